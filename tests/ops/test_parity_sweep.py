"""benchmarks/parity_sweep.py: its --smoke mode builds norm forward cases (launch grids, the
looped kernel, launches compiled for the row length) and a cross entropy backward case, checks
every variant against the op's output and times the ones that agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "parity_sweep.py"


@pytest.mark.interpreter
def test_smoke_run_checks_and_times_the_variants(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    only = ["layer_norm.fwd M=16384 N=4096", "add_rms_norm.fwd M=16384 N=4096",
            "cross_entropy.bwd M=4096 V=50257", "layer_norm.bwd M=32768 N=1024",
            "add_rms_norm.bwd M=16384 N=2048", "add_rms_norm.fwd M=32768 N=256"]  # fmt: skip
    command = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--smoke", "--max-time", "0.05"]
    command += ["--only", *only]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "parity_sweep.json").read_text())
    assert report["environment"]["torch"]
    cases = {case["case"]: case for case in report["cases"]}
    assert sorted(cases) == [
        "add_rms_norm.bwd M=16384 N=2048 torch.float32 backward alone around the tuned launch",
        "add_rms_norm.fwd M=16384 N=4096 torch.float32",  # bf16 cases run in float32 here
        "add_rms_norm.fwd M=32768 N=256 torch.float32 tile",  # the tile kernel's launches
        "cross_entropy.bwd M=4096 V=50257 torch.float32",
        "layer_norm.bwd M=32768 N=1024 torch.float32 backward alone",  # the measured grid
        "layer_norm.bwd M=32768 N=1024 torch.float32 backward alone around the tuned launch",
        "layer_norm.fwd M=16384 N=4096 torch.float32",
        "layer_norm.fwd M=16384 N=4096 torch.float32 looped",  # the looped kernel's variants
        "layer_norm.fwd M=16384 N=4096 torch.float32 specialized",  # compiled for the length
    ]
    for label, case in cases.items():
        assert "error" not in case and not case["skipped"], (label, case)
        names = {row["contender"] for row in case["rows"]}
        assert {"op", "op bwd"} & names and len(names) >= 3, (label, names)
        for row in case["rows"]:
            assert row["median_us"] > 0 and row["relative_error_vs_op"] <= 1e-5, (label, row)
    whole_rows = {"whole-row 4w", "whole-row 4w early", "whole-row 4w reload",
                  "whole-row 4w early reload"}  # fmt: skip
    assert whole_rows | {"tiles 256/2/2w", "chunked 128/1/1w"} <= {
        row["contender"] for row in cases["layer_norm.fwd M=16384 N=4096 torch.float32"]["rows"]
    }
    looped = cases["layer_norm.fwd M=16384 N=4096 torch.float32 looped"]["rows"]
    assert {row["contender"] for row in looped} >= {
        "op", "looped 128/2w", "looped 128/2w forwards unrolled"
    }  # fmt: skip
    specialized = {row["contender"] for row in
                   cases["layer_norm.fwd M=16384 N=4096 torch.float32 specialized"]["rows"]}  # fmt: skip
    assert {"looped 2048/16w forwards", "looped 2048/16w forwards specialized",
            "whole-row 1w reload specialized"} <= specialized  # fmt: skip
    tiles = {row["contender"] for row in
             cases["add_rms_norm.fwd M=32768 N=256 torch.float32 tile"]["rows"]}  # fmt: skip
    assert {"tile 1 rows/1w", "tile 1 rows/1w early", "tile 2 rows/1w early"} <= tiles
    ce_rows = {
        row["contender"] for row in cases["cross_entropy.bwd M=4096 V=50257 torch.float32"]["rows"]
    }
    assert {"flat BLOCK=64 warps=1", "flat BLOCK=64 warps=1 evict_first"} <= ce_rows
    # the norm backward alone: the public backward, the tuned launch, the grid's launches (the
    # smoke run's 256-column tiles), each checked against the public one
    grid = {row["contender"] for row in
            cases["layer_norm.bwd M=32768 N=1024 torch.float32 backward alone"]["rows"]}  # fmt: skip
    assert {"op bwd", "tuned", "256/2/1w x4 prefetch", "256/4/1w x3 prefetch maxnreg=168"} <= grid
    around = [
        row["contender"]
        for row in cases[
            "add_rms_norm.bwd M=16384 N=2048 torch.float32 backward alone around the tuned launch"
        ]["rows"]
    ]
    assert {"op bwd", "tuned"} <= set(around) and any(a.endswith("prefetch") for a in around)


def test_looped_grid_takes_chunk_and_warps_and_refuses_the_rest(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for bad in ("2048/3", "100"):
        command = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--looped-grid", bad]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (bad, done.stderr)
        assert "argument --looped-grid: expected" in done.stderr and repr(bad) in done.stderr
