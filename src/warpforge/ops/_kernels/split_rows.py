"""Meeting points of the split-row kernels (``softmax_fwd_split_kernel``,
``cross_entropy_fwd_grad_split_kernel``): the programs that share a row publish partial
statistics in a global workspace and count their arrivals in an int32 counter per row.

The pattern is a grid barrier restricted to one row: every thread's stores, a CTA barrier, one
atomic add (acq_rel at GPU scope, so the stores are released with it); the waiter polls with
atomics (acquire) and a CTA barrier lets every thread read what was published. It terminates
only when all programs of the row are resident at once (see warpforge.ops._split_rows).
"""

from __future__ import annotations

import triton
import triton.language as tl

# A finite "minus infinity" for chunk maxima, so exp(x - max) never sees -inf - -inf.
_NEG_BIG = tl.constexpr(-1.0e30)

LOG2E = tl.constexpr(1.4426950408889634)
"""exp(d) is computed as exp2(d * LOG2E): a single MUFU instruction (tl.exp adds a range check
and two predicated multiplies per element on sm_90, which bf16 rows cannot afford)."""


@triton.jit
def split_place(n_cols, BLOCK: tl.constexpr):
    """Where a program of a split-row launch works: the chunks a row has, the program's chunk
    (``pid % chunks``) and slot (``pid // chunks``; its rows are ``slot, slot + slots, ...``),
    the number of slots, and its chunk's columns with their in-row mask."""
    pid = tl.program_id(0)
    chunks = tl.cdiv(n_cols, BLOCK)
    chunk = pid % chunks
    slot = pid // chunks
    slots = tl.num_programs(0) // chunks
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    return chunks, chunk, slot, slots, cols, cols < n_cols


@triton.jit
def wait_for_row(arrivals_ptr, row, chunks, arrived):
    """Spin until all ``chunks`` programs of ``row`` have bumped its arrival counter, last seen
    at ``arrived`` (acquire; the barrier then lets every thread read what they published).
    Acquire alone, not acq_rel: a release fence before every poll would also wait for this
    program's own loads in flight (the prefetch of its next row)."""
    while arrived < chunks:
        arrived = tl.atomic_add(arrivals_ptr + row, 0, sem="acquire")
    tl.debug_barrier()


@triton.jit
def arrive(arrivals_ptr, row, RELEASE_ONLY: tl.constexpr = False):
    """Publish this program's partials of ``row`` (every thread's stores precede the release);
    returns the count of arrived programs, this one included.

    RELEASE_ONLY: a release, not acq_rel, atomic. Nothing read after the arrival depends on the
    other programs until :func:`wait_for_row` acquires, and an acquire here would hold back the
    loads that follow (the prefetch of the next row) until the atomic returns from L2."""
    tl.debug_barrier()
    if RELEASE_ONLY:
        return tl.atomic_add(arrivals_ptr + row, 1, sem="release") + 1
    return tl.atomic_add(arrivals_ptr + row, 1) + 1


@triton.jit
def chunk_exponentials(x):
    """(max, exp(x - max)) of one chunk held in registers; the max is clamped, so a chunk of
    only -inf gets zero exponentials rather than exp(-inf - -inf) = NaN. The caller keeps the
    exponentials (not x) until it writes its output: one exponential per element in all."""
    chunk_max = tl.maximum(tl.max(x, axis=0), _NEG_BIG)
    return chunk_max, tl.exp2((x - chunk_max) * LOG2E)


@triton.jit
def store_chunk_partials(partial, chunk, chunk_max, exponentials, CHUNKS_POW2: tl.constexpr):
    """Publish one chunk's (max, sum of exp(x - max)) at ``partial + chunk`` and
    ``partial + CHUNKS_POW2 + chunk``; :func:`combined_partials` reads them back."""
    tl.store(partial + chunk, chunk_max)
    tl.store(partial + CHUNKS_POW2 + chunk, tl.sum(exponentials, axis=0))


