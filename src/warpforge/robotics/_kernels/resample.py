"""Triton kernels for trajectory resampling and N-stream alignment.

One program (a work item of the grid) handles one batch row, a block of ``BLOCK_T`` queries and
a block of ``BLOCK_D`` value columns of one stream. Each query finds its interval by the guided
search of :func:`_guided_interval` (``PROBES >= 2``: an interpolated guess verified by a few
parallel loads; one round on a uniform clock, a handful on jittered ones, a bisection safeguard
on adversarial ones) or by a fixed-step binary search (``PROBES == 0``: ``bit_length(S)``
dependent loads), then gathers the two bracketing value rows with contiguous (16-byte) loads
along D and writes one output row segment. Values are read once per query pair, times and queries
once: the kernel is memory bound like a copy, provided the search does not leave the memory
system idle, which is why it is guided.

Times are searched in their own dtype (float32, float64 or int64 nanoseconds); the interpolation
weight is formed from differences in that dtype and divided in float64 for float64/int64 times,
so an hour-long 1 kHz int64 stream interpolates as exactly as float64 allows.

The backward scatters with float32 atomics (``resample_backward_kernel``), or deterministically in
two passes over queries sorted per row (``resample_brackets_kernel`` then
``resample_gather_grad_kernel``: each source sample sums its own run of queries in order).

Alignment of several streams runs in the same launch: ``resample_streams_kernel`` takes each of a
stream's operands as one entry of a tuple (Triton compiles a kernel per tuple length, pointer
types and constexprs); its 1-D grid lists the work items of every stream in turn, and a guarded
tile unrolled at compile time serves each stream, or in large launches each kind of stream
(value and output dtype, method, tile shape), whose programs then pick their stream's operands
at run time (``OWN_TILE_MAX_STREAMS`` in :mod:`warpforge.robotics.resample` says when and why).
"""

from __future__ import annotations

import triton
import triton.language as tl

# Codes of the constexpr switches. Globals read inside @triton.jit must be tl.constexpr objects;
# the launcher passes the plain ints from the *_CODES tables.
LINEAR, PREVIOUS, NEAREST, SLERP = (tl.constexpr(code) for code in range(4))
CLAMP, EXTRAPOLATE, FILL_NAN = (tl.constexpr(code) for code in range(3))
TIME_F32, TIME_F64, TIME_I64 = (tl.constexpr(code) for code in range(3))
METHOD_CODES = {"linear": 0, "previous": 1, "nearest": 2, "slerp": 3}
# "error" runs as clamp; the host then checks the mask
POLICY_CODES = {"clamp": 0, "extrapolate": 1, "nan": 2, "error": 0}
TIME_CODES = {"float32": 0, "float64": 1, "int64": 2}

NEARLY_PARALLEL = tl.constexpr(0.9995)
"""|cos(angle)| above which slerp falls back to normalised lerp (sin(angle) too small)."""


@triton.jit
def _acos_unit_interval(x):
    # acos on [0, 1] (Abramowitz & Stegun 4.4.46, |error| <= 2e-8): tl has no acos that exists
    # in every supported Triton version and in the interpreter.
    p = -0.0012624911
    p = p * x + 0.0066700901
    p = p * x - 0.0170881256
    p = p * x + 0.0308918810
    p = p * x - 0.0501743046
    p = p * x + 0.0889789874
    p = p * x - 0.2145988016
    p = p * x + 1.5707963050
    return tl.sqrt(1.0 - x) * p


@triton.jit
def _interval_weight(q, ta, tb, TIME_KIND: tl.constexpr):
    """``(w, dw/dq)``: (q - ta) / (tb - ta) and 1 / (tb - ta), both 0 for a zero-width
    interval; in float64 for float64/int64 times."""
    if TIME_KIND == TIME_F32:
        width = tb - ta
        offset = q - ta
    else:
        width = (tb - ta).to(tl.float64)
        offset = (q - ta).to(tl.float64)
    safe = tl.where(width > 0, width, 1.0)
    return tl.where(width > 0, offset / safe, 0.0), tl.where(width > 0, 1.0 / safe, 0.0)


@triton.jit
def _time_at(times_row, t_stride_s, t_tile, j, mask, STAGED: tl.constexpr):
    """t[j]: from the row's times staged in ``t_tile`` (a one-dimensional ``tl.gather``, which
    Triton lowers through shared memory; ``j`` must lie in the tile) or loaded from memory."""
    if STAGED:
        t_j = tl.gather(t_tile, j, 0)
    else:
        t_j = tl.load(times_row + j.to(tl.int64) * t_stride_s, mask=mask, other=0)
    return t_j


