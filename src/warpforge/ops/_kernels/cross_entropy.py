"""Cross-entropy kernels: one program per row, the vocabulary walked in chunks.

Forward: a single read of the row. Each lane keeps its own running max and rescaled sum of
exponentials (an online softmax without a cross-lane reduction per chunk); the lanes are
combined once at the end into ``lse = logsumexp(row)``. The same pass accumulates the row sum
(for label smoothing); the target logit is one extra scalar load.

Backward: reads the row again with the saved ``lse`` and writes

    grad_j = g * (p_j * (1 + 2 * z_loss * lse) - eps / V - (1 - eps) * [j == target])

with ``p_j = exp(x_j - lse)``: the derivative of
``lse - (1 - eps) * x_t - eps / V * sum_j x_j + z_loss * lse**2``. Each element is read and
then written by the same program, so the gradient may overwrite the logits in place (the fused
linear cross entropy does that with its private chunk buffer).

Rows, offsets and the target index are int64 so logits beyond 2**31 elements address correctly.
A target outside ``[0, V)`` that is not ``ignore_index`` gives a NaN loss and gradient (never an
out-of-bounds read); with ``CHECK_TARGETS`` the kernel also fails a device assertion.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Lanes start from a finite "minus infinity" so that exp(m_old - m_new) never sees inf - inf.
_NEG_BIG = tl.constexpr(-1.0e30)


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    logits_row_stride,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * logits_row_stride
    cols = tl.arange(0, BLOCK)

    lane_max = tl.full([BLOCK], _NEG_BIG, tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    lane_total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(row_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        lane_sum = lane_sum * tl.exp(lane_max - new_max) + tl.exp(x - new_max)
        lane_max = new_max
        lane_total += tl.where(mask, x, 0.0)

    row_max = tl.max(lane_max, axis=0)
    lse = row_max + tl.log(tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0))
    row_total = tl.sum(lane_total, axis=0)

    target = tl.load(target_ptr + row).to(tl.int64)
    ignored = target == ignore_index
    in_range = (target >= 0) & (target < n_cols)
    if CHECK_TARGETS:
        tl.device_assert(ignored | in_range, "cross_entropy: target outside [0, vocab)")
    safe_target = tl.where(in_range, target, 0)
    target_logit = tl.load(row_ptr + safe_target).to(tl.float32)

    loss = (
        lse
        - (1.0 - label_smoothing) * target_logit
        - (label_smoothing / n_cols) * row_total
        + z_loss * lse * lse
    )
    loss = tl.where(ignored, 0.0, tl.where(in_range, loss, float("nan")))
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


@triton.jit
def cross_entropy_bwd_kernel(
    grad_logits_ptr,
    logits_ptr,
    target_ptr,
    lse_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    in_row = logits_ptr + row * logits_row_stride
    out_row = grad_logits_ptr + row * grad_row_stride
    cols = tl.arange(0, BLOCK)

    target = tl.load(target_ptr + row).to(tl.int64)
    lse = tl.load(lse_ptr + row)
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    ignored = target == ignore_index
    in_range = (target >= 0) & (target < n_cols)
    scale = tl.where(ignored, 0.0, tl.where(in_range, grad_loss, float("nan")))
    prob_scale = scale * (1.0 + 2.0 * z_loss * lse)
    uniform = scale * (label_smoothing / n_cols)
    hit = scale * (1.0 - label_smoothing)

    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(in_row + offs, mask=mask, other=0.0).to(tl.float32)
        grad = tl.exp(x - lse) * prob_scale - uniform - tl.where(offs == target, hit, 0.0)
        tl.store(out_row + offs, grad.to(grad_logits_ptr.dtype.element_ty), mask=mask)
