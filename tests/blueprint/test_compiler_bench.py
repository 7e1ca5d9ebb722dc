"""benchmarks/compiler_bench.py runs end to end on the CPU (interpreter) and reports honestly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_compiler_bench_smoke(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "WARPFORGE_CACHE_DIR": str(tmp_path / "c"),
    }
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "compiler_bench.py"),
        "--out", str(tmp_path / "out"),
        "--problems", "bias_gelu",
        "--skip-torch-compile",
        "--warm-repeats", "1",
        "--lookup-samples", "300",
        "--replay-steps", "1200",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "compiler_bench.json").read_text())
    assert report["environment_fingerprint"]["torch"]
    (entry,) = report["blueprints"]
    assert entry["problem"] == "blueprint.bias_gelu"
    assert entry["warpforge_cold"]["builds"] == 1
    warm = entry["warm_first_result"][0]
    assert warm["builds"] == 0 and warm["disk_hits"] == 1  # the new process reused the disk cache
    assert entry["warm_first_result_ms_median"] > 0
    assert report["hit_lookup"]["per_call_hit_path"]["samples"] == 300
    replay = report["replay"]
    assert replay["calls"] == 1200
    # 7 suite blueprints + 1 variant swapped in at step 1000: each misses once
    assert replay["in_process_misses"] == replay["codegen_builds"] <= 8
    assert replay["hit_ratio"] == 1 - replay["in_process_misses"] / 1200
