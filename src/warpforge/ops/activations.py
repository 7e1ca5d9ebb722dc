"""Gated activations for transformer MLPs: ``swiglu(gate, up) = silu(gate) * up`` and
``geglu(gate, up) = gelu(gate) * up``.

Both are one elementwise pass (read ``gate`` and ``up``, write the output); the backward reads
``grad``, ``gate`` and ``up`` and writes both input gradients, recomputing the activation rather
than saving it. Math runs in float32 for every input dtype.
"""

from __future__ import annotations

import functools
import math

import torch

from warpforge.dispatch import dispatched_op
from warpforge.ops._rows import cdiv, kernel_device
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import FLOAT_DTYPES, check_choice, check_same_device, check_tensor

GELU_APPROXIMATIONS = ("tanh", "none")


@functools.lru_cache(maxsize=16)
def _launch_config(element_size: int, backward: bool) -> tuple[int, int]:
    """(BLOCK, num_warps). 2-byte types: one 16-byte vector of each operand per thread of 8
    warps (4 KB per operand and program), measured best or tied-best of a (BLOCK, num_warps)
    grid on the H100 (benchmarks/activation_launch_sweep.py). float32: 256-element blocks on 4
    warps, two elements (8 bytes) a thread, the one launch within 0.4% of the fastest at 8192 x
    14336 swiglu forward on both Hopper GPUs measured (``benchmarks/parity_sweep.py``): H100
    461.0 us against 459.1 at 512 / 8 warps and torch.compile 459.3
    (``parity-sweep-2026-11-25-h100.json``); H200 326.1 against 324.8 at 256 / 2 warps, 329.3
    at 512 / 8 and torch.compile 326.1 (``session18-h200-2026-11-28/parity-sweep-call5.json``).
    The float32 backwards keep 512 / 8 warps, the launch torch.compile's autotuner picks for
    them: fastest of its grid on the H100 (776.1 us, torch.compile 776.0) and 1.00x
    torch.compile on the H200 (``session18-h200-2026-11-28/gated-fp32-call2.json``)."""
    if element_size == 4:
        return (512, 8) if backward else (256, 4)
    return 4096 // element_size, 8


_INT32_LIMIT = 2**31


