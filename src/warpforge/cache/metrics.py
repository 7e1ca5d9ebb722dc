"""Kernel-cache metrics: hits and misses per tier, lookup latency, build and first-launch times,
fallbacks.

Recording is a few integer updates under one lock (the in-memory hit path records on every
lookup, so nothing here allocates or calls into Prometheus). :meth:`CacheMetrics.snapshot`
returns everything as a dict; with ``prometheus-client`` installed the same numbers are exposed
through a collector that reads a snapshot at scrape time.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from typing import Any

from warpforge.optional import require
from warpforge.validation import check_positive, describe

TIERS: tuple[str, ...] = ("memory", "disk", "redis")
# Lookup latency buckets (seconds), 1 us to 1 s: the memory hit lives in the first few, a disk
# hit around 100 us to a few ms, Redis over the network in the ms range.
LOOKUP_BUCKETS_S: tuple[float, ...] = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
    1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
# Build time buckets (seconds), 1 ms to 2 min; also used for first launches (Triton compiles).
BUILD_BUCKETS_S: tuple[float, ...] = (
    1e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
_MAX_REASON = 120


class _Histogram:
    """Cumulative-free bucket counts over fixed upper bounds (nanoseconds for speed)."""

    __slots__ = ("bounds_ns", "bounds_s", "count", "counts", "sum_ns")

    def __init__(self, bounds_s: Sequence[float]) -> None:
        self.bounds_s = tuple(bounds_s)
        self.bounds_ns = tuple(round(b * 1e9) for b in bounds_s)
        self.counts = [0] * (len(bounds_s) + 1)  # the last one is +Inf
        self.count = 0
        self.sum_ns = 0

    def observe_ns(self, value_ns: int) -> None:
        self.counts[bisect.bisect_left(self.bounds_ns, value_ns)] += 1
        self.count += 1
        self.sum_ns += value_ns

    def as_dict(self) -> dict[str, Any]:
        cumulative, running = [], 0
        for bound, n in zip((*self.bounds_s, float("inf")), self.counts, strict=True):
            running += n
            cumulative.append(["+Inf" if bound == float("inf") else bound, running])
        return {"count": self.count, "sum_s": self.sum_ns / 1e9, "buckets": cumulative}


class CacheMetrics:
    """Thread-safe counters and histograms for one or more :class:`KernelRegistry` objects."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Zero everything (tests and benchmarks start from a clean slate)."""
        with self._lock:
            self._hits = dict.fromkeys(TIERS, 0)
            self._misses = dict.fromkeys(TIERS, 0)
            self._errors = dict.fromkeys(TIERS, 0)
            self._corruptions = dict.fromkeys(TIERS, 0)
            self._evictions = dict.fromkeys(TIERS, 0)
            # Lookup latency by outcome: the tier that hit, or "miss".
            self._lookup = {name: _Histogram(LOOKUP_BUCKETS_S) for name in (*TIERS, "miss")}
            self._build = _Histogram(BUILD_BUCKETS_S)
            self._build_failures = 0
            self._first_launch = _Histogram(BUILD_BUCKETS_S)
            self._fallbacks: dict[str, int] = {}
            self._direct_launches: dict[str, int] = {}

    # --- recording (hot path first) ---
    def record_lookup(self, outcome: str, elapsed_ns: int, missed: Sequence[str] = ()) -> None:
        """One registry lookup: ``outcome`` is the tier that hit or ``"miss"``; ``missed`` lists
        the tiers asked before it that did not have the entry."""
        with self._lock:
            for tier in missed:
                self._misses[tier] += 1
            if outcome != "miss":
                self._hits[outcome] += 1
            self._lookup[outcome].observe_ns(elapsed_ns)

    def record_build(self, seconds: float, *, ok: bool = True) -> None:
        """One ``build()`` on a full registry miss, and how long it took. For the blueprint
        compiler that is code generation only: Triton compiles at the first launch, which
        :meth:`record_first_launch` times."""
        seconds = check_positive("seconds", seconds, allow_zero=True)
        with self._lock:
            if ok:
                self._build.observe_ns(round(seconds * 1e9))
            else:
                self._build_failures += 1

    def record_first_launch(self, seconds: float) -> None:
        """A compiled program's first successful launch for one specialisation in this process:
        host time, where Triton compiles the kernels (or loads them from its cache), not
        synchronised with the device."""
        seconds = check_positive("seconds", seconds, allow_zero=True)
        with self._lock:
            self._first_launch.observe_ns(round(seconds * 1e9))

    def record_fallback(self, reason: str) -> None:
        """The compiler ran the PyTorch reference instead of a kernel; ``reason`` is a short
        category (e.g. ``"codegen"``, ``"triton-compile"``), used as a label."""
        if not isinstance(reason, str) or not reason:
            raise TypeError(f"reason: expected a non-empty str, got {describe(reason)}")
        reason = reason[:_MAX_REASON]
        with self._lock:
            self._fallbacks[reason] = self._fallbacks.get(reason, 0) + 1

    def record_direct_launch(self, outcome: str) -> None:
        """A blueprint kernel's recorded Triton binary was ``"loaded"`` for direct launches, or a
        launch went through Triton's JIT instead (``"no-record"``, ``"hooks"``, ``"stale"``,
        ``"error"``); see :mod:`warpforge.blueprint.triton_direct`."""
        with self._lock:
            self._direct_launches[outcome] = self._direct_launches.get(outcome, 0) + 1

    def record_error(self, tier: str) -> None:
        """An I/O or connection error in ``tier`` that was turned into a miss or a skipped put."""
        with self._lock:
            self._errors[tier] += 1

    def record_corruption(self, tier: str) -> None:
        """An entry in ``tier`` failed verification and was quarantined or deleted."""
        with self._lock:
            self._corruptions[tier] += 1

    def record_eviction(self, tier: str, count: int = 1) -> None:
        with self._lock:
            self._evictions[tier] += count

    # --- reading ---
    def snapshot(self) -> dict[str, Any]:
        """Every counter and histogram as JSON-ready values."""
        with self._lock:
            hits, misses = dict(self._hits), dict(self._misses)
            lookups = sum(h.count for h in self._lookup.values())
            full_hits = lookups - self._lookup["miss"].count
            return {
                "hits": hits,
                "misses": misses,
                "errors": dict(self._errors),
                "corruptions": dict(self._corruptions),
                "evictions": dict(self._evictions),
                "lookups": lookups,
                "hit_ratio": (full_hits / lookups) if lookups else None,
                "lookup_latency": {k: h.as_dict() for k, h in self._lookup.items()},
                "builds": self._build.as_dict(),
                "build_failures": self._build_failures,
                "first_launches": self._first_launch.as_dict(),
                "fallbacks": dict(self._fallbacks),
                "direct_launch": dict(self._direct_launches),
            }

    def register_prometheus(self, registry: Any = None) -> Any:
        """Expose these metrics on ``registry`` (a ``prometheus_client.CollectorRegistry``;
        default: prometheus-client's global REGISTRY). Returns the registry."""
        prometheus_client = require(
            "prometheus_client", extra="metrics", feature="Prometheus metrics"
        )
        if registry is None:
            registry = prometheus_client.REGISTRY
        elif not isinstance(registry, prometheus_client.CollectorRegistry):
            raise TypeError(
                f"registry: expected a prometheus_client.CollectorRegistry, got {describe(registry)}"
            )
        registry.register(_PrometheusCollector(self))
        return registry

    def prometheus_registry(self) -> Any:
        """A new ``prometheus_client.CollectorRegistry`` holding only these metrics."""
        prometheus_client = require(
            "prometheus_client", extra="metrics", feature="Prometheus metrics"
        )
        return self.register_prometheus(prometheus_client.CollectorRegistry(auto_describe=True))


