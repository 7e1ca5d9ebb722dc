"""``warpforge compile FILE.json|module:function [--show]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from warpforge.blueprint.problems import bias_gelu_blueprint
from warpforge.cli import app


def example(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * y


example.example_inputs = lambda: [torch.randn(4, 8), torch.randn(4, 8)]  # type: ignore[attr-defined]


def test_compile_json_file_shows_the_source(tmp_path: Path) -> None:
    path = tmp_path / "bias_gelu.json"
    path.write_text(bias_gelu_blueprint("float16").to_json())
    result = CliRunner().invoke(app, ["compile", str(path), "--show"])
    assert result.exit_code == 0, result.output
    assert "1 fused kernel(s) for 2 node(s)" in result.output
    assert "@triton.jit" in result.output
    assert "k0_add_gelu" in result.output


def test_compile_module_function_as_json() -> None:
    result = CliRunner().invoke(app, ["compile", f"{__name__}:example", "--json", "--show"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["kernels"] == 1
    assert [g["nodes"] for g in summary["groups"]] == [["sigmoid", "mul"]]
    assert "def k0_sigmoid_mul(" in summary["source"]


def test_compile_reports_bad_targets(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["compile", str(tmp_path / "none.json")])
    assert missing.exit_code != 0
    assert "is not a file" in missing.output
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    broken = CliRunner().invoke(app, ["compile", str(bad)])
    assert broken.exit_code == 2
    assert "not valid JSON" in broken.output
    no_attr = CliRunner().invoke(app, ["compile", f"{__name__}:nothing_here"])
    assert no_attr.exit_code != 0 and "has no attribute" in no_attr.output


def test_show_prints_whole_lines_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    from warpforge.blueprint import KernelSourceGenerator

    ir = bias_gelu_blueprint("float16")
    generator = KernelSourceGenerator(ir)
    source = generator.source(generator.plan())
    long_lines = [line for line in source.splitlines() if len(line) > 100]
    assert long_lines  # e.g. the tl.store of the output
    path = tmp_path / "bias_gelu.json"
    path.write_text(ir.to_json())
    result = CliRunner().invoke(app, ["compile", str(path), "--show"])  # captured: no terminal
    assert result.exit_code == 0, result.output
    for line in long_lines:
        assert line in result.output.splitlines()


def test_compile_imports_a_module_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wf_cwd_blueprint.py").write_text(
        "import torch\n\n"
        "def double(x):\n"
        "    return x * 2.0\n\n"
        "double.example_inputs = [torch.randn(2, 8)]\n"
    )
    monkeypatch.chdir(tmp_path)
    # the installed console script: neither '' nor the current directory on the path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "wf_cwd_blueprint", raising=False)
    result = CliRunner().invoke(app, ["compile", "wf_cwd_blueprint:double", "--json"])
    monkeypatch.delitem(sys.modules, "wf_cwd_blueprint", raising=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["kernels"] == 1
