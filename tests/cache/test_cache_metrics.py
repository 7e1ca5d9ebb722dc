import json

import pytest
from cache_samples import make_artifact, make_key

from warpforge.cache import CacheMetrics, KernelRegistry, MemoryTier
from warpforge.cache import metrics as metrics_module
from warpforge.cache.metrics import LOOKUP_BUCKETS_S


def test_snapshot_counts_hits_misses_latency_builds_and_fallbacks():
    metrics = CacheMetrics()
    registry = KernelRegistry(memory=MemoryTier(), metrics=metrics)
    key = make_key("a")
    registry.get_or_build(key, lambda: make_artifact("a"))  # miss + build
    for _ in range(3):
        registry.get(key)  # memory hits
    metrics.record_fallback("triton-compile")
    metrics.record_fallback("triton-compile")
    metrics.record_fallback("codegen")
    snap = metrics.snapshot()
    json.dumps(snap)  # JSON-ready
    assert snap["hits"] == {"memory": 3, "disk": 0, "redis": 0}
    assert snap["misses"] == {"memory": 1, "disk": 0, "redis": 0}
    assert snap["lookups"] == 4 and snap["hit_ratio"] == pytest.approx(0.75)
    memory_hist = snap["lookup_latency"]["memory"]
    assert memory_hist["count"] == 3 and memory_hist["buckets"][-1] == ["+Inf", 3]
    assert [b for b, _ in memory_hist["buckets"][:-1]] == list(LOOKUP_BUCKETS_S)
    counts = [n for _, n in memory_hist["buckets"]]
    assert counts == sorted(counts)  # cumulative
    assert snap["lookup_latency"]["miss"]["count"] == 1
    assert snap["builds"]["count"] == 1 and snap["builds"]["sum_s"] >= 0
    assert snap["fallbacks"] == {"triton-compile": 2, "codegen": 1}


def test_failed_build_is_counted_and_propagates():
    metrics = CacheMetrics()
    registry = KernelRegistry(metrics=metrics)

    def broken():
        raise RuntimeError("codegen exploded")

    with pytest.raises(RuntimeError, match="codegen exploded"):
        registry.get_or_build(make_key("a"), broken)
    with pytest.raises(TypeError, match="build: expected it to return a KernelArtifact"):
        registry.get_or_build(make_key("a"), lambda: {"kernel.py": b""})
    assert metrics.snapshot()["build_failures"] == 2
    assert metrics.snapshot()["builds"]["count"] == 0
    assert registry.get(make_key("a")) is None


def test_histogram_bucket_edges():
    metrics = CacheMetrics()
    metrics.record_lookup("memory", 1_000)  # exactly 1 us: in the first bucket (le)
    metrics.record_lookup("memory", 1_001)
    metrics.record_lookup("memory", 2 * 10**9)  # 2 s: only +Inf
    buckets = metrics.snapshot()["lookup_latency"]["memory"]["buckets"]
    assert buckets[0] == [1e-6, 1] and buckets[1] == [2.5e-6, 2]
    assert buckets[-2] == [1.0, 2] and buckets[-1] == ["+Inf", 3]


def test_prometheus_exposition():
    from prometheus_client import CollectorRegistry, generate_latest

    metrics = CacheMetrics()
    registry = KernelRegistry(metrics=metrics)
    registry.get_or_build(make_key("a"), lambda: make_artifact("a"))
    registry.get(make_key("a"))
    metrics.record_fallback("codegen")
    text = generate_latest(metrics.prometheus_registry()).decode()
    assert 'warpforge_cache_hits_total{tier="memory"} 1.0' in text
    assert 'warpforge_cache_misses_total{tier="memory"} 1.0' in text
    assert 'warpforge_cache_lookup_seconds_bucket{le="+Inf",outcome="memory"} 1.0' in text
    assert 'warpforge_cache_lookup_seconds_count{outcome="miss"} 1.0' in text
    assert "warpforge_cache_build_seconds_count 1.0" in text
    assert 'warpforge_compiler_fallbacks_total{reason="codegen"} 1.0' in text
    metrics.record_first_launch(0.3)
    text = generate_latest(metrics.prometheus_registry()).decode()
    assert 'warpforge_compiler_first_launch_seconds_bucket{le="0.5"} 1.0' in text
    assert "warpforge_compiler_first_launch_seconds_count 1.0" in text
    # Scrapes read live values.
    registry.get(make_key("a"))
    assert (
        'warpforge_cache_hits_total{tier="memory"} 2.0'
        in generate_latest(metrics.register_prometheus(CollectorRegistry())).decode()
    )
    with pytest.raises(
        TypeError, match=r"registry: expected a prometheus_client\.CollectorRegistry"
    ):
        metrics.register_prometheus(object())


def test_module_level_helpers_use_the_process_wide_metrics():
    default = metrics_module.default_metrics()
    before = default.snapshot()["fallbacks"].get("unit-test", 0)
    metrics_module.record_fallback("unit-test")
    assert metrics_module.snapshot()["fallbacks"]["unit-test"] == before + 1
    assert KernelRegistry().metrics is default
    with pytest.raises(TypeError, match="reason: expected a non-empty str"):
        metrics_module.record_fallback("")
    with pytest.raises(ValueError, match="seconds: expected a number >= 0"):
        default.record_build(-1.0)
