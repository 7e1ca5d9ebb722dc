"""The norm forward of long rows split over programs (``norm_fwd_flags_kernel``): each program
holds one chunk of a row in registers from the read of x to the write of y, so memory sees x
read once (``norm_fwd_chunked_kernel`` reads a long row twice, or three times for LayerNorm,
and at 262144 columns the second read mostly comes from DRAM).

The programs of a row meet through flag words (``warpforge.ops._kernels.split_rows``, the
pattern of ``softmax_bwd_flags_kernel``): each publishes its chunk's statistics as one 8-byte
word and polls the row's words until every one is published.
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.reductions import INTERPRETED, shifted_moments
from warpforge.ops._kernels.split_rows import (
    await_words,
    look_at_words,
    publish_word,
    row_words,
    split_place,
    unpack_pair,
    word_lanes,
)


@triton.jit
def _chunk_sizes(lanes, chunks, N, BLOCK_N: tl.constexpr):
    """Columns of chunk ``lanes`` of a row (0 past the row's last chunk)."""
    return tl.where(lanes < chunks, tl.minimum(N - lanes * BLOCK_N, BLOCK_N), 0).to(tl.float32)


@triton.jit
def _chunk_moments(parts, lanes, chunks, N, BLOCK_N: tl.constexpr):
    """(columns, means, M2s) of chunks ``lanes`` from their words (0, 0, 0 past the row's end,
    whose words read as (-inf, 0))."""
    means, m2s = unpack_pair(parts)
    n = _chunk_sizes(lanes, chunks, N, BLOCK_N)
    live = n > 0
    return n, tl.where(live, means, 0.0), tl.where(live, m2s, 0.0)


@triton.jit
def _row_moments(parts, parts_2, lanes, chunks, N, BLOCK_N: tl.constexpr, SECOND: tl.constexpr):
    """(mean, M2) of a row from its chunks' (mean, M2) words (``parts``: chunks ``lanes``,
    ``parts_2``: ``32 + lanes`` when SECOND): Chan's combination, mean = sum(n_c mean_c) / N and
    M2 = sum(M2_c) + sum(n_c (mean_c - mean)^2), which never subtracts two large sums of squares
    (E[x^2] - mean^2 cancels for rows far from zero)."""
    n, means, m2s = _chunk_moments(parts, lanes, chunks, N, BLOCK_N)
    mean = tl.sum(n * means, axis=0)
    if SECOND:
        n_2, means_2, m2s_2 = _chunk_moments(parts_2, lanes + 32, chunks, N, BLOCK_N)
        mean += tl.sum(n_2 * means_2, axis=0)
    mean = mean / N
    d = means - mean
    m2 = tl.sum(m2s, axis=0) + tl.sum(n * d * d, axis=0)
    if SECOND:
        d_2 = means_2 - mean
        m2 += tl.sum(m2s_2, axis=0) + tl.sum(n_2 * d_2 * d_2, axis=0)
    return mean, m2


@triton.jit
def norm_fwd_flags_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
    WORDS,
    stride_x,
    stride_r,
    stride_y,
    stride_h,
    M,
    N,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """RMSNorm / LayerNorm (CENTER) forward of rows split over ``cdiv(N, BLOCK_N)`` programs
    (the places of ``split_place``), the same outputs as ``norm_fwd_chunked_kernel``: y; h =
    x + r rounded to the input dtype (HAS_RESIDUAL; h is what is normalised); rstd (and mean)
    per row, written by the row's first chunk.

    A program publishes its chunk's sum of squares (RMSNorm, high half of the word) or its
    (mean, M2) (LayerNorm: Chan's combination in ``_row_moments``; no sum of squares, which
    cancels) in ``WORDS[row * CHUNKS_POW2 + chunk]`` (filled with UNPUBLISHED by the caller),
    polls the row's words, then writes y from the chunk it holds.

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2: the words
    (and h) only / y only from a second read (two launches, for the interpreter). PREFETCH loads
    the chunk of the program's next row after publishing, before the poll."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    lanes = word_lanes(CHUNKS_POW2)
    n_chunk = tl.minimum(N - chunk * BLOCK_N, BLOCK_N).to(tl.float32)
    if PREFETCH:
        first = slot.to(tl.int64)
        upcoming_x = tl.load(X + first * stride_x + cols, mask=mask, other=0.0)
        if HAS_RESIDUAL:
            upcoming_r = tl.load(R + first * stride_r + cols, mask=mask, other=0.0)
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        if PREFETCH:
            x = upcoming_x
            if HAS_RESIDUAL:
                r = upcoming_r
        else:
            x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
            if HAS_RESIDUAL:
                r = tl.load(R + row * stride_r + cols, mask=mask, other=0.0)
        if HAS_RESIDUAL:
            x = (x.to(tl.float32) + r.to(tl.float32)).to(X.dtype.element_ty)
            if STAGE != 2:
                tl.store(H + row * stride_h + cols, x, mask=mask)
        x = x.to(tl.float32)
        words = WORDS + row * CHUNKS_POW2
        if STAGE != 2:
            if CENTER:
                chunk_mean = tl.sum(x, axis=0) / n_chunk
                d = tl.where(mask, x - chunk_mean, 0.0)
                publish_word(words + chunk, chunk_mean, tl.sum(d * d, axis=0), STAGE)
            else:
                # high half: a word past the row's end (EMPTY_STATS) reads as 0 there
                publish_word(words + chunk, 0.0, tl.sum(x * x, axis=0), STAGE)
        if PREFETCH:
            next_end = tl.where(row + slots < M, N, 0)  # nothing past the last row
            upcoming_x = tl.load(
                X + (row + slots) * stride_x + cols, mask=cols < next_end, other=0.0
            )
            if HAS_RESIDUAL:
                upcoming_r = tl.load(
                    R + (row + slots) * stride_r + cols, mask=cols < next_end, other=0.0
                )
        if STAGE != 1:
            parts, parts_2, _, _ = row_words(
                words, words, lanes, chunks, 0, CHUNKS_POW2 > 32, STAGE
            )  # fmt: skip
            if CENTER:
                mean, total = _row_moments(parts, parts_2, lanes, chunks, N, BLOCK_N,
                                           CHUNKS_POW2 > 32)  # fmt: skip
            else:
                mean = 0.0
                _, sums = unpack_pair(parts)
                _, sums_2 = unpack_pair(parts_2)
                total = tl.sum(sums, axis=0) + tl.sum(sums_2, axis=0)
            rstd = 1.0 / tl.sqrt(total / N + eps)
            if chunk == 0:
                tl.store(RSTD + row, rstd)
                if CENTER:
                    tl.store(MEAN + row, mean)
            y = (x - mean) * rstd
            if HAS_WEIGHT:
                w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
                y = y * (offset + w)
            if HAS_BIAS:
                y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------- lagged split forward
# norm_fwd_lag_kernel: the same meeting, one row later. A program publishes row k + 1's word
# before it waits for row k's, so the wait finds words published an iteration ago instead of
# the slowest program's load of this row. It carries chunks as loaded, converting them where
# used, so DEPTH rows can be loading at once; PACKED carries 2-byte elements as int32 pairs (a
# tensor of bf16 sits in one 32-bit register an element, two a register as pairs).


@triton.jit
def _halves(v, DT: tl.constexpr):
    """The (even, odd) elements of int32 pairs of 2-byte ``DT`` values, as fp32."""
    u = v.to(tl.uint32, bitcast=True)
    if DT.is_bf16():  # a bf16 is the high half of its fp32
        even = (u << 16).to(tl.float32, bitcast=True)
        odd = ((u >> 16) << 16).to(tl.float32, bitcast=True)
    else:
        even = ((u << 16) >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
        odd = (u >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    return even, odd


@triton.jit
def _pairs(even, odd, DT: tl.constexpr):
    """fp32 (even, odd) elements rounded to ``DT`` and packed as int32 pairs. On the GPU one
    ``cvt.rn.{bf16,f16}x2.f32`` a pair (the compiler rounds two separate tensors one element
    at a time and packs them in three more instructions); the interpreter, which runs no PTX,
    rounds and packs them itself."""
    if INTERPRETED:
        even_bits = even.to(DT).to(tl.uint16, bitcast=True).to(tl.uint32)
        odd_bits = odd.to(DT).to(tl.uint16, bitcast=True).to(tl.uint32)
        return (even_bits | (odd_bits << 16)).to(tl.int32, bitcast=True)
    if DT.is_bf16():  # the first source goes to the high half
        return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [even, odd],
                                         dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    return tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,f,f", [even, odd],
                                     dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip


@triton.jit
def _load_chunk(P, row, stride, cols, M, n_cols, EVICTION: tl.constexpr):
    """A chunk of ``row`` as stored (0 past the last row). Callers carry raw loads through the
    loop and convert them only where used, so the load stays in flight until then. EVICTION:
    the load's eviction policy ("" for none; a string constexpr has no default under Triton
    3.6)."""
    return tl.load(P + row * stride + cols, mask=cols < tl.where(row < M, n_cols, 0), other=0.0,
                   eviction_policy=EVICTION)  # fmt: skip


@triton.jit
def _add_pairs(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _centred_moments(h, mask, n_chunk, PACKED: tl.constexpr, DT: tl.constexpr):
    """(mean, M2) of a chunk of h (as carried) by two reductions: the mean, then the squares of
    the centred values."""
    if PACKED:
        even, odd = _halves(h, DT)
        mean = (tl.sum(even, axis=0) + tl.sum(odd, axis=0)) / n_chunk
        d_even = tl.where(mask, even - mean, 0.0)
        d_odd = tl.where(mask, odd - mean, 0.0)
        m2 = tl.sum(d_even * d_even, axis=0) + tl.sum(d_odd * d_odd, axis=0)
    else:
        hf = h.to(tl.float32)
        mean = tl.sum(hf, axis=0) / n_chunk
        d = tl.where(mask, hf - mean, 0.0)
        m2 = tl.sum(d * d, axis=0)
    return mean, m2


@triton.jit
def _shifted_moments(h, mask, shift, n_chunk, PACKED: tl.constexpr, DT: tl.constexpr):
    """(mean, M2, far) of a chunk of h (as carried) from one reduction of its shifted values
    ``d = h - shift`` and their squares: mean = shift + sum(d) / n, M2 = sum(d^2) - sum(d)^2 / n;
    ``far`` where that subtraction loses more than about 2 bits (sum(d)^2 / n above 4 M2: the
    shift more than two standard deviations from the mean)."""
    if PACKED:
        even, odd = _halves(h, DT)
        d_even = tl.where(mask, even - shift, 0.0)
        d_odd = tl.where(mask, odd - shift, 0.0)
        s1, s2 = tl.reduce((d_even + d_odd, d_even * d_even + d_odd * d_odd), 0, _add_pairs)
    else:
        d = tl.where(mask, h.to(tl.float32) - shift, 0.0)
        s1, s2 = tl.reduce((d, d * d), 0, _add_pairs)
    offset, m2, far = shifted_moments(s1, s2, n_chunk)
    return shift + offset, m2, far


@triton.jit
def _publish_chunk(x, r, H, WORDS, row, stride_h, cols, mask, chunk, n_chunk, shift,
                   CENTER: tl.constexpr, HAS_RESIDUAL: tl.constexpr, CHUNKS_POW2: tl.constexpr,
                   STAGE: tl.constexpr, PACKED: tl.constexpr, DT: tl.constexpr,
                   ONE_PASS: tl.constexpr):  # fmt: skip
    """h of a chunk (x, or x + r rounded to DT and stored in H) with its statistics published
    in the row's word (not in STAGE 2, which only writes y); returns (h as carried, the chunk's
    mean, 0.0 without CENTER).

    ONE_PASS (CENTER): the chunk's moments from one reduction of ``h - shift`` and its square
    (``shift``: the caller's guess at the mean, the program's previous chunk mean) instead of
    the mean and then the centred squares, two reductions one after the other. Where the shift
    lies more than two standard deviations from the chunk's mean (``_shifted_moments``' far) the
    chunk takes the two reductions after all, so M2 stays within a few units in the last place
    of the two-reduction result on any input."""
    chunk_mean = 0.0
    if HAS_RESIDUAL:
        if PACKED:
            x_even, x_odd = _halves(x, DT)
            r_even, r_odd = _halves(r, DT)
            h = _pairs(x_even + r_even, x_odd + r_odd, DT)
        else:
            h = (x.to(tl.float32) + r.to(tl.float32)).to(DT)
        if STAGE != 2:
            tl.store(H + row * stride_h + cols, h, mask=mask)
    else:
        h = x
    if STAGE != 2:
        if CENTER:
            if ONE_PASS:
                chunk_mean, second, far = _shifted_moments(h, mask, shift, n_chunk, PACKED, DT)
                if far:
                    chunk_mean, second = _centred_moments(h, mask, n_chunk, PACKED, DT)
            else:
                chunk_mean, second = _centred_moments(h, mask, n_chunk, PACKED, DT)
        elif PACKED:
            # high half: a word past the row's end (EMPTY_STATS) reads 0
            even, odd = _halves(h, DT)
            second = tl.sum(even * even, axis=0) + tl.sum(odd * odd, axis=0)
        else:
            hf = h.to(tl.float32)
            second = tl.sum(hf * hf, axis=0)
        publish_word(WORDS + row * CHUNKS_POW2 + chunk, chunk_mean, second, STAGE)
    return h, chunk_mean


@triton.jit
def _row_stats(first, second, lanes, chunks, N, eps, BLOCK_N: tl.constexpr,
               CENTER: tl.constexpr, SECOND: tl.constexpr):  # fmt: skip
    """(mean, rstd) of a row from its published words (two 32-lane vectors when SECOND)."""
    if CENTER:
        mean, total = _row_moments(first, second, lanes, chunks, N, BLOCK_N, SECOND)
    else:
        mean = 0.0
        _, sums = unpack_pair(first)
        _, sums_2 = unpack_pair(second)
        total = tl.sum(sums, axis=0) + tl.sum(sums_2, axis=0)
    return mean, 1.0 / tl.sqrt(total / N + eps)


@triton.jit
def _scaled(v, mean, rstd, w, b, offset, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    v = (v - mean) * rstd
    if HAS_WEIGHT:
        v = v * (offset + w)
    if HAS_BIAS:
        v = v + b
    return v


@triton.jit
def _scaled_lean(v, mean, rstd, w, b, offset, CENTER: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                 HAS_BIAS: tl.constexpr, HAS_OFFSET: tl.constexpr):  # fmt: skip
    """:func:`_scaled` as one fused multiply-add a column, ``v * scale + shift`` with ``scale =
    rstd * (offset + w)`` and ``shift = b - mean * scale`` (the offset add only with
    HAS_OFFSET). It rounds ``v * scale`` against ``mean * scale`` where :func:`_scaled`
    subtracts the mean first: for rows whose mean is far from zero against their spread it
    loses more digits than a 2-byte result holds only past a ratio the 2-byte input cannot
    resolve either."""
    scale = rstd
    if HAS_WEIGHT:
        if HAS_OFFSET:
            w = offset + w
        scale = rstd * w
    if CENTER:
        if HAS_BIAS:
            y = tl.fma(v, scale, tl.fma(-mean, scale, b))
        else:
            y = tl.fma(v, scale, -mean * scale)
    else:
        y = v * scale
        if HAS_BIAS:
            y = y + b
    return y


@triton.jit
def _scaled_by(v, mean, rstd, w, b, offset, LEAN: tl.constexpr, CENTER: tl.constexpr,
               HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_OFFSET: tl.constexpr):  # fmt: skip
    """y of fp32 ``v``: :func:`_scaled_lean` with LEAN, else :func:`_scaled`."""
    if LEAN:
        return _scaled_lean(v, mean, rstd, w, b, offset, CENTER, HAS_WEIGHT, HAS_BIAS, HAS_OFFSET)
    return _scaled(v, mean, rstd, w, b, offset, HAS_WEIGHT, HAS_BIAS)


@triton.jit
def _awaited_row_stats(WORDS, MEAN, RSTD, row, chunk, first, second, lanes, chunks, N, eps,
                       BLOCK_N: tl.constexpr, CENTER: tl.constexpr, CHUNKS_POW2: tl.constexpr,
                       STAGE: tl.constexpr):  # fmt: skip
    """(mean, rstd) of ``row`` from its words, polled again from the first look (``first``,
    ``second``) until all are published in the one-launch path (STAGE 0); the row's chunk 0
    stores them."""
    if STAGE == 0:
        first, second = await_words(WORDS + row * CHUNKS_POW2, lanes, chunks, first, second,
                                    CHUNKS_POW2 > 32)  # fmt: skip
    mean, rstd = _row_stats(first, second, lanes, chunks, N, eps, BLOCK_N, CENTER,
                            CHUNKS_POW2 > 32)  # fmt: skip
    if chunk == 0:
        tl.store(RSTD + row, rstd)
        if CENTER:
            tl.store(MEAN + row, mean)
    return mean, rstd


@triton.jit
def _load_row_chunk(P, row, stride, cols, M, n_cols, EVEN: tl.constexpr,
                    EVICTION: tl.constexpr):  # fmt: skip
    """:func:`_load_chunk`, or with EVEN (whole chunks) unmasked: a row past the last one loads
    the last row again."""
    if EVEN:
        return tl.load(P + tl.minimum(row, M - 1) * stride + cols, eviction_policy=EVICTION)
    return _load_chunk(P, row, stride, cols, M, n_cols, EVICTION)


@triton.jit
def norm_fwd_lag_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
    WORDS,
    stride_x,
    stride_r,
    stride_y,
    stride_h,
    M,
    N,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    DEPTH: tl.constexpr,
    HOLD_W: tl.constexpr,
    PACKED: tl.constexpr,
    ONE_PASS: tl.constexpr,
    LEAN: tl.constexpr = False,
    HAS_OFFSET: tl.constexpr = True,
    EVEN: tl.constexpr = False,
):
    """``norm_fwd_flags_kernel``'s outputs (y; h = x + r rounded, HAS_RESIDUAL; rstd, mean from
    each row's chunk 0) from the same split launch and words, one row later: at iteration k a
    program holds h of row k (published at k - 1) as loaded, publishes row k + 1 from its load
    issued DEPTH iterations earlier, issues the load of row k + 1 + DEPTH, then reads row k's
    words (their first poll issued before the wait for row k + 1's load) and writes y of row k.
    DEPTH (1, 2): rows a program has loading at once. HOLD_W: w (and b) loaded once and held
    rather than read from L2 for every row. PACKED: 2-byte x, r, w, b, y, h (one dtype) moved
    as int32 pairs (even N, even row strides, 4-byte aligned rows; the caller checks).
    ONE_PASS (CENTER): each chunk's moments in one reduction, shifted by the program's previous
    chunk mean (``_publish_chunk``). LEAN: y in one fused multiply-add a column
    (:func:`_scaled_lean`; HAS_OFFSET: add ``offset`` to w). EVEN (every chunk whole): loads
    and stores unmasked.

    STAGE 0 (GPU): one launch, all programs of a row resident together (a program waits only
    for words published before the other programs' own previous wait, so the lag adds no
    cycle). STAGE 1 / 2 (the interpreter's two launches): words and h only / y only."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    n_chunk = tl.minimum(N - chunk * BLOCK_N, BLOCK_N).to(tl.float32)
    if PACKED:  # int32 pairs: N, the strides and the chunk halved
        n_cols = N // 2
        cols = chunk * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        mask = cols < n_cols
        Xs = X.to(tl.pointer_type(tl.int32))
        Rs = R.to(tl.pointer_type(tl.int32))
        Ws = W.to(tl.pointer_type(tl.int32))
        Bs = B.to(tl.pointer_type(tl.int32))
        Ys = Y.to(tl.pointer_type(tl.int32))
        Hs = H.to(tl.pointer_type(tl.int32))
        sx = stride_x // 2
        sr = stride_r // 2
        sy = stride_y // 2
        sh = stride_h // 2
    else:
        n_cols = N
        Xs = X
        Rs = R
        Ws = W
        Bs = B
        Ys = Y
        Hs = H
        sx = stride_x
        sr = stride_r
        sy = stride_y
        sh = stride_h
    if EVEN:  # a constant mask, which the compiler drops
        mask = tl.full(cols.shape, 1, tl.int1)
    lanes = word_lanes(CHUNKS_POW2)
    if HOLD_W:
        if HAS_WEIGHT:
            w_held = tl.load(Ws + cols, mask=mask, other=0.0)
        if HAS_BIAS:
            b_held = tl.load(Bs + cols, mask=mask, other=0.0)
    row = slot.to(tl.int64)
    x = _load_row_chunk(Xs, row, sx, cols, M, n_cols, EVEN, "")
    r = x
    if HAS_RESIDUAL:
        r = _load_row_chunk(Rs, row, sr, cols, M, n_cols, EVEN, "")
    h, shift = _publish_chunk(x, r, Hs, WORDS, row, sh, cols, mask, chunk, n_chunk, 0.0, CENTER,
                              HAS_RESIDUAL, CHUNKS_POW2, STAGE, PACKED, X.dtype.element_ty,
                              ONE_PASS)  # fmt: skip
    next_x = _load_row_chunk(Xs, row + slots, sx, cols, M, n_cols, EVEN, "")
    next_r = next_x
    if HAS_RESIDUAL:
        next_r = _load_row_chunk(Rs, row + slots, sr, cols, M, n_cols, EVEN, "")
    if DEPTH == 2:
        later_x = _load_row_chunk(Xs, row + 2 * slots, sx, cols, M, n_cols, EVEN, "")
        if HAS_RESIDUAL:
            later_r = _load_row_chunk(Rs, row + 2 * slots, sr, cols, M, n_cols, EVEN, "")
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        words = WORDS + row * CHUNKS_POW2
        # first look at row k's words now: the answer travels while row k + 1's load lands
        first, second = look_at_words(words, lanes, chunks, CHUNKS_POW2 > 32)
        next_row = row + slots
        if next_row < M:
            next_h, shift = _publish_chunk(next_x, next_r, Hs, WORDS, next_row, sh, cols, mask,
                                           chunk, n_chunk, shift, CENTER, HAS_RESIDUAL,
                                           CHUNKS_POW2, STAGE, PACKED, X.dtype.element_ty,
                                           ONE_PASS)  # fmt: skip
        else:
            next_h = h
        if DEPTH == 2:
            next_x = later_x
            later_x = _load_row_chunk(Xs, row + 3 * slots, sx, cols, M, n_cols, EVEN, "")
            if HAS_RESIDUAL:
                next_r = later_r
                later_r = _load_row_chunk(Rs, row + 3 * slots, sr, cols, M, n_cols, EVEN, "")
        else:
            next_x = _load_row_chunk(Xs, row + 2 * slots, sx, cols, M, n_cols, EVEN, "")
            if HAS_RESIDUAL:
                next_r = _load_row_chunk(Rs, row + 2 * slots, sr, cols, M, n_cols, EVEN, "")
        if STAGE != 1:
            mean, rstd = _awaited_row_stats(WORDS, MEAN, RSTD, row, chunk, first, second, lanes,
                                            chunks, N, eps, BLOCK_N, CENTER, CHUNKS_POW2,
                                            STAGE)  # fmt: skip
            if HAS_WEIGHT:
                if HOLD_W:
                    w = w_held
                else:
                    w = tl.load(Ws + cols, mask=mask, other=0.0)
            else:
                w = h
            if HAS_BIAS:
                if HOLD_W:
                    b = b_held
                else:
                    b = tl.load(Bs + cols, mask=mask, other=0.0)
            else:
                b = h
            if PACKED:
                even, odd = _halves(h, X.dtype.element_ty)
                w_even, w_odd = _halves(w, X.dtype.element_ty)
                b_even, b_odd = _halves(b, X.dtype.element_ty)
                y_even = _scaled_by(even, mean, rstd, w_even, b_even, offset, LEAN, CENTER,
                                    HAS_WEIGHT, HAS_BIAS, HAS_OFFSET)  # fmt: skip
                y_odd = _scaled_by(odd, mean, rstd, w_odd, b_odd, offset, LEAN, CENTER,
                                   HAS_WEIGHT, HAS_BIAS, HAS_OFFSET)  # fmt: skip
                y = _pairs(y_even, y_odd, X.dtype.element_ty)
            else:
                y = _scaled_by(h.to(tl.float32), mean, rstd, w.to(tl.float32), b.to(tl.float32),
                               offset, LEAN, CENTER, HAS_WEIGHT, HAS_BIAS,
                               HAS_OFFSET).to(Y.dtype.element_ty)  # fmt: skip
            tl.store(Ys + row * sy + cols, y, mask=mask)
        h = next_h


# --------------------------------------------------------------------------- re-reading split forward
# norm_fwd_reread_kernel: the same meeting, LAG rows later, without holding the chunks in
# registers: a program publishes row k + LAG from its load of x, then reads row k's chunk again
# for y. The grid's rows of LAG iterations (slots x LAG rows) stay in L2 between the two reads,
# so memory still sees x read once, and the lag a program tolerates costs no registers.


@triton.jit
def norm_fwd_reread_kernel(
    X,
    W,
    B,
    Y,
    MEAN,
    RSTD,
    WORDS,
    stride_x,
    stride_y,
    M,
    N,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    LAG: tl.constexpr,
    PREFETCH: tl.constexpr,
    HOLD_W: tl.constexpr,
    HOLD_B: tl.constexpr,
    ONE_PASS: tl.constexpr,
    LEAN: tl.constexpr,
    HAS_OFFSET: tl.constexpr,
    EVEN: tl.constexpr,
    KEEP: tl.constexpr,
    DROP: tl.constexpr,
):
    """RMSNorm / LayerNorm (CENTER) forward without a residual, ``norm_fwd_flags_kernel``'s
    outputs (y; rstd, mean from each row's chunk 0) from the same split launch and words: at
    step s a program reads row k = s - LAG's chunk again (from L2: it read it LAG steps ago)
    and the chunk of row s (issued a step earlier with PREFETCH), publishes row s's word, then
    waits for row k's words and writes y of row k. LAG (>= 1): steps between a row's two reads,
    the lag the programs of a row may fall behind each other without a wait. HOLD_W / HOLD_B: w
    / b loaded once and held (else read from L2 for each row). ONE_PASS (CENTER): the chunk's
    moments from one reduction, shifted by the program's previous chunk mean
    (``_publish_chunk``'s). LEAN: y in one fused multiply-add a column (:func:`_scaled_lean`,
    2-byte rows; HAS_OFFSET adds ``offset`` to w). EVEN (every chunk whole): unmasked. KEEP /
    DROP: the eviction policy of the first read / of the second read and of y ("" for none;
    "evict_last" / "evict_first" keep the row in L2 for its second read).

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2 (the
    interpreter's two launches): the words only / y only."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    n_chunk = tl.minimum(N - chunk * BLOCK_N, BLOCK_N).to(tl.float32)
    if EVEN:  # a constant mask, which the compiler drops
        mask = tl.full(cols.shape, 1, tl.int1)
    lanes = word_lanes(CHUNKS_POW2)
    if HOLD_W and HAS_WEIGHT:
        w_held = tl.load(W + cols, mask=mask, other=0.0)
    if HOLD_B and HAS_BIAS:
        b_held = tl.load(B + cols, mask=mask, other=0.0)
    shift = 0.0
    first_row = slot.to(tl.int64)
    if PREFETCH and STAGE != 2:
        upcoming = _load_row_chunk(X, first_row, stride_x, cols, M, N, EVEN, KEEP)
    for s in range(0, tl.cdiv(M - slot, slots) + LAG):
        ahead = first_row + s * slots
        row = tl.maximum(ahead - LAG * slots, first_row)  # the row of y (row 0's at s < LAG)
        if STAGE != 1:
            x = _load_row_chunk(X, row, stride_x, cols, M, N, EVEN, DROP)
            look, look_2 = look_at_words(WORDS + row * CHUNKS_POW2, lanes, chunks,
                                         CHUNKS_POW2 > 32)  # fmt: skip
        if STAGE != 2:
            if PREFETCH:
                x_ahead = upcoming
                upcoming = _load_row_chunk(X, ahead + slots, stride_x, cols, M, N, EVEN, KEEP)
            else:
                x_ahead = _load_row_chunk(X, ahead, stride_x, cols, M, N, EVEN, KEEP)
            if ahead < M:  # no residual: h is x, and H (here Y) is never written
                _, shift = _publish_chunk(x_ahead, x_ahead, Y, WORDS, ahead, 0, cols, mask, chunk,
                                          n_chunk, shift, CENTER, False, CHUNKS_POW2, STAGE,
                                          False, X.dtype.element_ty, ONE_PASS)  # fmt: skip
        if STAGE != 1:  # noqa: SIM102 (a compile-time branch around a run-time one)
            if s >= LAG:
                mean, rstd = _awaited_row_stats(WORDS, MEAN, RSTD, row, chunk, look, look_2,
                                                lanes, chunks, N, eps, BLOCK_N, CENTER,
                                                CHUNKS_POW2, STAGE)  # fmt: skip
                v = x.to(tl.float32)
                w = v
                b = v
                if HAS_WEIGHT:
                    if HOLD_W:
                        w = w_held.to(tl.float32)
                    else:
                        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
                if HAS_BIAS:
                    if HOLD_B:
                        b = b_held.to(tl.float32)
                    else:
                        b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
                y = _scaled_by(v, mean, rstd, w, b, offset, LEAN, CENTER, HAS_WEIGHT, HAS_BIAS,
                               HAS_OFFSET)  # fmt: skip
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask,
                         eviction_policy=DROP)  # fmt: skip
