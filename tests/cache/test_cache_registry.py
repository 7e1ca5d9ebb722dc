import logging
import threading
import time

import pytest
from cache_samples import make_artifact, make_key

from warpforge.cache import CacheMetrics, DiskTier, KernelRegistry, MemoryTier
from warpforge.cache.registry import env_size


@pytest.fixture
def registry(tmp_path) -> KernelRegistry:
    return KernelRegistry(
        memory=MemoryTier(), disk=DiskTier(tmp_path / "kernels"), metrics=CacheMetrics()
    )


def test_disk_hit_is_promoted_to_memory(registry):
    key = make_key("a")
    registry.disk.put(key, make_artifact("a"))
    assert key not in registry.memory
    assert registry.get(key) == make_artifact("a")
    assert key in registry.memory
    assert registry.get(key) == make_artifact("a")
    snap = registry.metrics.snapshot()
    assert snap["hits"] == {"memory": 1, "disk": 1, "redis": 0}
    assert snap["misses"]["memory"] == 1 and snap["misses"]["disk"] == 0


def test_put_stores_in_every_tier_and_get_or_build_builds_once(registry):
    key = make_key("a")
    calls = []
    for _ in range(3):
        got = registry.get_or_build(key, lambda: calls.append(1) or make_artifact("a"))
        assert got == make_artifact("a")
    assert calls == [1]
    assert key in registry.memory and key in registry.disk
    assert registry.put(make_key("b"), make_artifact("b")) == {"memory": True, "disk": True}


def test_threads_missing_the_same_key_build_it_once(registry):
    key = make_key("slow")
    calls = []
    barrier = threading.Barrier(8)
    results = []

    def build():
        calls.append(threading.get_ident())
        time.sleep(0.05)
        return make_artifact("slow")

    def worker():
        barrier.wait()
        results.append(registry.get_or_build(key, build))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert results == [make_artifact("slow")] * 8
    assert registry._build_locks == {}  # per-key locks are dropped once unused


def test_an_entry_another_process_publishes_after_the_miss_is_a_disk_hit(registry, tmp_path):
    """Between this process's miss and its build lock another process publishes the entry on
    disk: no build, a disk hit counted, and the entry kept in memory (the next call is a
    memory hit, not a second read and check of the disk entry)."""
    key = make_key("a")
    other_process = KernelRegistry(
        memory=MemoryTier(), disk=DiskTier(tmp_path / "kernels"), metrics=CacheMetrics()
    )
    first_lookup = registry.get

    def miss_then_the_other_publishes(k):
        found = first_lookup(k)
        other_process.put(k, make_artifact("a"))
        return found

    registry.get = miss_then_the_other_publishes
    got = registry.get_or_build(key, lambda: pytest.fail("built what the disk tier held"))
    assert got == make_artifact("a") and key in registry.memory
    snap = registry.metrics.snapshot()
    assert snap["builds"]["count"] == 0
    assert snap["hits"] == {"memory": 0, "disk": 1, "redis": 0}
    assert snap["misses"]["disk"] == 1  # the first lookup's


def test_a_thread_waiting_on_anothers_build_counts_a_memory_hit(registry):
    """A waiter that finds the entry the builder put in memory records that hit."""
    key = make_key("a")
    first_lookup = registry.get

    def miss_then_another_thread_builds(k):
        found = first_lookup(k)
        registry.memory.put(k, make_artifact("a"))
        return found

    registry.get = miss_then_another_thread_builds
    assert registry.get_or_build(key, lambda: pytest.fail("built twice")) == make_artifact("a")
    snap = registry.metrics.snapshot()
    assert snap["hits"]["memory"] == 1 and snap["builds"]["count"] == 0


