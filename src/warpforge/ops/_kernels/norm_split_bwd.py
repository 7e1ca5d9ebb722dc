"""The norm backward of long rows split over programs (``norm_bwd_flags_kernel``): each program
holds one chunk of a row's x and dy in registers from their read to the write of dx, so memory
sees each read once (``norm_bwd_chunked_kernel`` reads a long row of both twice, and at 262144
columns the second read mostly comes from DRAM).

dx needs two row totals (RMSNorm: ``sum(w * dy * xhat)``; LayerNorm also ``sum(w * dy)``).
The programs of a row meet through flag words (``warpforge.ops._kernels.split_rows``, as
``norm_fwd_flags_kernel`` does): each publishes its chunk's sums as one 8-byte word and polls
the row's words until every one is published. dweight / dbias need no row total, so each
program accumulates its chunk's columns over its rows in registers and writes them once, to its
slot's row of the ``[slots, N]`` partials that ``partial_sum_kernel`` adds up (or, with FLUSH,
adds them there every FLUSH rows: a slot can own thousands of rows, whose float32 running sum
loses more than PyTorch's reduction does).
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.reductions import sum_pair
from warpforge.ops._kernels.split_rows import (
    publish_word,
    row_words,
    split_place,
    unpack_pair,
    word_lanes,
)


@triton.jit
def _row_totals(words, lanes, chunks, SECOND: tl.constexpr, STAGE: tl.constexpr):
    """(sum over the row's chunks of the low halves, of the high halves) of its words, polled
    until all are published (STAGE 0). A word past the row's last chunk reads as (-inf, 0), so
    its low half is masked out."""
    parts, parts_2, _, _ = row_words(words, words, lanes, chunks, 0, SECOND, STAGE)
    lo, hi = unpack_pair(parts)
    lo_2, hi_2 = unpack_pair(parts_2)
    lo = tl.where(lanes < chunks, lo, 0.0) + tl.where(lanes + 32 < chunks, lo_2, 0.0)
    return tl.sum(lo, axis=0), tl.sum(hi + hi_2, axis=0)


@triton.jit
def _add_to_partials(dw_ptrs, db_ptrs, dw_acc, db_acc, mask, WEIGHT_GRAD: tl.constexpr,
                     BIAS_GRAD: tl.constexpr):  # fmt: skip
    """Add the accumulators into a slot's (zeroed) partial rows: relaxed atomics, as no value
    comes back into registers (a load, an add and a store would hold one more chunk of them);
    only this program writes those addresses, so the sums come out in one order every run."""
    if WEIGHT_GRAD:
        tl.atomic_add(dw_ptrs, dw_acc, mask=mask, sem="relaxed")
    if BIAS_GRAD:
        tl.atomic_add(db_ptrs, db_acc, mask=mask, sem="relaxed")


@triton.jit
def norm_bwd_flags_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DH,
    stride_dh,
    offset,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    WORDS,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    CENTER: tl.constexpr,
    HAS_DH: tl.constexpr,
    PREFETCH: tl.constexpr,
    FLUSH: tl.constexpr = 0,
):
    """RMSNorm / LayerNorm (CENTER) backward of rows split over ``cdiv(N, BLOCK_N)`` programs
    (the places of ``split_place``: program ``pid`` owns column chunk ``pid % chunks`` of rows
    ``slot, slot + slots, ...``), the same math as ``norm_bwd_chunked_kernel``:

        xhat = (x - mean) * rstd (mean 0 without CENTER),  wdy = dy * (offset + w)
        dx = rstd * (wdy - xhat * sum(wdy * xhat) / N - [CENTER] sum(wdy) / N)  (+ dh: HAS_DH)
        dweight += dy * xhat,  dbias += dy   (into row ``slot`` of the [slots, N] partials)

    A program publishes its chunk's ``(sum(wdy), sum(wdy * xhat))`` (low, high half) in
    ``WORDS[row * CHUNKS_POW2 + chunk]`` (filled with UNPUBLISHED by the caller), accumulates
    the parameter gradients and, with PREFETCH, loads its next row's chunk while the others
    publish, then polls the row's words and writes dx from the chunk it holds. FLUSH > 0 adds
    the parameter gradients into the partials (zeroed by the caller) every FLUSH rows of the
    program and after its last, instead of storing them once.

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2 (the
    interpreter): the words only / dx and the partials from a second read (two launches)."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    lanes = word_lanes(CHUNKS_POW2)
    inv_n = 1.0 / N
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = slot.to(tl.int64)
    if PREFETCH:
        x_next = tl.load(X + first * stride_x + cols, mask=mask, other=0.0)
        dy_next = tl.load(DY + first * stride_dy + cols, mask=mask, other=0.0)
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = first + i * slots
        if PREFETCH:
            x, dy = x_next, dy_next
        else:
            x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
            dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0)
        rstd = tl.load(RSTD + row)
        if CENTER:
            xhat = tl.where(mask, (x.to(tl.float32) - tl.load(MEAN + row)) * rstd, 0.0)
        else:
            xhat = x.to(tl.float32) * rstd  # masked columns loaded as 0
        dy = dy.to(tl.float32)
        if HAS_WEIGHT:
            # re-read per row (an L1 hit) rather than pinning BLOCK_N registers for the loop
            wdy = dy * (offset + tl.load(W + cols, mask=mask, other=0.0).to(tl.float32))
        else:
            wdy = dy
        words = WORDS + row * CHUNKS_POW2
        if STAGE != 2:
            if CENTER:
                s_wdy, s_dot = sum_pair(wdy, wdy * xhat, 0)
            else:
                s_wdy, s_dot = 0.0, tl.sum(wdy * xhat, axis=0)
            publish_word(words + chunk, s_wdy, s_dot, STAGE)
        if PREFETCH:  # after publishing, before the poll
            upcoming = row + slots
            next_end = tl.where(upcoming < M, N, 0)  # nothing past the last row
            x_next = tl.load(X + upcoming * stride_x + cols, mask=cols < next_end, other=0.0)
            dy_next = tl.load(DY + upcoming * stride_dy + cols, mask=cols < next_end, other=0.0)
        if STAGE != 1:
            if HAS_DH:
                dh = tl.load(DH + row * stride_dh + cols, mask=mask, other=0.0)
            # the parameter gradients while the other chunks of the row publish
            if WEIGHT_GRAD:
                dw_acc += dy * xhat
            if BIAS_GRAD:
                db_acc += dy
            if FLUSH > 0:  # noqa: SIM102 (a compile-time branch around a run-time one)
                if (i + 1) % FLUSH == 0:
                    _add_to_partials(DW_PARTIAL + first * N + cols, DB_PARTIAL + first * N + cols,
                                     dw_acc, db_acc, mask, WEIGHT_GRAD, BIAS_GRAD)  # fmt: skip
                    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
                    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            total_wdy, total_dot = _row_totals(words, lanes, chunks, CHUNKS_POW2 > 32, STAGE)
            dx = wdy - xhat * (total_dot * inv_n)
            if CENTER:
                dx = dx - total_wdy * inv_n
            dx = dx * rstd
            if HAS_DH:
                dx = dx + dh.to(tl.float32)
            tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)
    if STAGE != 1 and FLUSH > 0:
        _add_to_partials(DW_PARTIAL + first * N + cols, DB_PARTIAL + first * N + cols, dw_acc,
                         db_acc, mask, WEIGHT_GRAD, BIAS_GRAD)  # fmt: skip
    elif STAGE != 1:
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + first * N + cols, dw_acc, mask=mask)
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + first * N + cols, db_acc, mask=mask)
