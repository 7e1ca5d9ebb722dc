"""scripts/gpu/masked_softmax_ab.py: both launch orders run, checked, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

from script_module import load_script

masked_softmax_ab = load_script("scripts/gpu/masked_softmax_ab.py")


def test_every_variant_is_checked_and_timed_and_the_switch_restored(tmp_path: Path) -> None:
    from warpforge.blueprint import program

    out = tmp_path / "ab.json"
    before = program.LAST_ROWS_FIRST
    assert masked_softmax_ab.main([str(out), "--device", "cpu", "--max-time", "0.05"]) == 0
    assert before == program.LAST_ROWS_FIRST
    report = json.loads(out.read_text())
    assert report["problem"] == "blueprint.causal_attention_scores"
    assert "git_commit" in report["environment_fingerprint"]
    (row,) = report["rows"]
    variants = {"last rows first", "in order"}
    assert set(row["max_abs_error"]) == variants == set(row["median_us"])
    assert all(error < 1e-5 for error in row["max_abs_error"].values())
    assert all(low <= row["median_us"][n] <= high for n, (low, high) in row["ci_us"].items())
