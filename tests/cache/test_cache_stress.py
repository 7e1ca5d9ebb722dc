"""Many processes compiling the same kernels into one cache directory at once."""

from __future__ import annotations

import multiprocessing
import random
import time

from cache_samples import make_artifact, make_key

from warpforge.cache import CacheMetrics, DiskTier, KernelRegistry, MemoryTier

PROCESSES = 6
NAMES = [f"k{i}" for i in range(6)]


def _worker(stores: list[tuple[str, int]], seed: int, barrier, results) -> None:
    for root, max_bytes in stores:
        barrier.wait()
        results.put(_hammer(root, max_bytes, seed))


def _hammer(root: str, max_bytes: int, seed: int) -> dict:
    rng = random.Random(seed)
    builds, wrong, corruptions = 0, [], 0
    for _ in range(4):
        # A new registry each round: its empty memory tier forces reads from the shared disk.
        metrics = CacheMetrics()
        registry = KernelRegistry(
            memory=MemoryTier(), disk=DiskTier(root, max_bytes=max_bytes), metrics=metrics
        )
        for name in rng.sample(NAMES, len(NAMES)):

            def build(name: str = name) -> object:
                nonlocal builds
                builds += 1
                time.sleep(rng.uniform(0, 0.003))  # widen the race between writers
                return make_artifact(name, size=3000)

            got = registry.get_or_build(make_key(name), build)
            if got != make_artifact(name, size=3000):
                wrong.append(name)
        corruptions += metrics.snapshot()["corruptions"]["disk"]
    return {"root": root, "builds": builds, "wrong": wrong, "corruptions": corruptions}


def _run(stores: list[tuple[str, int]]) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(stores, seed, barrier, results))
        for seed in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=120) for _ in range(len(procs) * len(stores))]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return out


def test_processes_racing_on_one_cache_dir_all_get_correct_kernels(tmp_path):
    probe = DiskTier(tmp_path / "probe")
    probe.put(make_key("k0"), make_artifact("k0", size=3000))
    entry_bytes = probe.stats()["bytes"]
    roomy = (str(tmp_path / "roomy"), 1 << 24)
    # Room for half the kernels, so eviction runs while other processes read and write.
    evicting = (str(tmp_path / "evicting"), entry_bytes * 3 + 100)
    results = _run([roomy, evicting])
    assert all(r["wrong"] == [] for r in results), results
    # Eviction racing a read is a miss, never a reported corruption.
    assert all(r["corruptions"] == 0 for r in results), results
    for root, max_bytes in (roomy, evicting):
        assert sum(r["builds"] for r in results if r["root"] == root) >= len(NAMES)
        store = DiskTier(root, max_bytes=max_bytes)
        report = store.verify()
        assert report.clean and store.quarantined() == []
        assert store.stats()["bytes"] <= max_bytes
        for name in NAMES:
            assert store.get(make_key(name)) in (None, make_artifact(name, size=3000))
    assert DiskTier(roomy[0]).verify().checked == len(NAMES)