def test_different_keys_build_in_parallel(registry):
    started = threading.Barrier(2, timeout=5)

    def build(name):
        started.wait()  # deadlocks (BrokenBarrierError) if builds of different keys serialise
        return make_artifact(name)

    threads = [
        threading.Thread(target=registry.get_or_build, args=(make_key(n), lambda n=n: build(n)))
        for n in "ab"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert registry.get(make_key("a")) == make_artifact("a")
    assert registry.get(make_key("b")) == make_artifact("b")


def test_clear_per_tier_and_all(registry):
    for name in "abc":
        registry.put(make_key(name), make_artifact(name))
    assert registry.clear("memory") == {"memory": 3}
    assert registry.get(make_key("a")) == make_artifact("a")  # from disk again
    assert registry.clear() == {"memory": 1, "disk": 3}
    assert registry.get(make_key("a")) is None
    with pytest.raises(
        ValueError, match=r"tier: expected one of \['memory', 'disk', 'redis', 'all'\]"
    ):
        registry.clear("gpu")


def test_verify_and_stats(registry):
    registry.put(make_key("a"), make_artifact("a"))
    report = registry.verify()
    assert report.clean and report.checked == 1 and report.as_dict()["corrupted"] == []
    stats = registry.stats()
    assert stats["disk"]["entries"] == 1 and stats["memory"]["entries"] == 1
    assert stats["redis"] is None and "hits" in stats["metrics"]
    memory_only = KernelRegistry(metrics=CacheMetrics())
    assert memory_only.verify().root is None and memory_only.stats()["disk"] is None


def test_from_environment_reads_every_setting(tmp_path, monkeypatch):
    monkeypatch.setattr(KernelRegistry, "_default", None)  # restored after the test
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path / "wf"))
    monkeypatch.setenv("WARPFORGE_CACHE_MAX_BYTES", "3M")
    monkeypatch.setenv("WARPFORGE_CACHE_MEMORY_MAX_BYTES", "64KiB")
    monkeypatch.setenv("WARPFORGE_CACHE_MEMORY_MAX_ENTRIES", "7")
    monkeypatch.setenv("WARPFORGE_REDIS_URL", "redis://127.0.0.1:1/0")
    registry = KernelRegistry.from_environment()
    assert registry.disk.root == tmp_path / "wf" / "kernels"
    assert registry.disk.max_bytes == 3 * 1024**2
    assert (registry.memory.max_bytes, registry.memory.max_entries) == (64 * 1024, 7)
    assert registry.redis.url == "redis://127.0.0.1:1/0"
    default = KernelRegistry.default(refresh=True)
    assert KernelRegistry.default() is default
    monkeypatch.delenv("WARPFORGE_REDIS_URL")
    assert KernelRegistry.default(refresh=True).redis is None


@pytest.mark.parametrize("raw", ["lots", "0", "-5", "1.5G"])
def test_bad_size_settings_name_the_variable(monkeypatch, raw):
    monkeypatch.setenv("WARPFORGE_CACHE_MAX_BYTES", raw)
    with pytest.raises(
        ValueError, match="WARPFORGE_CACHE_MAX_BYTES: expected a positive byte count"
    ):
        KernelRegistry.from_environment()
    assert env_size("WARPFORGE_UNSET_FOR_TEST", 5) == 5


def test_argument_types_are_checked(registry, tmp_path):
    with pytest.raises(TypeError, match="key: expected a CacheKey, got str"):
        registry.get("a" * 64)
    with pytest.raises(TypeError, match="artifact: expected a KernelArtifact"):
        registry.put(make_key("a"), b"bytes")
    with pytest.raises(TypeError, match="build: expected a callable"):
        registry.get_or_build(make_key("a"), make_artifact("a"))
    with pytest.raises(TypeError, match="disk: expected a DiskTier or None"):
        KernelRegistry(disk=str(tmp_path))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("notaurl", "no scheme"),
        ("http://host:6379/0", "scheme 'http'"),
        ("redis://host:port/0", "Port could not be cast"),
    ],
)
def test_an_unusable_redis_url_turns_the_redis_tier_off_with_one_warning(
    tmp_path, monkeypatch, caplog, raw, reason
):
    from warpforge.cache import registry as registry_module

    monkeypatch.setattr(registry_module, "_WARNED_REDIS_URLS", set())
    monkeypatch.setenv("WARPFORGE_REDIS_URL", raw)
    with caplog.at_level(logging.WARNING, logger="warpforge.cache.registry"):
        first = KernelRegistry.from_environment()
        KernelRegistry.from_environment()
    assert first.redis is None and first.disk is not None
    first.put(make_key("a"), make_artifact("a"))  # memory and disk keep working
    assert first.disk.get(make_key("a")) == make_artifact("a")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "WARPFORGE_REDIS_URL" in warning and repr(raw) in warning and reason in warning
    assert "expected a redis://, rediss:// or unix:// URL" in warning
    with pytest.raises(ValueError, match=f"WARPFORGE_REDIS_URL: expected .* got '{raw}'"):
        KernelRegistry.from_environment(strict=True)


def test_a_valid_but_unreachable_redis_url_is_a_miss_not_an_error(monkeypatch):
    monkeypatch.setenv("WARPFORGE_REDIS_URL", "redis://127.0.0.1:1/0")
    registry = KernelRegistry.from_environment(strict=True)
    assert registry.redis is not None
    registry.metrics = registry.redis.metrics = CacheMetrics()
    got = registry.get_or_build(make_key("a"), lambda: make_artifact("a"))
    assert got == make_artifact("a") and registry.redis.errors == 1
    assert registry.metrics.snapshot()["misses"]["redis"] == 1