@triton.jit
def combined_partials(partial, parts, chunks, CHUNKS_POW2: tl.constexpr):
    """(row max, sum of exp(x - row max)) from the chunks' (max, sum of exp) partials at
    ``partial`` and ``partial + CHUNKS_POW2``, read from L2 (.cg: never a stale L1 line of
    another program's store)."""
    maxes = tl.load(partial + parts, mask=parts < chunks, other=float("-inf"), cache_modifier=".cg")
    sums = tl.load(
        partial + CHUNKS_POW2 + parts, mask=parts < chunks, other=0.0, cache_modifier=".cg"
    )
    row_max = tl.max(maxes, axis=0)
    return row_max, tl.sum(sums * tl.exp2((maxes - row_max) * LOG2E), axis=0)


# Meeting without a counter (``cross_entropy_fwd_grad_flags_kernel``): each program writes its
# chunk's two statistics as one 8-byte word into a workspace the caller filled with UNPUBLISHED,
# and the others poll the row's words until none is unpublished: the word is its own flag. The
# counter meeting costs a release fence (it waits for the program's earlier gradient stores to
# drain), the arrival atomic's round trip, a poll and then the partials' load; here the poll is
# the load. Each value travels in one single-copy-atomic write, so no fence orders anything.

UNPUBLISHED = tl.constexpr(-1)  # the host's UNPUBLISHED_WORD (warpforge.ops._split_rows)
"""A chunk's word before its program writes it: all bits set, a NaN pattern in both halves that
:func:`pack_pair` never writes (it writes every NaN as the canonical one)."""

EMPTY_STATS = tl.constexpr(0xFF800000)
"""The word of a chunk past the row's end, read as (max -inf, sum 0): it adds nothing."""


@triton.jit
def pack_pair(lo, hi):
    """Two fp32 values in one int64 (``lo`` in the low half), NaN canonicalised."""
    lo = tl.where(lo == lo, lo, float("nan"))
    hi = tl.where(hi == hi, hi, float("nan"))
    lo_bits = lo.to(tl.uint32, bitcast=True).to(tl.uint64)
    hi_bits = hi.to(tl.uint32, bitcast=True).to(tl.uint64)
    return (lo_bits | (hi_bits << 32)).to(tl.int64, bitcast=True)


