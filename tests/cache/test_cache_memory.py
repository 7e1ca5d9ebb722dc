import threading

import pytest
from cache_samples import make_artifact, make_key

from warpforge.cache import KernelArtifact, MemoryTier


def test_hit_miss_and_lru_order_by_entries():
    tier = MemoryTier(max_entries=3, max_bytes=1 << 20)
    keys = [make_key(str(i)) for i in range(4)]
    for key in keys[:3]:
        tier.put(key, make_artifact(key.graph_hash))
    assert tier.get(keys[0]) == make_artifact(keys[0].graph_hash)  # now most recent
    assert tier.put(keys[3], make_artifact(keys[3].graph_hash)) == 1
    assert len(tier) == 3
    assert tier.get(keys[1]) is None  # least recently used went first
    assert all(tier.get(k) is not None for k in (keys[0], keys[2], keys[3]))
    assert tier.stats()["evictions"] == 1


def test_registry_counts_memory_evictions():
    from warpforge.cache import CacheMetrics, KernelRegistry

    metrics = CacheMetrics()
    registry = KernelRegistry(memory=MemoryTier(max_entries=2), metrics=metrics)
    for name in "abcd":
        registry.put(make_key(name), make_artifact(name))
    assert metrics.snapshot()["evictions"]["memory"] == 2


def test_byte_bound_holds_after_every_put():
    one = make_artifact("x", size=1000).nbytes
    tier = MemoryTier(max_entries=100, max_bytes=3 * one)
    for i in range(10):
        tier.put(make_key(str(i)), make_artifact("x", size=1000))
        assert tier.nbytes <= tier.max_bytes
        assert tier.nbytes == sum(a.nbytes for a in tier._entries.values())
    assert len(tier) == 3
    assert [k in tier for k in (make_key("7"), make_key("8"), make_key("9"))] == [True] * 3


def test_oversized_artifact_is_not_kept_and_replacing_updates_bytes():
    tier = MemoryTier(max_entries=10, max_bytes=2000)
    assert make_artifact("small", size=10).nbytes < 2000 < make_artifact("big", size=5000).nbytes
    key = make_key("big")
    tier.put(key, make_artifact("small", size=10))
    small_bytes = tier.nbytes
    tier.put(key, make_artifact("big", size=5000))
    assert tier.get(key) is None and tier.nbytes == 0
    tier.put(key, make_artifact("small", size=10))
    assert tier.nbytes == small_bytes
    assert tier.clear() == 1 and len(tier) == 0 and tier.nbytes == 0


def test_concurrent_puts_and_gets_keep_the_accounting_exact():
    tier = MemoryTier(max_entries=16, max_bytes=1 << 20)
    artifacts = {i: make_artifact(str(i), size=50 + i) for i in range(40)}
    errors = []

    def worker(offset: int) -> None:
        for step in range(400):
            i = (offset * 7 + step) % 40
            key = make_key(str(i))
            got = tier.get(key)
            if got is not None and got != artifacts[i]:
                errors.append(i)
            tier.put(key, artifacts[i])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(tier) == 16
    assert tier.nbytes == sum(a.nbytes for a in tier._entries.values())


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_entries": 0}, ValueError),
        ({"max_bytes": -1}, ValueError),
        ({"max_entries": 1.5}, TypeError),
    ],
)
def test_bounds_are_validated(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        MemoryTier(**kwargs)


def test_put_rejects_non_artifacts():
    with pytest.raises(TypeError, match="artifact: expected a KernelArtifact"):
        MemoryTier().put(make_key("a"), {"kernel.py": b""})
    assert isinstance(make_artifact("a"), KernelArtifact)
