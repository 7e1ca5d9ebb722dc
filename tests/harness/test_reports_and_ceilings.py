"""Reports, the compare gate, the roofline plot, ceilings and suite arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from warpforge.harness import ceilings, compare, report, roofline, suite


def _times(median: float, spread: float = 0.01) -> dict:
    return {
        "median_s": median,
        "ci95_s": [median * (1 - spread), median * (1 + spread)],
        "samples": 50,
        "clock": "cuda-events",
        "cold": True,
    }


CEIL = ceilings.Ceilings(
    device="Test GPU",
    fingerprint={"device": "Test GPU"},
    copy_bytes_per_s=3.0e12,
    matmul_flops_per_s={"bf16": 700e12, "fp32": 50e12, "tf32": 350e12},
    measured_at="2026-11-21T00:00:00+00:00",
    is_gpu=True,
)


def _row(name: str, cand: float, base: float, *, flops=None, bytes_moved=1e9, passed=True):
    return report.result_entry(
        problem=name, shape={"N": 4096}, dtype=torch.bfloat16,
        verification={"passed": passed, "findings": []},
        times={"candidate": _times(cand), "eager": _times(base), "compiled": _times(base * 0.8)},
        flops=flops, bytes_moved=bytes_moved, ceilings=CEIL,
    )  # fmt: skip


def test_result_entry_speedups_throughput_and_regime() -> None:
    row = _row("softmax", cand=0.5e-3, base=1e-3)
    assert row["status"] == "ok"
    best = row["speedup"]["vs_best"]
    assert best["baseline"] == "compiled"
    assert best["value"] == pytest.approx(0.8e-3 / 0.5e-3)
    low, high = best["ci95"]
    assert low < best["value"] < high
    assert row["achieved"]["gb_per_s"] == pytest.approx(1e9 / 0.5e-3 / 1e9)
    assert row["regime"] == "memory"
    assert row["percent_of_ceiling"] == pytest.approx(100 * 2e12 / 3e12)
    mm = _row("matmul", cand=1e-3, base=1e-3, flops=5e11, bytes_moved=1e8)
    assert mm["regime"] == "compute"
    assert mm["percent_of_ceiling"] == pytest.approx(100 * 5e14 / 700e12)


def test_report_round_trip_has_environment_and_results(tmp_path: Path) -> None:
    rep = report.new_report("builtin-suite", [_row("softmax", 1e-3, 2e-3)], ceilings=CEIL)
    path = report.write_report(rep, tmp_path / "r.json")
    data = report.load_report(path)
    assert data["schema"] == report.SCHEMA
    assert data["environment"]["torch"] == torch.__version__
    assert "clocks" in data["environment"] and "git_commit" in data["environment"]
    assert data["ceilings"]["copy_bytes_per_s"] == 3.0e12
    assert data["results"][0]["times"]["candidate"]["median_s"] == 1e-3


def test_load_report_rejects_foreign_json(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match="schema"):
        report.load_report(path)
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not JSON"):
        report.load_report(path)


def _report(rows: list[dict]) -> dict:
    return {"schema": report.SCHEMA, "results": rows}


def test_compare_flags_only_regressions_beyond_noise_and_threshold() -> None:
    old = _report([_row("a", 1.00e-3, 2e-3), _row("b", 1.00e-3, 2e-3), _row("c", 1e-3, 2e-3)])
    new_rows = [_row("a", 1.10e-3, 2e-3), _row("b", 1.02e-3, 2e-3), _row("c", 0.8e-3, 2e-3)]
    rows = compare.compare_reports(old, _report(new_rows), threshold=0.03)
    status = {r.key.split("[")[0]: r.status for r in rows}
    assert status == {"a": "regression", "b": "same", "c": "improvement"}
    assert compare.has_regression(rows)
    # a 10% slowdown inside a +-15% noise interval is not a regression
    noisy_old = _report([{**_row("a", 1e-3, 2e-3), "times": {"candidate": _times(1e-3, 0.15)}}])
    noisy_new = _report([{**_row("a", 1.1e-3, 2e-3), "times": {"candidate": _times(1.1e-3, 0.15)}}])
    assert not compare.has_regression(compare.compare_reports(noisy_old, noisy_new))


def test_compare_newly_rejected_is_a_regression() -> None:
    old = _report([_row("a", 1e-3, 2e-3)])
    new = _report([{**_row("a", 1e-3, 2e-3), "status": "rejected"}])
    rows = compare.compare_reports(old, new)
    assert [r.status for r in rows] == ["new-rejected"]
    with pytest.raises(ValueError, match="threshold"):
        compare.compare_reports(old, new, threshold=-1)


def test_compare_refuses_reports_of_two_devices_unless_asked() -> None:
    def on(device: str | None, median: float) -> dict:
        environment = {"device": {"name": device}} if device else {}
        return {**_report([_row("a", median, 2e-3)]), "environment": environment}

    h100_slow, h200_fast = on("NVIDIA H100 80GB HBM3", 1.2e-3), on("NVIDIA H200", 0.8e-3)
    with pytest.raises(ValueError, match=r"new: measured on 'NVIDIA H200', the old report on "
                                         r"'NVIDIA H100 80GB HBM3'.*--across-devices"):  # fmt: skip
        compare.compare_reports(h100_slow, h200_fast)
    rows = compare.compare_reports(h100_slow, h200_fast, across_devices=True)
    assert [r.status for r in rows] == ["improvement"]
    # one device, or a report that names none (older files): compared as before
    assert compare.compare_reports(on("NVIDIA H200", 1e-3), h200_fast)[0].status == "improvement"
    assert compare.compare_reports(on(None, 1e-3), h200_fast)[0].status == "improvement"


def test_roofline_png_written(tmp_path: Path) -> None:
    rows = [_row("softmax", 1e-3, 2e-3), _row("matmul", 1e-3, 2e-3, flops=5e11, bytes_moved=1e8)]
    rep = report.new_report("builtin-suite", rows, ceilings=CEIL)
    points = roofline.roofline_points(rep)
    assert {p["label"] for p in points} == {"softmax", "matmul"}
    # one bar a row: rows of one problem at two shapes stay apart
    assert [p["row_label"] for p in points] == ["softmax N=4096 bfloat16", "matmul N=4096 bfloat16"]
    out = roofline.plot_roofline(rep, tmp_path / "roof.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep["ceilings"] = None
    with pytest.raises(ValueError, match="ceilings"):
        roofline.plot_roofline(rep, tmp_path / "none.png")


def test_impossible_speed_against_the_floor() -> None:
    # 1 GB at 3 TB/s cannot take less than 333 us
    assert ceilings.impossible(300e-6, CEIL, bytes_moved=1e9, flops=None, dtype=torch.bfloat16)
    assert (
        ceilings.impossible(330e-6, CEIL, bytes_moved=1e9, flops=None, dtype=torch.bfloat16) is None
    )
    # 7e11 FLOP at 700 TFLOP/s: 1 ms floor
    assert ceilings.impossible(0.9e-3, CEIL, bytes_moved=1, flops=7e11, dtype=torch.bfloat16)
    # fp32 may use TF32: judged against the TF32 peak, not the no-TF32 one
    assert ceilings.impossible(3e-3, CEIL, bytes_moved=1, flops=7e11, dtype=torch.float32) is None


def test_ceilings_measured_on_cpu_are_cached_per_fingerprint(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    first, cached = ceilings.load_or_measure(torch.device("cpu"), quick=True)
    assert not cached and not first.is_gpu
    assert first.copy_bytes_per_s > 0 and first.matmul_flops_per_s["fp32"] > 0
    again, cached = ceilings.load_or_measure(torch.device("cpu"), quick=True)
    assert cached and again == first
    entries = json.loads((tmp_path / "ceilings.json").read_text())["entries"]
    assert list(entries) == [ceilings.fingerprint_key(first.fingerprint)]


def test_corrupt_ceilings_cache_is_kept_aside(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    (tmp_path / "ceilings.json").write_text("{broken")
    with pytest.warns(UserWarning, match="unreadable"):
        assert ceilings.cached_ceilings(torch.device("cpu")) is None
    assert list(tmp_path.glob("ceilings.corrupt-*.json"))


def test_suite_discovers_both_conventions(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "a_new.py").write_text("")
    (tmp_path / "lonely.py").write_text("")
    (tmp_path / "ref").mkdir()
    (tmp_path / "cand").mkdir()
    (tmp_path / "ref" / "b.py").write_text("")
    (tmp_path / "cand" / "b.py").write_text("")
    assert [p.name for p in suite.discover_pairs(tmp_path)] == ["a", "b"]
    with pytest.raises(ValueError, match="no pairs"):
        suite.discover_pairs(tmp_path / "ref")


def test_fast_p_and_geomean() -> None:
    def row(speed: float | None, ok: bool = True) -> dict:
        sp = {"vs": {"reference": {"value": speed}}} if speed else None
        return {"status": "ok" if ok else "rejected", "speedup": sp}

    rows = [row(0.5), row(1.2), row(1.6), row(3.0), row(None, ok=False)]
    s = suite.summarize(rows)
    assert s["pairs"] == 5 and s["correct"] == 4
    assert s["fast_0"] == pytest.approx(4 / 5)
    assert s["fast_1"] == pytest.approx(3 / 5)
    assert s["fast_1.5"] == pytest.approx(2 / 5)
    assert s["fast_2"] == pytest.approx(1 / 5)
    assert s["geomean_speedup"] == pytest.approx(
        math.exp(sum(map(math.log, [0.5, 1.2, 1.6, 3.0])) / 4)
    )


def test_shard_takes_every_world_th_pair() -> None:
    items = list(range(7))
    assert suite.Shard(1, 3).take(items) == [1, 4]
    assert suite.Shard(0, 1).take(items) == items
