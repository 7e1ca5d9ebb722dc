from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.tune.database import PerfDatabase

runner = CliRunner()
ENV = {"COLUMNS": "250"}
SHAPE = ["--shape", "M=3,N=20"]


def _invoke(*args: str):
    return runner.invoke(app, list(args), env=ENV)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'perf.db'}"


def test_tune_without_an_op_lists_the_tunables() -> None:
    result = _invoke("tune")
    assert result.exit_code == 0, result.output
    assert "row_sum" in result.output and "BLOCK_N" in result.output


def test_exhaustive_tune_stores_every_trial_and_prints_the_best(url: str) -> None:
    result = _invoke("tune", "row_sum", *SHAPE, "--db", url)
    assert result.exit_code == 0, result.output
    with PerfDatabase(url) as db:
        trials = db.trials(kernel="row_sum")
        best = db.best_configs(kernel="row_sum")
    assert len(trials) == 9 and all(t.status == "ok" for t in trials)
    assert len(best) == 1
    assert "M=3,N=20" in result.output and f"BLOCK_N={best[0].config['BLOCK_N']}" in result.output
    assert "9/0/0" in result.output


def test_budgeted_tune_with_two_dtypes(url: str) -> None:
    result = _invoke(
        "tune",
        "row_sum",
        *SHAPE,
        "--dtype",
        "fp32",
        "--dtype",
        "fp16",
        "--budget",
        "0.5",
        "--db",
        url,
    )
    assert result.exit_code == 0, result.output
    with PerfDatabase(url) as db:
        best = db.best_configs(kernel="row_sum")
        assert {b.features["dtype"] for b in best} == {"float32", "float16"}
        assert 2 <= db.count_trials(kernel="row_sum") <= 18
    assert "/?" in result.output  # a budgeted search: its progress has no known total


def test_refine_starts_from_the_nearest_tuned_shape_and_stops_at_its_trials(url: str) -> None:
    assert _invoke("tune", "row_sum", *SHAPE, "--db", url).exit_code == 0
    seen: list[dict] = []
    from warpforge.tune import search

    real = search.evaluate_config

    def spy(problem, config, timer):
        seen.append(dict(config))
        return real(problem, config, timer)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "evaluate_config", spy)
        result = _invoke("tune", "row_sum", "--shape", "M=3,N=40", "--refine", "3", "--db", url)
    assert result.exit_code == 0, result.output
    with PerfDatabase(url) as db:
        tuned = db.best_configs(kernel="row_sum")
        refined = [t for t in db.trials(kernel="row_sum") if t.features["N"] == 40]
    near = next(b for b in tuned if b.features["N"] == 20)
    assert 1 <= len(refined) <= 3 and len(seen) == len(refined)
    assert seen[0] == near.config  # the nearest tuned shape's best is tried first


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune", "no_such_op"], "no tunable kernel named 'no_such_op'"),
        (["tune", "row_sum", "--shape", "M=3"], "missing"),
        (["tune", "row_sum", "--shape", "M=x"], "shape"),
        (["tune", "row_sum", "--dtype", "int8"], "dtype"),
        (["tune", "row_sum", "--budget", "0"], "--budget"),
        (["tune", "row_sum", "--budget", "nan"], "--budget: expected a finite number"),
        (["tune", "row_sum", "--shape", "M=3,N=4,M=5"], "'M' twice"),
        (["tune", "row_sum", "--budget", "1", "--exhaustive"], "exclude"),
        (["tune", "row_sum", "--refine", "0"], "--refine"),
        (["tune", "row_sum", "--refine", "3", "--exhaustive"], "--refine excludes"),
        (["tune", "row_sum", "--trial-timeout", "0"], "--trial-timeout: expected a finite"),
        (["tune", "row_sum", "--trial-timeout", "inf"], "--trial-timeout: expected a finite"),
    ],
)
def test_tune_errors_are_clear(args: list[str], message: str, url: str) -> None:
    result = _invoke(*args, "--db", url)
    assert result.exit_code != 0
    assert message in result.output


def test_a_problem_whose_inputs_cannot_be_made_is_reported_not_a_traceback(url: str) -> None:
    huge = "M=100000000,N=100000000"  # 40 PB of float32: the allocation fails at once
    result = _invoke("tune", "row_sum", "--shape", huge, "--db", url)
    assert result.exit_code == 1
    assert f"row_sum {huge} float32: not tuned: " in result.output.replace("\n", "")
    assert not isinstance(result.exception, RuntimeError)


def test_db_show_export_import(url: str, tmp_path: Path) -> None:
    assert _invoke("tune", "row_sum", *SHAPE, "--db", url).exit_code == 0
    shown = _invoke("db", "show", "--db", url)
    assert shown.exit_code == 0, shown.output
    assert "row_sum" in shown.output and "M=3 N=20 dtype=float32" in shown.output
    trials = _invoke("db", "show", "--trials", "--status", "ok", "--limit", "3", "--db", url)
    assert trials.exit_code == 0 and trials.output.count("row_sum") == 3
    empty = _invoke("db", "show", "--kernel", "nothing", "--db", url)
    assert empty.exit_code == 0 and "0 shown" in empty.output

    configs = tmp_path / "configs.json"
    exported = _invoke("db", "export", str(configs), "--kernel", "row_sum", "--db", url)
    assert exported.exit_code == 0 and "wrote 1 best configs" in exported.output
    assert json.loads(configs.read_text())["kernels"]["row_sum"][0]["features"]["M"] == 3
    all_trials = tmp_path / "trials.json"
    assert _invoke("db", "export", str(all_trials), "--trials", "--db", url).exit_code == 0

    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = _invoke("db", "import", str(all_trials), "--db", other)
    assert imported.exit_code == 0 and "imported 9 trials" in imported.output
    imported = _invoke("db", "import", str(configs), "--db", other)
    assert imported.exit_code == 0 and "imported 1 trials" in imported.output
    with PerfDatabase(other) as db:
        assert db.count_trials() == 10


