"""The shared dispatch path: eager calls skip the custom-op dispatcher, ``torch.compile`` records
the custom op, and both give the same values and gradients."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
import torch

from warpforge import dispatch as _dispatch
from warpforge import ops


def _randn(*shape: int, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float32).requires_grad_(grad)


def _case(name: str) -> tuple[Callable[..., object], tuple[torch.Tensor, ...]]:
    """(function of leaf tensors returning a tensor or tuple, fresh random leaves)."""
    target = torch.randint(0, 11, (5,))
    cases = {
        "rms_norm": (lambda x, w: ops.rms_norm(x, w), (_randn(5, 11), _randn(11))),
        "rms_norm_residual": (
            lambda x, w, r: ops.rms_norm(x, w, residual=r, offset=1.0),
            (_randn(5, 11), _randn(11), _randn(5, 11)),
        ),
        "layer_norm": (
            lambda x, w, b: ops.layer_norm(x, w, b),
            (_randn(5, 11), _randn(11), _randn(11)),
        ),
        "softmax": (lambda x: ops.softmax(x, dim=0), (_randn(5, 11),)),
        "log_softmax": (lambda x: ops.log_softmax(x), (_randn(5, 11),)),
        "cross_entropy": (
            lambda x: ops.cross_entropy(x, target, label_smoothing=0.1),
            (_randn(5, 11),),
        ),
        "cross_entropy_none": (
            lambda x: ops.cross_entropy(x, target, reduction="none"),
            (_randn(5, 11),),
        ),
        "fused_linear_cross_entropy": (
            lambda h, w: ops.fused_linear_cross_entropy(h, w, target, chunk_size=2),
            (_randn(5, 7), _randn(11, 7)),
        ),
        "swiglu": (lambda g, u: ops.swiglu(g, u), (_randn(3, 9), _randn(3, 9))),
        "geglu": (lambda g, u: ops.geglu(g, u, approximate="none"), (_randn(3, 9), _randn(3, 9))),
        "rope": (
            lambda q, k: ops.rope(q, k, cos, sin),
            (_randn(2, 3, 2, 8), _randn(2, 3, 1, 8)),
        ),
    }
    cos, sin = torch.randn(3, 8), torch.randn(3, 8)
    return cases[name]


CASES = (
    "rms_norm",
    "rms_norm_residual",
    "layer_norm",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "cross_entropy_none",
    "fused_linear_cross_entropy",
    "swiglu",
    "geglu",
    "rope",
)

# by module path: ``from warpforge.ops import cross_entropy`` is the function, not the module
OP_MODULES = tuple(
    importlib.import_module(f"warpforge.ops.{name}")
    for name in (
        "norm",
        "softmax_ops",
        "cross_entropy",
        "fused_linear_cross_entropy",
        "activations",
        "rope",
    )
)


def _dispatched_ops() -> list[_dispatch.DispatchedOp]:
    found = {
        id(value): value
        for module in OP_MODULES
        for value in vars(module).values()
        if isinstance(value, _dispatch.DispatchedOp)
    }
    return list(found.values())


def _as_tuple(out: object) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)  # type: ignore[return-value]


def _forward_backward(fn, leaves):
    outs = _as_tuple(fn(*leaves))
    seeds = [
        torch.randn(o.shape, generator=torch.Generator().manual_seed(i)) for i, o in enumerate(outs)
    ]
    grads = torch.autograd.grad(outs, leaves, seeds)
    return [o.detach() for o in outs], list(grads)


def test_every_op_module_uses_the_dispatch_path() -> None:
    names = {op.name for op in _dispatched_ops()}
    assert {
        "warpforge::rms_norm_fwd",
        "warpforge::layer_norm_fwd",
        "warpforge::softmax_fwd",
        "warpforge::cross_entropy_fwd",
        "warpforge::cross_entropy_fwd_grad",
        "warpforge::fused_linear_cross_entropy_fwd",
        "warpforge::swiglu_fwd",
        "warpforge::geglu_fwd",
        "warpforge::rope_fwd",
    } <= names
    for module in OP_MODULES:  # no op left on the slow path
        assert not any(
            isinstance(v, torch._library.custom_ops.CustomOpDef) for v in vars(module).values()
        ), module.__name__


@pytest.mark.parametrize("name", CASES)
def test_eager_calls_skip_the_custom_op(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args, **kwargs):
        raise AssertionError("eager call went through the custom op")

    for op in _dispatched_ops():
        monkeypatch.setattr(op, "custom_op", forbidden)
    fn, leaves = _case(name)
    outs, grads = _forward_backward(fn, leaves)  # with grad: the autograd.Function
    assert all(torch.isfinite(o).all() for o in outs)
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    with torch.no_grad():  # without grad: the implementation itself
        again = _as_tuple(fn(*leaves))
    # a mean cross entropy with grad sums its row losses in one Triton program (the loss-only
    # path with torch.sum, another order): the same value to float32 rounding
    tol = 4e-7 if name == "cross_entropy" else 0.0
    for a, b in zip(again, outs, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=0)


def test_grad_calls_record_the_eager_function_and_plain_calls_record_nothing() -> None:
    x, w = _randn(2, 4, 6), _randn(6)
    node = ops.rms_norm(x, w).grad_fn
    names = []
    while node is not None:  # walk back through the views to the op's node
        names.append(type(node).__name__)
        node = node.next_functions[0][0] if node.next_functions else None
    assert any(n.startswith("Eager_warpforge_rms_norm_fwd") for n in names), names
    assert ops.rms_norm(x.detach(), w.detach()).grad_fn is None


def test_fake_tensors_go_through_the_custom_op() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 6)
        y = ops.layer_norm(x)
    assert y.shape == (4, 6)


@pytest.mark.parametrize("name", CASES)
def test_compiled_and_eager_agree_and_compile_records_the_custom_op(name: str) -> None:
    graphs: list[str] = []

    def recording_backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(str(gm.graph))
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    fn, leaves = _case(name)
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend=recording_backend)
    eager_outs, eager_grads = _forward_backward(fn, leaves)
    compiled_outs, compiled_grads = _forward_backward(compiled, leaves)
    for a, b in zip(compiled_outs + compiled_grads, eager_outs + eager_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # same kernels: bitwise
    assert graphs and "warpforge." in graphs[0]  # the opaque custom op, not its body
