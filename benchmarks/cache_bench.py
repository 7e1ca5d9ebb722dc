"""Kernel-cache latency and hit-ratio benchmark (CPU only; no GPU needed).

    PYTHONPATH=src python benchmarks/cache_bench.py --out DIR

Measures, each lookup timed on its own with ``time.perf_counter_ns``:

* in-memory hit through ``KernelRegistry.get`` (metrics recording included): with a key object
  reused across calls, with a new ``CacheKey`` built from strings for every call, and with
  ``CacheKey.for_current_environment`` (dtype objects converted) for every call;
* a disk hit in a fresh process (a subprocess imports warpforge, opens the store and loads one
  entry), repeated in several processes;
* a Redis hit when ``WARPFORGE_REDIS_URL`` is set;
* the hit ratio of a replay of 10 000 training-step lookups drawn from a fixed set of
  blueprints and specialisations.

Writes ``DIR/cache_bench.json`` with the environment fingerprint.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from warpforge.cache import (
    CacheKey,
    CacheMetrics,
    DiskTier,
    KernelArtifact,
    KernelRegistry,
    MemoryTier,
    RedisTier,
)
from warpforge.environment import environment_fingerprint


def summarise(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] / 1e3

    return {
        "n": len(ordered),
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "p999_us": pct(99.9),
        "max_us": ordered[-1] / 1e3,
        "mean_us": statistics.fmean(ordered) / 1e3,
    }


def sample_artifact(name: str, source_bytes: int = 6000) -> KernelArtifact:
    source = (f"# generated kernel {name}\n".encode() * (source_bytes // 20 + 1))[:source_bytes]
    return KernelArtifact(
        files={"kernel.py": source},
        metadata={"entry_point": f"kernel_{name}", "signature": ["*fp32", "*fp32", "i32"]},
    )


def key_for(name: str, dtype: str = "float16", bucket: int = 4096) -> CacheKey:
    return CacheKey.for_current_environment(
        f"blueprint-{name}",
        {"x.dtype": getattr(torch, dtype), "n.divisible_by_16": True, "bucket": bucket},
    )


def timer_overhead_ns(n: int = 100_000) -> float:
    now = time.perf_counter_ns
    samples = []
    for _ in range(n):
        a = now()
        samples.append(now() - a)
    return statistics.median(samples)


def bench_memory(lookups: int) -> dict[str, object]:
    registry = KernelRegistry(memory=MemoryTier(), metrics=CacheMetrics())
    names = [f"b{i}" for i in range(64)]
    for name in names:
        registry.put(key_for(name), sample_artifact(name))
    keys = [key_for(name) for name in names]
    now, get = time.perf_counter_ns, registry.get
    for key in keys * 50:  # warm-up
        get(key)
    reused = []
    for i in range(lookups):
        key = keys[i % len(keys)]
        start = now()
        get(key)
        reused.append(now() - start)
    fresh = []
    versions = (keys[0].warpforge_version, keys[0].triton_version, keys[0].torch_version)
    for i in range(lookups):
        name = names[i % len(names)]
        start = now()
        get(
            CacheKey(
                f"blueprint-{name}",
                keys[0].arch,
                *versions,
                (("bucket", "4096"), ("n.divisible_by_16", "true"), ("x.dtype", "float16")),
            )
        )
        fresh.append(now() - start)
    from_environment = []
    for i in range(lookups):
        name = names[i % len(names)]
        start = now()
        get(key_for(name))
        from_environment.append(now() - start)
    hits = registry.metrics.snapshot()["hits"]["memory"]
    assert hits == lookups * 3 + len(keys) * 50, "every timed lookup must be a memory hit"
    return {
        "reused_key_object": summarise(reused),
        "new_key_object_each_call": summarise(fresh),
        "key_for_current_environment_each_call": summarise(from_environment),
        "distinct_keys": len(keys),
    }


_FRESH_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter_ns()
import torch

from warpforge.cache import CacheKey, CacheMetrics, DiskTier, KernelRegistry, MemoryTier
t1 = time.perf_counter_ns()
root, key_json = sys.argv[1], sys.argv[2]
key = CacheKey.from_dict(json.loads(key_json))
registry = KernelRegistry(memory=MemoryTier(), disk=DiskTier(root), metrics=CacheMetrics())
t2 = time.perf_counter_ns()
artifact = registry.get(key)
t3 = time.perf_counter_ns()
assert artifact is not None and registry.metrics.snapshot()["hits"]["disk"] == 1
print(json.dumps({"import_warpforge_cache_ms": (t1 - t0) / 1e6,
                  "first_disk_hit_us": (t3 - t2) / 1e3}))
"""


