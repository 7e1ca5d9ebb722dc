"""Whole-row kernels for rows wider than the tiled row kernels take (16385-32768 columns).

One program holds one whole row in registers (``BLOCK_N`` = the row's power of two, 16-32
warps: 16-64 columns a thread), so x is read once and y written once, where the chunked kernels
read a row twice and the split kernels make a row's programs wait for one another. One row a
program, a grid of M programs: no persistence (a program's registers leave no room to hold a
second row), the SM scheduler starts the next row as a program retires.

Options (constexpr) that the launch sweep picks between:

* ``EARLY_W`` (norm): load the weight (and bias) before the row reductions, so their latency
  hides under x's rather than following the reductions (costs their registers meanwhile).
* ``STREAM``: x loaded ``evict_first`` and y stored ``.cs``: each is touched once, so L2 keeps
  the weight (and, at one row a program, nothing else worth keeping).
* ``ONE_REDUCTION`` (LayerNorm): the row's deviations from its first value summed with their
  squares in one cross-warp reduction (``reductions.sum_pair``), where the mean and then the
  centred squares take two, so x is used once before the output and is not held across a
  reduction (with ``RELOAD``, nothing of the row stays live there). A row whose first value
  lies more than two standard deviations from its mean (``reductions.shifted_moments``' far)
  takes the two reductions after all, on x read again, so the variance keeps its precision on
  any input.
* ``SPECIALIZED`` (norm): the row length, compiled in, for packed rows (every row stride equal
  to it) of operands under 2**31 elements: bounds and masks fold, row offsets are 32-bit, as in
  torch.compile's kernels, which are compiled for one shape.
* ``RELOAD`` (norm): x is not held from the reductions to the output but read again (first
  ``evict_last``, then ``evict_first``, as torch.compile's reduction kernels read a row), so
  fewer registers stay live across the reductions and more programs fit on an SM; the second
  read comes from L1 or L2.

``norm_fwd_looped_kernel`` and ``softmax_fwd_looped_kernel`` instead walk their row in chunks
(one-pass statistics, the output from L2), torch.compile's shape of a norm or softmax forward:
few registers a program, so several programs an SM, and rows of any length.

Row offsets are int64 (operands of more than 2**31 elements).
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.reductions import shifted_moments, sum_pair


@triton.jit
def _load_row(ptr, cols, mask, other, STREAM: tl.constexpr):
    if STREAM:
        return tl.load(ptr + cols, mask=mask, other=other, eviction_policy="evict_first")
    return tl.load(ptr + cols, mask=mask, other=other)


@triton.jit
def _store_row(ptr, cols, value, mask, STREAM: tl.constexpr):
    if STREAM:
        tl.store(ptr + cols, value, mask=mask, cache_modifier=".cs")
    else:
        tl.store(ptr + cols, value, mask=mask)


@triton.jit
def _program_row(SPECIALIZED: tl.constexpr):
    """This program's row: a 32-bit index where the launch compiled in the row length (every
    operand under 2**31 elements), else 64-bit."""
    row = tl.program_id(0)
    if not SPECIALIZED:
        row = row.to(tl.int64)
    return row


@triton.jit
def _row_shift(x_row, r_row, HAS_RESIDUAL: tl.constexpr):
    """The one-reduction moments' guess at a row's mean: its first value (x + r unrounded with
    a residual; any guess is exact enough, the far check covers a poor one)."""
    shift = tl.load(x_row).to(tl.float32)
    if HAS_RESIDUAL:
        shift += tl.load(r_row).to(tl.float32)
    return shift


@triton.jit
def norm_fwd_wide_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
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
    EARLY_W: tl.constexpr,
    STREAM: tl.constexpr,
    RELOAD: tl.constexpr = False,
    ONE_REDUCTION: tl.constexpr = False,
    SPECIALIZED: tl.constexpr = 0,
):
    """``norm_fwd_rows_kernel``'s arithmetic (same order, same rounding) on one whole row; with
    ``ONE_REDUCTION`` (LayerNorm) the moments from one reduction (module docstring)."""
    if SPECIALIZED:  # the row length and strides compiled in, 32-bit row offsets
        N, stride_x, stride_r, stride_y, stride_h = (SPECIALIZED, SPECIALIZED, SPECIALIZED,
                                                     SPECIALIZED, SPECIALIZED)  # fmt: skip
    row = _program_row(SPECIALIZED)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N

    if RELOAD:
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    else:
        x = _load_row(X + row * stride_x, cols, mask, 0.0, STREAM)
    if HAS_RESIDUAL:
        r = _load_row(R + row * stride_r, cols, mask, 0.0, STREAM)
        # h rounded to the input dtype before it is normalised, as eager ``x + residual``
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
        _store_row(H + row * stride_h, cols, x, mask, STREAM)
    if EARLY_W:
        if HAS_WEIGHT:
            w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        if HAS_BIAS:
            b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    x = x.to(tl.float32)

    if HAS_RESIDUAL:
        src = H + row * stride_h
    else:
        src = X + row * stride_x
    if CENTER and ONE_REDUCTION:
        shift = _row_shift(X + row * stride_x, R + row * stride_r, HAS_RESIDUAL)
        d = tl.where(mask, x - shift, 0.0)
        s1, s2 = sum_pair(d, d * d, 0)
        offset_mean, m2, far = shifted_moments(s1, s2, N)
        mean = shift + offset_mean
        if far:  # the mean, then the centred squares, of x read again
            if HAS_RESIDUAL:
                tl.debug_barrier()  # h, written by this program's threads, is read back
            # a cache modifier of its own: not merged with the first read (which would keep x
            # live across the reduction)
            again = tl.load(src + cols, mask=mask, other=0.0, cache_modifier=".ca")
            again = again.to(tl.float32)
            mean = tl.sum(again, axis=0) / N
            again = tl.where(mask, again - mean, 0.0)
            m2 = tl.sum(again * again, axis=0)
        if not RELOAD:
            x = tl.where(mask, x - mean, 0.0)
        tl.store(MEAN + row, mean)
    else:
        if CENTER:
            mean = tl.sum(x, axis=0) / N
            x = tl.where(mask, x - mean, 0.0)
            tl.store(MEAN + row, mean)
        m2 = tl.sum(x * x, axis=0)
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    tl.store(RSTD + row, rstd)

    if RELOAD:
        if HAS_RESIDUAL:
            tl.debug_barrier()  # h, written by this program's threads, is read back
        x = tl.load(src + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        x = x.to(tl.float32)
        if CENTER:
            x = x - mean
    y = x * rstd
    if HAS_WEIGHT:
        if not EARLY_W:
            w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        y = y * (offset + w.to(tl.float32))
    if HAS_BIAS:
        if not EARLY_W:
            b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        y = y + b.to(tl.float32)
    _store_row(Y + row * stride_y, cols, y.to(Y.dtype.element_ty), mask, STREAM)


@triton.jit
def _chunk_load(ptr, c, m, EVEN: tl.constexpr, POLICY: tl.constexpr):
    if EVEN:
        return tl.load(ptr + c, eviction_policy=POLICY)
    return tl.load(ptr + c, mask=m, other=0.0, eviction_policy=POLICY)


@triton.jit
def _chunk_store(ptr, c, value, m, EVEN: tl.constexpr):
    if EVEN:
        tl.store(ptr + c, value)
    else:
        tl.store(ptr + c, value, mask=m)


@triton.jit
def output_columns(i, cols, N, BLOCK_N: tl.constexpr, FORWARDS: tl.constexpr):
    """The columns of a looped kernel's output pass at step ``i`` (0, BLOCK_N, ...): in order
    with ``FORWARDS``, else from the last chunk back (the chunks the statistics pass read last,
    likeliest still in L2, first)."""
    if FORWARDS:
        return i + cols
    return (N - 1) // BLOCK_N * BLOCK_N - i + cols


@triton.jit
def _looped_chunk(x_row, r_row, h_row, c, m, HAS_RESIDUAL: tl.constexpr, EVEN: tl.constexpr):
    """One chunk of the row in float32 (h = x + residual, stored, with a residual)."""
    x = _chunk_load(x_row, c, m, EVEN, "evict_last")
    if HAS_RESIDUAL:
        r = _chunk_load(r_row, c, m, EVEN, "evict_first")
        # h rounded to the input dtype before it is normalised, as eager ``x + residual``
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
        _chunk_store(h_row, c, x, m, EVEN)
    return x.to(tl.float32)


@triton.jit
def _add_chunk_stats(x, shift, total, squares, c, N, CENTER: tl.constexpr, EVEN: tl.constexpr):
    """One more chunk into a lane's sums: deviations from its shift and their squares
    (LayerNorm), or squares (RMSNorm)."""
    if CENTER:
        d = x - shift
        if not EVEN:
            d = tl.where(c < N, d, 0.0)  # the masked lanes' x is 0, not their shift
        return total + d, squares + d * d
    return total, squares + x * x


@triton.jit
def _write_chunk(src, W, B, y_row, c, N, mean, rstd, offset, HAS_WEIGHT: tl.constexpr,
                 HAS_BIAS: tl.constexpr, EVEN: tl.constexpr):  # fmt: skip
    """y of one chunk from the row re-read (L2) and the statistics."""
    m = c < N
    x = _chunk_load(src, c, m, EVEN, "evict_first").to(tl.float32)
    y = (x - mean) * rstd
    if HAS_WEIGHT:
        w = _chunk_load(W, c, m, EVEN, "evict_last")
        y = y * (offset + w.to(tl.float32))
    if HAS_BIAS:
        b = _chunk_load(B, c, m, EVEN, "evict_last")
        y = y + b.to(tl.float32)
    _chunk_store(y_row, c, y.to(y_row.dtype.element_ty), m, EVEN)


@triton.jit
def norm_fwd_looped_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
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
    EVEN: tl.constexpr = False,
    FORWARDS: tl.constexpr = False,
    CHUNKS: tl.constexpr = 0,
    SPECIALIZED: tl.constexpr = 0,
):
    """One row a program, walked in chunks of ``BLOCK_N`` columns (few registers, so several
    programs share an SM and keep more loads in flight than one whole row in registers).

    The statistics take one pass (x is read twice in all, where ``norm_fwd_chunked_kernel``
    reads a LayerNorm row three times): RMSNorm sums squares per lane; LayerNorm sums each
    lane's deviations from the lane's first value and their squares. That shift costs little
    precision: a lane's first value lies within sqrt(n - 1) standard deviations of the lane's
    mean (Samuelson's inequality, n the lane's count), so the squares exceed the squared
    deviations they stand for at most n-fold. The output pass re-reads the row from L2,
    backwards (the chunks read last first) or, with ``FORWARDS``, in order as torch.compile's.
    ``EVEN``: N is a multiple of ``BLOCK_N``, so no chunk is masked. ``CHUNKS`` > 0: the row's
    number of chunks, known when compiling, so the statistics pass is unrolled and a thread
    issues all its loads of it before using the first (torch.compile's kernels know N and get
    this; with N only at run time each chunk's load waits for the one before). Compiled for
    sm_90 by Triton 3.9, bf16 LayerNorm, 16384 columns in 2048-column chunks on 16 warps: eight
    64-bit loads back to back at 32 registers; with the output pass unrolled too, 40 registers
    and only five of the eight loads ahead, so that pass stays a loop (its loads hit L2).
    ``SPECIALIZED`` > 0: the row length, compiled in (module docstring)."""
    if SPECIALIZED:  # the row length and strides compiled in, 32-bit row offsets
        N, stride_x, stride_r, stride_y, stride_h = (SPECIALIZED, SPECIALIZED, SPECIALIZED,
                                                     SPECIALIZED, SPECIALIZED)  # fmt: skip
    row = _program_row(SPECIALIZED)
    cols = tl.arange(0, BLOCK_N)
    x_row = X + row * stride_x
    h_row = H + row * stride_h
    r_row = R + row * stride_r
    # the first chunk's values are the lanes' shifts (no division in the loop, as Welford's)
    shift = _looped_chunk(x_row, r_row, h_row, cols, cols < N, HAS_RESIDUAL, EVEN)
    total = tl.zeros([BLOCK_N], dtype=tl.float32)
    squares = tl.zeros([BLOCK_N], dtype=tl.float32) if CENTER else shift * shift
    if CHUNKS:
        for i in tl.static_range(1, CHUNKS):
            c = i * BLOCK_N + cols
            x = _looped_chunk(x_row, r_row, h_row, c, c < N, HAS_RESIDUAL, EVEN)
            total, squares = _add_chunk_stats(x, shift, total, squares, c, N, CENTER, EVEN)
    else:
        for start in range(BLOCK_N, N, BLOCK_N):
            c = start + cols
            x = _looped_chunk(x_row, r_row, h_row, c, c < N, HAS_RESIDUAL, EVEN)
            total, squares = _add_chunk_stats(x, shift, total, squares, c, N, CENTER, EVEN)
    if CENTER:
        # each lane's mean and squared deviations, merged across lanes as sums (pairwise on
        # the GPU and in the interpreter): the row's are the lanes' own plus each lane's count
        # times its mean's squared distance from the row's
        count = tl.where(cols < N, (N - 1 - cols) // BLOCK_N + 1, 0).to(tl.float32)
        held = tl.maximum(count, 1.0)
        lane_mean = shift + total / held
        lane_m2 = tl.maximum(squares - total * total / held, 0.0)
        mean = tl.sum(lane_mean * count, axis=0) / N
        spread = lane_mean - mean
        m2 = tl.sum(lane_m2 + count * spread * spread, axis=0)
        tl.store(MEAN + row, mean)
    else:
        mean = 0.0
        m2 = tl.sum(squares, axis=0)
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    tl.store(RSTD + row, rstd)
    if HAS_RESIDUAL:
        tl.debug_barrier()  # h, written by this program's threads, is read back
        src = h_row
    else:
        src = x_row

    y_row = Y + row * stride_y
    for i in range(0, N, BLOCK_N):
        c = output_columns(i, cols, N, BLOCK_N, FORWARDS)
        _write_chunk(src, W, B, y_row, c, N, mean, rstd, offset, HAS_WEIGHT, HAS_BIAS, EVEN)


@triton.jit
def softmax_fwd_wide_kernel(
    X,
    Y,
    stride_x,
    stride_y,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STREAM: tl.constexpr,
):
    """``softmax_fwd_rows_kernel``'s arithmetic on one whole row (every row is in range, so no
    guard for rows past M)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = _load_row(X + row * stride_x, cols, mask, -float("inf"), STREAM).to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    e = tl.exp(shifted)
    total = tl.sum(e, axis=0)
    if LOG:
        y = shifted - tl.log(total)
    else:
        y = e / total
    _store_row(Y + row * stride_y, cols, y.to(Y.dtype.element_ty), mask, STREAM)


