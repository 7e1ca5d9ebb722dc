"""Reductions shared by the norm kernels.

``sum_pair`` sums two tensors along an axis in one ``tl.reduce`` on the GPU: LayerNorm's two row
sums then share the cross-warp exchange (one round of shared memory and barriers instead of
two). Triton's interpreter runs a reduction with a user combine function one element at a time
in Python (about 2 s for a 2048-column chunk of a 65536-column row), so there it takes two
``tl.sum`` calls (NumPy) instead; ``INTERPRETED`` is a compile-time constant, so the GPU's code
is the single reduction alone.
"""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.runtime import interpreter_enabled

INTERPRETED = tl.constexpr(interpreter_enabled())
"""Whether the kernels run under Triton's interpreter; read at import, as Triton reads
``TRITON_INTERPRET`` when it decorates a kernel (``warpforge.runtime`` mirrors
``WARPFORGE_INTERPRET`` into it first)."""


@triton.jit
def add_pair(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def sum_pair(a, b, axis: tl.constexpr):
    """``(tl.sum(a, axis), tl.sum(b, axis))``, one reduction on the GPU."""
    if INTERPRETED:
        first = tl.sum(a, axis)
        second = tl.sum(b, axis)
    else:
        first, second = tl.reduce((a, b), axis, add_pair)
    return first, second


@triton.jit
def shifted_moments(s1, s2, n):
    """(mean - shift, M2, far) of n values from the sums of their deviations from a shift,
    ``s1 = sum(v - shift)`` and ``s2 = sum((v - shift)^2)``, taken in one reduction (with
    ``sum_pair``): M2 = s2 - s1^2 / n. ``far`` where that subtraction loses more than about two
    bits (s1^2 / n above 0.8 s2: the shift more than two standard deviations from the mean);
    callers then take the centred squares in a second reduction instead."""
    cancelled = s1 * s1 / n
    return s1 / n, tl.maximum(s2 - cancelled, 0.0), cancelled > s2 * 0.8
