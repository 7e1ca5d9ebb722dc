"""scripts/gpu/problem_run.py: the profiler's driver runs a problem and refuses bad arguments."""

from __future__ import annotations

import pytest

from script_module import load_script

problem_run = load_script("scripts/gpu/problem_run.py")


@pytest.mark.parametrize("impl", ["warpforge", "eager"])
def test_runs_a_problem_on_its_cpu_shape(impl: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["blueprint.causal_attention_scores", "--device", "cpu", "--dtype", "fp32",
            "--impl", impl, "--warmup", "1", "--iters", "1"]  # fmt: skip
    assert problem_run.main(argv) == 0
    out = capsys.readouterr().out
    assert f"blueprint.causal_attention_scores {impl} " in out and "1+1 calls" in out


def test_an_explicit_shape_is_used(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["blueprint.bias_gelu", "--device", "cpu", "--dtype", "fp32", "--shape", "T=3,H=5",
            "--warmup", "0", "--iters", "1"]  # fmt: skip
    assert problem_run.main(argv) == 0
    assert "{'T': 3, 'H': 5}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["blueprint.bias_gelu", "--device", "cpu", "--impl", "nope"], "--impl: expected"),
        (["blueprint.nope", "--device", "cpu"], "no problem named 'blueprint.nope'"),
    ],
)
def test_bad_arguments_are_named(argv: list[str], message: str) -> None:
    with pytest.raises((SystemExit, ValueError), match=message):
        problem_run.main(argv)


def test_a_malformed_shape_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        problem_run.main(["blueprint.bias_gelu", "--device", "cpu", "--shape", "T=x"])
    assert "--shape: expected NAME=INT" in capsys.readouterr().err
