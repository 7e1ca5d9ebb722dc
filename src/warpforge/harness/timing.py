"""Timing a callable honestly: events around each call, L2 flushed, inputs rotated, noise reported.

Measurement is separate from reporting: :func:`measure` returns a :class:`Measurement` holding the
raw samples and their summary; reports decide how to show them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# Captured at import, before any candidate code is loaded, so a candidate that patches these
# afterwards cannot change what the harness measures with (checked by `timers_untouched`).
_perf_counter = time.perf_counter
_cuda_synchronize = torch.cuda.synchronize
_cuda_event = torch.cuda.Event

WARMUP_CALLS = 3
"""Fixed warm-up count: independent of the candidate's speed, so a slow first call can't hide."""


@dataclass(frozen=True)
class Measurement:
    """Per-call times of one callable, in seconds, with their summary."""

    samples_s: tuple[float, ...]
    median_s: float
    ci_low_s: float
    ci_high_s: float
    rel_stderr: float
    clock: str
    """``"cuda-events"`` or ``"cpu-wall"``."""
    cold: bool
    """True when L2 was flushed before every call (GPU)."""
    wall_total_s: float
    """Host wall-clock over the whole timed loop, for the event cross-check."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def samples(self) -> int:
        return len(self.samples_s)

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_s": self.median_s,
            "ci95_s": [self.ci_low_s, self.ci_high_s],
            "rel_stderr": self.rel_stderr,
            "samples": self.samples,
            "clock": self.clock,
            "cold": self.cold,
            "wall_total_s": self.wall_total_s,
            "notes": list(self.notes),
        }


def bootstrap_median_ci(
    samples: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(medians, alpha)), float(np.quantile(medians, 1.0 - alpha))


def relative_stderr_of_median(samples: Sequence[float]) -> float:
    """Standard error of the median (1.2533 * sd / sqrt(n)) relative to the median."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size < 2:
        return math.inf
    median = float(np.median(data))
    if median <= 0:
        return math.inf
    return float(1.2533 * data.std(ddof=1) / math.sqrt(data.size) / median)


class L2Flusher:
    """Evicts the GPU's L2 by writing a buffer of at least twice its size."""

    def __init__(self, device: torch.device, l2_bytes: int | None) -> None:
        size = max(2 * (l2_bytes or 50 * 2**20), 64 * 2**20)
        self._buffer = torch.empty(size // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self._buffer.zero_()


def _summarise(
    samples: list[float], clock: str, cold: bool, wall: float, notes: list[str]
) -> Measurement:
    low, high = bootstrap_median_ci(samples)
    return Measurement(
        samples_s=tuple(samples),
        median_s=float(np.median(samples)),
        ci_low_s=low,
        ci_high_s=high,
        rel_stderr=relative_stderr_of_median(samples),
        clock=clock,
        cold=cold,
        wall_total_s=wall,
        notes=tuple(notes),
    )


def measure(
    fn: Callable[..., Any],
    input_sets: Sequence[tuple[Any, ...]],
    *,
    cold: bool = True,
    min_samples: int = 10,
    max_samples: int = 1000,
    max_time_s: float = 2.0,
    target_rel_stderr: float = 0.01,
    warmup: int = WARMUP_CALLS,
) -> Measurement:
    """Time ``fn(*inputs)`` per call, rotating through ``input_sets``.

    On CUDA: each call is bracketed by events after a device-wide synchronisation (so work queued
    on any stream counts), L2 is flushed before each call when ``cold``. Sampling stops once the
    median's relative standard error is under ``target_rel_stderr`` (after ``min_samples``) or
    ``max_time_s`` of wall time has passed. On CPU the host clock is used.
    """
    if not input_sets:
        raise ValueError("input_sets: expected at least one set of inputs, got none")
    if min_samples < 2:
        raise ValueError(f"min_samples: expected >= 2, got {min_samples}")
    device = _first_device(input_sets[0])
    on_gpu = device is not None and device.type == "cuda"
    notes: list[str] = []

    for i in range(warmup):
        fn(*input_sets[i % len(input_sets)])
    if on_gpu:
        _cuda_synchronize()

    flush: Callable[[], None] | None = None
    if on_gpu and cold:
        props = torch.cuda.get_device_properties(device)
        flush = L2Flusher(device, getattr(props, "L2_cache_size", None))
    if not on_gpu and cold:
        notes.append("cpu: no L2 flush")

    samples: list[float] = []
    start_wall = _perf_counter()
    while len(samples) < max_samples:
        inputs = input_sets[len(samples) % len(input_sets)]
        if on_gpu:
            if flush is not None:
                flush()
            begin, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
            _cuda_synchronize()
            begin.record()
            fn(*inputs)
            end.record()
            _cuda_synchronize()
            samples.append(begin.elapsed_time(end) / 1e3)
        else:
            t0 = _perf_counter()
            fn(*inputs)
            samples.append(_perf_counter() - t0)
        elapsed = _perf_counter() - start_wall
        if len(samples) >= min_samples and (
            relative_stderr_of_median(samples) < target_rel_stderr or elapsed > max_time_s
        ):
            break
    wall = _perf_counter() - start_wall
    if relative_stderr_of_median(samples) >= target_rel_stderr:
        notes.append(
            f"relative standard error {relative_stderr_of_median(samples):.2%} above target "
            f"{target_rel_stderr:.0%} when the time budget ran out"
        )
    if on_gpu and sum(samples) > wall * 1.05:
        notes.append("event time exceeds host wall-clock: clock tampering suspected")
    return _summarise(
        samples, "cuda-events" if on_gpu else "cpu-wall", on_gpu and cold, wall, notes
    )


def timers_untouched() -> bool:
    """True when the timing functions are still the ones captured before any candidate loaded."""
    return (
        time.perf_counter is _perf_counter
        and torch.cuda.synchronize is _cuda_synchronize
        and torch.cuda.Event is _cuda_event
    )


def _first_device(inputs: tuple[Any, ...]) -> torch.device | None:
    for value in inputs:
        if isinstance(value, torch.Tensor):
            return value.device
    return None
