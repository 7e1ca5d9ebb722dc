"""The harness commands: exit codes, reports written, the default suite through a loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from warpforge.harness import ceilings, commands, report

CHEATS = Path(__file__).parent / "cheats"
ROOT = Path(__file__).resolve().parents[2]


def _app(problems: list | None = None) -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test app"""

    commands.register(app, problem_loader=lambda: list(problems or []))
    return app


def test_verify_module_entry_point_exit_codes(tmp_path: Path) -> None:
    # `python -m warpforge` spawns the candidate's worker without re-running the CLI in it
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-m", "warpforge", "verify", str(CHEATS / "ref_scale.py"),
         str(CHEATS / "honest_scale.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "correct" in run.stdout


def test_verify_rejects_with_one_line_per_failed_check() -> None:
    result = CliRunner().invoke(
        _app(), ["verify", str(CHEATS / "ref_scale.py"), str(CHEATS / "wrong_shape.py")]
    )
    assert result.exit_code == 1, result.output
    fails = [line for line in result.output.splitlines() if line.startswith("FAIL")]
    assert fails == [line for line in fails if "[wrong-shape]" in line] and fails
    if not torch.cuda.is_available():
        assert "skipped (GPU only)" in result.output


def test_verify_load_errors_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(_app(), ["verify", str(tmp_path / "nope.py"), str(CHEATS / "crash.py")])
    assert missing.exit_code == 2
    no_class = runner.invoke(
        _app(), ["verify", str(CHEATS / "ref_scale.py"), str(CHEATS / "no_model_new.py")]
    )
    assert no_class.exit_code == 2 and "ModelNew" in no_class.output


def test_bench_usage_errors_exit_2() -> None:
    result = CliRunner().invoke(_app(), ["bench", str(CHEATS / "ref_scale.py")])
    assert result.exit_code == 2
    nothing = CliRunner().invoke(_app([]), ["bench", "--no-ceilings"])
    assert nothing.exit_code == 2 and "no built-in problems" in nothing.output


def test_bench_shape_filter_keeps_the_rows_asked_for(tmp_path: Path) -> None:
    from test_builtin_suite import _axpb, _problem

    good = _problem(_axpb, "test.good")
    shapes = good.shapes if torch.cuda.is_available() else good.cpu_shapes  # bench's device
    wanted = shapes[-1]["N"]
    out = tmp_path / "one.json"
    args = ["bench", "--no-ceilings", "--dtype", "fp32", "--out", str(out)]
    result = CliRunner().invoke(_app([good]), [*args, "--shape", f"N={wanted}"])
    assert result.exit_code == 0, result.output
    assert [r["shape"] for r in report.load_report(out)["results"]] == [{"N": wanted}]
    none = CliRunner().invoke(_app([good]), [*args, "--shape", "N=3"])
    assert none.exit_code == 2 and "no row" in none.output
    bad = CliRunner().invoke(_app([good]), [*args, "--shape", "N=x"])
    assert bad.exit_code == 2 and "--shape" in bad.output
    pair = CliRunner().invoke(
        _app(), ["bench", str(CHEATS / "ref_scale.py"), str(CHEATS / "honest_scale.py"),
                 "--shape", "N=7"],
    )  # fmt: skip
    assert pair.exit_code == 2 and "built-in suite" in pair.output


def test_bench_default_suite_writes_report_and_fails_on_rejection(tmp_path: Path) -> None:
    from test_builtin_suite import _axpb, _mutating, _problem

    good = _problem(_axpb, "test.good")
    out = tmp_path / "good.json"
    result = CliRunner().invoke(
        _app([good]), ["bench", "--no-ceilings", "--out", str(out), "--dtype", "fp32"]
    )
    assert result.exit_code == 0, result.output
    data = report.load_report(out)
    assert data["kind"] == "builtin-suite"
    shapes = good.shapes if torch.cuda.is_available() else good.cpu_shapes  # bench's default device
    assert [r["status"] for r in data["results"]] == ["ok"] * len(shapes)
    assert data["results"][0]["verification"]["passed"] is True
    bad = _problem(_mutating, "test.bad")
    result = CliRunner().invoke(
        _app([good, bad]),
        ["bench", "--no-ceilings", "--out", str(tmp_path / "bad.json"), "--problem", "test.b*",
         "--dtype", "fp32"],
    )  # fmt: skip
    assert result.exit_code == 1
    rows = report.load_report(tmp_path / "bad.json")["results"]
    assert {r["problem"] for r in rows} == {"test.bad"}
    assert "input-mutation" in result.output


def test_suite_reports_fast_p(tmp_path: Path) -> None:
    for name, ref, cand in [
        ("good", "ref_scale", "honest_scale"),
        ("bad", "ref_scale", "nan_output"),
    ]:
        (tmp_path / f"{name}.py").write_text((CHEATS / f"{ref}.py").read_text())
        (tmp_path / f"{name}_new.py").write_text((CHEATS / f"{cand}.py").read_text())
    out = tmp_path / "suite.json"
    result = CliRunner().invoke(
        _app(), ["suite", str(tmp_path), "--out", str(out), "--no-ceilings", "--max-time", "0.2"]
    )
    assert result.exit_code == 1, result.output  # one pair rejected
    data = report.load_report(out)
    assert data["summary"]["pairs"] == 2 and data["summary"]["correct"] == 1
    assert data["summary"]["fast_0"] == pytest.approx(0.5)
    statuses = {r["problem"]: r["status"] for r in data["results"]}
    assert statuses == {"bad": "rejected", "good": "ok"}
    good = next(r for r in data["results"] if r["problem"] == "good")
    assert {"candidate", "reference"} <= set(good["times"])


def test_compare_and_roofline_commands(tmp_path: Path) -> None:
    from test_reports_and_ceilings import CEIL, _row

    old = report.write_report(
        report.new_report("s", [_row("a", 1e-3, 2e-3)], ceilings=CEIL), tmp_path / "old.json"
    )
    slow = report.new_report("s", [_row("a", 1.2e-3, 2e-3)], ceilings=CEIL)
    new = report.write_report(slow, tmp_path / "new.json")
    runner = CliRunner()
    assert runner.invoke(_app(), ["compare", str(old), str(old)]).exit_code == 0
    regressed = runner.invoke(_app(), ["compare", str(old), str(new), "--json"])
    assert regressed.exit_code == 1
    assert json.loads(regressed.output)[0]["status"] == "regression"
    assert runner.invoke(_app(), ["compare", str(old), str(tmp_path / "none.json")]).exit_code == 2
    elsewhere = json.loads(new.read_text())
    elsewhere["environment"]["device"] = {"name": "Another GPU"}
    other = tmp_path / "other-device.json"
    other.write_text(json.dumps(elsewhere))
    refused = runner.invoke(_app(), ["compare", str(old), str(other)])
    assert refused.exit_code == 2 and "--across-devices" in refused.output
    across = runner.invoke(_app(), ["compare", str(old), str(other), "--across-devices"])
    assert across.exit_code == 1  # compared: the slowdown is a regression again
    png = tmp_path / "roof.png"
    drawn = runner.invoke(_app(), ["roofline", str(new), "-o", str(png)])
    assert drawn.exit_code == 0, drawn.output
    assert png.stat().st_size > 1000


def test_ceilings_command_json_uses_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    runner = CliRunner()
    first = runner.invoke(_app(), ["ceilings", "--json", "--quick"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["from_cache"] is False and data["copy_bytes_per_s"] > 0
    second = json.loads(runner.invoke(_app(), ["ceilings", "--json"]).output)
    assert second["from_cache"] is True
    assert ceilings.cached_ceilings() is not None


def _sharded_suite(tmp_path: Path, nproc: int, env_overrides: dict[str, str]) -> None:
    """Run ``warpforge suite`` under torchrun over ``nproc`` ranks; check the one merged report."""
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    names = ["a", "b", "c"]
    for name in names:
        (pairs / f"{name}.py").write_text((CHEATS / "ref_scale.py").read_text())
        (pairs / f"{name}_new.py").write_text((CHEATS / "honest_scale.py").read_text())
    out = tmp_path / "merged.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env_overrides}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
         "-m", "warpforge",
         "suite", str(pairs), "--out", str(out), "--no-ceilings", "--max-time", "0.2"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    data = report.load_report(out)
    findings = [(r["problem"], r["verification"].get("findings")) for r in data["results"]]
    assert data["world_size"] == nproc
    assert [r["problem"] for r in data["results"]] == names
    assert data["summary"]["correct"] == len(names), findings
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_suite_sharded_under_torchrun_merges_one_report(tmp_path: Path) -> None:
    # two CPU ranks (gloo) whatever GPUs this machine has; NCCL over GPUs is the test below
    _sharded_suite(tmp_path, 2, {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"})


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="needs at least 2 visible GPUs for NCCL sharding",
)
def test_gpu_suite_sharded_over_gpus_with_nccl(tmp_path: Path) -> None:
    _sharded_suite(tmp_path, torch.cuda.device_count(), {})


def test_bench_pair_with_baseline_times_all_in_one_run(tmp_path: Path) -> None:
    out = tmp_path / "pair.json"
    result = CliRunner().invoke(
        _app(),
        ["bench", str(CHEATS / "ref_scale.py"), str(CHEATS / "honest_scale.py"), "--baseline",
         str(CHEATS / "ref_scale.py"), "--out", str(out), "--max-time", "0.2", "--no-ceilings"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = report.load_report(out)["results"][0]
    assert set(row["times"]) == {"candidate", "reference", "baseline:ref_scale.py"}
    assert set(row["speedup"]["vs"]) == {"reference", "baseline:ref_scale.py"}
    assert all(t["samples"] >= 10 for t in row["times"].values())
    if not torch.cuda.is_available():
        assert "CPU times" in result.output
    rejected = CliRunner().invoke(
        _app(),
        ["bench", str(CHEATS / "ref_scale.py"), str(CHEATS / "lower_precision.py"), "--out",
         str(tmp_path / "bad.json"), "--no-ceilings"],
    )  # fmt: skip
    assert rejected.exit_code == 1
    assert report.load_report(tmp_path / "bad.json")["results"][0]["times"] == {}


def test_bench_verify_only_checks_without_timing(tmp_path: Path, monkeypatch) -> None:
    from test_builtin_suite import _axpb, _mutating, _problem

    from warpforge.harness import bench as bench_mod

    def no_timing(*args, **kwargs):
        raise AssertionError("--verify-only timed a row")

    monkeypatch.setattr(bench_mod, "time_problem", no_timing)
    good, bad = _problem(_axpb, "test.good"), _problem(_mutating, "test.bad")
    out = tmp_path / "verified.json"
    args = ["bench", "--verify-only", "--no-ceilings", "--dtype", "fp32", "--out", str(out)]
    result = CliRunner().invoke(_app([good]), args)
    assert result.exit_code == 0, result.output
    data = report.load_report(out)
    assert data["verify_only"] is True
    assert all(r["verification"]["passed"] is True and not r["times"] for r in data["results"])
    rejected = CliRunner().invoke(_app([good, bad]), args)
    assert rejected.exit_code == 1, rejected.output
    pair = CliRunner().invoke(
        _app(), ["bench", "--verify-only", str(CHEATS / "ref_scale.py"),
                 str(CHEATS / "honest_scale.py")],
    )  # fmt: skip
    assert pair.exit_code == 2 and "--verify-only" in pair.output


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [("bench", "--max-time", "0"), ("bench", "--max-time", "nan"), ("verify", "--timeout", "nan"),
     ("verify", "--timeout", "-1"), ("bench", "--timeout", "0")],
)  # fmt: skip
def test_seconds_options_must_be_finite_and_positive(command: str, option: str, value: str) -> None:
    """A usage error (exit 2 naming the option), not a traceback deep in timing (exit 1)."""
    pair = [str(CHEATS / "ref_scale.py"), str(CHEATS / "honest_scale.py")]
    done = CliRunner().invoke(_app(), [command, *pair, option, value])
    assert done.exit_code == 2, done.output
    assert option in done.output and "finite number of seconds > 0" in done.output
