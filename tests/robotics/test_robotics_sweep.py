"""benchmarks/robotics_sweep.py keeps working: its ``--smoke`` run on the CPU (interpreter)
checks every variant it would time against the float64 reference and writes the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_sweep_smoke_run_writes_a_checked_report(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "WARPFORGE_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH")]))}  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "robotics_sweep.py"), "--smoke", "--out",
         str(tmp_path)], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((tmp_path / "robotics-sweep.json").read_text())
    assert report["smoke"] is True and "device" in report["environment"]
    kinds = {case["kind"] for case in report["cases"]}
    assert kinds == {"fwd", "bwd", "align"}
    for case in report["cases"]:
        rows = case["rows"]
        wrong = [r for r in rows if r["status"] not in ("ok", "skipped")]
        assert not wrong, (case["case"], wrong)
        variants = {r["variant"] for r in rows if r["median_us"]}
        # both searches were checked and timed (the backward: on its atomic path and on the
        # deterministic gather path), and the tile stage ran
        searches = {"binary (default tile)", "guided4 (default tile)"}
        if case["kind"] == "bwd":
            searches |= {"gather, default tiles"}
        assert searches <= variants, case["case"]
        assert any(r["stage"] == "tile" and r["config"] and r["median_us"] for r in rows)
        assert case["best_variant"] in variants


def test_sweep_prefetch_stage_checks_every_variant(tmp_path: Path) -> None:
    # on the CPU the prefetch is planned away (no inline PTX in the interpreter): the stage still
    # checks each variant against float64 and times it next to the fill floor
    env = {**os.environ, "TRITON_INTERPRET": "1", "WARPFORGE_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH")]))}  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "robotics_sweep.py"), "--smoke", "--out",
         str(tmp_path), "--stages", "prefetch", "--only", "resample.fwd"], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((tmp_path / "robotics-sweep.json").read_text())
    assert {case["kind"] for case in report["cases"]} == {"fwd"}
    for case in report["cases"]:
        rows = [r for r in case["rows"] if r["stage"] == "prefetch"]
        timed = [r for r in rows if r["config"]]
        assert timed and all(r["status"] == "ok" and r["median_us"] for r in timed), rows
        assert {r["config"][0]["prefetch"] for r in timed} == {0, 1}
        assert any(r["variant"] == "floor: fill the output" and r["median_us"] for r in rows)


def test_sweep_staged_stage_checks_every_variant(tmp_path: Path) -> None:
    # the staged kernel's tiles, each checked against float64 before it is timed
    env = {**os.environ, "TRITON_INTERPRET": "1", "WARPFORGE_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH")]))}  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "robotics_sweep.py"), "--smoke", "--out",
         str(tmp_path), "--stages", "staged", "--only", "resample.fwd"], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((tmp_path / "robotics-sweep.json").read_text())
    by_dtype = {case["dtype"]: case for case in report["cases"]}
    assert set(by_dtype) == {"float16", "float32"}

    def staged_rows(dtype: str) -> list[dict]:
        return [r for r in by_dtype[dtype]["rows"]
                if r["stage"] == "staged" and r["config"] and r["config"][0].get("staged")]  # fmt: skip

    timed = staged_rows("float32")
    assert len(timed) == 2 and all(r["status"] == "ok" and r["median_us"] for r in timed), timed
    assert {r["config"][0]["staged_search"] for r in timed} == {0, 1}
    # the gather kernel's default tile is timed beside them
    for case in report["cases"]:
        assert any(r["variant"].startswith("gather kernel") and r["median_us"]
                   for r in case["rows"]), case["rows"]  # fmt: skip
    # 5 float16 columns make no whole 32-bit words: each tile is reported refused, not timed
    refused = staged_rows("float16")
    assert len(refused) == 2 and all(r["status"] == "wrong" and "refused" in r["detail"]
                                     and not r["median_us"] for r in refused), refused  # fmt: skip
