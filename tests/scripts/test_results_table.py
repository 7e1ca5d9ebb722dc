"""scripts/results_table.py: the docs' tables never mix GPU models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from script_module import load_script


@pytest.fixture(scope="module")
def results_table():
    return load_script("scripts/results_table.py")


def _report(device: str, median_s: float, n: int = 4096) -> dict:
    """A harness report of one timed row on ``device`` (the fields the table reads)."""
    times = {"candidate": {"median_s": median_s}, "torch.compile": {"median_s": 2 * median_s}}
    vs = {"baseline": "torch.compile", "value": 2.0, "ci95": [1.9, 2.1]}
    return {
        "schema": "warpforge-bench/1",
        "environment": {"device": {"name": device}, "torch": "2.11", "triton": "3.6"},
        "ceilings": {"copy_bytes_per_s": 3e12},
        "results": [
            {
                "problem": "rms_norm.fwd",
                "shape": {"M": 4096, "N": n},
                "dtype": "bfloat16",
                "status": "ok",
                "verification": {},
                "times": times,
                "speedup": {"vs_best": vs, "vs": {"torch.compile": vs}},
                "achieved": {"gb_per_s": 2500.0},
                "bytes_moved": 3e8,
                "percent_of_ceiling": 83.0,
            }
        ],
    }


def test_a_later_report_of_the_same_device_replaces_the_row(results_table) -> None:
    text = results_table.render_latest(
        [("a.json", _report("NVIDIA H100", 1e-4)), ("b.json", _report("NVIDIA H100", 2e-4))], None
    )
    assert text.count("| rms_norm.fwd |") == 1 and "| 200.0 |" in text and "####" not in text


def test_reports_of_two_gpu_models_get_a_table_each(results_table) -> None:
    text = results_table.render_latest(
        [
            ("h100.json", _report("NVIDIA H100 80GB HBM3", 1e-4)),
            ("h200.json", _report("NVIDIA H200", 7e-5)),
            ("h100-later.json", _report("NVIDIA H100 80GB HBM3", 9e-5, n=8192)),
        ],
        None,
    )
    h100, h200 = text.split("#### NVIDIA H200")
    assert h100.startswith("#### NVIDIA H100 80GB HBM3")
    assert "| 100.0 |" in h100 and "| 90.0 |" in h100 and "| 70.0 |" not in h100
    assert "| 70.0 |" in h200 and "h100" not in h200
    assert h100.count("- rows timed: 2") == 1 and h200.count("- rows timed: 1") == 1


def test_a_compute_bound_row_is_placed_against_matmul_not_copy(results_table) -> None:
    """The harness gives a compute-bound row its share of the matmul ceiling: the table says
    so, and the copy-ceiling count of the summary leaves the row out."""
    report = _report("NVIDIA H200", 1e-4)
    compute = dict(report["results"][0], problem="fused_linear_cross_entropy.fwd_bwd",
                   regime="compute", percent_of_ceiling=91.0)  # fmt: skip
    report["results"][0]["regime"] = "memory"
    report["results"].append(compute)
    text = results_table.render_latest([("a.json", report)], None)
    assert "| 91% of matmul |" in text and "| 83% |" in text
    assert "- memory-bound rows moving >= 256 MB: 1; at >= 90% of the copy ceiling: 0" in text


def test_by_date_lets_the_newer_report_win_and_skips_other_files(
    results_table, tmp_path, capsys
) -> None:
    """Named so that they sort the other way, the report written later still replaces the
    earlier one's row; a tuning export and a sweep's JSON among the files are skipped, said
    on stderr; an
    excluded problem's rows are left out, and a report left with none is dropped."""
    newer, older = _report("NVIDIA H200", 1e-4), _report("NVIDIA H200", 2e-4)
    newer["created"], older["created"] = "2026-11-29T15:00:01+00:00", "2026-11-29T14:48:45+00:00"
    other = dict(newer["results"][0], problem="blueprint.bias_gelu")
    newer["results"].append(other)
    paths = []
    excluded_only = {**older, "results": [other]}
    for name, document in (("call10.json", newer), ("call9.json", older),
                           ("tune-export.json", {"format": "warpforge.tune.configs"}),
                           ("sweep.json", {"device": "NVIDIA H200", "results": [{"case": "x"}]}),
                           ("blueprints.json", excluded_only)):  # fmt: skip
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(document))
    reports = results_table.harness_reports(paths, by_date=True, exclude=("blueprint.*",))
    assert [Path(name).name for name, _ in reports] == ["call9.json", "call10.json"]
    skipped = capsys.readouterr().err
    assert "tune-export.json: not a harness report" in skipped
    assert "sweep.json: not a harness report" in skipped  # a sweep's rows, no schema
    text = results_table.render_latest(reports, None)
    # the newer row (100 us, torch.compile 200) in, the older (200 us, torch.compile 400) out
    assert "| 100.0 |" in text and "| 400.0 |" not in text and "blueprint" not in text
    assert [Path(name).name for name, _ in results_table.harness_reports(paths)] == [
        "call10.json",
        "call9.json",
        "blueprints.json",
    ]  # as given without --by-date, and nothing excluded


def test_by_date_refuses_a_report_without_its_time(results_table, tmp_path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_report("NVIDIA H200", 1e-4)))
    with pytest.raises(SystemExit, match=r"old\.json: no 'created' time"):
        results_table.harness_reports([path], by_date=True)


def test_by_problem_sums_up_the_latest_rows_per_problem_and_dtype(results_table) -> None:
    """Two rows of one problem (one replaced by a later report) and one of another: a line
    each, counting rows at or above the best baseline and memory-bound rows at 90% of copy."""
    first, later = _report("NVIDIA H200", 1e-4), _report("NVIDIA H200", 1e-4)
    slow = dict(first["results"][0], shape={"M": 4096, "N": 8192}, percent_of_ceiling=95.0)
    slow["speedup"] = {"vs_best": {**slow["speedup"]["vs_best"], "value": 0.9},
                       "vs": slow["speedup"]["vs"]}  # fmt: skip
    first["results"].append(slow)
    later["results"][0] = dict(later["results"][0], percent_of_ceiling=91.0)
    later["results"].append(dict(later["results"][0], problem="softmax.fwd", dtype="float32"))
    text = results_table.render_by_problem([("a.json", first), ("b.json", later)], None)
    assert "| rms_norm.fwd | bfloat16 | 2 | 1 | 2.00x | 2 | 2 | 91% |" in text
    assert "| softmax.fwd | float32 | 1 | 1 | 2.00x | 1 | 1 | 91% |" in text
    assert "- rows timed: 3; at or above the best baseline (median): 2" in text