def _row_views(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """[rows, cols] views with a unit column stride: one long row when every tensor is
    contiguous, else rows of the last dimension (a tensor that has no such view is copied)."""
    if all(t.is_contiguous() for t in tensors):
        return [t.view(1, -1) for t in tensors]
    cols = tensors[0].shape[-1]
    views = []
    for t in tensors:
        try:
            view = t.view(-1, cols)
        except RuntimeError:  # leading dimensions do not collapse into one stride
            view = None
        if view is None or view.stride(1) != 1:
            view = t.contiguous().view(-1, cols)
        views.append(view)
    return views


def _launch(
    kernel,
    inputs: list[torch.Tensor],
    n_outputs: int,
    *,
    launch_config: tuple[int, int] | None = None,
    **constexprs: object,
):
    """Run ``kernel(*inputs, *outputs, n_cols, n_col_blocks, *input_row_strides)``; return the
    outputs: new contiguous tensors of the inputs' shape and dtype. ``launch_config`` forces
    (BLOCK, num_warps) instead of the op's own (``benchmarks/activation_launch_sweep.py``); the
    backwards, the kernels with two outputs (the gradients of gate and up), have their own."""
    shape = inputs[-1].shape
    outputs = [inputs[-1].new_empty(shape) for _ in range(n_outputs)]
    if outputs[0].numel() == 0:
        return outputs
    views = _row_views(*inputs)
    rows, cols = views[0].shape
    block, num_warps = launch_config or _launch_config(views[0].element_size(), n_outputs == 2)
    n_col_blocks = cdiv(cols, block)
    # the furthest element offset the kernel forms (padded last block included)
    furthest = (rows - 1) * max(cols, *(v.stride(0) for v in views)) + n_col_blocks * block
    with kernel_device(views[0]):
        kernel[(rows * n_col_blocks,)](
            *views, *outputs, cols, n_col_blocks, *(v.stride(0) for v in views),
            BLOCK=block, ONE_ROW=rows == 1, WIDE=furthest >= _INT32_LIMIT, EVEN=cols % block == 0,
            num_warps=num_warps,
            **constexprs,
        )  # fmt: skip
    return outputs


def _contiguous(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The PyTorch path returns the same (contiguous) layout as the kernels."""
    return tuple(t.contiguous() for t in tensors)


def _gelu_reference(gate: torch.Tensor, approximate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """gelu(gate) and its derivative, in the dtype of ``gate`` (float32 on the CPU path)."""
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = torch.tanh(k * (gate + 0.044715 * gate**3))
        d_inner = k * (1.0 + 3.0 * 0.044715 * gate * gate)
        return 0.5 * gate * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * gate * (1.0 - t * t) * d_inner
    cdf = 0.5 * (1.0 + torch.erf(gate / math.sqrt(2.0)))
    return gate * cdf, cdf + gate * torch.exp(-0.5 * gate * gate) / math.sqrt(2.0 * math.pi)


# --- SwiGLU ---------------------------------------------------------------------------------


@dispatched_op("warpforge::swiglu_fwd", mutates_args=())
def _swiglu_fwd(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    if execution_path(gate.device) is ExecutionPath.TORCH_REFERENCE:
        g = gate.float()
        return (torch.nn.functional.silu(g) * up.float()).to(gate.dtype).contiguous()
    from warpforge.ops._kernels.activations import swiglu_fwd_kernel

    (out,) = _launch(swiglu_fwd_kernel, [gate, up], 1)
    return out


@_swiglu_fwd.register_fake
def _(gate, up):
    return gate.new_empty(gate.shape)


@dispatched_op("warpforge::swiglu_bwd", mutates_args=())
def _swiglu_bwd(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    if execution_path(gate.device) is ExecutionPath.TORCH_REFERENCE:
        dy, g, u = grad_out.float(), gate.float(), up.float()
        s = torch.sigmoid(g)
        d_silu = s * (1.0 + g * (1.0 - s))
        return _contiguous((dy * u * d_silu).to(gate.dtype), (dy * g * s).to(up.dtype))
    from warpforge.ops._kernels.activations import swiglu_bwd_kernel

    grad_gate, grad_up = _launch(swiglu_bwd_kernel, [grad_out, gate, up], 2)
    return grad_gate, grad_up


@_swiglu_bwd.register_fake
def _(grad_out, gate, up):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


def _save_gate_up(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.extra = inputs[2:]


def _swiglu_backward(ctx, grad_out):
    gate, up = ctx.saved_tensors
    return _swiglu_bwd(grad_out, gate, up)


_swiglu_fwd.register_autograd(_swiglu_backward, setup_context=_save_gate_up)


# --- GeGLU ----------------------------------------------------------------------------------


@dispatched_op("warpforge::geglu_fwd", mutates_args=())
def _geglu_fwd(gate: torch.Tensor, up: torch.Tensor, approximate: str) -> torch.Tensor:
    if execution_path(gate.device) is ExecutionPath.TORCH_REFERENCE:
        gelu, _ = _gelu_reference(gate.float(), approximate)
        return (gelu * up.float()).to(gate.dtype).contiguous()
    from warpforge.ops._kernels.activations import geglu_fwd_kernel

    (out,) = _launch(geglu_fwd_kernel, [gate, up], 1, APPROX_TANH=approximate == "tanh")
    return out


@_geglu_fwd.register_fake
def _(gate, up, approximate):
    return gate.new_empty(gate.shape)


@dispatched_op("warpforge::geglu_bwd", mutates_args=())
def _geglu_bwd(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, approximate: str
) -> tuple[torch.Tensor, torch.Tensor]:
    if execution_path(gate.device) is ExecutionPath.TORCH_REFERENCE:
        dy, u = grad_out.float(), up.float()
        gelu, d_gelu = _gelu_reference(gate.float(), approximate)
        return _contiguous((dy * u * d_gelu).to(gate.dtype), (dy * gelu).to(up.dtype))
    from warpforge.ops._kernels.activations import geglu_bwd_kernel

    grad_gate, grad_up = _launch(
        geglu_bwd_kernel, [grad_out, gate, up], 2, APPROX_TANH=approximate == "tanh"
    )
    return grad_gate, grad_up


@_geglu_bwd.register_fake
def _(grad_out, gate, up, approximate):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


def _geglu_backward(ctx, grad_out):
    gate, up = ctx.saved_tensors
    grad_gate, grad_up = _geglu_bwd(grad_out, gate, up, ctx.extra[0])
    return grad_gate, grad_up, None


_geglu_fwd.register_autograd(_geglu_backward, setup_context=_save_gate_up)


# --- Public API -----------------------------------------------------------------------------


def _validate_gate_up(gate: object, up: object) -> tuple[torch.Tensor, torch.Tensor]:
    gate = check_tensor("gate", gate, dtypes=FLOAT_DTYPES, allow_empty=True)
    up = check_tensor("up", up, dtypes=FLOAT_DTYPES, allow_empty=True)
    if up.shape != gate.shape:
        raise ValueError(
            f"up: expected the shape of gate {tuple(gate.shape)}, got {tuple(up.shape)}"
        )
    if up.dtype != gate.dtype:
        raise TypeError(f"up: expected the dtype of gate ({gate.dtype}), got {up.dtype}")
    check_same_device(gate=gate, up=up)
    return gate, up


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` elementwise (the SwiGLU MLP of Llama), any shape, float32 math.

    ``gate`` and ``up`` must have the same shape, dtype (float32/float16/bfloat16) and device.
    Views whose rows have a unit column stride (e.g. ``gate_up.chunk(2, dim=-1)``) are read in
    place; other layouts are copied once. Returns a new contiguous tensor. Differentiable in
    both inputs.
    """
    gate, up = _validate_gate_up(gate, up)
    return _swiglu_fwd(gate, up)


def swiglu_backward(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_gate, grad_up) of :func:`swiglu` for ``grad_out``: the backward kernel alone."""
    grad_out, gate, up = _validate_backward_inputs(grad_out, gate, up)
    grad_gate, grad_up = _swiglu_bwd(grad_out, gate, up)
    return grad_gate, grad_up


def _validate_backward_inputs(
    grad_out: object, gate: object, up: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gate, up = _validate_gate_up(gate, up)
    grad_out = check_tensor("grad_out", grad_out, dtypes=(gate.dtype,), allow_empty=True)
    if grad_out.shape != gate.shape:
        raise ValueError(
            f"grad_out: expected the shape of gate {tuple(gate.shape)}, got {tuple(grad_out.shape)}"
        )
    check_same_device(gate=gate, grad_out=grad_out)
    return grad_out, gate, up


def geglu(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """``gelu(gate, approximate) * up`` elementwise, ``approximate`` in {"tanh", "none"}
    (as in ``torch.nn.functional.gelu``). Same rules as :func:`swiglu`.
    """
    check_choice("approximate", approximate, GELU_APPROXIMATIONS)
    gate, up = _validate_gate_up(gate, up)
    return _geglu_fwd(gate, up, approximate)


def geglu_backward(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_gate, grad_up) of :func:`geglu` for ``grad_out``: the backward kernel alone."""
    check_choice("approximate", approximate, GELU_APPROXIMATIONS)
    grad_out, gate, up = _validate_backward_inputs(grad_out, gate, up)
    grad_gate, grad_up = _geglu_bwd(grad_out, gate, up, approximate)
    return grad_gate, grad_up
