"""Triton kernels for softmax and log-softmax over the last dimension of a (M, N) row view.

``LOG`` selects log-softmax. Statistics (row max, sum of exponentials) are fp32.

* ``*_rows_kernel``: a row fits one block; a [ROWS, BLOCK_N] tile stays in registers, so memory
  is read once and written once.
* ``softmax_fwd_split_kernel``: the forward of long rows, each split over several programs
  that keep their chunk in registers and meet through a per-row atomic counter (see
  ``warpforge.ops._split_rows``): one read, one write.
* ``softmax_bwd_flags_kernel``: the backward of long rows split the same way, the programs of
  a row meeting through flag words (``warpforge.ops._kernels.split_rows.row_words``): y and dy
  read once, dx written once.
* ``*_chunked_kernel``: long rows, on a persistent grid sized so the rows in flight fit in L2
  (the backward; the forward where a row needs more programs than the GPU holds at once).
  Forward makes one online pass (running max and rescaled sum), then writes the output walking
  the row backwards, so the chunks still in L2 are re-read first (first-pass loads are marked
  ``evict_last``, the final pass ``evict_first``).

Row offsets are int64 so operands larger than 2**31 elements address correctly.
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.ops._kernels.split_rows import (
    LOG2E,
    arrive,
    await_words,
    chunk_exponentials,
    combined_partials,
    combined_words,
    look_at_words,
    publish_word,
    row_words,
    split_place,
    store_chunk_partials,
    unpack_pair,
    wait_for_row,
    word_lanes,
)


@triton.jit
def softmax_fwd_rows_kernel(
    X, Y, stride_x, stride_y, M, N, LOG: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr
):
    pid = tl.program_id(0)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    mask = row_mask[:, None] & (cols < N)[None, :]
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    # Rows past M are all -inf; keep their max finite so no NaN is ever computed.
    row_max = tl.where(row_mask, tl.max(x, axis=1), 0.0)
    shifted = x - row_max[:, None]
    e = tl.exp(shifted)
    total = tl.where(row_mask, tl.sum(e, axis=1), 1.0)
    if LOG:
        y = shifted - tl.log(total)[:, None]
    else:
        y = e / total[:, None]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def softmax_fwd_chunked_kernel(
    X, Y, stride_x, stride_y, M, N, LOG: tl.constexpr, BLOCK_N: tl.constexpr
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    num_chunks = tl.cdiv(N, BLOCK_N)
    neg_inf = -float("inf")
    for i in range(0, tl.cdiv(M - pid, num_programs)):  # persistent: rows in flight fit L2
        row = pid.to(tl.int64) + i * num_programs
        x_row = X + row * stride_x
        y_row = Y + row * stride_y

        # Online pass: per lane, a running max and the sum of exp(x - running max).
        lane_max = tl.full([BLOCK_N], neg_inf, dtype=tl.float32)
        lane_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
        for chunk in range(0, num_chunks):
            c = chunk * BLOCK_N + cols
            x = tl.load(x_row + c, mask=c < N, other=neg_inf, eviction_policy="evict_last").to(
                tl.float32
            )
            new_max = tl.maximum(lane_max, x)
            # A lane that has only seen -inf keeps a zero sum (avoids -inf - -inf = NaN).
            seen = new_max != neg_inf
            safe_max = tl.where(seen, new_max, 0.0)
            lane_sum = lane_sum * tl.exp(lane_max - safe_max) + tl.exp(x - safe_max)
            lane_max = new_max
        row_max = tl.max(lane_max, axis=0)
        safe_row_max = tl.where(row_max != neg_inf, row_max, 0.0)
        total = tl.sum(lane_sum * tl.exp(lane_max - safe_row_max), axis=0)
        log_total = tl.log(total)

        for chunk in range(0, num_chunks):
            c = (num_chunks - 1 - chunk) * BLOCK_N + cols
            m = c < N
            x = tl.load(x_row + c, mask=m, other=neg_inf, eviction_policy="evict_first").to(
                tl.float32
            )
            if LOG:
                y = x - safe_row_max - log_total
            else:
                y = tl.exp(x - safe_row_max) / total
            tl.store(y_row + c, y.to(Y.dtype.element_ty), mask=m)


@triton.jit
def softmax_bwd_rows_kernel(
    DY,
    Y,
    DX,
    stride_dy,
    stride_y,
    stride_dx,
    M,
    N,
    LOG: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """softmax: dx = y * (dy - sum(dy * y));  log-softmax: dx = dy - exp(y) * sum(dy)."""
    pid = tl.program_id(0)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    dy = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0)
    y = tl.load(Y + rows[:, None] * stride_y + cols[None, :], mask=mask, other=0.0)
    dy = dy.to(tl.float32)
    y = y.to(tl.float32)
    if LOG:
        dx = dy - tl.exp(y) * tl.sum(dy, axis=1)[:, None]
    else:
        dx = y * (dy - tl.sum(dy * y, axis=1)[:, None])
    tl.store(DX + rows[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_chunked_kernel(
    DY, Y, DX, stride_dy, stride_y, stride_dx, M, N, LOG: tl.constexpr, BLOCK_N: tl.constexpr
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    num_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, tl.cdiv(M - pid, num_programs)):  # persistent: rows in flight fit L2
        row = pid.to(tl.int64) + i * num_programs
        dy_row = DY + row * stride_dy
        y_row = Y + row * stride_y

        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for chunk in range(0, num_chunks):
            c = chunk * BLOCK_N + cols
            m = c < N
            dy = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
            if LOG:
                acc += dy
            else:
                acc += dy * tl.load(y_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(
                    tl.float32
                )
        total = tl.sum(acc, axis=0)

        for chunk in range(0, num_chunks):
            c = (num_chunks - 1 - chunk) * BLOCK_N + cols
            m = c < N
            dy = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(
                tl.float32
            )
            y = tl.load(y_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
            if LOG:
                dx = dy - tl.exp(y) * total
            else:
                dx = y * (dy - total)
            tl.store(DX + row * stride_dx + c, dx.to(DX.dtype.element_ty), mask=m)


@triton.jit
def softmax_fwd_split_kernel(
    X,
    Y,
    PARTIALS,
    ARRIVALS,
    stride_x,
    stride_y,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
    RELEASE_ONLY: tl.constexpr = False,
):
    """Long rows split over ``cdiv(N, BLOCK_N)`` programs, each holding one chunk of a row in
    registers from its read to its write: memory sees one read and one write.

    Program ``pid`` owns chunk ``pid % chunks`` of rows ``slot, slot + slots, ...`` (``slot =
    pid // chunks``). It stores its chunk's (max, sum of exp) in ``PARTIALS[row]``, then
    combines all the row's partials and writes its chunk of the output, softmax from the
    exponentials it already holds (one exponential per element).

    STAGE 0 (GPU): one launch; the programs of a row meet through ``ARRIVALS[row]`` (an atomic
    counter, zeroed by the caller) and wait until all have arrived, so the caller launches no
    more programs than can be resident at once.
    STAGE 1 / 2: the partials only / the output only (two launches, the output re-reading x):
    for the interpreter, where programs run one after the other and a wait could never end.
    PREFETCH loads the chunk of the program's next row before waiting for this one (see
    ``warpforge.ops._split_rows``); RELEASE_ONLY arrives with a release atomic (see ``arrive``).
    """
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    parts = tl.arange(0, CHUNKS_POW2)
    if PREFETCH:
        upcoming = tl.load(X + slot.to(tl.int64) * stride_x + cols, mask=mask, other=-float("inf"))
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        if PREFETCH:
            x = upcoming.to(tl.float32)
        else:
            x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
        partial = PARTIALS + row * (2 * CHUNKS_POW2)
        chunk_max, e = chunk_exponentials(x)
        if STAGE != 2:
            store_chunk_partials(partial, chunk, chunk_max, e, CHUNKS_POW2)
        if STAGE == 0:
            arrived = arrive(ARRIVALS, row, RELEASE_ONLY)
        if PREFETCH:  # after the release (whose fence would wait for it), before the wait
            next_end = tl.where(row + slots < M, N, 0)  # nothing past the last row
            upcoming = tl.load(
                X + (row + slots) * stride_x + cols, mask=cols < next_end, other=-float("inf")
            )
        if STAGE == 0:
            wait_for_row(ARRIVALS, row, chunks, arrived)
        if STAGE != 1:
            row_max, total = combined_partials(partial, parts, chunks, CHUNKS_POW2)
            if LOG:
                y = x - row_max - tl.log(total)
            else:
                # exp(x - row_max) / total from the chunk's exponentials: one multiply each
                y = e * (tl.exp2((chunk_max - row_max) * LOG2E) / total)
            tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_chunk(X, row, stride_x, cols, M, N, EVICTION: tl.constexpr):
    """A chunk of ``row`` as stored, -inf past the row's end and past the last row (carried
    raw, converted where used, so the load stays in flight until then). EVICTION: the load's
    eviction policy ("" for none)."""
    return tl.load(X + row * stride_x + cols, mask=cols < tl.where(row < M, N, 0),
                   other=float("-inf"), eviction_policy=EVICTION)  # fmt: skip


@triton.jit
def _softmax_from_words(x, first, second, LOG: tl.constexpr):
    """(log-)softmax of a chunk (as loaded) from its row's (max, sum of exp) words."""
    row_max, total = combined_words(first, second)
    xf = x.to(tl.float32)
    if LOG:
        return xf - (row_max + tl.log(total))
    return tl.exp2((xf - row_max) * LOG2E) * (1.0 / total)