@triton.jit
def unpack_pair(words):
    """The (low, high) fp32 halves of :func:`pack_pair` words."""
    lo = (words & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    hi = ((words >> 32) & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    return lo, hi


@triton.jit
def publish_word(word_ptr, lo, hi, STAGE: tl.constexpr):
    """Write one chunk's word: a relaxed atomic exchange when other programs poll it (STAGE 0),
    a plain store for the interpreter's two launches."""
    if STAGE == 0:
        tl.atomic_xchg(word_ptr, pack_pair(lo, hi), sem="relaxed")
    else:
        tl.store(word_ptr, pack_pair(lo, hi))


@triton.jit
def _pending(words):
    return tl.max((words == UNPUBLISHED).to(tl.int32), axis=0)


@triton.jit
def _poll(ptr, lanes, live, empty):
    return tl.load(ptr + lanes, mask=live, other=empty, volatile=True)


@triton.jit
def row_words(words_ptr, more_ptr, lanes, chunks, more_chunks, SECOND: tl.constexpr,
              STAGE: tl.constexpr):  # fmt: skip
    """A row's words, polled with volatile loads until none is UNPUBLISHED when the programs
    meet in one launch (STAGE 0): ``words_ptr[c]`` for the ``chunks`` chunks (EMPTY_STATS past
    them) and ``more_ptr[c]`` for the first ``more_chunks`` (0 past them), as 32-lane vectors
    (``lanes`` = arange(0, 32) or fewer): (words of chunks ``lanes``, of ``32 + lanes``, more of
    ``lanes``, of ``32 + lanes``); with SECOND False the second vectors are empty.

    A vector of at most 32 words sits in every warp's lanes and each warp tests its own copy (a
    longer one would spread over warps, whose test of another warp's copy says nothing of its
    own), so the values a warp goes on with are the ones its test saw published."""
    first = _poll(words_ptr, lanes, lanes < chunks, EMPTY_STATS)
    more_first = _poll(more_ptr, lanes, lanes < more_chunks, 0)
    if SECOND:
        second = _poll(words_ptr + 32, lanes, lanes + 32 < chunks, EMPTY_STATS)
        more_second = _poll(more_ptr + 32, lanes, lanes + 32 < more_chunks, 0)
    else:
        second = tl.full(lanes.shape, EMPTY_STATS, tl.int64)
        more_second = tl.zeros(lanes.shape, tl.int64)
    if STAGE == 0:
        pending = tl.maximum(_pending(first), _pending(more_first))
        if SECOND:
            pending = tl.maximum(pending, tl.maximum(_pending(second), _pending(more_second)))
        while pending > 0:
            first = _poll(words_ptr, lanes, lanes < chunks, EMPTY_STATS)
            more_first = _poll(more_ptr, lanes, lanes < more_chunks, 0)
            pending = tl.maximum(_pending(first), _pending(more_first))
            if SECOND:
                second = _poll(words_ptr + 32, lanes, lanes + 32 < chunks, EMPTY_STATS)
                more_second = _poll(more_ptr + 32, lanes, lanes + 32 < more_chunks, 0)
                pending = tl.maximum(pending, tl.maximum(_pending(second), _pending(more_second)))
    return first, second, more_first, more_second


@triton.jit
def word_lanes(CHUNKS_POW2: tl.constexpr):
    """The lanes a row's words are polled in: ``CHUNKS_POW2`` of them, or 32 where a row has
    more chunks (then two vectors of 32 words, see :func:`row_words`)."""
    LANES: tl.constexpr = 32 if CHUNKS_POW2 > 32 else CHUNKS_POW2
    return tl.arange(0, LANES)


@triton.jit
def look_at_words(words_ptr, lanes, chunks, SECOND: tl.constexpr):
    """A first look at a row's words, not waiting (the lagged kernels issue it early so the
    answer travels while other loads land): (words of chunks ``lanes``, of ``32 + lanes``),
    EMPTY_STATS past the row's chunks (and as the whole second vector without SECOND)."""
    first = _poll(words_ptr, lanes, lanes < chunks, EMPTY_STATS)
    if SECOND:
        second = _poll(words_ptr + 32, lanes, lanes + 32 < chunks, EMPTY_STATS)
    else:
        second = tl.full(lanes.shape, EMPTY_STATS, tl.int64)
    return first, second


@triton.jit
def await_words(words_ptr, lanes, chunks, first, second, SECOND: tl.constexpr):
    """:func:`look_at_words`'s (first, second), polled again until no word is UNPUBLISHED (the
    one-launch path, STAGE 0; see :func:`row_words` for why a vector is at most 32 words)."""
    pending = _pending(first)
    if SECOND:
        pending = tl.maximum(pending, _pending(second))
    while pending > 0:
        first = _poll(words_ptr, lanes, lanes < chunks, EMPTY_STATS)
        pending = _pending(first)
        if SECOND:
            second = _poll(words_ptr + 32, lanes, lanes + 32 < chunks, EMPTY_STATS)
            pending = tl.maximum(pending, _pending(second))
    return first, second


@triton.jit
def combined_words(stats, stats_2):
    """(row max, sum of exp(x - row max)) of a row from its chunks' (max, sum of exp) words
    (two vectors; a word past the row's end, EMPTY_STATS, reads as (-inf, 0) and adds nothing)."""
    maxes, sums = unpack_pair(stats)
    maxes_2, sums_2 = unpack_pair(stats_2)
    row_max = tl.maximum(tl.max(maxes, axis=0), tl.max(maxes_2, axis=0))
    total = tl.sum(sums * tl.exp2((maxes - row_max) * LOG2E), axis=0) + tl.sum(
        sums_2 * tl.exp2((maxes_2 - row_max) * LOG2E), axis=0
    )
    return row_max, total
