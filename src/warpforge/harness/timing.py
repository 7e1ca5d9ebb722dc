"""Timing a callable honestly: events around each call, L2 flushed, inputs rotated, noise reported.

Measurement is separate from reporting: :func:`measure` returns a :class:`Measurement` holding the
raw samples and their summary; reports decide how to show them.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# Captured at import, before any candidate code is loaded, so a candidate that patches these
# afterwards cannot change what the harness measures with (checked by `timers_untouched`).
_perf_counter = time.perf_counter
_cuda_synchronize = torch.cuda.synchronize
_cuda_event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed_time = torch.cuda.Event.elapsed_time

WARMUP_CALLS = 3
MIN_SAMPLES = 30
"""Samples per contender before the stopping rule may end timing: a median of 10 cold samples of
a ~25 us kernel moved by ~2% between two runs on the H100; 30 cost under 10 ms for such a kernel."""
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
    warmup: int = WARMUP_CALLS
    """Untimed calls made first (fixed, whatever the callable's speed)."""
    cuda_graph: bool = False
    """True when samples are replays of a captured CUDA graph (divided by its call count)."""
    clocks_mhz: tuple[int, ...] = ()
    """SM clocks sampled through NVML during the loop (empty when NVML is unavailable)."""
    throttled_samples: int = 0
    """Clock samples taken while NVML reported power/thermal throttling."""
    event_wall_consistent: bool = True
    """False when event time exceeded the host clock over the same calls (tampering)."""
    host_enqueue_s: float | None = None
    """Median host time to enqueue one call (Python, dispatch, launches): what an eager caller
    pays on the CPU, reported beside the device time rather than hidden in it."""
    launch_bound_samples: int = 0
    """GPU samples whose enqueue outlasted the hold kernel: the device may have waited on the host
    during them, so their event time includes host overhead."""

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
            "warmup": self.warmup,
            "cuda_graph": self.cuda_graph,
            "clock_mhz": (
                {"min": min(self.clocks_mhz), "max": max(self.clocks_mhz)}
                if self.clocks_mhz
                else None
            ),
            "throttled_samples": self.throttled_samples,
            "event_wall_consistent": self.event_wall_consistent,
            "host_enqueue_s": self.host_enqueue_s,
            "launch_bound_samples": self.launch_bound_samples,
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


class LaunchHold:
    """Holds the stream busy while the host enqueues the timed call, so events time the device.

    Without it, a call whose Python and launch overhead exceeds its GPU work is timed as host
    latency: the device idles between ``begin`` and the first kernel. A spin kernel
    (``torch.cuda._sleep``) queued before ``begin`` lets the host get ahead, as nvbench's blocking
    kernel does. The hold is sized from the measured enqueue time; samples whose enqueue outlasts
    it are counted (``launch_bound_samples``), never silently mixed in.
    """

    MAX_HOLD_S = 0.02

    def __init__(self) -> None:
        # calibrate the spin: cycles per second on this device and clock
        cycles = 2_000_000
        begin, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
        torch.cuda._sleep(cycles // 10)  # warm the kernel
        begin.record()
        torch.cuda._sleep(cycles)
        end.record()
        _cuda_synchronize()
        self._cycles_per_s = cycles / max(begin.elapsed_time(end) / 1e3, 1e-6)
        self.hold_s = 50e-6

    def fit(self, enqueue_s: Sequence[float]) -> None:
        """Size the hold to 2x the slowest enqueue seen (at least 50 us, at most 20 ms)."""
        if enqueue_s:
            self.hold_s = min(max(2.0 * max(enqueue_s), 50e-6), self.MAX_HOLD_S)

    def __call__(self) -> None:
        torch.cuda._sleep(int(self.hold_s * self._cycles_per_s))


def _summarise(
    samples: list[float],
    clock: str,
    cold: bool,
    wall: float,
    notes: list[str],
    **extra: Any,
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
        **extra,
    )


OutputHook = Callable[[str, tuple[Any, ...], Any], None]
"""``on_output(name, inputs, output)``: sees every output produced while timing (check 11)."""

GRAPH_CALLS = 10
"""Calls captured per CUDA graph in graph mode; a sample is one replay divided by this."""

# NVML clock-event reasons that mean the clocks were held down (power, thermal, slowdown).
_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


class ClockSampler:
    """SM clock and throttle state through NVML (nvidia-ml-py), imported lazily.

    ``available`` is False (and samples are empty) when NVML or the package is missing.
    """

    def __init__(self, device: torch.device) -> None:
        self.available = False
        self.clocks_mhz: list[int] = []
        self.throttled = 0
        try:
            import pynvml

            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._reasons = getattr(
                pynvml,
                "nvmlDeviceGetCurrentClocksEventReasons",
                getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None),
            )
            self.available = True
        except Exception:  # no NVML here: timings still stand, clocks are just not recorded
            self.available = False

    def sample(self) -> None:
        if not self.available:
            return
        try:
            self.clocks_mhz.append(
                int(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
            )
            if self._reasons is not None and int(self._reasons(self._handle)) & _THROTTLE_MASK:
                self.throttled += 1
        except Exception:  # a transient NVML error loses one clock sample, not the run
            pass


class _Contender:
    """One callable being timed: its samples and, in graph mode, its captured graphs."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn
        self.samples: list[float] = []
        self.host_s: list[float] = []
        self.enqueue_s: list[float] = []
        self.launch_bound = 0
        self.graphs: dict[int, tuple[Any, Any]] = {}
        self.notes: list[str] = []


def _capture_graph(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> tuple[Any, Any]:
    """A CUDA graph of ``GRAPH_CALLS`` calls of ``fn(*inputs)`` and its (static) output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = None
        for _ in range(GRAPH_CALLS):
            out = fn(*inputs)
    return graph, out


def measure_interleaved(
    fns: Mapping[str, Callable[..., Any]],
    input_sets: Sequence[tuple[Any, ...]],
    *,
    cold: bool = True,
    min_samples: int = MIN_SAMPLES,
    max_samples: int = 1000,
    max_time_s: float = 2.0,
    target_rel_stderr: float = 0.01,
    warmup: int = WARMUP_CALLS,
    cuda_graph: bool = False,
    on_output: OutputHook | None = None,
    seed: int | None = None,
) -> dict[str, Measurement]:
    """Time several callables in the same run, one sample each per round, in shuffled order.

    Interleaving means a clock change or a noisy neighbour hits every contender alike, so their
    ratio stays honest. Round ``r`` uses ``input_sets[r % len(input_sets)]`` for everyone.

    On CUDA each call is bracketed by events after a device-wide synchronisation (work queued on
    any stream counts) and a :class:`LaunchHold` spin (so the events time the device, and the
    host's enqueue time is reported separately as ``host_enqueue_s``), the host clock brackets
    the same span as a cross-check, L2 is flushed
    before each call when ``cold``, and NVML clocks are sampled (``nvidia-ml-py``) with throttled
    samples counted. ``cuda_graph`` replays a graph of ``GRAPH_CALLS`` calls per sample, for
    microsecond kernels where launch overhead would dominate. On CPU the host clock is used.

    Sampling stops once every contender has ``min_samples`` and a median relative standard
    error under ``target_rel_stderr``, or the ``max_time_s`` budget (shared) is spent.
    """
    if not fns:
        raise ValueError("fns: expected at least one callable to time, got none")
    if not input_sets:
        raise ValueError("input_sets: expected at least one set of inputs, got none")
    if min_samples < 2:
        raise ValueError(f"min_samples: expected >= 2, got {min_samples}")
    if max_samples < min_samples:
        raise ValueError(f"max_samples: expected >= min_samples ({min_samples}), got {max_samples}")
    if max_time_s <= 0:
        raise ValueError(f"max_time_s: expected a number > 0, got {max_time_s!r}")
    if warmup < 0:
        raise ValueError(f"warmup: expected >= 0, got {warmup}")
    device = _first_device(input_sets[0])
    on_gpu = device is not None and device.type == "cuda"
    if cuda_graph and not on_gpu:
        raise ValueError("cuda_graph: CUDA graphs need CUDA inputs; got inputs on the CPU")
    contenders = [_Contender(name, fn) for name, fn in fns.items()]
    notes: list[str] = []
    rng = random.Random(seed)

    warmup_enqueue: list[float] = []
    for contender in contenders:
        for i in range(warmup):
            inputs = input_sets[i % len(input_sets)]
            t0 = _perf_counter()
            out = contender.fn(*inputs)
            warmup_enqueue.append(_perf_counter() - t0)
            if on_output is not None:
                on_output(contender.name, inputs, out)
    if on_gpu:
        _cuda_synchronize()
    if cuda_graph:
        for contender in contenders:
            for index, inputs in enumerate(input_sets):
                try:
                    contender.graphs[index] = _capture_graph(contender.fn, inputs)
                except Exception as exc:  # not capturable: time it eagerly and say so
                    contender.notes.append(f"cuda graph capture failed ({exc}); timed eagerly")
                    contender.graphs.clear()
                    break
        _cuda_synchronize()

    flush: Callable[[], None] | None = None
    clocks: ClockSampler | None = None
    hold: LaunchHold | None = None
    if on_gpu:
        props = torch.cuda.get_device_properties(device)
        if cold:
            flush = L2Flusher(device, getattr(props, "L2_cache_size", None))
        clocks = ClockSampler(device)
        if not clocks.available:
            notes.append("nvml unavailable: clocks not sampled")
        hold = LaunchHold()
        # the first warm-up call compiles; size the hold from the later ones
        hold.fit(warmup_enqueue[1:] if len(warmup_enqueue) > 1 else warmup_enqueue)
    elif cold:
        notes.append("cpu: no L2 flush")

    def done(elapsed: float) -> bool:
        counts = [len(c.samples) for c in contenders]
        if min(counts) < min_samples:
            return min(counts) >= max_samples
        if max(counts) >= max_samples or elapsed > max_time_s:
            return True
        return all(relative_stderr_of_median(c.samples) < target_rel_stderr for c in contenders)

    start_wall = _perf_counter()
    round_index = 0
    while True:
        index = round_index % len(input_sets)
        inputs = input_sets[index]
        order = list(contenders)
        if len(order) > 1:
            rng.shuffle(order)
        for contender in order:
            graph = contender.graphs.get(index)
            if on_gpu:
                if flush is not None:
                    flush()
                begin, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
                _cuda_synchronize()
                assert hold is not None
                hold()
                t0 = _perf_counter()
                begin.record()
                if graph is not None:
                    graph[0].replay()
                    out = graph[1]
                else:
                    out = contender.fn(*inputs)
                end.record()
                enqueue = _perf_counter() - t0
                _cuda_synchronize()
                host = _perf_counter() - t0
                if enqueue > hold.hold_s:
                    contender.launch_bound += 1
                sample = begin.elapsed_time(end) / 1e3
                if graph is not None:
                    sample, host = sample / GRAPH_CALLS, host / GRAPH_CALLS
                    enqueue /= GRAPH_CALLS
                contender.enqueue_s.append(enqueue)
                if clocks is not None and round_index % 4 == 0:
                    clocks.sample()
            else:
                t0 = _perf_counter()
                out = contender.fn(*inputs)
                sample = host = _perf_counter() - t0
            contender.samples.append(sample)
            contender.host_s.append(host)
            if on_output is not None:
                on_output(contender.name, inputs, out)
        round_index += 1
        if done(_perf_counter() - start_wall):
            break

    results: dict[str, Measurement] = {}
    for contender in contenders:
        own = [*notes, *contender.notes]
        rse = relative_stderr_of_median(contender.samples)
        if rse >= target_rel_stderr:
            own.append(
                f"relative standard error {rse:.2%} above target {target_rel_stderr:.0%} "
                "when the time budget ran out"
            )
        if contender.launch_bound:
            own.append(
                f"{contender.launch_bound} of {len(contender.samples)} samples launch-bound: "
                "host enqueue outlasted the hold, so those include host overhead"
            )
        wall = float(sum(contender.host_s))
        consistent = not (on_gpu and sum(contender.samples) > wall * 1.05)
        if not consistent:
            own.append("event time exceeds host wall-clock: clock tampering suspected")
        results[contender.name] = _summarise(
            contender.samples,
            "cuda-events" if on_gpu else "cpu-wall",
            on_gpu and cold,
            wall,
            own,
            warmup=warmup,
            cuda_graph=bool(contender.graphs),
            clocks_mhz=tuple(clocks.clocks_mhz) if clocks is not None else (),
            throttled_samples=clocks.throttled if clocks is not None else 0,
            event_wall_consistent=consistent,
            host_enqueue_s=float(np.median(contender.enqueue_s)) if contender.enqueue_s else None,
            launch_bound_samples=contender.launch_bound,
        )
    return results


def measure(
    fn: Callable[..., Any],
    input_sets: Sequence[tuple[Any, ...]],
    *,
    cold: bool = True,
    min_samples: int = MIN_SAMPLES,
    max_samples: int = 1000,
    max_time_s: float = 2.0,
    target_rel_stderr: float = 0.01,
    warmup: int = WARMUP_CALLS,
    cuda_graph: bool = False,
    on_output: OutputHook | None = None,
) -> Measurement:
    """Time ``fn(*inputs)`` per call, rotating through ``input_sets``.

    The one-callable case of :func:`measure_interleaved` (same method, same stopping rule).
    """
    return measure_interleaved(
        {"fn": fn},
        input_sets,
        cold=cold,
        min_samples=min_samples,
        max_samples=max_samples,
        max_time_s=max_time_s,
        target_rel_stderr=target_rel_stderr,
        warmup=warmup,
        cuda_graph=cuda_graph,
        on_output=on_output,
    )["fn"]


def timers_untouched() -> bool:
    """True when the timing functions are still the ones captured before any candidate loaded."""
    return (
        time.perf_counter is _perf_counter
        and torch.cuda.synchronize is _cuda_synchronize
        and torch.cuda.Event is _cuda_event
        and torch.cuda.Event.record is _event_record
        and torch.cuda.Event.elapsed_time is _event_elapsed_time
    )


def _first_device(inputs: tuple[Any, ...]) -> torch.device | None:
    for value in inputs:
        if isinstance(value, torch.Tensor):
            return value.device
    return None
