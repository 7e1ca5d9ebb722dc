"""Cross-entropy kernels over the rows of a [rows, V] logits matrix.

Forward (loss only): one program per row, a single read of the row in chunks. Each lane keeps
its own running max and rescaled sum of exponentials (an online softmax without a cross-lane
reduction per chunk, and with one exponential per element); the lanes are combined once at the
end into ``lse = logsumexp(row)``. The same pass accumulates the row sum (for label smoothing);
the target logit is one extra scalar load.

Forward with gradient (``*_fwd_grad_*``): the loss and lse as above, plus the gradient of the
*reduced* loss written into a separate buffer, so training needs no second visit to the logits.
``cross_entropy_fwd_grad_row_kernel`` keeps a whole row in registers (V <= the widest block):
one read and one write of memory; ``cross_entropy_fwd_grad_split_kernel`` does the same for a
longer row split over several programs that meet through a per-row atomic counter (see
``warpforge.ops._split_rows``). ``cross_entropy_fwd_grad_kernel`` (longer rows) re-reads the
row for the gradient pass, backwards, from L2 when the rows in flight fit there (the caller
sizes its persistent grid for that); ``cross_entropy_fwd_grad_looped_kernel`` does so with one
row a program and its statistics pass unrolled. The backward then only multiplies by
``grad_output``; ``cross_entropy_scale_rows_kernel`` does that in place and skips every row whose factor is
exactly 1 (``loss.backward()``), deciding on the device so nothing synchronises.

Backward from the saved ``lse`` (``cross_entropy_bwd_kernel``): one program per (row, block), a
pure read-one-write-one stream of

    grad_j = g * (p_j * (1 + 2 * z_loss * lse) - eps / V - (1 - eps) * [j == target])

with ``p_j = exp(x_j - lse)``: the derivative of
``lse - (1 - eps) * x_t - eps / V * sum_j x_j + z_loss * lse**2``. Every gradient kernel reads
each element before the same program writes it, so the gradient may overwrite the logits in
place (the fused linear cross entropy does that with its private chunk buffer).

Rows, offsets and the target index are int64 so logits beyond 2**31 elements address correctly.
A target outside ``[0, V)`` that is not ``ignore_index`` gives a NaN loss and gradient (never an
out-of-bounds read); with ``CHECK_TARGETS`` the kernel also fails a device assertion.
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.split_rows import (
    LOG2E,
    arrive,
    chunk_exponentials,
    combined_partials,
    combined_words,
    publish_word,
    row_words,
    split_place,
    store_chunk_partials,
    unpack_pair,
    wait_for_row,
    word_lanes,
)
from warpforge.ops._kernels.wide_rows import output_columns

# Lanes start from a finite "minus infinity" so that exp(m_old - m_new) never sees inf - inf.
_NEG_BIG = tl.constexpr(-1.0e30)


@triton.jit
def _load_chunk(row_ptr, offs, n_cols, KEEP: tl.constexpr):
    """One chunk of a row (-inf past its end); KEEP asks L2 to keep the lines."""
    if KEEP:
        return tl.load(
            row_ptr + offs, mask=offs < n_cols, other=float("-inf"), eviction_policy="evict_last"
        )
    return tl.load(row_ptr + offs, mask=offs < n_cols, other=float("-inf"))


@triton.jit
def _online_update(x, offs, n_cols, lane_max, lane_sum, lane_total, NEED_SUM: tl.constexpr):
    """Fold one chunk (columns ``offs``, -inf past the row's end) into the lanes' running max,
    rescaled sum of exponentials and (NEED_SUM) plain sum."""
    x = x.to(tl.float32)
    # One exponential per element (the MUFU unit is nearly as busy as DRAM here):
    # e = exp(-|x - m|) is exp(x - m) when x <= m, else the factor rescaling the old sum.
    e = tl.exp2((tl.minimum(lane_max, x) - tl.maximum(lane_max, x)) * LOG2E)
    lane_sum = tl.where(x > lane_max, lane_sum * e + 1.0, lane_sum + e)
    if NEED_SUM:
        lane_total += tl.where(offs < n_cols, x, 0.0)
    return tl.maximum(lane_max, x), lane_sum, lane_total


@triton.jit
def _row_logsumexp(
    row_ptr, n_cols, BLOCK: tl.constexpr, NEED_SUM: tl.constexpr, KEEP: tl.constexpr
):
    """(logsumexp, sum) of one row, reading it once in BLOCK-wide chunks; the sum (needed for
    label smoothing only) is 0 unless NEED_SUM, sparing a register per element otherwise.
    KEEP asks L2 to keep the lines (a gradient pass re-reads the row next).

    Two chunks a step, each loaded one half-step before it is folded in, so every warp keeps a
    load in flight while it computes: a 2-byte chunk takes as long to fold as a 4-byte one but
    half as long to arrive, and without the overlap bf16 rows ran at ~70% of copy speed. (A
    chunk prefetched a whole step ahead gets its load sunk to the end of the step by ptxas.)"""
    cols = tl.arange(0, BLOCK)
    lane_max = tl.full([BLOCK], _NEG_BIG, tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    lane_total = tl.zeros([BLOCK], tl.float32)
    even = _load_chunk(row_ptr, cols, n_cols, KEEP)
    for start in range(0, n_cols, 2 * BLOCK):
        odd = _load_chunk(row_ptr, start + BLOCK + cols, n_cols, KEEP)
        lane_max, lane_sum, lane_total = _online_update(
            even, start + cols, n_cols, lane_max, lane_sum, lane_total, NEED_SUM
        )
        even = _load_chunk(row_ptr, start + 2 * BLOCK + cols, n_cols, KEEP)
        lane_max, lane_sum, lane_total = _online_update(
            odd, start + BLOCK + cols, n_cols, lane_max, lane_sum, lane_total, NEED_SUM
        )
    row_max = tl.max(lane_max, axis=0)
    total = tl.sum(lane_sum * tl.exp2((lane_max - row_max) * LOG2E), axis=0)
    return row_max + tl.log(total), tl.sum(lane_total, axis=0)


@triton.jit
def _unrolled_row_logsumexp(
    row_ptr, n_cols, BLOCK: tl.constexpr, CHUNKS: tl.constexpr, NEED_SUM: tl.constexpr,
    KEEP: tl.constexpr,
):  # fmt: skip
    """``_row_logsumexp`` of a row of at most ``CHUNKS`` BLOCK-wide chunks, the loop unrolled
    (CHUNKS known when compiling), so a thread issues every chunk's loads before folding the
    first in, where the rolled loop keeps two chunks in flight."""
    cols = tl.arange(0, BLOCK)
    lane_max = tl.full([BLOCK], _NEG_BIG, tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    lane_total = tl.zeros([BLOCK], tl.float32)
    for i in tl.static_range(0, CHUNKS):
        offs = i * BLOCK + cols
        x = _load_chunk(row_ptr, offs, n_cols, KEEP)
        lane_max, lane_sum, lane_total = _online_update(
            x, offs, n_cols, lane_max, lane_sum, lane_total, NEED_SUM
        )
    row_max = tl.max(lane_max, axis=0)
    total = tl.sum(lane_sum * tl.exp2((lane_max - row_max) * LOG2E), axis=0)
    return row_max + tl.log(total), tl.sum(lane_total, axis=0)


@triton.jit
def _classify_target(target, n_cols, ignore_index, CHECK_TARGETS: tl.constexpr):
    """(target as int64, ignored, in_range) of a loaded target index; the index is only used
    where in_range."""
    target = target.to(tl.int64)
    ignored = target == ignore_index
    in_range = (target >= 0) & (target < n_cols)
    if CHECK_TARGETS:
        tl.device_assert(ignored | in_range, "cross_entropy: target outside [0, vocab)")
    return target, ignored, in_range


@triton.jit
def _row_target(target_ptr, row, n_cols, ignore_index, CHECK_TARGETS: tl.constexpr):
    """(target, ignored, in_range) of one row (see ``_classify_target``)."""
    return _classify_target(tl.load(target_ptr + row), n_cols, ignore_index, CHECK_TARGETS)


@triton.jit
def _row_grad_inputs(
    target_ptr, row_ptr, grad_loss_ptr, row, grad_loss_stride, n_cols, ignore_index,
    CHECK_TARGETS: tl.constexpr,
):  # fmt: skip
    """(target, ignored, in_range, target logit, grad_loss) of one row of a forward with
    gradient; load them before any store of the gradient, which may overwrite the logits."""
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, CHECK_TARGETS)
    target_logit = _target_logit(row_ptr, target, in_range)
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    return target, ignored, in_range, target_logit, grad_loss


@triton.jit
def _next_row_chunk(row_ptr, row, slots, n_rows, n_cols, logits_row_stride, offs):
    """A split program's chunk of its next row (``row + slots``), -inf past the last row."""
    next_end = tl.where(row + slots < n_rows, n_cols, 0)  # nothing past the last row
    return tl.load(
        row_ptr + slots * logits_row_stride + offs, mask=offs < next_end, other=float("-inf")
    )


@triton.jit
def _target_logit(row_ptr, target, in_range):
    return tl.load(row_ptr + tl.where(in_range, target, 0)).to(tl.float32)


@triton.jit
def _row_loss(lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss):
    loss = (
        lse
        - (1.0 - label_smoothing) * target_logit
        - (label_smoothing / n_cols) * row_total
        + z_loss * lse * lse
    )
    return tl.where(ignored, 0.0, tl.where(in_range, loss, float("nan")))


@triton.jit
def _grad_values(x, offs, lse, scale, target, n_cols, label_smoothing, z_loss):
    """scale * (p_j (1 + 2 z lse) - eps / V - (1 - eps) [j == target]) for logits x at offs."""
    prob_scale = scale * (1.0 + 2.0 * z_loss * lse)
    uniform = scale * (label_smoothing / n_cols)
    hit = scale * (1.0 - label_smoothing)
    p = tl.exp2((x - lse) * LOG2E)
    return p * prob_scale - uniform - tl.where(offs == target, hit, 0.0)


@triton.jit
def _write_row_grad(
    out_row, in_row, lse, scale, target, n_cols, label_smoothing, z_loss, BLOCK: tl.constexpr,
    FORWARDS: tl.constexpr = False,
):  # fmt: skip
    """The gradient of one row, chunk by chunk, walking the row *backwards* (the chunks the
    statistics pass read last are the likeliest still in L2, and this pass lets them go) or,
    with ``FORWARDS``, in order.

    Each chunk is read before it is written by this same program, so out_row may be in_row.
    """
    cols = tl.arange(0, BLOCK)
    num_chunks = tl.cdiv(n_cols, BLOCK)
    for chunk in range(0, num_chunks):
        offs = output_columns(chunk * BLOCK, cols, n_cols, BLOCK, FORWARDS)
        mask = offs < n_cols
        x = tl.load(in_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        grad = _grad_values(
            x.to(tl.float32), offs, lse, scale, target, n_cols, label_smoothing, z_loss
        )
        tl.store(out_row + offs, grad.to(out_row.dtype.element_ty), mask=mask)


@triton.jit
def _grad_scale(grad_loss, ignored, in_range):
    # ignored rows get 0 (even when grad_loss is inf, as in a mean over zero rows); bad targets NaN
    return tl.where(ignored, 0.0, tl.where(in_range, grad_loss, float("nan")))


@triton.jit
def _held_grad(exponentials, prob_factor, lse, scale, n_cols, label_smoothing, z_loss):
    """The gradient of row elements without the one-hot term, from their ``exponentials``
    (``p_j = exponentials * prob_factor``, the exponentials already computed for lse: one
    exponential per element in all)."""
    prob_scale = scale * (1.0 + 2.0 * z_loss * lse)
    uniform = scale * (label_smoothing / n_cols)
    return exponentials * (prob_factor * prob_scale) - uniform


@triton.jit
def _store_target_grad(
    out_row, lse, target, target_logit, owns_target, scale, n_cols, label_smoothing, z_loss
):  # fmt: skip
    """Rewrite the target element's gradient alone where ``owns_target``, after a barrier that
    lands every thread's store of :func:`_held_grad` first. Comparing every column with the
    target would cost a register per element (ptxas spills at BLOCK=32768)."""
    tl.debug_barrier()
    prob_scale = scale * (1.0 + 2.0 * z_loss * lse)
    uniform = scale * (label_smoothing / n_cols)
    hit = tl.exp(target_logit - lse) * prob_scale - uniform - scale * (1.0 - label_smoothing)
    tl.store(
        out_row + tl.where(owns_target, target, 0),
        hit.to(out_row.dtype.element_ty),
        mask=owns_target,
    )


@triton.jit
def _store_held_grad(
    exponentials, prob_factor, offs, mask, lse, target, target_logit, owns_target, scale,
    out_row, n_cols, label_smoothing, z_loss,
):  # fmt: skip
    """Write the gradient of the row elements at columns ``offs`` to ``out_row``: every element
    without the one-hot term first (:func:`_held_grad`), then the target element alone."""
    grad = _held_grad(exponentials, prob_factor, lse, scale, n_cols, label_smoothing, z_loss)
    tl.store(out_row + offs, grad.to(out_row.dtype.element_ty), mask=mask)
    _store_target_grad(
        out_row, lse, target, target_logit, owns_target, scale, n_cols, label_smoothing, z_loss
    )


@triton.jit
def _row_forward(
    logits_ptr, target_ptr, loss_ptr, lse_ptr, row, logits_row_stride, n_cols,
    ignore_index, label_smoothing, z_loss,
    BLOCK: tl.constexpr, HAS_SMOOTHING: tl.constexpr, CHECK_TARGETS: tl.constexpr,
    KEEP: tl.constexpr, CHUNKS: tl.constexpr = 0,
):  # fmt: skip
    """Store one row's loss and lse; return what a gradient pass over the row needs.
    ``CHUNKS`` > 0: the row's chunk count, its statistics loop unrolled."""
    row_ptr = logits_ptr + row * logits_row_stride
    if CHUNKS:
        lse, row_total = _unrolled_row_logsumexp(
            row_ptr, n_cols, BLOCK, CHUNKS, HAS_SMOOTHING, KEEP
        )
    else:
        lse, row_total = _row_logsumexp(row_ptr, n_cols, BLOCK, HAS_SMOOTHING, KEEP)
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, CHECK_TARGETS)
    target_logit = _target_logit(row_ptr, target, in_range)
    loss = _row_loss(
        lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
    )
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)
    return row_ptr, lse, target, ignored, in_range


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
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
    CHUNKS: tl.constexpr = 0,
):
    """Loss and lse of one row a program, read once in BLOCK-wide chunks (``CHUNKS`` > 0: the
    row's chunk count, the loop unrolled)."""
    row = tl.program_id(0).to(tl.int64)
    _row_forward(
        logits_ptr, target_ptr, loss_ptr, lse_ptr, row, logits_row_stride, n_cols,
        ignore_index, label_smoothing, z_loss, BLOCK, HAS_SMOOTHING, CHECK_TARGETS, False,
        CHUNKS,
    )  # fmt: skip


