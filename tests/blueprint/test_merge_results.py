"""scripts/merge_results.py: a suite run in pieces becomes one report; mismatched parts refuse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from script_module import load_script
from warpforge.harness import report

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "merge_results.py"


def _load_script() -> Any:
    return load_script("scripts/merge_results.py")


def _row(problem: str, median: float, t: int = 8) -> dict[str, Any]:
    return {
        "problem": problem,
        "shape": {"T": t},
        "dtype": "float32",
        "status": "ok",
        "times": {"candidate": {"median_s": median}},
    }


def _part(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    return report.write_report(
        report.new_report("builtin-suite", rows, ceilings=None), tmp_path / name
    )


def test_parts_merge_into_one_report(tmp_path: Path) -> None:
    a = _part(tmp_path, "a.json", [_row("blueprint.b", 2e-5), _row("blueprint.a", 1e-5)])
    b = _part(tmp_path, "b.json", [_row("blueprint.c", 3e-5), _row("blueprint.a", 4e-5)])
    merged_path = tmp_path / "merged.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(merged_path), str(a), str(b), "--quiet"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    merged = report.load_report(merged_path)  # still a valid harness report
    problems = [r["problem"] for r in merged["results"]]
    assert problems == ["blueprint.a", "blueprint.b", "blueprint.c"]
    # the row measured twice keeps the later part's numbers, and says so
    row_a = merged["results"][0]
    assert row_a["times"]["candidate"]["median_s"] == 4e-5 and row_a["merged_from"] == str(b)
    assert merged["merge_replaced_rows"] == [{"row": report.result_key(row_a), "kept_from": str(b)}]
    assert [p["rows"] for p in merged["merged_from"]] == [2, 2]


def test_parts_from_different_software_are_refused(tmp_path: Path) -> None:
    merge = _load_script()
    first = report.new_report("builtin-suite", [_row("blueprint.a", 1e-5)], ceilings=None)
    second = json.loads(json.dumps(first))
    second["environment"]["triton"] = "0.0-other"
    with pytest.raises(ValueError, match="environment field 'triton'"):
        merge.merge_reports([("one.json", first), ("two.json", second)])
    with pytest.raises(ValueError, match="at least one report"):
        merge.merge_reports([])


def test_cli_reports_unreadable_parts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    merge = _load_script()
    bad = tmp_path / "bad.json"
    bad.write_text("{ torn")
    assert merge.main([str(tmp_path / "m.json"), str(bad), "--quiet"]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
