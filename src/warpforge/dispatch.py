"""How every warpforge op (``warpforge.ops``, ``warpforge.robotics``) reaches its implementation:
custom op when compiling, a direct call in eager mode.

A ``torch.library`` custom op is what ``torch.compile(fullgraph=True)``, CUDA graphs and
``opcheck`` need: an opaque node with a fake (meta) implementation. Called eagerly, though, it
costs ~100 us of Python per call (dispatcher, its generated autograd wrapper, a redispatch and
the dynamo-disable wrapper around the implementation), which for a small or medium problem is
longer than the kernel: the GPU waits for the host.

:func:`dispatched_op` registers the custom op exactly as ``torch.library.custom_op`` does and
returns a :class:`DispatchedOp` that routes each call:

* while ``torch.compile`` traces (or under a tensor subclass, dispatch mode or functorch
  transform, which need the dispatcher): the custom op;
* eager, with an input that requires grad: an ``autograd.Function`` built from the *same*
  forward implementation, ``setup_context`` and ``backward`` that the custom op registers, so
  the two paths cannot drift apart;
* eager, otherwise: the implementation itself.
"""

# No ``from __future__ import annotations``: torch.library infers the custom ops' schemas from
# the decorated functions' annotations.

from collections.abc import Callable, Sequence
from typing import Any

import torch

_is_compiling: Callable[[], bool] = getattr(torch.compiler, "is_compiling", lambda: False)
_dispatch_modes_active: Callable[[], int] = getattr(
    torch._C, "_len_torch_dispatch_stack", lambda: 0
)
_functorch_active: Callable[[], bool] = getattr(
    torch._C, "_are_functorch_transforms_active", lambda: False
)


_DIRECT, _AUTOGRAD, _DISPATCHER = 0, 1, 2
_PLAIN_TENSOR_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))


def _route(args: tuple[Any, ...]) -> int:
    """Which path a call takes: _DISPATCHER, _AUTOGRAD or _DIRECT (one pass over the args)."""
    if _is_compiling() or _dispatch_modes_active() or _functorch_active():
        return _DISPATCHER
    grad_enabled = torch.is_grad_enabled()
    route = _DIRECT
    for a in args:
        if isinstance(a, torch.Tensor):
            if type(a) not in _PLAIN_TENSOR_TYPES:
                return _DISPATCHER  # FakeTensor, FunctionalTensor, DTensor...: dispatcher only
            if grad_enabled and a.requires_grad:
                route = _AUTOGRAD
    return route


def eager_call_allowed(args: Sequence[Any]) -> bool:
    """True when a call may skip the custom op: eager, plain tensors, nothing requires grad."""
    return _route(tuple(args)) == _DIRECT


def dispatcher_required(args: Sequence[Any]) -> bool:
    """True when only the custom op will do: compiling, a dispatch mode, functorch or a subclass."""
    return _route(tuple(args)) == _DISPATCHER


class DispatchedOp:
    """A registered custom op with an eager fast path (see the module docstring).

    Mirrors the parts of ``torch.library.CustomOpDef`` that the ops use: ``register_fake``,
    ``register_autograd`` and calling it with positional arguments.
    """

    def __init__(
        self, name: str, implementation: Callable[..., Any], mutates_args: Sequence[str]
    ) -> None:
        self.name = name
        self.implementation = implementation
        self.custom_op = torch.library.custom_op(name, mutates_args=tuple(mutates_args))(
            implementation
        )
        self._autograd_function: type[torch.autograd.Function] | None = None

    def register_fake(self, fake: Callable[..., Any]) -> Callable[..., Any]:
        return self.custom_op.register_fake(fake)

    def register_autograd(
        self, backward: Callable[..., Any], *, setup_context: Callable[..., None]
    ) -> None:
        """Register ``backward``/``setup_context`` on the custom op and build the eager
        ``autograd.Function`` from the same three functions."""
        self.custom_op.register_autograd(backward, setup_context=setup_context)
        implementation = self.implementation

        # ctx-style forward calling setup_context itself: with a separate setup_context,
        # Function.apply binds default arguments through inspect.signature on every call.
        def forward(ctx: Any, *args: Any) -> Any:
            output = implementation(*args)
            setup_context(ctx=ctx, inputs=args, output=output)
            return output

        self._autograd_function = type(
            "Eager_" + self.name.replace("::", "_"),
            (torch.autograd.Function,),
            {"forward": staticmethod(forward), "backward": staticmethod(backward)},
        )

    def __call__(self, *args: Any) -> Any:
        route = _route(args)
        if route == _DIRECT:
            return self.implementation(*args)
        if route == _AUTOGRAD and self._autograd_function is not None:
            return self._autograd_function.apply(*args)
        # compiling, a subclass or mode, or grad needed without a formula (the op raises)
        return self.custom_op(*args)


def dispatched_op(
    name: str, *, mutates_args: Sequence[str] = ()
) -> Callable[[Callable[..., Any]], DispatchedOp]:
    """Decorator: ``torch.library.custom_op(name, mutates_args=...)`` plus the eager fast path."""

    def wrap(implementation: Callable[..., Any]) -> DispatchedOp:
        return DispatchedOp(name, implementation, mutates_args)

    return wrap
