"""benchmarks/ops_bwd_sweep.py: its --smoke mode runs every contender through the interpreter,
verifies each against float64 and writes the report; its error measure rejects wrong outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ops_bwd_sweep.py"


def _load_script():
    return load_script("benchmarks/ops_bwd_sweep.py")


@pytest.mark.interpreter
def test_smoke_run_verifies_and_times_every_contender(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--smoke"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "ops_bwd_sweep.json").read_text())
    assert report["environment_fingerprint"]["torch"] and report["copy_bytes_per_s"] > 0
    families = {case["family"] for case in report["cases"]}
    assert families == {
        "cross_entropy.bwd", "cross_entropy.fwd_bwd", "layer_norm.bwd", "rms_norm.bwd"
    }  # fmt: skip
    for case in report["cases"]:
        names = [row["contender"] for row in case["contenders"]]
        assert names[0].startswith("default") and len(names) >= 3, names
        for row in case["contenders"]:
            assert row["verified"], (case["family"], row)
            assert row["median_us"] > 0 and row["gb_per_s"] > 0
    fwd_bwd = next(c for c in report["cases"] if c["family"] == "cross_entropy.fwd_bwd")
    strategies = {row["config"].get("strategy") for row in fwd_bwd["contenders"]}
    assert {"fused", "split"} <= strategies
    layer = next(c for c in report["cases"] if c["family"] == "layer_norm.bwd")
    assert {row["config"].get("partials_in_memory") for row in layer["contenders"]} >= {
        True, False
    }  # fmt: skip
    assert "ops backward sweep" in (tmp_path / "ops_bwd_sweep.txt").read_text()


def test_error_measure_is_scale_free_and_rejects_wrong_values() -> None:
    sweep = _load_script()
    ref = torch.randn(64, 33, dtype=torch.float64) * 1e-9  # a mean-reduced gradient is tiny
    assert sweep._error(ref.float(), ref, torch.float32) <= 1.0
    assert sweep._error((ref * 1.01).float(), ref, torch.float32) > 1.0
    assert sweep._error(ref.bfloat16(), ref, torch.bfloat16) <= 1.0
    nan = ref.clone()
    nan[3, 4] = float("nan")
    assert sweep._error(nan, ref, torch.float32) == float("inf")
    assert sweep._error(ref[:, :32], ref, torch.float32) == float("inf")