@triton.jit
def softmax_bwd_wide_kernel(
    DY,
    Y,
    DX,
    stride_dy,
    stride_y,
    stride_dx,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STREAM: tl.constexpr,
):
    """softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy), one whole
    row a program (y and dy both held: twice the forward's registers)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    dy = _load_row(DY + row * stride_dy, cols, mask, 0.0, STREAM).to(tl.float32)
    y = _load_row(Y + row * stride_y, cols, mask, 0.0, STREAM).to(tl.float32)
    if LOG:
        dx = dy - tl.exp(y) * tl.sum(dy, axis=0)
    else:
        dx = y * (dy - tl.sum(dy * y, axis=0))
    _store_row(DX + row * stride_dx, cols, dx.to(DX.dtype.element_ty), mask, STREAM)


@triton.jit
def _softmax_chunk(x_row, c, N, EVEN: tl.constexpr, POLICY: tl.constexpr):
    """One chunk of a softmax row in float32, -inf past the row's end."""
    if EVEN:
        return tl.load(x_row + c, eviction_policy=POLICY).to(tl.float32)
    return tl.load(x_row + c, mask=c < N, other=-float("inf"), eviction_policy=POLICY).to(
        tl.float32
    )


@triton.jit
def _softmax_lane_update(x, top, total):
    """One more value a lane into the lane's running max ``top`` (finite: it starts at least
    at -FLT_MAX, so x - top is never -inf - -inf) and its sum of exp(value - top), with one
    exp: of the value and the old max, the larger contributes exp(0) = 1, so only their
    distance needs one. An -inf value adds exp(-inf) = 0; a NaN value makes the sum NaN, as it
    makes the row NaN in PyTorch."""
    e = tl.exp(-tl.abs(x - top))
    bigger = x > top
    return tl.maximum(x, top), tl.where(bigger, total * e + 1.0, total + e)