@triton.jit
def _aligned_row_logsumexp(
    base, lead, n_cols, BLOCK: tl.constexpr, NEED_SUM: tl.constexpr
):  # fmt: skip
    """``_row_logsumexp`` of a row that starts ``lead`` elements past the 16-byte aligned
    ``base``: chunks are taken from ``base``, so every chunk between the first and the last is
    whole and aligned, and loads 16 bytes a vector under a mask that is one flag for the chunk
    (a per-element mask at an unaligned start loads element by element: 67% of copy at
    4096 x 50257 bf16). The first and last chunks mask per element."""
    cols = tl.arange(0, BLOCK)
    end = lead + n_cols  # the row is base[lead:end]
    last = (tl.cdiv(end, BLOCK) - 1) * BLOCK  # start of the last chunk
    lane_max = tl.full([BLOCK], _NEG_BIG, tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    lane_total = tl.zeros([BLOCK], tl.float32)
    inside = (cols >= lead) & (cols < end)
    x = tl.load(base + cols, mask=inside, other=float("-inf")).to(tl.float32)
    lane_max, lane_sum, lane_total = _online_update(
        x, cols, n_cols, lane_max, lane_sum, lane_total, False
    )
    if NEED_SUM:
        lane_total += tl.where(inside, x, 0.0)
    # the whole chunks [BLOCK, last), two a step, each loaded one half-step ahead, under one
    # flag a chunk (splat: the interpreter takes no scalar mask, the compiler folds the splat)
    every = tl.full([BLOCK], 1, tl.int1)
    even = tl.load(base + BLOCK + cols, mask=every & (last > BLOCK), other=float("-inf"))
    for start in range(BLOCK, last, 2 * BLOCK):
        odd_whole = every & (last > start + BLOCK)
        odd = tl.load(base + start + BLOCK + cols, mask=odd_whole, other=float("-inf"))
        lane_max, lane_sum, lane_total = _online_update(
            even, cols, n_cols, lane_max, lane_sum, lane_total, False
        )
        if NEED_SUM:
            lane_total += even.to(tl.float32)
        even = tl.load(
            base + start + 2 * BLOCK + cols,
            mask=every & (last > start + 2 * BLOCK),
            other=float("-inf"),
        )
        lane_max, lane_sum, lane_total = _online_update(
            odd, cols, n_cols, lane_max, lane_sum, lane_total, False
        )
        if NEED_SUM:
            lane_total += tl.where(odd_whole, odd.to(tl.float32), 0.0)
    inside = every & (last > 0) & (last + cols < end)
    x = tl.load(base + last + cols, mask=inside, other=float("-inf")).to(tl.float32)
    lane_max, lane_sum, lane_total = _online_update(
        x, cols, n_cols, lane_max, lane_sum, lane_total, False
    )
    if NEED_SUM:
        lane_total += tl.where(inside, x, 0.0)
    row_max = tl.max(lane_max, axis=0)
    total = tl.sum(lane_sum * tl.exp2((lane_max - row_max) * LOG2E), axis=0)
    return row_max + tl.log(total), tl.sum(lane_total, axis=0)


@triton.jit
def cross_entropy_fwd_aligned_kernel(
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
    ALIGN: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
):
    """``cross_entropy_fwd_kernel`` for rows whose starts are not 16-byte aligned (a row
    stride that is not a multiple of ``ALIGN`` = 16 / element size, e.g. vocab 50257): each
    row is read in chunks from the aligned address at or before its start (``logits_ptr`` is
    16-byte aligned)."""
    row = tl.program_id(0).to(tl.int64)
    start = row * logits_row_stride
    aligned = (start // ALIGN) * ALIGN
    lse, row_total = _aligned_row_logsumexp(
        logits_ptr + aligned, start - aligned, n_cols, BLOCK, HAS_SMOOTHING
    )
    row_ptr = logits_ptr + start
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, CHECK_TARGETS)
    target_logit = _target_logit(row_ptr, target, in_range)
    loss = _row_loss(
        lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
    )
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


@triton.jit
def cross_entropy_fwd_rows_kernel(
    logits_ptr, target_ptr, loss_ptr, lse_ptr, n_rows, logits_row_stride, n_cols,
    ignore_index, label_smoothing, z_loss,
    ROWS: tl.constexpr, BLOCK: tl.constexpr, HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
):  # fmt: skip
    """``cross_entropy_fwd_kernel`` for short rows (``n_cols <= BLOCK``): ROWS whole rows a
    program as one [ROWS, BLOCK] tile. One 256-column row a program left each one-warp program
    a single load to wait on (32768 x 256 bf16: 21.5 us, 23% of copy)."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    inside = row_ok[:, None] & (cols[None, :] < n_cols)
    row_ptrs = logits_ptr + rows * logits_row_stride
    x = tl.load(row_ptrs[:, None] + cols[None, :], mask=inside, other=float("-inf"))
    x = x.to(tl.float32)
    row_max = tl.maximum(tl.max(x, axis=1), _NEG_BIG)  # exp never sees inf - inf
    total = tl.sum(tl.exp2((x - row_max[:, None]) * LOG2E), axis=1)
    lse = row_max + tl.log(total)
    if HAS_SMOOTHING:
        row_total = tl.sum(tl.where(inside, x, 0.0), axis=1)
    else:
        row_total = tl.zeros([ROWS], tl.float32)
    target = tl.load(target_ptr + rows, mask=row_ok, other=ignore_index)
    target, ignored, in_range = _classify_target(target, n_cols, ignore_index, CHECK_TARGETS)
    target_logit = tl.load(
        row_ptrs + tl.where(in_range, target, 0), mask=row_ok & in_range, other=0.0
    ).to(tl.float32)
    loss = _row_loss(
        lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
    )
    tl.store(loss_ptr + rows, loss, mask=row_ok)
    tl.store(lse_ptr + rows, lse, mask=row_ok)


@triton.jit
def cross_entropy_fwd_grad_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    grad_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_rows,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
):
    """Loss and lse as the forward, plus grad_loss[row] * d(loss_row)/d(logits) in grad_ptr
    (which may alias logits_ptr). Rows longer than one block: persistent over rows, the grid
    sized by the caller so that the rows in flight fit in L2 for the gradient pass's re-read."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    for i in range(0, tl.cdiv(n_rows - pid, num_programs)):
        row = pid.to(tl.int64) + i * num_programs
        row_ptr, lse, target, ignored, in_range = _row_forward(
            logits_ptr, target_ptr, loss_ptr, lse_ptr, row, logits_row_stride, n_cols,
            ignore_index, label_smoothing, z_loss, BLOCK, HAS_SMOOTHING, CHECK_TARGETS, True,
        )  # fmt: skip
        grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
        _write_row_grad(
            grad_ptr + row * grad_row_stride, row_ptr, lse,
            _grad_scale(grad_loss, ignored, in_range), target, n_cols, label_smoothing, z_loss,
            BLOCK,
        )  # fmt: skip


@triton.jit
def cross_entropy_fwd_grad_row_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    grad_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
    EARLY: tl.constexpr = True,
):
    """The same as ``cross_entropy_fwd_grad_kernel`` for a row that fits one block (BLOCK >=
    n_cols): the row stays in registers, so memory sees one read and one write.

    EARLY issues the target index, target logit and grad_loss loads right after the row's load,
    so their round trips overlap it instead of following the row's two reductions."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * logits_row_stride
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(row_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
    if EARLY:
        target, ignored, in_range, target_logit, grad_loss = _row_grad_inputs(
            target_ptr, row_ptr, grad_loss_ptr, row, grad_loss_stride, n_cols, ignore_index,
            CHECK_TARGETS,
        )  # fmt: skip
    # clamped so that a row of -inf gives exp(-inf) = 0 terms rather than NaN (lse = -inf)
    row_max, e = chunk_exponentials(x)
    total = tl.sum(e, axis=0)
    lse = row_max + tl.log(total)
    if HAS_SMOOTHING:
        row_total = tl.sum(tl.where(mask, x, 0.0), axis=0)
    else:
        row_total = 0.0
    if not EARLY:
        target, ignored, in_range, target_logit, grad_loss = _row_grad_inputs(
            target_ptr, row_ptr, grad_loss_ptr, row, grad_loss_stride, n_cols, ignore_index,
            CHECK_TARGETS,
        )  # fmt: skip
    loss = _row_loss(
        lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
    )
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)
    scale = _grad_scale(grad_loss, ignored, in_range)
    _store_held_grad(
        e, 1.0 / total, offs, mask, lse, target, target_logit, in_range, scale,
        grad_ptr + row * grad_row_stride, n_cols, label_smoothing, z_loss,
    )  # fmt: skip


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
    EVICT_FIRST: tl.constexpr = True,
):
    """Program ``pid``: the gradient of slice ``pid % cdiv(n_cols, BLOCK)`` of row
    ``pid // cdiv(n_cols, BLOCK)`` from the saved lse. ``EVICT_FIRST=False`` loads the logits
    without the eviction hint (benchmark sweeps).

    A pure stream (read a slice, write a slice) like a copy kernel: no loop, no reduction, and
    enough programs to fill every SM whatever the row length. Consecutive programs take
    consecutive slices, so the grid walks memory in order as a copy does. Each element is read
    before this program writes it, so grad_logits may be logits itself.
    """
    slices = tl.cdiv(n_cols, BLOCK)
    pid = tl.program_id(0)
    row = (pid // slices).to(tl.int64)
    offs = (pid % slices) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols
    if EVICT_FIRST:
        x = tl.load(
            logits_ptr + row * logits_row_stride + offs,
            mask=mask,
            other=0.0,
            eviction_policy="evict_first",
        )
    else:
        x = tl.load(logits_ptr + row * logits_row_stride + offs, mask=mask, other=0.0)
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, False)
    lse = tl.load(lse_ptr + row)
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    scale = _grad_scale(grad_loss, ignored, in_range)
    grad = _grad_values(x.to(tl.float32), offs, lse, scale, target, n_cols, label_smoothing, z_loss)
    tl.store(
        grad_logits_ptr + row * grad_row_stride + offs,
        grad.to(grad_logits_ptr.dtype.element_ty),
        mask=mask,
    )


@triton.jit
def cross_entropy_scale_rows_kernel(
    grad_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    grad_row_stride,
    n_rows,
    n_cols,
    BLOCK: tl.constexpr,
):
    """grad[row] *= grad_loss[row] in place, rows whose factor is exactly 1 untouched, over a
    persistent grid (program ``pid`` takes rows ``pid, pid + programs, ...``). One broadcast factor (stride 0) of exactly 1, a mean or sum
    loss's ``backward()``, ends every program after one load: one program per row would spend
    a load's round trip per row on it, about 30 us at 16384 rows on the H100."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    first = tl.load(grad_loss_ptr + pid.to(tl.int64) * grad_loss_stride).to(tl.float32)
    skip_all = (grad_loss_stride == 0) & (first == 1.0)
    if skip_all == 0:
        for i in range(0, tl.cdiv(n_rows - pid, programs)):
            row = pid.to(tl.int64) + i * programs
            factor = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
            if factor != 1.0:
                row_ptr = grad_ptr + row * grad_row_stride
                for start in range(0, n_cols, BLOCK):
                    offs = start + cols
                    mask = offs < n_cols
                    g = tl.load(row_ptr + offs, mask=mask, other=0.0).to(tl.float32)
                    tl.store(row_ptr + offs, (g * factor).to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cross_entropy_mean_scale_kernel(
    target_ptr, scale_ptr, n_rows, ignore_index, BLOCK: tl.constexpr
):
    """One program: ``scale_ptr[0] = 1 / (number of targets that are not ignore_index)`` (inf
    for none), the factor of a mean loss; one launch where torch takes three."""
    offs = tl.arange(0, BLOCK)
    counts = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        t = tl.load(target_ptr + start + offs, mask=start + offs < n_rows, other=ignore_index)
        counts += (t != ignore_index).to(tl.int32)
    count = tl.sum(counts, axis=0).to(tl.float32)
    tl.store(scale_ptr, tl.div_rn(1.0, count))


@triton.jit
def cross_entropy_reduce_kernel(
    loss_ptr, scale_ptr, target_ptr, out_ptr, n_rows, ignore_index, BLOCK: tl.constexpr,
    HAS_SCALE: tl.constexpr, COUNT: tl.constexpr,
):  # fmt: skip
    """One program: ``out_ptr[0] = sum(loss_ptr[:n_rows])``, times ``scale_ptr[0]`` (HAS_SCALE:
    a mean whose 1 / count the gradient already used) or divided by the number of targets that
    are not ignore_index (COUNT: a mean without a gradient; NaN for none, as torch), in float32,
    stored in the output's dtype: the sums, the division and the cast in one launch (torch
    takes five, which at 32768 x 256 cost more than the row kernel)."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    counts = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        inside = start + offs < n_rows
        acc += tl.load(loss_ptr + start + offs, mask=inside, other=0.0)
        if COUNT:
            t = tl.load(target_ptr + start + offs, mask=inside, other=ignore_index)
            counts += (t != ignore_index).to(tl.int32)
    total = tl.sum(acc, axis=0)
    if HAS_SCALE:
        total = total * tl.load(scale_ptr)
    if COUNT:
        total = tl.div_rn(total, tl.sum(counts, axis=0).to(tl.float32))
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _split_row_total(partial, parts, chunks, CHUNKS_POW2: tl.constexpr):
    """The row's sum of logits (label smoothing) from its programs' published partials."""
    totals = tl.load(
        partial + 2 * CHUNKS_POW2 + parts, mask=parts < chunks, other=0.0, cache_modifier=".cg"
    )
    return tl.sum(totals, axis=0)


@triton.jit
def _split_chunk_grad(
    e, chunk_max, offs, mask, chunk_start, chunk_end, row, partial, parts, chunks, target_ptr,
    loss_ptr, lse_ptr, grad_ptr, grad_loss_ptr, grad_loss_stride, grad_row_stride, n_cols,
    ignore_index, label_smoothing, z_loss, CHUNKS_POW2: tl.constexpr, HAS_SMOOTHING: tl.constexpr,
):  # fmt: skip
    """One chunk's gradient from its exponentials ``e = exp(x - chunk_max)`` and the row's
    combined partials; the chunk-0 program also stores the row's loss and lse."""
    row_max, total = combined_partials(partial, parts, chunks, CHUNKS_POW2)
    lse = row_max + tl.log(total)
    target_logit = tl.load(partial + 3 * CHUNKS_POW2, cache_modifier=".cg")
    if HAS_SMOOTHING:
        row_total = _split_row_total(partial, parts, chunks, CHUNKS_POW2)
    else:
        row_total = 0.0
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, False)
    if chunk_start == 0:
        loss = _row_loss(
            lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
        )
        tl.store(loss_ptr + row, loss)
        tl.store(lse_ptr + row, lse)
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    scale = _grad_scale(grad_loss, ignored, in_range)
    owns_target = in_range & (target >= chunk_start) & (target < chunk_end)
    _store_held_grad(
        e, tl.exp2((chunk_max - row_max) * LOG2E) / total, offs, mask, lse, target,
        target_logit, owns_target, scale, grad_ptr + row * grad_row_stride, n_cols,
        label_smoothing, z_loss,
    )  # fmt: skip


