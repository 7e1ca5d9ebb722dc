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