def test_db_commands_fail_clearly(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    result = _invoke("db", "show", "--db", missing)
    assert result.exit_code == 1 and "no performance database" in result.output
    assert not (tmp_path / "none.db").exists()
    assert "--limit" in _invoke("db", "show", "--limit", "0", "--db", missing).output
    assert "--status" in _invoke("db", "show", "--status", "fast", "--db", missing).output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = _invoke("db", "import", str(bad), "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.exit_code == 1 and "format" in result.output


def test_db_stale_lists_configs_tuned_on_an_earlier_kernel_source(tmp_path: Path) -> None:
    from test_shipped import _shipped_file

    # the package's own shipped tables are re-tuned whenever a kernel changes: nothing is stale
    shipped = _invoke("db", "stale", "--args")
    assert shipped.exit_code == 0, shipped.output
    assert shipped.output.strip() == ""
    path = _shipped_file(
        tmp_path / "old.json", "rms_norm.fwd", [({"M": 64, "N": 1024, "dtype": "float16"},
                                                {"BLOCK_N": 1024}, "an-earlier-source")],
    )  # fmt: skip
    listed = _invoke("db", "stale", str(path), "--args")
    assert listed.exit_code == 0, listed.output
    assert listed.output.split() == ["rms_norm.fwd", "float16", "M=64,N=1024"]
    table = _invoke("db", "stale", str(path))
    assert "1 stale shipped config" in table.output and "old.json" in table.output


def test_the_cli_names_the_watchdogs_exit_status() -> None:
    """`warpforge tune --help` documents the trial watchdog and the exit status it stops with."""
    from warpforge.tune import STOPPED_EXIT_CODE

    result = _invoke("tune", "--help")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())  # the help box wraps lines
    assert "--trial-timeout" in text
    assert f"exits with status {STOPPED_EXIT_CODE}" in text


def test_db_lookup_shows_each_problems_config_and_where_it_comes_from(url: str) -> None:
    tuned = ["--shape", "M=3,N=20"]
    assert _invoke("tune", "row_sum", *tuned, "--exhaustive", "--db", url).exit_code == 0
    with PerfDatabase(url) as db:
        (best,) = db.best_configs(kernel="row_sum")
    result = _invoke("db", "lookup", "row_sum", *tuned, "--shape", "M=5,N=40", "--db", url)
    assert result.exit_code == 0, result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines()
             if line.count("│") > 4 and "M=" in line}  # fmt: skip
    assert set(lines) == {"M=3,N=20", "M=5,N=40"}
    assert "database exact" in lines["M=3,N=20"]
    assert " ".join(f"{k}={v}" for k, v in best.config.items()) in lines["M=3,N=20"]
    assert "database" in lines["M=5,N=40"] and "exact" not in lines["M=5,N=40"]
    missing = _invoke("db", "lookup", "no_such_op", "--db", url)
    assert missing.exit_code == 1 and "no tunable kernel named 'no_such_op'" in missing.output


def _without_interpreter_flags() -> dict[str, str]:
    import os

    return {
        k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "WARPFORGE_INTERPRET")
    }


def test_tune_without_a_gpu_runs_the_kernels_under_the_interpreter_unasked(url: str) -> None:
    import subprocess
    import sys

    from warpforge import runtime

    if runtime.cuda_available():
        pytest.skip("with a GPU the kernels run there")
    command = [sys.executable, "-m", "warpforge", "tune", "row_sum", *SHAPE, "--exhaustive"]
    env = {**_without_interpreter_flags(), **ENV}
    done = subprocess.run([*command, "--db", url], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with PerfDatabase(url) as db:
        trials = db.trials(kernel="row_sum")
    # before, every trial was an error ("0 active drivers"): Triton had no backend to run on
    assert len(trials) == 9 and {t.status for t in trials} == {"ok"}
    assert {t.device for t in trials} == {"cpu/triton-interpreter"}
    off = subprocess.run(
        [*command, "--db", url],
        capture_output=True,
        text=True,
        env={**env, "TRITON_INTERPRET": "0", "WARPFORGE_INTERPRET": "0"},
    )
    assert off.returncode == 1 and "Triton's interpreter is switched off" in off.stderr


def test_tune_stops_with_the_stop_status_when_a_config_breaks_the_device(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tune_synthetic import make_synthetic

    from warpforge.tune import search
    from warpforge.tune.tunable import register_tunable, unregister_tunable

    kernel = make_synthetic("breaks_the_device")
    state = {"broken": False}

    def run(config, x):
        if state["broken"] or config["BLOCK"] == 512:
            state["broken"] = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return kernel.run(config, x)

    monkeypatch.setattr(search, "device_usable", lambda d: not state["broken"])
    register_tunable(type(kernel)(**{**kernel.__dict__, "run": run}), replace=True)
    try:
        result = _invoke("tune", "breaks_the_device", "--shape", "N=1024", "--exhaustive",
                         "--db", url)  # fmt: skip
    finally:
        unregister_tunable("breaks_the_device")
    assert result.exit_code == search.STOPPED_EXIT_CODE, result.output
    assert "stopped:" in result.output and "unusable" in result.output
    with PerfDatabase(url) as db:
        last = db.trials(kernel="breaks_the_device")[-1]
    assert last.config["BLOCK"] == 512 and last.error.startswith(search.BROKE_DEVICE)
