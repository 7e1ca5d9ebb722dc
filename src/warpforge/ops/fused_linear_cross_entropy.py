"""Linear layer + cross entropy without materialising the ``[tokens, vocab]`` logits.

The tokens are processed in chunks. For each chunk the forward computes
``logits = hidden_chunk @ weight.T (+ bias)`` with cuBLAS, runs the cross-entropy kernels on it
(loss and, in the same launch, the gradient written over the chunk's own logits buffer) and immediately folds that
gradient into ``grad_hidden[chunk] = grad_logits @ weight`` and ``grad_weight += grad_logits.T @
hidden_chunk`` (the Liger-Kernel approach). Peak memory holds one chunk of logits instead of all
of them; the backward only multiplies the stored gradients by ``grad_output``.

``reduction="none"`` cannot pre-scale ``grad_weight`` (each row has its own ``grad_output``), so
its backward recomputes each chunk's logits once, with the saved ``logsumexp``.

Precision: logits and their gradient are in the dtype of ``hidden`` (as in the unfused PyTorch
path); loss terms in float32; ``grad_weight`` and ``grad_bias`` accumulate across chunks in
float32 and are rounded to the weight dtype once, after scaling by ``grad_output``. Accumulating
a bf16 ``grad_weight`` in bf16 (as Liger-Kernel does) rounds every chunk's sum relative to the
running total, which loses columns whose partial sums cancel.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from warpforge.dispatch import dispatched_op
from warpforge.ops._rows import cdiv, kernel_device
from warpforge.ops.cross_entropy import (
    check_target_values,
    reduce_rows,
    row_grads,
    row_losses,
    validate_loss_options,
    validate_target,
)
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import FLOAT_DTYPES, check_same_device, check_tensor, describe

CHUNK_LOGITS_BYTES = 2 << 30
"""Largest default chunk of logits (2 GiB). Every chunk after the first reads and writes the
whole float32 ``grad_weight`` accumulator once (the first only writes it), so fewer, larger
chunks keep that traffic small next to the matmuls: 16k tokens of a 128k vocabulary in bf16
take 2 chunks, 4.2 GB of accumulator traffic where 4 zero-filled chunks moved 18.9 GB."""

MIN_CHUNKS = 2
"""Default chunks per call at least: one chunk holds at most half the logits, whatever the
problem's size (the point of the fused op)."""