def bench_disk_fresh_process(root: Path, processes: int) -> dict[str, object]:
    store = DiskTier(root)
    key = key_for("disk-probe")
    store.put(key, sample_artifact("disk-probe"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = []
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, "-c", _FRESH_PROCESS, str(root), json.dumps(key.as_dict())],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        runs.append(json.loads(out.stdout))
    # Warm disk hits in this process (page cache hot, memory tier bypassed).
    registry = KernelRegistry(memory=MemoryTier(), disk=store, metrics=CacheMetrics())
    warm = []
    for _ in range(2000):
        registry.memory.clear()
        start = time.perf_counter_ns()
        registry.get(key)
        warm.append(time.perf_counter_ns() - start)
    first = [r["first_disk_hit_us"] for r in runs]
    return {
        "fresh_processes": runs,
        "fresh_process_first_hit_us": {"median": statistics.median(first), "max": max(first)},
        "warm_disk_hit": summarise(warm),
        "entry_files_bytes": sample_artifact("disk-probe").nbytes,
    }


def bench_redis(url: str, lookups: int) -> dict[str, object]:
    tier = RedisTier(url, prefix="warpforge:bench:")
    key = key_for("redis-probe")
    tier.put(key, sample_artifact("redis-probe"))
    samples = []
    for _ in range(lookups):
        start = time.perf_counter_ns()
        got = tier.get(key)
        samples.append(time.perf_counter_ns() - start)
        assert got is not None, "Redis lookup missed; is the server reachable?"
    tier.clear()
    return {"url": tier.stats()["url"], "redis_hit": summarise(samples)}


def bench_replay(root: Path, steps: int, seed: int) -> dict[str, object]:
    """Training-step lookups: a few blueprints per step, some dtypes and shape buckets, skewed."""
    rng = random.Random(seed)
    blueprints = [f"block{i}" for i in range(12)]
    weights = [1 / (rank + 1) for rank in range(len(blueprints))]  # Zipf-like popularity
    variants = [("float16", 4096), ("bfloat16", 4096), ("float16", 8192)]
    metrics = CacheMetrics()
    registry = KernelRegistry(memory=MemoryTier(), disk=DiskTier(root), metrics=metrics)
    builds = 0

    def build(name: str) -> KernelArtifact:
        nonlocal builds
        builds += 1
        return sample_artifact(name)

    seen = set()
    for _ in range(steps):
        name = rng.choices(blueprints, weights)[0]
        dtype, bucket = rng.choice(variants)
        seen.add((name, dtype, bucket))
        registry.get_or_build(key_for(name, dtype, bucket), lambda name=name: build(name))
    snap = metrics.snapshot()
    assert builds == len(seen), f"{builds} builds for {len(seen)} distinct keys: unexpected misses"
    return {
        "lookups": steps,
        "distinct_keys_possible": len(blueprints) * len(variants),
        "distinct_keys_seen": len(seen),
        "builds": builds,
        "hit_ratio": snap["hit_ratio"],
        "hits": snap["hits"],
        "misses": snap["misses"],
        "seed": seed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for cache_bench.json")
    parser.add_argument("--lookups", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--replay", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {
        "benchmark": "cache",
        "environment": environment_fingerprint(),
        "timer_overhead_ns_median": timer_overhead_ns(),
    }
    results["memory_hit"] = bench_memory(args.lookups)
    with tempfile.TemporaryDirectory(prefix="warpforge-cache-bench-") as tmp:
        results["disk_hit"] = bench_disk_fresh_process(Path(tmp) / "disk", args.processes)
        results["replay"] = bench_replay(Path(tmp) / "replay", args.replay, args.seed)
    url = os.environ.get("WARPFORGE_REDIS_URL")
    results["redis"] = bench_redis(url, 2000) if url else {"skipped": "WARPFORGE_REDIS_URL unset"}
    path = args.out / "cache_bench.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    memory = results["memory_hit"]
    print(f"memory hit (reused key):  {memory['reused_key_object']}")
    print(f"memory hit (new key):     {memory['new_key_object_each_call']}")
    print(f"memory hit (env key):     {memory['key_for_current_environment_each_call']}")
    print(f"disk hit, fresh process:  {results['disk_hit']['fresh_process_first_hit_us']} us")
    print(f"disk hit, warm:           {results['disk_hit']['warm_disk_hit']}")
    print(f"redis:                    {results['redis']}")
    print(f"replay hit ratio:         {results['replay']['hit_ratio']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
