"""scripts/compiler_table.py: the compiler benchmark's table, from the committed H200 reports."""

from __future__ import annotations

import copy
import json
import re

import pytest

from script_module import ROOT, load_script

RESULTS = ROOT / "benchmarks/results/session19-h200-2026-11-29"


@pytest.fixture(scope="module")
def compiler_table():
    return load_script("scripts/compiler_table.py")


@pytest.fixture(scope="module")
def reports():
    return [json.loads((RESULTS / name).read_text())
            for name in ("compiler-bias-gelu.json", "compiler-suite.json")]  # fmt: skip


def test_one_row_a_blueprint_with_the_reports_numbers(compiler_table, reports):
    text = compiler_table.render(reports)
    blueprints = {b["problem"]: b for r in reports for b in r["blueprints"]}
    rows = [line for line in text.splitlines() if line.startswith("| blueprint.")]
    assert len(rows) == len(blueprints) == 8
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        b = blueprints[cells[0]]
        ours, theirs = b["warpforge_cold"]["seconds"], b["torch_compile_cold"]["seconds"]
        assert cells[2:5] == [f"{ours:.2f}", f"{theirs:.2f}", f"{ours / theirs:.2f}"]
        assert cells[5] == f"{b['warm_first_result_ms_median']:.1f}"
    met = re.search(r"cold compile <= 25% of torch.compile's: (\d+) of 8", text)
    want = sum(b["cold_compile_ratio"] <= 0.25 for b in blueprints.values())
    assert met is not None and int(met.group(1)) == want
    assert "NVIDIA H200" in text and text.count("hit ratio 0.9984") == 2


def test_reports_of_other_machines_or_commits_are_refused(compiler_table, reports):
    other = copy.deepcopy(reports[1])
    other["environment_fingerprint"]["git_commit"] = "0" * 40
    with pytest.raises(ValueError, match="reports: expected one machine"):
        compiler_table.render([reports[0], other])
    with pytest.raises(ValueError, match="at least one"):
        compiler_table.render([])


def test_a_concurrent_cold_compile_is_listed_when_the_report_has_one(compiler_table, reports):
    """compiler_bench.py --concurrent-compile adds a cold run with the kernels compiled at once."""
    assert "compiled concurrently" not in compiler_table.render(reports)
    both = copy.deepcopy(reports)
    entry = both[1]["blueprints"][0]
    entry["warpforge_cold_concurrent"] = {"seconds": 1.5}
    entry["cold_compile_ratio_concurrent"] = 1.5 / entry["torch_compile_cold"]["seconds"]
    text = compiler_table.render(both)
    ratio = entry["cold_compile_ratio_concurrent"]
    assert f"{entry['problem']} 1.50 s (ratio {ratio:.2f})" in text


def test_a_run_without_torch_compile_leaves_its_cells_empty(compiler_table):
    """compiler_bench.py --skip-torch-compile (session 21 call 8): no ratio, every warm repeat."""
    report = json.loads(
        (ROOT / "benchmarks/results/session21-h200-2026-11-29/compiler-warm-call8.json").read_text()
    )
    text = compiler_table.render([report])
    mlp = next(b for b in report["blueprints"] if b["problem"] == "blueprint.mlp_block")
    row = next(line for line in text.splitlines() if line.startswith("| blueprint.mlp_block"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:5] == ["-", "-"]
    assert cells[5] == f"{mlp['warm_first_result_ms_median']:.1f}"
    repeats = " / ".join(f"{run['seconds'] * 1e3:.1f}" for run in mlp["warm_first_result"])
    assert f"blueprint.mlp_block {repeats}" in text and len(mlp["warm_first_result"]) == 7
    assert "not measured (torch.compile's cold run skipped)" in text


def test_the_first_launch_inside_each_repeat_is_listed_when_recorded(compiler_table, reports):
    """compiler_bench.py records each warm run's first launch (first_launch_s)."""
    assert "first launch" not in compiler_table.render(reports)
    both = copy.deepcopy(reports)
    for entry in both[1]["blueprints"]:
        for run in entry["warm_first_result"]:
            run["first_launch_s"] = 0.0125
    text = compiler_table.render(both)
    assert "first launch, every repeat, ms: blueprint.causal_attention_scores 12.5 / 12.5" in text