@triton.jit
def _publish_softmax_chunk(x, words, chunk, STAGE: tl.constexpr):
    """Publish one chunk's (max, sum of exp(x - max)) in its word (nothing kept: the chunk's
    exponentials are computed again from x when its output is written)."""
    chunk_max, e = chunk_exponentials(x.to(tl.float32))
    publish_word(words + chunk, chunk_max, tl.sum(e, axis=0), STAGE)


@triton.jit
def softmax_fwd_lag_kernel(
    X,
    Y,
    WORDS,
    stride_x,
    stride_y,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
):
    """``softmax_fwd_split_kernel``'s output from the same places (``split_place``), the
    programs of a row meeting through flag words (``WORDS``, filled with UNPUBLISHED by the
    caller; a chunk's word holds its (max, sum of exp)) one row later, as
    ``warpforge.ops._kernels.norm_split.norm_fwd_lag_kernel`` does: at iteration k a program
    holds row k's chunk as loaded (published at k - 1), publishes row k + 1 from the load it
    issued an iteration earlier, issues the load of row k + 2, then reads row k's words (their
    first look issued before row k + 1's publication) and writes row k. The wait finds words
    published an iteration ago rather than the slowest program's load of this row. x is held
    rather than its exponentials (half the registers for 2-byte rows), so softmax computes each
    element's exponential twice; log-softmax needs none at the write.

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2 (the
    interpreter's two launches): words only / the output only."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    lanes = word_lanes(CHUNKS_POW2)
    row = slot.to(tl.int64)
    x = _softmax_chunk(X, row, stride_x, cols, M, N, "")
    if STAGE != 2:
        _publish_softmax_chunk(x, WORDS + row * CHUNKS_POW2, chunk, STAGE)
    next_x = _softmax_chunk(X, row + slots, stride_x, cols, M, N, "")
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        words = WORDS + row * CHUNKS_POW2
        first, second = look_at_words(words, lanes, chunks, CHUNKS_POW2 > 32)
        if STAGE != 2:  # noqa: SIM102 (a compile-time branch around a run-time one)
            if row + slots < M:
                _publish_softmax_chunk(next_x, WORDS + (row + slots) * CHUNKS_POW2, chunk, STAGE)
        held = next_x
        next_x = _softmax_chunk(X, row + 2 * slots, stride_x, cols, M, N, "")
        if STAGE != 1:
            if STAGE == 0:
                first, second = await_words(words, lanes, chunks, first, second,
                                            CHUNKS_POW2 > 32)  # fmt: skip
            y = _softmax_from_words(x, first, second, LOG)
            tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        x = held


@triton.jit
def softmax_fwd_reread_kernel(
    X,
    Y,
    WORDS,
    stride_x,
    stride_y,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    LAG: tl.constexpr,
    PREFETCH: tl.constexpr,
    KEEP: tl.constexpr,
    DROP: tl.constexpr,
):
    """``softmax_fwd_lag_kernel``'s output from the same places and words, LAG rows later and
    without holding the chunk, as ``warpforge.ops._kernels.norm_split.norm_fwd_reread_kernel``
    does: at step s a program reads row k = s - LAG's chunk again (from L2: it read it LAG steps
    ago) and the chunk of row s (issued a step earlier with PREFETCH), publishes row s's (max,
    sum of exp), then waits for row k's words and writes row k. KEEP / DROP: the eviction policy
    of the first read / of the second read and of y ("evict_last" / "evict_first" keep the row
    in L2 for its second read).

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2 (the
    interpreter's two launches): words only / the output only."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    lanes = word_lanes(CHUNKS_POW2)
    first_row = slot.to(tl.int64)
    if PREFETCH and STAGE != 2:
        upcoming = tl.load(X + first_row * stride_x + cols, mask=mask, other=float("-inf"),
                           eviction_policy=KEEP)  # fmt: skip
    for s in range(0, tl.cdiv(M - slot, slots) + LAG):
        ahead = first_row + s * slots
        row = tl.maximum(ahead - LAG * slots, first_row)  # the row of y (row 0's at s < LAG)
        if STAGE != 1:
            words = WORDS + row * CHUNKS_POW2
            # row < M always: the row mask alone (with _softmax_chunk's test of the row, as
            # for the first load above, an sm_90 compile spilled 96 bytes a thread, not 72)
            x = tl.load(X + row * stride_x + cols, mask=mask, other=float("-inf"),
                        eviction_policy=DROP)  # fmt: skip
            look, look_2 = look_at_words(words, lanes, chunks, CHUNKS_POW2 > 32)
        if STAGE != 2:
            if PREFETCH:
                x_ahead = upcoming
                upcoming = _softmax_chunk(X, ahead + slots, stride_x, cols, M, N, KEEP)
            else:
                x_ahead = _softmax_chunk(X, ahead, stride_x, cols, M, N, KEEP)
            if ahead < M:
                _publish_softmax_chunk(x_ahead, WORDS + ahead * CHUNKS_POW2, chunk, STAGE)
        if STAGE != 1:  # noqa: SIM102 (a compile-time branch around a run-time one)
            if s >= LAG:
                if STAGE == 0:
                    look, look_2 = await_words(words, lanes, chunks, look, look_2,
                                               CHUNKS_POW2 > 32)  # fmt: skip
                y = _softmax_from_words(x, look, look_2, LOG)
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask,
                         eviction_policy=DROP)  # fmt: skip