@triton.jit
def _split_chunk_grad_known_target(
    e, chunk_max, offs, mask, chunk_start, chunk_end, row, partial, parts, chunks, target,
    ignored, in_range, target_logit, loss_ptr, lse_ptr, grad_ptr, grad_loss_ptr,
    grad_loss_stride, grad_row_stride, n_cols, label_smoothing, z_loss,
    CHUNKS_POW2: tl.constexpr, HAS_SMOOTHING: tl.constexpr,
):  # fmt: skip
    """``_split_chunk_grad`` for a program that already holds the row's target and target
    logit (EARLY): after the wait only the partials (and grad_loss) are read."""
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    row_max, total = combined_partials(partial, parts, chunks, CHUNKS_POW2)
    lse = row_max + tl.log(total)
    if HAS_SMOOTHING:
        row_total = _split_row_total(partial, parts, chunks, CHUNKS_POW2)
    else:
        row_total = 0.0
    if chunk_start == 0:
        loss = _row_loss(
            lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
        )
        tl.store(loss_ptr + row, loss)
        tl.store(lse_ptr + row, lse)
    scale = _grad_scale(grad_loss, ignored, in_range)
    owns_target = in_range & (target >= chunk_start) & (target < chunk_end)
    _store_held_grad(
        e, tl.exp2((chunk_max - row_max) * LOG2E) / total, offs, mask, lse, target,
        target_logit, owns_target, scale, grad_ptr + row * grad_row_stride, n_cols,
        label_smoothing, z_loss,
    )  # fmt: skip


