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


@triton.jit
def wait_for_row(arrivals_ptr, row, chunks, arrived):
    """Spin until all ``chunks`` programs of ``row`` have bumped its arrival counter, last seen
    at ``arrived`` (acquire; the barrier then lets every thread read what they published)."""
    while arrived < chunks:
        arrived = tl.atomic_add(arrivals_ptr + row, 0)
    tl.debug_barrier()


@triton.jit
def arrive(arrivals_ptr, row):
    """Publish this program's partials of ``row`` (every thread's stores precede the release);
    returns the count of arrived programs, this one included."""
    tl.debug_barrier()
    return tl.atomic_add(arrivals_ptr + row, 1) + 1


@triton.jit
def arrivals_of(arrivals_ptr, row):
    """The count of programs that have arrived at ``row`` so far (acquire)."""
    return tl.atomic_add(arrivals_ptr + row, 0)