@triton.jit
def softmax_bwd_flags_kernel(
    DY,
    Y,
    DX,
    WORDS,
    stride_dy,
    stride_y,
    stride_dx,
    M,
    N,
    LOG: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """The backward of long rows split over ``cdiv(N, BLOCK_N)`` programs (the places of
    ``softmax_fwd_split_kernel``), each holding its chunk of y and dy in registers from the
    read to the write of dx: memory sees y and dy read once (the chunked kernel reads them
    twice, the second time mostly from DRAM at 262144 columns).

    A program publishes its chunk's partial sum (softmax: sum(dy * y); log-softmax: sum(dy)) in
    the high half of ``WORDS[row * CHUNKS_POW2 + chunk]`` (the int64 workspace the caller fills
    with ``UNPUBLISHED``), polls the row's words until all are published (``row_words``: a word
    is its own flag, no counter, no fence; no program reads another's chunk), then writes dx
    from what it holds: softmax y * (dy - total), log-softmax dy - exp(y) * total.

    STAGE 0 (GPU): one launch, all programs of a row resident together. STAGE 1 / 2: the words
    only / dx only, re-reading y and dy (two launches, for the interpreter). PREFETCH loads the
    chunks of the program's next row after publishing, before the poll."""
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    lanes = word_lanes(CHUNKS_POW2)
    if PREFETCH:
        first = slot.to(tl.int64)
        upcoming_dy = tl.load(DY + first * stride_dy + cols, mask=mask, other=0.0)
        upcoming_y = tl.load(Y + first * stride_y + cols, mask=mask, other=0.0)
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = slot.to(tl.int64) + i * slots
        if PREFETCH:
            dy = upcoming_dy.to(tl.float32)
            y = upcoming_y.to(tl.float32)
        else:
            dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
            y = tl.load(Y + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        words = WORDS + row * CHUNKS_POW2
        if STAGE != 2:
            if LOG:
                part = tl.sum(dy, axis=0)
            else:
                part = tl.sum(dy * y, axis=0)
            # high half: a word of a chunk past the row's end (EMPTY_STATS) reads as 0 there
            publish_word(words + chunk, 0.0, part, STAGE)
        if PREFETCH:
            next_end = tl.where(row + slots < M, N, 0)  # nothing past the last row
            upcoming_dy = tl.load(
                DY + (row + slots) * stride_dy + cols, mask=cols < next_end, other=0.0
            )
            upcoming_y = tl.load(
                Y + (row + slots) * stride_y + cols, mask=cols < next_end, other=0.0
            )
        if STAGE != 1:
            parts, parts_2, _, _ = row_words(
                words, words, lanes, chunks, 0, CHUNKS_POW2 > 32, STAGE
            )  # fmt: skip
            _, sums = unpack_pair(parts)
            _, sums_2 = unpack_pair(parts_2)
            total = tl.sum(sums, axis=0) + tl.sum(sums_2, axis=0)
            if LOG:
                dx = dy - tl.exp2(y * LOG2E) * total
            else:
                dx = y * (dy - total)
            tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _tile_offsets(ptr_rows, stride, cols, WIDE: tl.constexpr):
    # one return: Triton 3.6 rejects a constexpr branch returning another type than the rest
    if WIDE:
        offsets = ptr_rows.to(tl.int64)[:, None] * stride + cols[None, :]
    else:
        offsets = ptr_rows[:, None] * stride + cols[None, :]
    return offsets


@triton.jit
def softmax_bwd_tile_kernel(
    DY, Y, DX, stride_dy, stride_y, stride_dx, M, N,
    LOG: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, WIDE: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    """``softmax_bwd_rows_kernel`` for short rows, as lean as the stream allows: 32-bit offsets
    unless an operand reaches 2**31 elements (``WIDE``; the 64-bit products cost index
    arithmetic per element), and no predicates when the tiles cover the matrix exactly
    (``EVEN``: M % ROWS == 0 and N == BLOCK_N)."""
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    dy_offs = _tile_offsets(rows, stride_dy, cols, WIDE)
    y_offs = _tile_offsets(rows, stride_y, cols, WIDE)
    dx_offs = _tile_offsets(rows, stride_dx, cols, WIDE)
    if EVEN:
        dy = tl.load(DY + dy_offs).to(tl.float32)
        y = tl.load(Y + y_offs).to(tl.float32)
    else:
        mask = (rows < M)[:, None] & (cols < N)[None, :]
        dy = tl.load(DY + dy_offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(Y + y_offs, mask=mask, other=0.0).to(tl.float32)
    if LOG:
        dx = dy - tl.exp2(y * LOG2E) * tl.sum(dy, axis=1)[:, None]
    else:
        dx = y * (dy - tl.sum(dy * y, axis=1)[:, None])
    if EVEN:
        tl.store(DX + dx_offs, dx.to(DX.dtype.element_ty))
    else:
        tl.store(DX + dx_offs, dx.to(DX.dtype.element_ty), mask=mask)