@triton.jit
def _binary_count(
    q, times_row, t_stride_s, n, t_in, NUM_STEPS, t_tile,
    STAGED: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    """Number of source times <= q (searchsorted right) by a fixed-step binary search: ``NUM_STEPS``
    dependent loads (or staged gathers, ``STAGED``) whatever the data."""
    lo = tl.zeros([BLOCK_T], dtype=tl.int32)
    hi = tl.zeros([BLOCK_T], dtype=tl.int32) + n
    for _ in range(NUM_STEPS):
        active = lo < hi
        mid = (lo + hi) // 2
        if STAGED:
            # an inactive lane may sit at lo == hi == n: keep its (unused) index inside the tile
            probe = tl.minimum(mid, n - 1)
        else:
            probe = mid
        t_mid = _time_at(times_row, t_stride_s, t_tile, probe, active & t_in, STAGED)
        go_right = active & (t_mid <= q)
        lo = tl.where(go_right, mid + 1, lo)
        hi = tl.where(active & (t_mid > q), mid, hi)
    return lo


@triton.jit
def _guided_interval(
    q, times_row, t_stride_s, last, t_first, t_last, interior, t_tile,
    TIME_KIND: tl.constexpr, PROBES: tl.constexpr, STAGED: tl.constexpr, BLOCK_T: tl.constexpr,
):  # fmt: skip
    """For ``interior`` lanes (t[0] <= q < t[n-1]): ``(a, t[a], t[a+1])`` with t[a] <= q < t[a+1].

    Keeps a bracket ``t[a] <= q < t[b]`` (initially ``a = 0, b = n-1``) and narrows it in rounds:
    each round guesses q's position by interpolating between t[a] and t[b] (on a uniform clock the
    first guess is right), reads ``PROBES`` consecutive times around the guess in parallel, and
    keeps the tightest bracket they prove. The guess only chooses where to look; the comparisons
    decide, so rounding in the float32 guess cannot change the result. Every round shrinks the
    bracket; after three rounds every other round bisects instead, so adversarial spacing costs
    at most about ``3 + 2 * log2(n)`` rounds. The loop runs while any lane of the block is open.
    """
    a = tl.zeros([BLOCK_T], dtype=tl.int32)
    b = last
    ta = t_first
    tb = t_last
    # the round count as a tensor: some Triton versions refuse a loop-carried Python int
    rounds = tl.zeros([BLOCK_T], dtype=tl.int32)
    while tl.max((interior & (b - a > 1)).to(tl.int32), axis=0) > 0:
        active = interior & (b - a > 1)
        width = b - a
        if TIME_KIND == TIME_F32:
            frac = (q - ta) / (tb - ta)
        else:
            frac = (q - ta).to(tl.float32) / (tb - ta).to(tl.float32)
        # NaN / inf from flushed or overflowing differences: look in the middle instead
        frac = tl.where((frac >= 0.0) & (frac < 1.0), frac, 0.5)
        guess = a + (frac * width.to(tl.float32)).to(tl.int32)
        bisect = (rounds >= 3) & (rounds % 2 == 1)
        guess = tl.where(bisect, a + width // 2, guess)
        first = tl.minimum(tl.maximum(guess, a), b - 1) - (PROBES // 2 - 1)
        # a bracket the probes can cover whole is read whole: this round closes it
        first = tl.where(width <= PROBES + 1, a + 1, first)
        a_start = a
        b_start = b
        for k in tl.static_range(PROBES):
            # indices from the round's start bracket only: the loads do not wait on each other
            j = tl.minimum(tl.maximum(first + k, a_start), b_start)
            t_j = _time_at(times_row, t_stride_s, t_tile, j, active, STAGED)
            # probes ascend: the last one <= q is the tightest lower bound, the first one > q
            # the tightest upper bound
            raise_a = active & (t_j <= q) & (j > a)
            a = tl.where(raise_a, j, a)
            ta = tl.where(raise_a, t_j, ta)
            lower_b = active & (t_j > q) & (j < b)
            b = tl.where(lower_b, j, b)
            tb = tl.where(lower_b, t_j, tb)
        rounds += 1
    return a, ta, tb


@triton.jit
def _row_length(lengths_ptr, row, S, HAS_LENGTHS: tl.constexpr):
    """Valid samples of ``row``: ``lengths[row]`` clamped to [1, S] (the clamp keeps memory safe
    when checks were skipped, assume_sorted=True), else all S."""
    if HAS_LENGTHS:
        n = tl.minimum(tl.maximum(tl.load(lengths_ptr + row).to(tl.int32), 1), S)
    else:
        n = S
    return n


@triton.jit
def _bracket(
    q_ptr,
    q_stride_b,
    q_stride_t,
    T,
    t_ptr,
    t_stride_b,
    t_stride_s,
    n,
    row,
    t_block,
    NUM_STEPS,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    PROBES: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    """For a block of queries of one row: the two samples ``ia``, ``ib`` to blend, the weight
    ``w`` of ``ib`` (the result is ``v[ia] + w * (v[ib] - v[ia])``), ``dw/dq``, the in-range
    mask and the NaN-query mask. Shared by the forward and the backward.

    ``PROBES == 0`` finds the interval by a fixed-step binary search, then reads its two times;
    ``PROBES >= 2`` by :func:`_guided_interval`, which ends holding both times."""
    row64 = row.to(tl.int64)
    offs_t = t_block * BLOCK_T + tl.arange(0, BLOCK_T)
    t_in = offs_t < T
    q = tl.load(q_ptr + row64 * q_stride_b + offs_t.to(tl.int64) * q_stride_t, mask=t_in, other=0)
    times_row = t_ptr + row64 * t_stride_b

    # n may be a specialised constant (S == 1): broadcast it to a vector before any cast
    last = tl.zeros([BLOCK_T], dtype=tl.int32) + (n - 1)
    t_first = tl.load(times_row + offs_t * 0)
    t_last = tl.load(times_row + last.to(tl.int64) * t_stride_s)
    below = q < t_first
    above = q > t_last
    is_nan = q != q  # NaN queries never compare: they yield NaN and a False mask
    in_range = (~below) & (~above) & (~is_nan)

    # i0 = clamp(count - 1, 0, last), i1 = min(i0 + 1, last) and their times t0, t1, where count
    # is the number of source times <= q (searchsorted right)
    if PROBES == 0:
        count = _binary_count(q, times_row, t_stride_s, n, t_in, NUM_STEPS, q, False, BLOCK_T)
        i0 = tl.minimum(tl.maximum(count - 1, 0), last)
        i1 = tl.minimum(i0 + 1, last)
        t0 = tl.load(times_row + i0.to(tl.int64) * t_stride_s, mask=t_in, other=0)
        t1 = tl.load(times_row + i1.to(tl.int64) * t_stride_s, mask=t_in, other=0)
    else:
        interior = t_in & (q >= t_first) & (q < t_last)  # False for NaN queries and n == 1
        a, ta_found, tb_found = _guided_interval(
            q, times_row, t_stride_s, last, t_first, t_last, interior, q,
            TIME_KIND, PROBES, False, BLOCK_T,
        )  # fmt: skip
        # q >= t[n-1] counts every sample (i0 = last); q < t[0] (or NaN) none (i0 = 0); their
        # times below are placeholders that the out-of-range selection replaces
        at_end = q >= t_last
        i0 = tl.where(interior, a, tl.where(at_end, last, 0))
        i1 = tl.minimum(i0 + 1, last)
        t0 = tl.where(interior, ta_found, tl.where(at_end, t_last, t_first))
        t1 = tl.where(interior, tb_found, tl.where(at_end, t_last, t_first))

    if METHOD == PREVIOUS:
        i1 = i0
        t1 = t0
    if METHOD == NEAREST:
        take_first = (q - t0) <= (t1 - q)  # ties go to v[i]
        i0 = tl.where(take_first, i0, i1)
        t0 = tl.where(take_first, t0, t1)
        i1 = i0
        t1 = t0
    # out of range: hold the edge sample, or for linear extrapolation use the edge interval
    if POLICY == EXTRAPOLATE and METHOD == LINEAR:
        second = tl.minimum(last, 1)
        penultimate = tl.maximum(last - 1, 0)
        t_second = tl.load(times_row + second.to(tl.int64) * t_stride_s)
        t_penultimate = tl.load(times_row + penultimate.to(tl.int64) * t_stride_s)
        ia = tl.where(below, 0, tl.where(above, penultimate, i0))
        ib = tl.where(below, second, tl.where(above, last, i1))
        ta = tl.where(below, t_first, tl.where(above, t_penultimate, t0))
        tb = tl.where(below, t_second, tl.where(above, t_last, t1))
        # a zero-width edge interval holds the edge sample itself
        ia = tl.where(above & (tb == ta), ib, ia)
    else:
        ia = tl.where(below, 0, tl.where(above, last, i0))
        ib = tl.where(below, 0, tl.where(above, last, i1))
        ta = tl.where(below, t_first, tl.where(above, t_last, t0))
        tb = tl.where(below, t_first, tl.where(above, t_last, t1))
    if METHOD == LINEAR or METHOD == SLERP:  # noqa: SIM109 (Triton constexpr test)
        w, inv_width = _interval_weight(q, ta, tb, TIME_KIND)
    else:
        w = tl.zeros([BLOCK_T], dtype=tl.float32)
        inv_width = w
    if COMPUTE_F64:
        w = w.to(tl.float64)
        inv_width = inv_width.to(tl.float64)
    else:
        w = w.to(tl.float32)
        inv_width = inv_width.to(tl.float32)
    return offs_t, t_in, ia, ib, w, inv_width, in_range, is_nan


@triton.jit
def _resample_tile(
    q_ptr,
    q_stride_b,
    q_stride_t,
    T,
    v_ptr,
    v_stride_b,
    v_stride_s,
    t_ptr,
    t_stride_b,
    t_stride_s,
    n,
    out_ptr,
    out_stride_b,
    out_stride_t,
    out_col,
    D,
    mask_ptr,
    row,
    t_block,
    d_block,
    NUM_STEPS,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    WRITE_MASK: tl.constexpr,
    PROBES: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    offs_t, t_in, ia, ib, w, _, in_range, is_nan = _bracket(
        q_ptr, q_stride_b, q_stride_t, T, t_ptr, t_stride_b, t_stride_s, n, row, t_block,
        NUM_STEPS, METHOD, POLICY, TIME_KIND, COMPUTE_F64, PROBES, BLOCK_T,
    )  # fmt: skip
    row64 = row.to(tl.int64)
    offs_d = d_block * BLOCK_D + tl.arange(0, BLOCK_D)
    d_in = offs_d < D
    tile_in = t_in[:, None] & d_in[None, :]
    values_row = v_ptr + row64 * v_stride_b
    va = tl.load(values_row + ia.to(tl.int64)[:, None] * v_stride_s + offs_d[None, :], mask=tile_in)
    vb = tl.load(values_row + ib.to(tl.int64)[:, None] * v_stride_s + offs_d[None, :], mask=tile_in)
    if COMPUTE_F64:
        va = va.to(tl.float64)
        vb = vb.to(tl.float64)
    else:
        va = va.to(tl.float32)
        vb = vb.to(tl.float32)
    w2 = w[:, None]
    if METHOD == SLERP:
        dot = tl.sum(va * vb, axis=1)
        vb = tl.where((dot < 0)[:, None], -vb, vb)  # shortest path: same hemisphere
        cos_angle = tl.minimum(tl.abs(dot), 1.0)
        parallel = cos_angle > NEARLY_PARALLEL
        angle = _acos_unit_interval(tl.where(parallel, 0.5, cos_angle))
        inv_sin = 1.0 / tl.sin(angle)
        ca = tl.where(parallel, 1.0 - w, tl.sin((1.0 - w) * angle) * inv_sin)
        cb = tl.where(parallel, w, tl.sin(w * angle) * inv_sin)
        result = ca[:, None] * va + cb[:, None] * vb
        norm_sq = tl.sum(result * result, axis=1)
        # masked-off lanes hold zeros: keep them away from 0 / 0
        result = result / tl.sqrt(tl.where(norm_sq > 0, norm_sq, 1.0))[:, None]
    else:
        # w == 0 returns v[i] exactly (q == t[n-1], holds, previous, nearest)
        result = tl.where(w2 == 0, va, va + w2 * (vb - va))
    if POLICY == FILL_NAN:
        result = tl.where(in_range[:, None], result, float("nan"))
    result = tl.where(is_nan[:, None], float("nan"), result)

    out_offs = (
        row64 * out_stride_b
        + offs_t.to(tl.int64)[:, None] * out_stride_t
        + (out_col + offs_d)[None, :]
    )
    tl.store(out_ptr + out_offs, result.to(out_ptr.dtype.element_ty), mask=tile_in)
    if WRITE_MASK:  # noqa: SIM102 (constexpr guard, then a run-time test)
        if d_block == 0:
            tl.store(mask_ptr + row64 * T + offs_t, in_range.to(tl.uint8), mask=t_in)


@triton.jit
def _prefetch_share(base, count, part, parts, LINE: tl.constexpr):
    """Ask L2 for this program's share (``part`` of ``parts``) of the ``count`` elements at
    ``base``, one 128-byte line (``LINE`` elements) per lane. A hint with no result: the
    programs of one row fetch the whole row together while their first loads are in flight, so
    their later dependent loads (search rounds, value rows) find it in L2 instead of memory."""
    lines = tl.cdiv(count, LINE)
    per = tl.cdiv(lines, parts)
    for start in range(0, per, 64):
        lane = start + tl.arange(0, 64)
        line = part * per + lane
        wanted = (lane < per) & (line < lines)
        address = (base + line.to(tl.int64) * LINE).to(tl.int64, bitcast=True)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
            "=r,l,r", [address, wanted.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip


@triton.jit
def _stream_slot(
    item,
    group,
    first_item,
    B,
    q_ptr,
    q_stride_b,
    q_stride_t,
    T,
    v_ptr,
    v_stride_b,
    v_stride_s,
    t_ptr,
    t_stride_b,
    t_stride_s,
    lengths_ptr,
    S,
    out_ptr,
    out_stride_b,
    out_stride_t,
    out_col,
    D,
    mask_ptr,
    NUM_STEPS,
    group_rows,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    WRITE_MASK: tl.constexpr,
    PROBES: tl.constexpr,
    PREFETCH_V: tl.constexpr,
    PREFETCH_T: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # the grid's second axis is the group of ``group_rows`` batch rows, its first the work
    # item within the group, stream after stream: this stream owns items [first_item,
    # first_item + group_rows * t_blocks * d_blocks) of every group (fewer in a last, shorter
    # group). Column blocks fastest, then query blocks: neighbouring programs share queries and
    # search path. Two grid axes rather than one split by a run-time division, which cost the
    # single-stream kernel 8% at (64, 4096 -> 4096, 256) bf16 on the H200
    # (benchmarks/results/session36-h200-2026-11-30/resample-*-call2.json)
    num_d_blocks = tl.cdiv(D, BLOCK_D)
    num_t_blocks = tl.cdiv(T, BLOCK_T)
    local = item - first_item
    first_row = group * group_rows
    rows = tl.minimum(group_rows, B - first_row)
    if (local >= 0) & (local < rows * num_t_blocks * num_d_blocks):
        d_block = local % num_d_blocks
        rest = local // num_d_blocks
        t_block = rest % num_t_blocks
        row = first_row + rest // num_t_blocks
        n = _row_length(lengths_ptr, row, S, HAS_LENGTHS)
        # PREFETCH_V / PREFETCH_T: elements per 128-byte line of packed value / time rows (0: no
        # prefetch); each of the row's programs asks L2 for its share of the row
        if PREFETCH_V > 0:
            _prefetch_share(v_ptr + row.to(tl.int64) * v_stride_b, n * v_stride_s,
                            t_block * num_d_blocks + d_block, num_t_blocks * num_d_blocks,
                            PREFETCH_V)  # fmt: skip
        if PREFETCH_T > 0:
            _prefetch_share(t_ptr + row.to(tl.int64) * t_stride_b, n,
                            t_block * num_d_blocks + d_block, num_t_blocks * num_d_blocks,
                            PREFETCH_T)  # fmt: skip
        _resample_tile(
            q_ptr, q_stride_b, q_stride_t, T,
            v_ptr, v_stride_b, v_stride_s,
            t_ptr, t_stride_b, t_stride_s, n,
            out_ptr, out_stride_b, out_stride_t, out_col, D,
            mask_ptr, row, t_block, d_block, NUM_STEPS,
            METHOD, POLICY, TIME_KIND, COMPUTE_F64, WRITE_MASK, PROBES, BLOCK_T, BLOCK_D,
        )  # fmt: skip


# a stream's place among the streams of its kind (the launch lists a kind's streams together)
ALONE, FIRST_OF_KIND, INSIDE_KIND, LAST_OF_KIND = (tl.constexpr(code) for code in range(4))


@triton.jit
def _widened(v_sb, v_ss, t_sb, t_ss, s, o_sb, o_st, col, d, item, steps):
    """A stream's integer operands in one type whichever way a launch specialised them (a 1
    becomes a constant, a large value int64), as a run-time pick among streams needs: strides
    int64, counts int32 (the single-stream kernel's search needs S in int32 too)."""
    return (
        tl.cast(v_sb, tl.int64), tl.cast(v_ss, tl.int64), tl.cast(t_sb, tl.int64),
        tl.cast(t_ss, tl.int64), tl.cast(s, tl.int32), tl.cast(o_sb, tl.int64),
        tl.cast(o_st, tl.int64), tl.cast(col, tl.int32), tl.cast(d, tl.int32),
        tl.cast(item, tl.int32), tl.cast(steps, tl.int32),
    )  # fmt: skip


@triton.jit
def resample_streams_kernel(
    q_ptr, q_stride_b, q_stride_t, T, B,
    # one tuple entry per stream, any number of streams, the streams of one kind together
    values, v_strides_b, v_strides_s, times, t_strides_b, t_strides_s, samples,
    outs, out_strides_b, out_strides_t, out_cols, widths, masks, first_items, search_steps,
    group_rows,
    # one tuple entry per stream; the last four the same for every stream of a kind
    ROLES: tl.constexpr,
    METHODS: tl.constexpr,
    BLOCK_TS: tl.constexpr,
    BLOCK_DS: tl.constexpr,
    OUT_VECS: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    WRITE_MASK: tl.constexpr,
    PROBES: tl.constexpr,
):  # fmt: skip
    # one 1-D grid over the work items of all streams, stream after stream; each stream has its
    # own tile shape, so a narrow 1 kHz stream gets long query blocks and a wide one wide
    # columns. The loop unrolls at compile time into one guarded tile per stream (ROLES ALONE)
    # or, where the launch groups streams into kinds, one per kind, whose programs pick their
    # stream's operands at run time: compile time then grows with the kinds. What the launch's
    # specialisation knows of every stream of a kind (16-byte aligned rows, a unit time stride)
    # the compiler still knows of the pick, which is one of them: its rows load in 16-byte
    # vectors (tests/robotics/test_kernels_compile.py).
    item = tl.program_id(0)  # the work item within its group of rows
    group = tl.program_id(1)
    for j in tl.static_range(len(values)):
        if ROLES[j] == ALONE:  # a tile of its own: its operands as the launch specialised them
            # the output's strides, column and width arrive divided by OUT_VECS[j], which
            # divides them all: multiplied back, the compiler knows the tile's rows start on
            # OUT_VECS[j]-element boundaries and stores them in vectors, whatever the row length
            vec = OUT_VECS[j]
            _stream_slot(
                item, group, first_items[j], B, q_ptr, q_stride_b, q_stride_t, T,
                values[j], v_strides_b[j], v_strides_s[j], times[j], t_strides_b[j],
                t_strides_s[j], q_ptr, samples[j], outs[j], out_strides_b[j] * vec,
                out_strides_t[j] * vec, out_cols[j] * vec, widths[j] * vec, masks[j],
                search_steps[j], group_rows,
                METHODS[j], POLICY, TIME_KIND, COMPUTE_F64, False, WRITE_MASK, PROBES, 0, 0,
                BLOCK_TS[j], BLOCK_DS[j],
            )  # fmt: skip
        else:
            # the program's stream: the kind's last whose first work item is at or before item
            # a constexpr test, then a run-time one: the first stream's operands start the pick
            if ROLES[j] == FIRST_OF_KIND:  # noqa: SIM114
                v, t, o, m = values[j], times[j], outs[j], masks[j]
                v_sb, v_ss, t_sb, t_ss, s, o_sb, o_st, col, d, first, steps = _widened(
                    v_strides_b[j], v_strides_s[j], t_strides_b[j], t_strides_s[j], samples[j],
                    out_strides_b[j], out_strides_t[j], out_cols[j], widths[j], first_items[j],
                    search_steps[j],
                )  # fmt: skip
            elif item >= first_items[j]:
                v, t, o, m = values[j], times[j], outs[j], masks[j]
                v_sb, v_ss, t_sb, t_ss, s, o_sb, o_st, col, d, first, steps = _widened(
                    v_strides_b[j], v_strides_s[j], t_strides_b[j], t_strides_s[j], samples[j],
                    out_strides_b[j], out_strides_t[j], out_cols[j], widths[j], first_items[j],
                    search_steps[j],
                )  # fmt: skip
            if ROLES[j] == LAST_OF_KIND:
                vec = OUT_VECS[j]
                _stream_slot(
                    item, group, first, B, q_ptr, q_stride_b, q_stride_t, T, v, v_sb, v_ss, t,
                    t_sb, t_ss, q_ptr, s, o, o_sb * vec, o_st * vec, col * vec, d * vec, m,
                    steps, group_rows,
                    METHODS[j], POLICY, TIME_KIND, COMPUTE_F64, False, WRITE_MASK, PROBES, 0, 0,
                    BLOCK_TS[j], BLOCK_DS[j],
                )  # fmt: skip


@triton.jit
def resample_kernel(
    q_ptr, q_stride_b, q_stride_t, T, B, lengths_ptr,
    v, v_sb, v_ss, t, t_sb, t_ss, S, o, o_sb, o_st, D, m, steps,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    WRITE_MASK: tl.constexpr,
    PROBES: tl.constexpr,
    PREFETCH_V: tl.constexpr,
    PREFETCH_T: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    # one stream, with padded lengths and the row prefetch, which resample_streams_kernel lacks;
    # plain arguments keep the launcher's per-call host work small (small shapes are launch bound)
    _stream_slot(
        tl.program_id(0), 0, 0, B, q_ptr, q_stride_b, q_stride_t, T, v, v_sb, v_ss, t, t_sb,
        t_ss, lengths_ptr, S, o, o_sb, o_st, 0, D, m, steps, B,  # the whole grid one group
        METHOD, POLICY, TIME_KIND, COMPUTE_F64, HAS_LENGTHS, WRITE_MASK, PROBES,
        PREFETCH_V, PREFETCH_T, BLOCK_T, BLOCK_D,
    )  # fmt: skip


@triton.jit
def _backward_bracket(
    q_ptr, q_stride_b, q_stride_t, T, t, t_sb, t_ss, lengths_ptr, S, row, t_block, steps,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    PROBES: tl.constexpr,
    BLOCK_T: tl.constexpr,
):  # fmt: skip
    """:func:`_bracket` of a block of queries for the backwards, with ``live``: the queries
    whose output is not a constant (NaN fills, NaN queries), the only ones passing a gradient."""
    n = _row_length(lengths_ptr, row, S, HAS_LENGTHS)
    offs_t, t_in, ia, ib, w, dw_dq, in_range, is_nan = _bracket(
        q_ptr, q_stride_b, q_stride_t, T, t, t_sb, t_ss, n, row, t_block,
        steps, METHOD, POLICY, TIME_KIND, COMPUTE_F64, PROBES, BLOCK_T,
    )  # fmt: skip
    live = ~is_nan
    if POLICY == FILL_NAN:
        live = live & in_range
    return offs_t, t_in, ia, ib, w, dw_dq, live


@triton.jit
def resample_backward_kernel(
    q_ptr, q_stride_b, q_stride_t, T, B, lengths_ptr,
    v, v_sb, v_ss, t, t_sb, t_ss, S, g, g_sb, g_st, D, gv, gv_sb, gv_ss, gq, steps,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    QUERY_GRAD: tl.constexpr,
    PROBES: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    # gradient of out = v[ia] + w * (v[ib] - v[ia]) (linear, previous, nearest): scatter
    # (1 - w) * g to row ia and w * g to row ib of a zeroed float32/64 buffer by atomics, and
    # for linear sum_d g * (v[ib] - v[ia]) * dw/dq into the query gradient
    pid = tl.program_id(0)
    num_d_blocks = tl.cdiv(D, BLOCK_D)
    num_t_blocks = tl.cdiv(T, BLOCK_T)
    d_block = pid % num_d_blocks
    t_block = (pid // num_d_blocks) % num_t_blocks
    row = pid // (num_d_blocks * num_t_blocks)
    offs_t, t_in, ia, ib, w, dw_dq, live = _backward_bracket(
        q_ptr, q_stride_b, q_stride_t, T, t, t_sb, t_ss, lengths_ptr, S, row, t_block,
        steps, METHOD, POLICY, TIME_KIND, COMPUTE_F64, HAS_LENGTHS, PROBES, BLOCK_T,
    )  # fmt: skip
    row64 = row.to(tl.int64)
    offs_d = d_block * BLOCK_D + tl.arange(0, BLOCK_D)
    tile_in = (t_in & live)[:, None] & (offs_d < D)[None, :]
    grad = tl.load(
        g + row64 * g_sb + offs_t.to(tl.int64)[:, None] * g_st + offs_d[None, :],
        mask=tile_in, other=0,
    )  # fmt: skip
    if COMPUTE_F64:
        grad = grad.to(tl.float64)
    else:
        grad = grad.to(tl.float32)
    w2 = w[:, None]
    grad_row = gv + row64 * gv_sb
    tl.atomic_add(
        grad_row + ia.to(tl.int64)[:, None] * gv_ss + offs_d[None, :], (1.0 - w2) * grad,
        mask=tile_in, sem="relaxed",
    )  # fmt: skip
    tl.atomic_add(
        grad_row + ib.to(tl.int64)[:, None] * gv_ss + offs_d[None, :], w2 * grad,
        mask=tile_in & (w2 != 0), sem="relaxed",
    )  # fmt: skip
    if QUERY_GRAD:
        values_row = v + row64 * v_sb
        va = tl.load(values_row + ia.to(tl.int64)[:, None] * v_ss + offs_d[None, :], mask=tile_in,
                     other=0)  # fmt: skip
        vb = tl.load(values_row + ib.to(tl.int64)[:, None] * v_ss + offs_d[None, :], mask=tile_in,
                     other=0)  # fmt: skip
        slope = tl.sum(grad * (vb.to(grad.dtype) - va.to(grad.dtype)), axis=1)
        # at w == 0 the forward selects v[ia] itself: no slope there (as in the reference)
        dq = tl.where(w != 0, slope * dw_dq, 0.0)
        tl.atomic_add(gq + row64 * T + offs_t, dq, mask=t_in & live, sem="relaxed")


# ----------------------------------------------------------------------------------------------
# the deterministic backward: queries sorted per row, brackets per query, then a gather per sample
# ----------------------------------------------------------------------------------------------


@triton.jit
def resample_brackets_kernel(
    q_ptr, q_stride_b, q_stride_t, T, B, lengths_ptr,
    v, v_sb, v_ss, t, t_sb, t_ss, S, g, g_sb, g_st, D,
    order, order_sb, order_st, ia_ptr, ib_ptr, wa_ptr, wb_ptr, gq, steps,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    COMPUTE_F64: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    QUERY_GRAD: tl.constexpr,
    PROBES: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    # pass 1 over the row's queries in ascending order (q_ptr holds them sorted, ``order`` their
    # original positions): each query's two samples and their weights, (1 - w) for ia and w for
    # ib (both 0 for a query whose output is a constant), into [B, T] arrays; and, for linear,
    # the gradient to the query, summed over all of D inside the program (no atomics: one store)
    pid = tl.program_id(0)
    num_t_blocks = tl.cdiv(T, BLOCK_T)
    t_block = pid % num_t_blocks
    row = pid // num_t_blocks
    offs_t, t_in, ia, ib, w, dw_dq, live = _backward_bracket(
        q_ptr, q_stride_b, q_stride_t, T, t, t_sb, t_ss, lengths_ptr, S, row, t_block,
        steps, METHOD, POLICY, TIME_KIND, COMPUTE_F64, HAS_LENGTHS, PROBES, BLOCK_T,
    )  # fmt: skip
    row64 = row.to(tl.int64)
    slot = row64 * T + offs_t
    tl.store(ia_ptr + slot, ia, mask=t_in)
    tl.store(ib_ptr + slot, ib, mask=t_in)
    # the products (1 - w) * g and w * g of the atomic kernel, factored the same way
    tl.store(wa_ptr + slot, tl.where(live, 1.0 - w, 0.0), mask=t_in)
    tl.store(wb_ptr + slot, tl.where(live & (w != 0), w, 0.0), mask=t_in)
    if QUERY_GRAD:
        source = tl.load(order + row64 * order_sb + offs_t.to(tl.int64) * order_st, mask=t_in,
                         other=0).to(tl.int64)  # fmt: skip
        values_row = v + row64 * v_sb
        if COMPUTE_F64:
            slope = tl.zeros([BLOCK_T], dtype=tl.float64)
        else:
            slope = tl.zeros([BLOCK_T], dtype=tl.float32)
        for d_start in range(0, D, BLOCK_D):
            offs_d = d_start + tl.arange(0, BLOCK_D)
            tile_in = (t_in & live)[:, None] & (offs_d < D)[None, :]
            grad = tl.load(g + row64 * g_sb + source[:, None] * g_st + offs_d[None, :],
                           mask=tile_in, other=0).to(slope.dtype)  # fmt: skip
            va = tl.load(values_row + ia.to(tl.int64)[:, None] * v_ss + offs_d[None, :],
                         mask=tile_in, other=0).to(slope.dtype)  # fmt: skip
            vb = tl.load(values_row + ib.to(tl.int64)[:, None] * v_ss + offs_d[None, :],
                         mask=tile_in, other=0).to(slope.dtype)  # fmt: skip
            slope += tl.sum(grad * (vb - va), axis=1)
        # at w == 0 the forward selects v[ia] itself: no slope there (as in the reference)
        dq = tl.where(live & (w != 0), slope * dw_dq, 0.0)
        tl.store(gq + row64 * T + source, dq, mask=t_in)


@triton.jit
def resample_gather_grad_kernel(
    first_ptr, end_ptr, S, T, ia_ptr, ib_ptr, wa_ptr, wb_ptr,
    order, order_sb, order_st, g, g_sb, g_st, D, gv, gv_sb, gv_ss,
    COMPUTE_F64: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    # pass 2, one program per row x block of samples x block of columns: sample j sums
    # (1 - w) * g over the queries with ia == j and w * g over those with ib == j. Sorted queries
    # put them in one run of positions [first[j], end[j]) (a superset found by time: see
    # resample.py), so every sample walks its own run in ascending order: no atomics, and the
    # same sum in the same order on every run. Every element is written (0 with no queries).
    pid = tl.program_id(0)
    num_d_blocks = tl.cdiv(D, BLOCK_D)
    num_s_blocks = tl.cdiv(S, BLOCK_S)
    d_block = pid % num_d_blocks
    s_block = (pid // num_d_blocks) % num_s_blocks
    row = pid // (num_d_blocks * num_s_blocks)
    row64 = row.to(tl.int64)
    offs_s = s_block * BLOCK_S + tl.arange(0, BLOCK_S)
    s_in = offs_s < S
    offs_d = d_block * BLOCK_D + tl.arange(0, BLOCK_D)
    d_in = offs_d < D
    first = tl.load(first_ptr + row64 * S + offs_s, mask=s_in, other=0).to(tl.int32)
    end = tl.load(end_ptr + row64 * S + offs_s, mask=s_in, other=0).to(tl.int32)
    if COMPUTE_F64:
        acc = tl.zeros([BLOCK_S, BLOCK_D], dtype=tl.float64)
    else:
        acc = tl.zeros([BLOCK_S, BLOCK_D], dtype=tl.float32)
    longest = tl.max(end - first, axis=0)
    for step in range(0, longest):
        k = first + step
        k_in = s_in & (k < end)
        slot = row64 * T + k
        ia = tl.load(ia_ptr + slot, mask=k_in, other=-1)
        ib = tl.load(ib_ptr + slot, mask=k_in, other=-1)
        wa = tl.load(wa_ptr + slot, mask=k_in, other=0)
        wb = tl.load(wb_ptr + slot, mask=k_in, other=0)
        source = tl.load(order + row64 * order_sb + k.to(tl.int64) * order_st, mask=k_in,
                         other=0).to(tl.int64)  # fmt: skip
        weight = tl.where(ia == offs_s, wa, 0.0) + tl.where(ib == offs_s, wb, 0.0)
        grad = tl.load(g + row64 * g_sb + source[:, None] * g_st + offs_d[None, :],
                       mask=(k_in & (weight != 0))[:, None] & d_in[None, :], other=0)  # fmt: skip
        acc += weight.to(acc.dtype)[:, None] * grad.to(acc.dtype)
    tl.store(gv + row64 * gv_sb + offs_s.to(tl.int64)[:, None] * gv_ss + offs_d[None, :], acc,
             mask=s_in[:, None] & d_in[None, :])  # fmt: skip


# ----------------------------------------------------------------------------------------------
# the staged forward: a program stages its row's times and a column slice of its values on chip,
# searches and gathers there (linear, previous, nearest; 16-bit or float32 values)
# ----------------------------------------------------------------------------------------------
#
# Every ``tl.gather`` below is rank 1. Triton relayouts a gather of rank >= 2 to make it
# warp-local (OptimizeThreadLocality), which lowers to warp shuffles whose count grows with the
# gathered axis; a rank-1 gather keeps the blocked layout spread over the warps, so its lowering
# stores the source tile to shared memory once per gather and each lane loads its element by
# index (``emitGatherInShared``): an indexed shared-memory gather. Values travel as 32- or
# 64-bit words of packed elements (two to four 16-bit values per shared-memory access); each
# query's row of words is addressed in a flat ``[queries x words]`` index space. Measured on the
# H100 (benchmarks/results/robotics-robo3-*): a gather of rank 1 compiles to no shuffles.

ELEM_BF16, ELEM_F16, ELEM_F32 = (tl.constexpr(code) for code in range(3))
ELEM_CODES = {"bfloat16": 0, "float16": 1, "float32": 2}


@triton.jit
def _bracket_staged(
    q, q_in, t_tile, times_row, t_stride_s, n, NUM_STEPS,
    METHOD: tl.constexpr, POLICY: tl.constexpr, TIME_KIND: tl.constexpr, PROBES: tl.constexpr,
    BLOCK_Q: tl.constexpr,
):  # fmt: skip
    """:func:`_bracket` for the staged kernel: ``(ia, w, in_range)``, the result being
    ``v[ia] + w * (v[ia + 1] - v[ia])``, or ``v[ia]`` where ``w == 0``.

    Whenever ``_bracket``'s ``ib`` differs from ``ia + 1`` it equals ``ia`` and ``w`` is 0 (a
    held edge, a zero-width interval, previous, nearest), so ``ib`` is not carried. Outputs the
    semantics fill with NaN (``out_of_range="nan"`` outside the range, NaN queries) get a NaN
    weight, which the blend turns into NaN."""
    offs0 = tl.zeros([BLOCK_Q], dtype=tl.int32)
    last = offs0 + (n - 1)
    t_first = tl.load(times_row + offs0)
    t_last = tl.load(times_row + last.to(tl.int64) * t_stride_s)
    below = q < t_first
    above = q > t_last
    is_nan = q != q
    in_range = (~below) & (~above) & (~is_nan)
    if PROBES == 0:
        count = _binary_count(q, times_row, t_stride_s, n, q_in, NUM_STEPS, t_tile, True, BLOCK_Q)
        i0 = tl.minimum(tl.maximum(count - 1, 0), last)
        i1 = tl.minimum(i0 + 1, last)
        t0 = tl.gather(t_tile, i0, 0)
        t1 = tl.gather(t_tile, i1, 0)
    else:
        interior = q_in & (q >= t_first) & (q < t_last)
        a, ta_found, tb_found = _guided_interval(
            q, times_row, t_stride_s, last, t_first, t_last, interior, t_tile,
            TIME_KIND, PROBES, True, BLOCK_Q,
        )  # fmt: skip
        at_end = q >= t_last
        i0 = tl.where(interior, a, tl.where(at_end, last, 0))
        i1 = tl.minimum(i0 + 1, last)
        t0 = tl.where(interior, ta_found, tl.where(at_end, t_last, t_first))
        t1 = tl.where(interior, tb_found, tl.where(at_end, t_last, t_first))
    if METHOD == PREVIOUS:
        i1 = i0
        t1 = t0
    if METHOD == NEAREST:
        take_first = (q - t0) <= (t1 - q)  # ties go to v[i]
        i0 = tl.where(take_first, i0, i1)
        t0 = tl.where(take_first, t0, t1)
        i1 = i0
        t1 = t0
    if POLICY == EXTRAPOLATE and METHOD == LINEAR:
        second = tl.minimum(last, 1)
        penultimate = tl.maximum(last - 1, 0)
        t_second = tl.gather(t_tile, second, 0)
        t_penultimate = tl.gather(t_tile, penultimate, 0)
        ia = tl.where(below, 0, tl.where(above, penultimate, i0))
        ta = tl.where(below, t_first, tl.where(above, t_penultimate, t0))
        tb = tl.where(below, t_second, tl.where(above, t_last, t1))
        # a zero-width edge interval holds the edge sample itself (w is 0 there)
        ia = tl.where(above & (tb == ta), last, ia)
    else:
        ia = tl.where(below, 0, tl.where(above, last, i0))
        ta = tl.where(below, t_first, tl.where(above, t_last, t0))
        tb = tl.where(below, t_first, tl.where(above, t_last, t1))
    if METHOD == LINEAR:
        w, _ = _interval_weight(q, ta, tb, TIME_KIND)
        w = w.to(tl.float32)
    else:
        w = tl.zeros([BLOCK_Q], dtype=tl.float32)
    fill = is_nan
    if POLICY == FILL_NAN:
        fill = fill | ~in_range
    return ia, tl.where(fill, float("nan"), w), in_range


@triton.jit
def _unpack_word(word, e: tl.constexpr, ELEM_KIND: tl.constexpr, WORD_BITS: tl.constexpr):
    """Element ``e`` (from the low bits) of a packed word, as float32."""
    if ELEM_KIND == ELEM_F32:
        if WORD_BITS == 32:
            bits = word
        else:
            bits = ((word >> (32 * e)) & 0xFFFFFFFF).to(tl.int32)
        value = bits.to(tl.float32, bitcast=True)
    else:
        bits = ((word >> (16 * e)) & 0xFFFF).to(tl.int32)
        if ELEM_KIND == ELEM_BF16:
            value = (bits << 16).to(tl.float32, bitcast=True)  # bf16 is fp32's high half
        else:
            value = bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return value


@triton.jit
def _pack_element(value, e: tl.constexpr, ELEM_KIND: tl.constexpr, WORD_BITS: tl.constexpr):
    """``value`` (float32) rounded to the element type, in element ``e``'s bits of a word."""
    if WORD_BITS == 64:
        word_type = tl.int64
    else:
        word_type = tl.int32
    if ELEM_KIND == ELEM_F32:
        bits = value.to(tl.int32, bitcast=True).to(word_type)
        if WORD_BITS == 64:
            bits = (bits & 0xFFFFFFFF) << (32 * e)
    else:
        if ELEM_KIND == ELEM_BF16:
            half = value.to(tl.bfloat16).to(tl.int16, bitcast=True)
        else:
            half = value.to(tl.float16).to(tl.int16, bitcast=True)
        bits = (half.to(word_type) & 0xFFFF) << (16 * e)
    return bits


@triton.jit
def _spread(x, BLOCK_Q: tl.constexpr, BLOCK_W: tl.constexpr):
    """``x`` [BLOCK_Q] repeated BLOCK_W times each, in the flat [BLOCK_Q * BLOCK_W] index space
    (query-major): a broadcast and a reshape, which Triton lowers to one small layout
    conversion instead of a gather."""
    return tl.reshape(tl.broadcast_to(x[:, None], [BLOCK_Q, BLOCK_W]), [BLOCK_Q * BLOCK_W])


@triton.jit
def resample_staged_kernel(
    q_ptr, q_stride_b, q_stride_t, T, lengths_ptr,
    v_words, v_sb, v_ss, W,
    t_ptr, t_sb, t_ss, S,
    o_words, o_sb, o_st,
    m_ptr, NUM_STEPS,
    METHOD: tl.constexpr,
    POLICY: tl.constexpr,
    TIME_KIND: tl.constexpr,
    HAS_LENGTHS: tl.constexpr,
    WRITE_MASK: tl.constexpr,
    PROBES: tl.constexpr,
    STAGED_SEARCH: tl.constexpr,
    ELEM_KIND: tl.constexpr,
    WORD_BITS: tl.constexpr,
    ELEMS: tl.constexpr,
    S_PAD: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_W: tl.constexpr,
):  # fmt: skip
    # one program: a row, a block of BLOCK_Q queries and a slice of BLOCK_W words of its values
    # (strides in words); word slices fastest, so neighbouring programs share the row in L2.
    # STAGED_SEARCH: the search reads the row's times staged in shared memory (one round trip
    # to memory for the whole program), else it probes them in global memory (L1) as the
    # gather kernel does, and only the values are staged.
    pid = tl.program_id(0)
    num_w_blocks = tl.cdiv(W, BLOCK_W)
    w_block = pid % num_w_blocks
    rest = pid // num_w_blocks
    num_q_blocks = tl.cdiv(T, BLOCK_Q)
    q_block = rest % num_q_blocks
    row = rest // num_q_blocks
    row64 = row.to(tl.int64)
    n = _row_length(lengths_ptr, row, S, HAS_LENGTHS)

    # the slice of the row's values, read once, coalesced; with STAGED_SEARCH every global read
    # (queries, times, values) is issued here, independent of each other
    flat_v = tl.arange(0, S_PAD * BLOCK_W)
    v_row = flat_v // BLOCK_W
    v_col = w_block * BLOCK_W + flat_v % BLOCK_W
    v_tile = tl.load(
        v_words + row64 * v_sb + v_row.to(tl.int64) * v_ss + v_col,
        mask=(v_row < n) & (v_col < W), other=0,
    )  # fmt: skip
    if STAGED_SEARCH:
        offs_q = q_block * BLOCK_Q + tl.arange(0, BLOCK_Q)
        q_in = offs_q < T
        q = tl.load(q_ptr + row64 * q_stride_b + offs_q.to(tl.int64) * q_stride_t, mask=q_in,
                    other=0)  # fmt: skip
        times_row = t_ptr + row64 * t_sb
        offs_s = tl.arange(0, S_PAD)
        t_tile = tl.load(times_row + offs_s.to(tl.int64) * t_ss, mask=offs_s < n, other=0)
        ia, w, in_range = _bracket_staged(
            q, q_in, t_tile, times_row, t_ss, n, NUM_STEPS, METHOD, POLICY, TIME_KIND, PROBES,
            BLOCK_Q,
        )  # fmt: skip
    else:
        offs_q, q_in, ia, _, w, _, in_range, is_nan = _bracket(
            q_ptr, q_stride_b, q_stride_t, T, t_ptr, t_sb, t_ss, n, row, q_block,
            NUM_STEPS, METHOD, POLICY, TIME_KIND, False, PROBES, BLOCK_Q,
        )  # fmt: skip
        # as in _bracket_staged: NaN fills as a NaN weight, and _bracket's ib is ia + 1
        # wherever w != 0
        fill = is_nan
        if POLICY == FILL_NAN:
            fill = fill | ~in_range
        w = tl.where(fill, float("nan"), w)

    flat = tl.arange(0, BLOCK_Q * BLOCK_W)
    query = flat // BLOCK_W
    col = flat % BLOCK_W
    ia_k = _spread(ia, BLOCK_Q, BLOCK_W)
    w_k = _spread(w, BLOCK_Q, BLOCK_W)
    # ia + 1 is read only where w != 0, where it is _bracket's ib (inside [0, n-1])
    ib_k = tl.minimum(ia_k + 1, n - 1)
    va = tl.gather(v_tile, ia_k * BLOCK_W + col, 0)
    vb = tl.gather(v_tile, ib_k * BLOCK_W + col, 0)

    if WORD_BITS == 64:
        packed = tl.zeros([BLOCK_Q * BLOCK_W], dtype=tl.int64)
    else:
        packed = tl.zeros([BLOCK_Q * BLOCK_W], dtype=tl.int32)
    for e in tl.static_range(ELEMS):
        fa = _unpack_word(va, e, ELEM_KIND, WORD_BITS)
        fb = _unpack_word(vb, e, ELEM_KIND, WORD_BITS)
        # w == 0 returns v[ia] exactly (q == t[n-1], holds, previous, nearest); NaN fills
        result = tl.where(w_k == 0, fa, fa + w_k * (fb - fa))
        packed = packed | _pack_element(result, e, ELEM_KIND, WORD_BITS)

    out_q = q_block * BLOCK_Q + query
    out_col = w_block * BLOCK_W + col
    tl.store(
        o_words + row64 * o_sb + out_q.to(tl.int64) * o_st + out_col, packed,
        mask=(out_q < T) & (out_col < W),
    )  # fmt: skip
    if WRITE_MASK:  # noqa: SIM102 (constexpr guard, then a run-time test)
        if w_block == 0:
            tl.store(m_ptr + row64 * T + offs_q, in_range.to(tl.uint8), mask=q_in)