class _PrometheusCollector:
    """Turns a snapshot into Prometheus metric families at scrape time."""

    def __init__(self, metrics: CacheMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Any]:
        return []  # families are dynamic (fallback reasons); no duplicate-name checking needed

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        snap = self._metrics.snapshot()
        for name, doc in (
            ("hits", "Kernel cache hits by tier."),
            ("misses", "Kernel cache misses by tier."),
            ("errors", "Kernel cache I/O or connection errors turned into misses, by tier."),
            ("corruptions", "Corrupted kernel cache entries quarantined, by tier."),
            ("evictions", "Kernel cache entries evicted, by tier."),
        ):
            family = CounterMetricFamily(f"warpforge_cache_{name}", doc, labels=["tier"])
            for tier, value in snap[name].items():
                family.add_metric([tier], value)
            yield family
        lookup = HistogramMetricFamily(
            "warpforge_cache_lookup_seconds",
            "Kernel registry lookup latency by outcome (tier that hit, or miss).",
            labels=["outcome"],
        )
        for outcome, hist in snap["lookup_latency"].items():
            lookup.add_metric([outcome], _prom_buckets(hist), sum_value=hist["sum_s"])
        yield lookup
        build = HistogramMetricFamily(
            "warpforge_cache_build_seconds",
            "Kernel build time on a full registry miss (for blueprints: code generation only).",
        )
        build.add_metric([], _prom_buckets(snap["builds"]), sum_value=snap["builds"]["sum_s"])
        yield build
        first = HistogramMetricFamily(
            "warpforge_compiler_first_launch_seconds",
            "Host time of each specialisation's first launch in a process (Triton compiles or "
            "loads from its cache there).",
        )
        launches = snap["first_launches"]
        first.add_metric([], _prom_buckets(launches), sum_value=launches["sum_s"])
        yield first
        failures = CounterMetricFamily(
            "warpforge_cache_build_failures", "Kernel builds that raised an error."
        )
        failures.add_metric([], snap["build_failures"])
        yield failures
        fallbacks = CounterMetricFamily(
            "warpforge_compiler_fallbacks",
            "Calls that ran the PyTorch reference instead of a compiled kernel, by reason.",
            labels=["reason"],
        )
        for reason, value in snap["fallbacks"].items():
            fallbacks.add_metric([reason], value)
        yield fallbacks


def _prom_buckets(hist: dict[str, Any]) -> list[tuple[str, int]]:
    return [
        ("+Inf" if bound == "+Inf" else repr(float(bound)), count)
        for bound, count in hist["buckets"]
    ]


_DEFAULT = CacheMetrics()


def default_metrics() -> CacheMetrics:
    """The process-wide metrics that :meth:`KernelRegistry.default` records into."""
    return _DEFAULT


def record_fallback(reason: str) -> None:
    """Count a compiler fallback on the process-wide metrics."""
    _DEFAULT.record_fallback(reason)


def record_build(seconds: float, *, ok: bool = True) -> None:
    """Count a build on the process-wide metrics."""
    _DEFAULT.record_build(seconds, ok=ok)


def record_first_launch(seconds: float) -> None:
    """Time a compiled program's first launch on the process-wide metrics."""
    _DEFAULT.record_first_launch(seconds)


def snapshot() -> dict[str, Any]:
    """The process-wide metrics as a dict."""
    return _DEFAULT.snapshot()


def prometheus_registry() -> Any:
    """A new ``CollectorRegistry`` exposing the process-wide metrics."""
    return _DEFAULT.prometheus_registry()
