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
        "--bytecode", "prefix",
        "--concurrent-compile",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "compiler_bench.json").read_text())
    assert report["environment_fingerprint"]["torch"]
    (entry,) = report["blueprints"]
    assert entry["problem"] == "blueprint.bias_gelu"
    assert entry["warpforge_cold"]["builds"] == 1
    assert entry["warpforge_cold_concurrent"]["builds"] == 1  # in caches of its own
    warm = entry["warm_first_result"][0]
    assert warm["builds"] == 0 and warm["disk_hits"] == 1  # the new process reused the disk cache
    assert entry["warm_first_result_ms_median"] > 0
    # The window is split into named stages that add up to the reported first-result time.
    stages = warm["stages"]
    window = (
        stages["compile_returned_s"] + stages["first_call_returned_s"] + stages["synchronised_s"]
    )
    assert abs(window - warm["seconds"]) < 1e-3
    # the kernels' first launch is a part of the first call
    assert 0 < warm["first_launch_s"] <= stages["first_call_returned_s"]
    assert stages["triton_import_s"] > 0 and stages["torch_import_s"] > 0
    triton_cold = entry["warm_first_result_triton_not_imported"]
    assert triton_cold["stages"]["triton_import_s"] is None and triton_cold["disk_hits"] == 1
    assert entry["warm_first_result_empty_triton_cache"]["disk_hits"] == 1
    # the BLAS start-up stage exists on CUDA only; its run without it is a warm hit all the same
    import torch

    assert (stages["blas_init_s"] is None) == (not torch.cuda.is_available())
    blas_cold = entry["warm_first_result_blas_not_initialised"]
    assert blas_cold["stages"]["blas_init_s"] is None
    assert blas_cold["disk_hits"] == 1 and entry["warm_first_result_including_blas_init_ms"] > 0
    cold_profile = entry["warpforge_cold_profile"]
    assert cold_profile["builds"] == 1 and cold_profile["disk_hits"] == 0  # caches of its own
    assert any("compiler.py" in row["function"] for row in cold_profile["profile_top_cumulative"])
    profile = entry["warm_first_result_profile"]["profile_top_cumulative"]
    assert any("compiler.py" in row["function"] for row in profile)
    assert entry["warm_first_result_profile"]["profile_top_self"]
    # Children ran with a primed bytecode prefix under OUT, and once more without it.
    bytecode = report["bytecode"]
    assert bytecode["children_use_prefix"] and bytecode["primed_by"] == [
        {"mode": "warpforge", "ok": True}
    ]
    assert Path(bytecode["prefix"]) == (tmp_path / "out" / "pycache").resolve()
    assert any(Path(bytecode["prefix"]).rglob("*.pyc"))
    assert warm["pycache_prefix"] == bytecode["prefix"]
    assert all("pyc_exists" in probe for probe in bytecode["probes"].values())
    (plain,) = entry["warm_first_result_without_bytecode_prefix"]
    assert plain["pycache_prefix"] is None and plain["disk_hits"] == 1
    lookup = report["hit_lookup"]
    for case in ("per_call_hit_path", "call_lookup_and_launch", "timer_floor"):
        assert lookup[case]["samples"] == 300 and len(lookup[case]["p99_us_per_round"]) == 5
    assert lookup["timer_floor"]["p50_us"] <= lookup["per_call_hit_path"]["p50_us"]
    replay = report["replay"]
    assert replay["calls"] == 1200
    # 7 suite blueprints + 1 variant swapped in at step 1000: each misses once
    assert replay["in_process_misses"] == replay["codegen_builds"] <= 8
    assert replay["hit_ratio"] == 1 - replay["in_process_misses"] / 1200