@triton.jit
def cross_entropy_fwd_grad_split_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    grad_ptr,
    grad_loss_ptr,
    partials_ptr,
    arrivals_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_rows,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
    EARLY: tl.constexpr = False,
    RELEASE_ONLY: tl.constexpr = False,
):
    """``cross_entropy_fwd_grad_kernel`` for rows split over ``cdiv(n_cols, BLOCK)`` programs,
    each holding its chunk in registers: one read of the logits, one write of the gradient.

    Program ``pid`` owns chunk ``pid % chunks`` of rows ``slot, slot + slots, ...``. It stores
    its chunk's (max, sum of exp, sum) in ``partials_ptr[row]`` (chunk 0 also the target
    logit, read before any gradient of the row is written, so grad_ptr may alias the logits),
    combines the row's partials into lse and writes its chunk of the gradient from the
    exponentials it holds; chunk 0 stores the loss and lse. STAGE as in
    ``softmax_fwd_split_kernel``: 0 meets through the atomic counter ``arrivals_ptr[row]``
    (zeroed by the caller; every program resident at once), 1 / 2 are the partials and the
    gradient as two launches (the interpreter). PREFETCH loads the chunk of the program's next
    row before waiting for this one (only this program writes that chunk's gradient, so an
    in-place gradient is safe).

    EARLY: every program loads its next row's target index with the prefetch and the target
    logit itself when its row starts (not chunk 0 alone, after its reductions, with two
    dependent loads on the path to the row's meeting); RELEASE_ONLY as in
    ``warpforge.ops._kernels.split_rows.arrive``. The target logit is read before the program
    arrives, so before any program of the row writes a gradient (in place stays safe).
    """
    chunks, chunk, slot, slots, offs, mask = split_place(n_cols, BLOCK)
    chunk_start = chunk * BLOCK
    chunk_end = tl.minimum(chunk_start + BLOCK, n_cols)
    parts = tl.arange(0, CHUNKS_POW2)
    if PREFETCH:
        upcoming = tl.load(
            logits_ptr + slot.to(tl.int64) * logits_row_stride + offs,
            mask=mask,
            other=float("-inf"),
        )
    if EARLY:
        next_target = tl.load(target_ptr + slot.to(tl.int64))
    for i in range(0, tl.cdiv(n_rows - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        row_ptr = logits_ptr + row * logits_row_stride
        if EARLY:
            target, ignored, in_range = _classify_target(
                next_target, n_cols, ignore_index, CHECK_TARGETS
            )
            target_logit = _target_logit(row_ptr, target, in_range)
        if PREFETCH:
            x = upcoming.to(tl.float32)
        else:
            x = tl.load(row_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
        partial = partials_ptr + row * (4 * CHUNKS_POW2)
        if HAS_SMOOTHING and STAGE != 2:
            # summed before the exponentials replace x: x and them held at once would spill
            tl.store(partial + 2 * CHUNKS_POW2 + chunk, tl.sum(tl.where(mask, x, 0.0), axis=0))
        chunk_max, e = chunk_exponentials(x)
        if STAGE != 2:
            store_chunk_partials(partial, chunk, chunk_max, e, CHUNKS_POW2)
            if not EARLY:  # noqa: SIM102 (a compile-time branch around a run-time one)
                if chunk == 0:
                    target, _, in_range = _row_target(
                        target_ptr, row, n_cols, ignore_index, CHECK_TARGETS
                    )
                    tl.store(partial + 3 * CHUNKS_POW2, _target_logit(row_ptr, target, in_range))
        if STAGE == 0:
            arrived = arrive(arrivals_ptr, row, RELEASE_ONLY)
        if PREFETCH:  # after the release (whose fence would wait for it), before the wait
            upcoming = _next_row_chunk(row_ptr, row, slots, n_rows, n_cols, logits_row_stride, offs)
        if EARLY:
            next_target = tl.load(target_ptr + row + slots, mask=row + slots < n_rows, other=0)
        if STAGE == 0:
            wait_for_row(arrivals_ptr, row, chunks, arrived)
        if STAGE != 1 and EARLY:
            _split_chunk_grad_known_target(
                e, chunk_max, offs, mask, chunk_start, chunk_end, row, partial, parts, chunks,
                target, ignored, in_range, target_logit, loss_ptr, lse_ptr, grad_ptr,
                grad_loss_ptr, grad_loss_stride, grad_row_stride, n_cols, label_smoothing,
                z_loss, CHUNKS_POW2, HAS_SMOOTHING,
            )  # fmt: skip
        if STAGE != 1 and not EARLY:
            _split_chunk_grad(
                e, chunk_max, offs, mask, chunk_start, chunk_end, row, partial, parts, chunks,
                target_ptr, loss_ptr, lse_ptr, grad_ptr, grad_loss_ptr, grad_loss_stride,
                grad_row_stride, n_cols, ignore_index, label_smoothing, z_loss, CHUNKS_POW2,
                HAS_SMOOTHING,
            )  # fmt: skip


@triton.jit
def _aligned_place(row, logits_row_stride, n_cols, ALIGN: tl.constexpr):
    """Where ``row`` lies from the 16-byte aligned address at or before its start: (that
    address, the row's first column after it, and the span [whole_lo, whole_hi) of the row's
    whole 16-byte vectors), offsets in elements."""
    start = row * logits_row_stride
    aligned = (start // ALIGN) * ALIGN
    lead = (start - aligned).to(tl.int32)  # int64 would widen every offset it meets
    return aligned, lead, ((lead + ALIGN - 1) // ALIGN) * ALIGN, ((lead + n_cols) // ALIGN) * ALIGN


@triton.jit
def _aligned_chunk(logits_ptr, row, live, logits_row_stride, n_cols, offs, ALIGN: tl.constexpr):
    """The row's whole 16-byte vectors among offsets ``offs`` from its aligned address, loaded a
    vector at a time (the mask's bounds are multiples of ALIGN), -inf elsewhere and when not
    ``live``; the row's partial first and last vectors are :func:`_row_edges`'."""
    aligned, _, whole_lo, whole_hi = _aligned_place(row, logits_row_stride, n_cols, ALIGN)
    whole_hi = tl.where(live, whole_hi, 0)
    return tl.load(
        logits_ptr + aligned + offs,
        mask=(offs >= whole_lo) & (offs < whole_hi),
        other=float("-inf"),
    )


@triton.jit
def _row_edges(lead, whole_hi, n_cols, chunk, live, BLOCK: tl.constexpr, ALIGN: tl.constexpr):
    """The row's partial first and last 16-byte vectors, each for the program whose chunk holds
    it: (offsets from the aligned address: the first vector, then the one at whole_hi; their
    in-row mask, all False for other programs and when not ``live``)."""
    pos = tl.arange(0, 2 * ALIGN)
    edge_offs = tl.where(pos < ALIGN, pos, whole_hi + pos - ALIGN)
    head_end = tl.where((chunk == 0) & (lead > 0) & live, ALIGN, 0)
    tail_end = tl.where((chunk == whole_hi // BLOCK) & live, lead + n_cols, 0)
    edge_mask = tl.where(pos < ALIGN, (pos >= lead) & (pos < head_end), edge_offs < tail_end)
    return edge_offs, edge_mask


@triton.jit
def _load_row_edges(logits_ptr, row, live, logits_row_stride, n_cols, chunk,
                    BLOCK: tl.constexpr, ALIGN: tl.constexpr):  # fmt: skip
    """:func:`_row_edges`' elements of ``row`` that this program's chunk holds, -inf elsewhere."""
    aligned, lead, _, whole_hi = _aligned_place(row, logits_row_stride, n_cols, ALIGN)
    edge_offs, edge_mask = _row_edges(lead, whole_hi, n_cols, chunk, live, BLOCK, ALIGN)
    return tl.load(logits_ptr + aligned + edge_offs, mask=edge_mask, other=float("-inf"))


@triton.jit
def cross_entropy_fwd_grad_flags_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    grad_ptr,
    grad_loss_ptr,
    words_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_rows,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
    ALIGN: tl.constexpr = 1,
):
    """``cross_entropy_fwd_grad_split_kernel`` (same programs, rows and chunks) meeting through
    flag words instead of a counter (see ``warpforge.ops._kernels.split_rows.row_words``): per
    row, ``words_ptr[row, chunk]`` holds a chunk's (max, sum of exp) and
    ``words_ptr[row, CHUNKS_POW2 + chunk]`` its (sum of logits, target logit or 0), the int64
    workspace filled with ``UNPUBLISHED`` by the caller. Every program polls the first words,
    chunk 0 (which stores the loss and lse) also the second ones.

    No fence: no program reads another's chunk. The target logit is read by the program whose
    chunk holds it (and published in its word for the loss), so the gradient may overwrite the
    logits in place. The target index and grad_loss of a program's next row are loaded with the
    prefetch of its next chunk, so after the meeting only the words' poll is a round trip.

    ALIGN > 1 (16 / element size) for rows that start off 16-byte boundaries (a row stride
    that is no multiple of ALIGN, e.g. vocab 50257), with the gradient laid out as the logits
    (same row stride, both buffers 16-byte aligned): chunks are counted from the aligned
    address at or before each row's start (``cdiv(n_cols + ALIGN - 1, BLOCK)`` of them), and
    a chunk loads and stores the row's whole 16-byte vectors a vector at a time; the row's
    partial first and last vectors (up to ALIGN - 1 elements each) go through a small tensor
    of 2 * ALIGN elements of the programs that hold them, folded into the chunk's published
    statistics. Counted from the row's start, every load and store is one element (ptxas,
    BLOCK 8192, 4 warps, bf16: 129 16-bit loads and a 408-byte stack a thread; a per-element
    in-row mask on the aligned chunks still spilled 264 bytes)."""
    chunks, chunk, slot, slots, offs, mask = split_place(n_cols + ALIGN - 1, BLOCK)
    chunk_start = chunk * BLOCK
    lanes = word_lanes(CHUNKS_POW2)
    if ALIGN > 1:  # the first row's edges, loaded with its chunk
        upcoming_edges = _load_row_edges(logits_ptr, slot.to(tl.int64), slot < n_rows,
                                         logits_row_stride, n_cols, chunk, BLOCK, ALIGN)  # fmt: skip
    if PREFETCH and ALIGN > 1:
        upcoming = _aligned_chunk(logits_ptr, slot.to(tl.int64), slot < n_rows,
                                  logits_row_stride, n_cols, offs, ALIGN)  # fmt: skip
    elif PREFETCH:
        upcoming = tl.load(
            logits_ptr + slot.to(tl.int64) * logits_row_stride + offs,
            mask=mask,
            other=float("-inf"),
        )
    next_target = tl.load(target_ptr + slot.to(tl.int64))
    next_grad_loss = tl.load(grad_loss_ptr + slot.to(tl.int64) * grad_loss_stride)
    for i in range(0, tl.cdiv(n_rows - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        row_ptr = logits_ptr + row * logits_row_stride
        if ALIGN > 1:  # this row's columns in the chunk, counted from its aligned address
            aligned, lead, whole_lo, whole_hi = _aligned_place(
                row, logits_row_stride, n_cols, ALIGN
            )
            first_col = chunk_start - lead
            in_row = (offs >= whole_lo) & (offs < whole_hi)
            edge_offs, edge_mask = _row_edges(lead, whole_hi, n_cols, chunk, True, BLOCK, ALIGN)
            edges = upcoming_edges.to(tl.float32)
        else:
            first_col = chunk_start
            in_row = mask
        target, ignored, in_range = _classify_target(
            next_target, n_cols, ignore_index, CHECK_TARGETS
        )
        grad_loss = next_grad_loss.to(tl.float32)
        owns_target = in_range & (target >= first_col) & (target < first_col + BLOCK)
        target_logit = tl.load(
            row_ptr + tl.where(owns_target, target, 0), mask=owns_target, other=0.0
        ).to(tl.float32)
        if PREFETCH:
            x = upcoming.to(tl.float32)
        elif ALIGN > 1:
            x = _aligned_chunk(logits_ptr, row, True, logits_row_stride, n_cols, offs, ALIGN)
            x = x.to(tl.float32)
        else:
            x = tl.load(row_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
        words = words_ptr + row * (2 * CHUNKS_POW2)
        if HAS_SMOOTHING and STAGE != 2:
            # summed before the exponentials replace x: x and them held at once would spill
            row_part = tl.sum(tl.where(in_row, x, 0.0), axis=0)
            if ALIGN > 1:
                row_part += tl.sum(tl.where(edge_mask, edges, 0.0), axis=0)
        else:
            row_part = 0.0
        chunk_max, e = chunk_exponentials(x)
        if ALIGN > 1:  # the edges join the chunk's statistics (e stays relative to chunk_max)
            stat_max = tl.maximum(chunk_max, tl.max(edges, axis=0))
            stat_sum = tl.sum(e, axis=0) * tl.exp2((chunk_max - stat_max) * LOG2E) + tl.sum(
                tl.exp2((edges - stat_max) * LOG2E), axis=0
            )
        else:
            stat_max = chunk_max
            stat_sum = tl.sum(e, axis=0)
        if STAGE != 2:
            publish_word(words + chunk, stat_max, stat_sum, STAGE)
            publish_word(words + CHUNKS_POW2 + chunk, row_part, target_logit, STAGE)
        if ALIGN > 1:
            upcoming_edges = _load_row_edges(logits_ptr, row + slots, row + slots < n_rows,
                                             logits_row_stride, n_cols, chunk, BLOCK,
                                             ALIGN)  # fmt: skip
        if PREFETCH and ALIGN > 1:
            upcoming = _aligned_chunk(logits_ptr, row + slots, row + slots < n_rows,
                                      logits_row_stride, n_cols, offs, ALIGN)  # fmt: skip
        elif PREFETCH:
            upcoming = _next_row_chunk(row_ptr, row, slots, n_rows, n_cols, logits_row_stride, offs)
        has_next = row + slots < n_rows
        next_target = tl.load(target_ptr + row + slots, mask=has_next, other=0)
        next_grad_loss = tl.load(
            grad_loss_ptr + (row + slots) * grad_loss_stride, mask=has_next, other=0.0
        )
        if STAGE != 1:
            stats, stats_2, sums, sums_2 = row_words(
                words, words + CHUNKS_POW2, lanes, chunks, tl.where(chunk == 0, chunks, 0),
                CHUNKS_POW2 > 32, STAGE,
            )  # fmt: skip
            row_max, total = combined_words(stats, stats_2)
            lse = row_max + tl.log(total)
            if chunk == 0:
                row_totals, target_logits = unpack_pair(sums)
                row_totals_2, target_logits_2 = unpack_pair(sums_2)
                loss = _row_loss(
                    lse, tl.sum(row_totals, axis=0) + tl.sum(row_totals_2, axis=0),
                    tl.sum(target_logits, axis=0) + tl.sum(target_logits_2, axis=0), ignored,
                    in_range, n_cols, label_smoothing, z_loss,
                )  # fmt: skip
                tl.store(loss_ptr + row, loss)
                tl.store(lse_ptr + row, lse)
            scale = _grad_scale(grad_loss, ignored, in_range)
            prob_factor = tl.exp2((chunk_max - row_max) * LOG2E) / total
            if ALIGN > 1:
                grad = _held_grad(e, prob_factor, lse, scale, n_cols, label_smoothing, z_loss)
                out = grad_ptr + aligned  # the logits' row stride
                tl.store(out + offs, grad.to(grad_ptr.dtype.element_ty), mask=in_row)
                edge_grad = _grad_values(edges, edge_offs - lead, lse, scale, target, n_cols,
                                         label_smoothing, z_loss)  # fmt: skip
                tl.store(out + edge_offs, edge_grad.to(grad_ptr.dtype.element_ty), mask=edge_mask)
                _store_target_grad(
                    grad_ptr + row * grad_row_stride, lse, target, target_logit, owns_target,
                    scale, n_cols, label_smoothing, z_loss,
                )  # fmt: skip
            else:
                _store_held_grad(
                    e, prob_factor, offs, in_row, lse, target, target_logit, owns_target, scale,
                    grad_ptr + row * grad_row_stride, n_cols, label_smoothing, z_loss,
                )  # fmt: skip


@triton.jit
def _flat_row_terms(target_ptr, lse_ptr, grad_loss_ptr, grad_loss_stride, row, n_rows, n_cols,
                    ignore_index):  # fmt: skip
    """(target, lse, scale) of one row for the flat backward; a row past the last reads row 0
    (its values are never used: no element of the block lies in it)."""
    row = tl.where(row < n_rows, row, 0)
    target, ignored, in_range = _row_target(target_ptr, row, n_cols, ignore_index, False)
    lse = tl.load(lse_ptr + row)
    grad_loss = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    return target, lse, _grad_scale(grad_loss, ignored, in_range)


@triton.jit
def cross_entropy_bwd_flat_kernel(
    grad_logits_ptr, logits_ptr, target_ptr, lse_ptr, grad_loss_ptr, grad_loss_stride,
    n_rows, n_cols, n_elements, ignore_index, label_smoothing, z_loss,
    BLOCK: tl.constexpr, WIDE: tl.constexpr, EVICT_FIRST: tl.constexpr = False,
):  # fmt: skip
    """``cross_entropy_bwd_kernel`` over contiguous logits seen as one flat stream: program
    ``pid`` takes elements ``[pid * BLOCK, (pid + 1) * BLOCK)`` wherever rows begin, so no lane
    idles in a padded last slice of a row (32000 classes in 4096-column slices leave 19% of the
    last slice's lanes idle). ``BLOCK <= n_cols``, so a block meets at most two rows: one scalar
    division places the first, and each element picks its row's terms by comparing its offset
    with the row boundary. Offsets are 64-bit only when the logits reach 2**31 elements
    (``WIDE``). Only a last partial block is predicated per element: a mask against an end
    that is no multiple of 16 bytes loads and stores element by element (fp32 4096 x 50257 ran
    at 87% of copy with every block masked)."""
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    offs = start + tl.arange(0, BLOCK)
    # n_elements (= n_rows * n_cols) comes from the host: the product of the two 32-bit
    # arguments would wrap past 2**31 elements
    whole = start + BLOCK <= n_elements
    mask = offs < n_elements
    # plain loads, as torch.compile's kernel reads the logits, ran faster on the H200 than
    # evict_first (``EVICT_FIRST``, kept for the sweeps; ``FLAT_BWD_LAUNCHES`` has the numbers)
    if EVICT_FIRST:
        if whole:
            x = tl.load(logits_ptr + offs, eviction_policy="evict_first")
        else:
            x = tl.load(logits_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    elif whole:
        x = tl.load(logits_ptr + offs)
    else:
        x = tl.load(logits_ptr + offs, mask=mask, other=0.0)
    row = start // n_cols
    boundary = (row + 1) * n_cols
    target_a, lse_a, scale_a = _flat_row_terms(
        target_ptr, lse_ptr, grad_loss_ptr, grad_loss_stride, row, n_rows, n_cols, ignore_index
    )
    target_b, lse_b, scale_b = _flat_row_terms(
        target_ptr, lse_ptr, grad_loss_ptr, grad_loss_stride, row + 1, n_rows, n_cols,
        ignore_index,
    )  # fmt: skip
    second = offs >= boundary
    cols = offs - tl.where(second, boundary, boundary - n_cols)
    grad = _grad_values(
        x.to(tl.float32), cols, tl.where(second, lse_b, lse_a), tl.where(second, scale_b, scale_a),
        tl.where(second, target_b, target_a), n_cols, label_smoothing, z_loss,
    )  # fmt: skip
    if whole:
        tl.store(grad_logits_ptr + offs, grad.to(grad_logits_ptr.dtype.element_ty))
    else:
        tl.store(grad_logits_ptr + offs, grad.to(grad_logits_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cross_entropy_fwd_grad_looped_kernel(
    logits_ptr,
    target_ptr,
    loss_ptr,
    lse_ptr,
    grad_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    logits_row_stride,
    grad_row_stride,
    n_cols,
    ignore_index,
    label_smoothing,
    z_loss,
    BLOCK: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,
    CHECK_TARGETS: tl.constexpr,
    CHUNKS: tl.constexpr = 0,
    FORWARDS: tl.constexpr = False,
):
    """``cross_entropy_fwd_grad_kernel``'s loss, lse and gradient with one row a program (a
    grid of n_rows), as ``softmax_fwd_looped_kernel`` walks a softmax row: the statistics pass
    in BLOCK-wide chunks (``CHUNKS`` > 0: the row's number of chunks, known when compiling, so
    that pass is unrolled and its loads are all in flight together), then the gradient pass
    re-reads the row from L2, backwards or with ``FORWARDS`` in order. Few registers a program,
    so several programs share an SM, where the whole-row kernel holds one row an SM."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * logits_row_stride
    target, ignored, in_range, target_logit, grad_loss = _row_grad_inputs(
        target_ptr, row_ptr, grad_loss_ptr, row, grad_loss_stride, n_cols, ignore_index,
        CHECK_TARGETS,
    )  # fmt: skip
    if CHUNKS:
        lse, row_total = _unrolled_row_logsumexp(
            row_ptr, n_cols, BLOCK, CHUNKS, HAS_SMOOTHING, True
        )
    else:
        lse, row_total = _row_logsumexp(row_ptr, n_cols, BLOCK, HAS_SMOOTHING, True)
    loss = _row_loss(
        lse, row_total, target_logit, ignored, in_range, n_cols, label_smoothing, z_loss
    )
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)
    _write_row_grad(
        grad_ptr + row * grad_row_stride, row_ptr, lse, _grad_scale(grad_loss, ignored, in_range),
        target, n_cols, label_smoothing, z_loss, BLOCK, FORWARDS,
    )  # fmt: skip