def default_chunk_size(n_tokens: int, vocab: int, element_size: int) -> int:
    """Rows per chunk: at most :data:`CHUNK_LOGITS_BYTES` of logits and at most
    ``1 / MIN_CHUNKS`` of the tokens, in whole 128-row matmul tiles where that is possible."""
    rows = min(CHUNK_LOGITS_BYTES // (vocab * element_size), -(-n_tokens // MIN_CHUNKS))
    if rows >= 128:
        rows -= rows % 128
    return max(1, min(n_tokens, rows))


_SCALE_BLOCK_ELEMENTS = 1 << 24
"""Elements scaled per step in :func:`_scaled_to` without Triton (64 MiB of float32)."""

_SCALE_BLOCK = 4096
"""Elements per program of the scale-and-round kernel: 16 a thread at 8 warps (four 16-byte
float32 vectors in flight)."""


def _chunk_logits(hidden, weight, bias):
    if bias is None:
        return hidden @ weight.t()
    return torch.addmm(bias, hidden, weight.t())


def _product_into(accumulator, left, right, accumulate: bool):
    """``accumulator (+)= left @ right``: a float32 accumulator, operands in their own dtype.

    Without ``accumulate`` the product overwrites the accumulator and cuBLAS never reads it (the
    first chunk: neither a zero-fill nor a read of the weight-sized float32 buffer).
    On CUDA cuBLAS reads and writes the float32 accumulator directly (``out_dtype``, PyTorch
    2.8+); elsewhere, or where that is missing, the operands are upcast, which is exact too.
    """
    if accumulator.dtype == left.dtype:
        if accumulate:
            accumulator.addmm_(left, right)
        else:
            torch.mm(left, right, out=accumulator)
        return
    if left.is_cuda and _MIXED_DTYPE_MATMUL.get("works", True):
        try:
            if accumulate:
                torch.addmm(accumulator, left, right, out_dtype=accumulator.dtype, out=accumulator)
            else:
                torch.mm(left, right, out_dtype=accumulator.dtype, out=accumulator)
            _MIXED_DTYPE_MATMUL["works"] = True
            return
        except (TypeError, RuntimeError, NotImplementedError):
            if _MIXED_DTYPE_MATMUL.get("works"):
                raise  # it worked before: this is a real error, not a missing feature
            _MIXED_DTYPE_MATMUL["works"] = False
    if accumulate:
        accumulator.addmm_(left.float(), right.float())
    else:
        torch.mm(left.float(), right.float(), out=accumulator)


_MIXED_DTYPE_MATMUL: dict[str, bool] = {}
"""Whether ``torch.mm`` / ``torch.addmm`` with ``out_dtype=float32`` ran on this PyTorch build."""


def _fold_chunk_grads(grad_logits, hidden, weight, grad_hidden_rows, grad_weight, grad_bias,
                      first: bool):  # fmt: skip
    """grad_hidden[chunk] = grad_logits @ weight; grad_weight (and grad_bias) += the chunk's part,
    both accumulators in float32; the ``first`` chunk writes ``grad_weight`` without reading it."""
    torch.mm(grad_logits, weight, out=grad_hidden_rows)
    _product_into(grad_weight, grad_logits.t(), hidden, accumulate=not first)
    if grad_bias is not None:
        grad_bias += grad_logits.sum(dim=0, dtype=torch.float32)


def _float32_accumulator(like: torch.Tensor, n_tokens: int) -> torch.Tensor:
    """Uninitialised when a first chunk will overwrite it, zeros when there is no chunk."""
    make = torch.empty if n_tokens > 0 else torch.zeros
    return make(like.shape, device=like.device, dtype=torch.float32)


@dispatched_op("warpforge::fused_linear_cross_entropy_fwd", mutates_args=())
def _flce_fwd(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: Optional[torch.Tensor],  # noqa: UP045 (custom_op schema inference)
    ignore_index: int,
    label_smoothing: float,
    reduction: str,
    chunk_size: int,
    compute_grads: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (loss, lse, grad_hidden, grad_weight, grad_bias); the gradients are those of the
    reduced loss (mean/sum), ``grad_weight`` and ``grad_bias`` unrounded in float32, and are empty
    when not computed."""
    check_target_values(target, weight.shape[0], ignore_index)
    n_tokens = hidden.shape[0]
    loss_rows = torch.empty(n_tokens, device=hidden.device, dtype=torch.float32)
    lse = torch.empty(n_tokens, device=hidden.device, dtype=torch.float32)
    grads = compute_grads and reduction != "none"
    # Outputs may not alias each other: every absent gradient is its own empty tensor.
    # Gradients are contiguous whatever the inputs' strides, so chunk slices are dense for cuBLAS.
    grad_hidden = hidden.new_empty(hidden.shape) if grads else hidden.new_empty(0)
    grad_weight = _float32_accumulator(weight, n_tokens) if grads else hidden.new_empty(0)
    grad_bias = (
        torch.zeros(weight.shape[0], device=hidden.device, dtype=torch.float32)
        if grads and bias is not None
        else hidden.new_empty(0)
    )
    # d(loss)/d(row loss): 1 for sum, 1 / (non-ignored rows) for mean; a device tensor, no sync.
    if reduction == "mean":
        row_scale = 1.0 / (target != ignore_index).sum().to(torch.float32)
    else:
        row_scale = torch.ones((), device=hidden.device, dtype=torch.float32)
    row_scale = row_scale.reshape(1)

    for start in range(0, n_tokens, chunk_size):
        rows = slice(start, min(start + chunk_size, n_tokens))
        # One launch: the chunk's losses, then its gradient written over its own logits.
        logits = _chunk_logits(hidden[rows], weight, bias)
        loss_rows[rows], lse[rows] = row_losses(
            logits, target[rows], ignore_index, label_smoothing, 0.0,
            grad_out=logits if grads else None, grad_loss=row_scale,
        )  # fmt: skip
        if grads:
            _fold_chunk_grads(logits, hidden[rows], weight, grad_hidden[rows], grad_weight,
                              grad_bias if bias is not None else None, first=start == 0)  # fmt: skip
        del logits  # before the next chunk's logits exist: one chunk alive at a time

    loss = reduce_rows(loss_rows, target, ignore_index, reduction)
    return loss, lse, grad_hidden, grad_weight, grad_bias


@_flce_fwd.register_fake
def _(hidden, weight, target, bias, ignore_index, label_smoothing, reduction, chunk_size,
      compute_grads):  # fmt: skip
    n_tokens = hidden.shape[0]
    grads = compute_grads and reduction != "none"
    loss = hidden.new_empty((n_tokens,) if reduction == "none" else (), dtype=torch.float32)
    lse = hidden.new_empty(n_tokens, dtype=torch.float32)
    return (
        loss,
        lse,
        hidden.new_empty(hidden.shape) if grads else hidden.new_empty(0),
        weight.new_empty(weight.shape, dtype=torch.float32) if grads else hidden.new_empty(0),
        hidden.new_empty(weight.shape[0], dtype=torch.float32)
        if grads and bias is not None
        else hidden.new_empty(0),
    )


@dispatched_op("warpforge::fused_linear_cross_entropy_bwd_rows", mutates_args=())
def _flce_bwd_rows(
    grad_loss: torch.Tensor,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: Optional[torch.Tensor],  # noqa: UP045 (custom_op schema inference)
    lse: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients for ``reduction="none"``: recompute each chunk's logits, scale rows by
    ``grad_loss``. Returns (grad_hidden, grad_weight, grad_bias or empty)."""
    grad_loss = grad_loss.float()
    grad_hidden = hidden.new_empty(hidden.shape)
    grad_weight = _float32_accumulator(weight, hidden.shape[0])
    grad_bias = torch.zeros(weight.shape[0], device=hidden.device, dtype=torch.float32)
    for start in range(0, hidden.shape[0], chunk_size):
        rows = slice(start, min(start + chunk_size, hidden.shape[0]))
        logits = _chunk_logits(hidden[rows], weight, bias)
        row_grads(
            logits, logits, target[rows], lse[rows], grad_loss[rows],
            ignore_index, label_smoothing, 0.0,
        )  # fmt: skip
        _fold_chunk_grads(logits, hidden[rows], weight, grad_hidden[rows], grad_weight,
                          grad_bias if bias is not None else None, first=start == 0)  # fmt: skip
        del logits
    grad_weight = grad_weight.to(weight.dtype)
    if bias is None:
        return grad_hidden, grad_weight, hidden.new_empty(0)
    return grad_hidden, grad_weight, grad_bias.to(bias.dtype)


@_flce_bwd_rows.register_fake
def _(grad_loss, hidden, weight, target, bias, lse, ignore_index, label_smoothing, chunk_size):
    grad_bias = hidden.new_empty(weight.shape[0]) if bias is not None else hidden.new_empty(0)
    return hidden.new_empty(hidden.shape), weight.new_empty(weight.shape), grad_bias


def _setup_context(ctx, inputs, output):
    hidden, weight, target, bias, ignore_index, label_smoothing, reduction, chunk_size, _ = inputs
    _, lse, grad_hidden, grad_weight, grad_bias = output
    ctx.mark_non_differentiable(lse, grad_hidden, grad_weight, grad_bias)
    # The auxiliary outputs never receive gradients; without this autograd would hand the
    # backward zero-filled tensors for them, a float32 weight-sized one among them.
    ctx.set_materialize_grads(False)
    ctx.has_bias = bias is not None
    ctx.param_dtype = weight.dtype
    ctx.reduction = reduction
    if reduction == "none":
        ctx.save_for_backward(hidden, weight, target, bias, lse)
        ctx.options = (ignore_index, label_smoothing, chunk_size)
    else:
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)


@dispatched_op("warpforge::fused_linear_cross_entropy_scaled_round", mutates_args=())
def _scaled_to(accumulated: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``accumulated * scale`` computed in float32 and rounded once to ``dtype``, as a new
    tensor (the accumulator stays as it is, for a second backward). One Triton pass (see
    ``warpforge.ops._kernels.fused_linear_cross_entropy``); without Triton, in row blocks: on
    the CPU a multiply whose output dtype differs stages a temporary the size of its input, and
    the accumulator is the largest tensor the op holds. An op of its own, so that a compiled
    backward traces it instead of the kernel launch."""
    out = torch.empty_like(accumulated, dtype=dtype)
    if out.numel() == 0:
        return out
    if execution_path(accumulated.device) is not ExecutionPath.TORCH_REFERENCE:
        from warpforge.ops._kernels.fused_linear_cross_entropy import scale_and_round_kernel

        with kernel_device(accumulated):
            scale_and_round_kernel[(cdiv(out.numel(), _SCALE_BLOCK),)](
                accumulated, scale, out, out.numel(), BLOCK=_SCALE_BLOCK, num_warps=8
            )
        return out
    rows = max(1, _SCALE_BLOCK_ELEMENTS // max(1, math.prod(accumulated.shape[1:])))
    for start in range(0, accumulated.shape[0], rows):
        torch.mul(accumulated[start : start + rows], scale, out=out[start : start + rows])
    return out


@_scaled_to.register_fake
def _(accumulated, scale, dtype):
    return torch.empty_like(accumulated, dtype=dtype)


def _backward(ctx, grad_loss, _lse, _gh, _gw, _gb):
    if grad_loss is None:  # nothing flowed into the loss (grads are not materialized)
        return (None,) * 9
    if ctx.reduction == "none":
        hidden, weight, target, bias, lse = ctx.saved_tensors
        grad_hidden, grad_weight, grad_bias = _flce_bwd_rows(
            grad_loss, hidden, weight, target, bias, lse, *ctx.options
        )
    else:
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        if grad_hidden.numel() == 0 and ctx.needs_input_grad[0] | ctx.needs_input_grad[1]:
            raise RuntimeError(
                "fused_linear_cross_entropy: gradients were not computed in the forward "
                "(it ran with grad disabled or no input requiring grad)"
            )
        scale = grad_loss.to(torch.float32).contiguous()
        grad_hidden = _scaled_to(grad_hidden, scale, grad_hidden.dtype)
        grad_weight = _scaled_to(grad_weight, scale, ctx.param_dtype)
        grad_bias = _scaled_to(grad_bias, scale, ctx.param_dtype) if ctx.has_bias else None
    return (
        grad_hidden,
        grad_weight,
        None,
        grad_bias if ctx.has_bias else None,
        None,
        None,
        None,
        None,
        None,
    )


_flce_fwd.register_autograd(_backward, setup_context=_setup_context)


def fused_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """``cross_entropy(hidden @ weight.T + bias, target)`` without holding all the logits.

    ``hidden`` is ``[..., H]``, ``weight`` ``[V, H]`` (the LM head), ``bias`` ``[V]`` or None,
    ``target`` ``[...]`` int64/int32. Semantics of ``ignore_index``, ``reduction`` and
    ``label_smoothing`` are those of :func:`warpforge.ops.cross_entropy`. ``chunk_size`` is the
    number of tokens per chunk (default: at most 2 GiB of logits and half the tokens). Differentiable in
    ``hidden``, ``weight`` and ``bias``. Returns the loss in the dtype of ``hidden``.
    """
    hidden = check_tensor("hidden", hidden, dtypes=FLOAT_DTYPES, min_ndim=1, allow_empty=True)
    weight = check_tensor("weight", weight, dtypes=FLOAT_DTYPES, ndim=2)
    ignore_index, reduction, label_smoothing = validate_loss_options(
        ignore_index, reduction, label_smoothing
    )
    vocab, width = weight.shape
    if hidden.shape[-1] != width:
        raise ValueError(
            f"hidden: expected last dimension {width} (weight is [vocab={vocab}, hidden={width}]), "
            f"got {describe(hidden)}"
        )
    if weight.dtype != hidden.dtype:
        raise TypeError(
            f"weight: expected the dtype of hidden ({hidden.dtype}), got {describe(weight)}"
        )
    if bias is not None:
        bias = check_tensor("bias", bias, dtypes=FLOAT_DTYPES, ndim=1)
        if bias.shape[0] != vocab:
            raise ValueError(
                f"bias: expected shape ({vocab},) (vocab of weight), got {describe(bias)}"
            )
        if bias.dtype != hidden.dtype:
            raise TypeError(
                f"bias: expected the dtype of hidden ({hidden.dtype}), got {describe(bias)}"
            )
    lead = tuple(hidden.shape[:-1])
    target = validate_target(target, lead, what="hidden.shape[:-1]")
    check_same_device(hidden=hidden, weight=weight, target=target, bias=bias)
    hidden2d = hidden.reshape(-1, width)
    n_tokens = hidden2d.shape[0]
    if chunk_size is None:
        chunk_size = default_chunk_size(n_tokens, vocab, hidden.element_size())
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size: expected a positive int or None, got {describe(chunk_size)}")
    chunk_size = max(1, min(chunk_size, max(n_tokens, 1)))

    compute_grads = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (hidden, weight, bias)
    )
    loss, *_ = _flce_fwd(
        hidden2d,
        weight,
        target.reshape(-1).contiguous(),  # the kernel reads one index per row, unit stride
        bias,
        ignore_index,
        label_smoothing,
        reduction,
        chunk_size,
        compute_grads,
    )
    if reduction == "none":
        loss = loss.reshape(lead)
    return loss.to(hidden.dtype)
