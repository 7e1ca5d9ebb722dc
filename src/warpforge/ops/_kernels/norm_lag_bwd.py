"""The lagged split-row norm backward (``norm_bwd_lag_flags_kernel``): ``norm_bwd_flags_kernel``
with the wait for a row's totals moved one row later.

``norm_bwd_flags_kernel`` publishes row r's chunk sums and then polls the row's other words
before it can write dx of r: every row costs a meeting of its programs, during which only the
prefetch of the next row is in flight. Here an iteration loads row r + 1 (a whole iteration
ahead), publishes row r's sums, accumulates its parameter gradients and only then polls the
words of row r - 1, published by the other programs an iteration earlier, so the poll rarely
waits; dx of r - 1 comes from a re-read of its x and dy (read an iteration earlier, so L2
hits). Holding them in registers instead (a HOLD variant) spilled 100-700 bytes a thread on
sm_90 (``benchmarks/norm_bwd_narrow_sweep.py spills``), timed no faster and gave wrong dx on
the H100 (Triton 3.6), so it was removed. It terminates for the same reason: a program
publishes row r before it polls anything of r, and the programs of a row are resident
together (``warpforge.ops._split_rows``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.norm_split_bwd import _row_totals
from warpforge.ops._kernels.reductions import sum_pair
from warpforge.ops._kernels.split_rows import publish_word, split_place, word_lanes


@triton.jit
def _weight(W, cols, mask, offset, HAS_OFFSET: tl.constexpr):
    """``offset + w`` of the chunk in float32 (w alone without HAS_OFFSET: one add a column
    fewer)."""
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_OFFSET:
        w = offset + w
    return w


@triton.jit
def _lagged_dx(
    DX, W, DH, X, DY, WORDS, row, mean, rstd, offset, cols, mask, lanes, chunks, inv_n,
    stride_dx, stride_dh, stride_x, stride_dy, HAS_WEIGHT: tl.constexpr, CENTER: tl.constexpr,
    HAS_DH: tl.constexpr, SECOND: tl.constexpr, CHUNKS_POW2: tl.constexpr, STAGE: tl.constexpr,
    LEAN: tl.constexpr, HAS_OFFSET: tl.constexpr, DROP: tl.constexpr,
):  # fmt: skip
    """dx of ``row`` from a re-read of its x and dy (read an iteration ago: L2 hits), once the
    row's words are all published. LEAN: dx from x itself in two fused multiply-adds a column,
    ``rstd * wdy + (a * x + k)`` with the row's constants folded into ``a`` and ``k``. DROP:
    the eviction policy of the re-read and of dx."""
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0,
                eviction_policy=DROP)  # issued before the poll  # fmt: skip
    dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0, eviction_policy=DROP)
    if HAS_DH:
        dh = tl.load(DH + row * stride_dh + cols, mask=mask, other=0.0)
    wdy = dy.to(tl.float32)
    if HAS_WEIGHT:
        wdy = wdy * _weight(W, cols, mask, offset, HAS_OFFSET)
    total_wdy, total_dot = _row_totals(WORDS + row * CHUNKS_POW2, lanes, chunks, SECOND, STAGE)
    if LEAN:
        # rstd * (wdy - xhat * dot / N - wdy_sum / N), xhat = (x - mean) * rstd, regrouped
        a = -(rstd * rstd) * (total_dot * inv_n)
        k = rstd * 0.0
        if CENTER:
            k = -a * mean - rstd * (total_wdy * inv_n)
        dx = tl.fma(wdy, rstd, tl.fma(x.to(tl.float32), a, k))
    else:
        if CENTER:
            xhat = tl.where(mask, (x.to(tl.float32) - mean) * rstd, 0.0)
        else:
            xhat = x.to(tl.float32) * rstd  # masked columns loaded as 0
        dx = wdy - xhat * (total_dot * inv_n)
        if CENTER:
            dx = dx - total_wdy * inv_n
        dx = dx * rstd
    if HAS_DH:
        dx = dx + dh.to(tl.float32)
    tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask,
             eviction_policy=DROP)  # fmt: skip


@triton.jit
def norm_bwd_lag_flags_kernel(
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
    LEAN: tl.constexpr = False,
    HAS_OFFSET: tl.constexpr = True,
    EVEN: tl.constexpr = False,
    KEEP: tl.constexpr = "",
    DROP: tl.constexpr = "",
):
    """RMSNorm / LayerNorm (CENTER) backward of rows split over ``cdiv(N, BLOCK_N)`` programs,
    the math and operands of ``norm_bwd_flags_kernel`` (the same words, partial rows and
    places), dx of each row written one iteration after its sums are published, from a re-read
    of its x and dy (an L2 hit; holding them in registers instead spilled, see the module doc).
    KEEP / DROP: the eviction policy of the first read of x and dy / of their re-read and of dx
    ("" for none; "evict_last" / "evict_first" keep the rows in L2 for the re-read, which took
    the split forward's re-reading kernel from 77% to 93% of copy).

    STAGE 0 (GPU): one launch. STAGE 1 / 2 (the interpreter): the words only / dx and the
    partials (two launches)."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    if EVEN:  # every chunk whole: a constant mask, which the compiler drops
        mask = tl.full([BLOCK_N], 1, tl.int1)
    lanes = word_lanes(CHUNKS_POW2)
    inv_n = 1.0 / N
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = slot.to(tl.int64)  # 64-bit row offsets throughout
    n_rows = tl.cdiv(M - slot, slots)  # >= 1: a plan has at most M slots
    x_next = tl.load(X + first * stride_x + cols, mask=mask, other=0.0, eviction_policy=KEEP)
    dy_next = tl.load(DY + first * stride_dy + cols, mask=mask, other=0.0, eviction_policy=KEEP)
    rstd_prev = tl.load(RSTD + first)  # typed for the loop (fp32 scalars)
    mean_prev = rstd_prev * 0.0
    for i in range(0, n_rows):
        row = first + i * slots
        x, dy = x_next, dy_next
        # row + 1 a whole iteration ahead: its loads overlap this row's sums and the dx of r - 1
        upcoming = row + slots
        if EVEN:  # the last row loaded again past the end: no mask
            upcoming = tl.minimum(upcoming, M - 1)
            x_next = tl.load(X + upcoming * stride_x + cols, eviction_policy=KEEP)
            dy_next = tl.load(DY + upcoming * stride_dy + cols, eviction_policy=KEEP)
        else:
            next_end = tl.where(upcoming < M, N, 0)  # nothing past the last row
            x_next = tl.load(X + upcoming * stride_x + cols, mask=cols < next_end, other=0.0,
                             eviction_policy=KEEP)  # fmt: skip
            dy_next = tl.load(DY + upcoming * stride_dy + cols, mask=cols < next_end, other=0.0,
                              eviction_policy=KEEP)  # fmt: skip
        rstd = tl.load(RSTD + row)
        if CENTER:
            mean = tl.load(MEAN + row)
            if LEAN:  # one fused multiply-add; masked columns hold dy = 0, so need no mask
                xhat = tl.fma(x.to(tl.float32), rstd, -mean * rstd)
            else:
                xhat = tl.where(mask, (x.to(tl.float32) - mean) * rstd, 0.0)
        else:
            mean = rstd * 0.0  # unused; an fp32 scalar like CENTER's for the loop
            xhat = x.to(tl.float32) * rstd
        dy32 = dy.to(tl.float32)
        if HAS_WEIGHT:
            wdy = dy32 * _weight(W, cols, mask, offset, HAS_OFFSET)
        else:
            wdy = dy32
        if STAGE != 2:
            if CENTER:
                s_wdy, s_dot = sum_pair(wdy, wdy * xhat, 0)
            else:
                s_wdy, s_dot = 0.0, tl.sum(wdy * xhat, axis=0)
            publish_word(WORDS + row * CHUNKS_POW2 + chunk, s_wdy, s_dot, STAGE)
        if STAGE != 1:
            if WEIGHT_GRAD:
                dw_acc += dy32 * xhat
            if BIAS_GRAD:
                db_acc += dy32
            if i > 0:
                _lagged_dx(DX, W, DH, X, DY, WORDS, row - slots, mean_prev, rstd_prev, offset,
                           cols, mask, lanes, chunks, inv_n, stride_dx, stride_dh, stride_x,
                           stride_dy, HAS_WEIGHT, CENTER, HAS_DH, CHUNKS_POW2 > 32, CHUNKS_POW2,
                           STAGE, LEAN, HAS_OFFSET, DROP)  # fmt: skip
        mean_prev, rstd_prev = mean, rstd
    if STAGE != 1:
        last = first + (n_rows - 1) * slots
        _lagged_dx(DX, W, DH, X, DY, WORDS, last, mean_prev, rstd_prev, offset, cols, mask,
                   lanes, chunks, inv_n, stride_dx, stride_dh, stride_x, stride_dy, HAS_WEIGHT,
                   CENTER, HAS_DH, CHUNKS_POW2 > 32, CHUNKS_POW2, STAGE, LEAN,
                   HAS_OFFSET, DROP)  # fmt: skip
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + first * N + cols, dw_acc, mask=mask)
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + first * N + cols, db_acc, mask=mask)