@triton.jit
def _softmax_row_result(top, total, LOG: tl.constexpr):
    """(shift, factor) of a row from its lanes' running maxima and sums: y = exp(x - shift) *
    factor, or with ``LOG`` y = (x - shift) - factor (the row's max and log-sum subtracted
    apart: their sum would round near the max). A row of only -inf sums to 0, so its outputs
    are NaN, as PyTorch's."""
    shift = tl.max(top, axis=0)
    row_sum = tl.sum(total * tl.exp(top - shift), axis=0)
    if LOG:
        return shift, tl.log(row_sum)
    return shift, 1.0 / row_sum


@triton.jit
def _softmax_values(x, shift, factor, LOG: tl.constexpr):
    if LOG:
        return (x - shift) - factor
    return tl.exp(x - shift) * factor


@triton.jit
def softmax_fwd_looped_kernel(
    X,
    Y,
    stride_x,
    stride_y,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN: tl.constexpr = False,
    FORWARDS: tl.constexpr = False,
    CHUNKS: tl.constexpr = 0,
):
    """(log-)softmax of one row a program, walked in chunks of ``BLOCK_N`` columns, as
    ``norm_fwd_looped_kernel`` walks a norm's row: a statistics pass keeps each lane's running
    max and its sum of exponentials (one exp a value, ``_softmax_lane_update``), the lanes
    merge into the row's max and sum, and the output pass re-reads the row from L2 (backwards,
    the chunks read last first, or with ``FORWARDS`` in order). ``EVEN``: N is a multiple of
    ``BLOCK_N``; ``CHUNKS`` > 0: the row's number of chunks, known when compiling, so the
    statistics pass is unrolled and its loads are all in flight together."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x_row = X + row * stride_x
    x = _softmax_chunk(x_row, cols, N, EVEN, "evict_last")
    top = tl.maximum(x, -3.4028234663852886e38)
    total = tl.where(x == -float("inf"), 0.0, 1.0)
    if CHUNKS:
        for i in tl.static_range(1, CHUNKS):
            x = _softmax_chunk(x_row, i * BLOCK_N + cols, N, EVEN, "evict_last")
            top, total = _softmax_lane_update(x, top, total)
    else:
        for start in range(BLOCK_N, N, BLOCK_N):
            x = _softmax_chunk(x_row, start + cols, N, EVEN, "evict_last")
            top, total = _softmax_lane_update(x, top, total)
    shift, factor = _softmax_row_result(top, total, LOG)

    y_row = Y + row * stride_y
    for i in range(0, N, BLOCK_N):
        c = output_columns(i, cols, N, BLOCK_N, FORWARDS)
        x = _softmax_chunk(x_row, c, N, EVEN, "evict_first")
        y = _softmax_values(x, shift, factor, LOG)
        _chunk_store(y_row, c, y.to(Y.dtype.element_ty), c < N, EVEN)
