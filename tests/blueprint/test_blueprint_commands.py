"""``warpforge compile FILE.json|module:function [--show]``."""

from __future__ import annotations

import json
import os
import subprocess
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


def _bias_gelu_file(tmp_path: Path) -> Path:
    path = tmp_path / "bias_gelu.json"
    path.write_text(bias_gelu_blueprint("float32").to_json())
    return path


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_warm_builds_into_the_disk_cache_for_a_later_process(
    device: str, tmp_path: Path, fresh_blueprint_cache: Path
) -> None:
    """The first --warm generates the kernel, launches it once (on the CPU, under Triton's
    interpreter) and stores the entry on disk; a second process finds it there and builds
    nothing."""
    path = _bias_gelu_file(tmp_path)
    args = ["compile", str(path), "--warm", "--dim", "T=17", "--dim", "H=33", "--device", device,
            "--json"]  # fmt: skip
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    warmed = json.loads(first.output)["warm"]
    assert warmed["inputs"] == ["float32[17, 33]", "float32[33]"]
    assert warmed["builds"] == 1 and warmed["first_launches"] == 1
    assert warmed["misses"] == {"memory": 1, "disk": 1} and warmed["hits"] == {}
    assert any(fresh_blueprint_cache.rglob("*")), "nothing stored on disk"
    later = subprocess.run(
        [sys.executable, "-m", "warpforge", *args], capture_output=True, text=True, timeout=300,
        env={**os.environ, "WARPFORGE_CACHE_DIR": str(fresh_blueprint_cache)},
    )  # fmt: skip
    assert later.returncode == 0, later.stderr
    again = json.loads(later.stdout)["warm"]
    assert again["builds"] == 0 and again["hits"] == {"disk": 1}


def test_warm_uses_the_traced_functions_example_inputs() -> None:
    result = CliRunner().invoke(app, ["compile", f"{__name__}:example", "--warm"])
    assert result.exit_code == 0, result.output
    assert "warmed on cpu for float32[4, 8], float32[4, 8]" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        (["--dim", "T=4"], {}, "symbolic dim 'H'; give its size as --dim H=SIZE"),
        (["--dim", "T=4", "--dim", "H"], {}, "--dim: expected NAME=SIZE"),
        (["--dim", "T=4", "--dim", "H=-2"], {}, "--dim: expected NAME=SIZE"),
        (["--dim", "T=4", "--dim", "H=8", "--device", "tpu"], {}, "--device: expected cpu"),
        (["--dim", "T=4", "--dim", "H=8", "--device", "cpu"],
         {"TRITON_INTERPRET": "0", "WARPFORGE_INTERPRET": "0"}, "nothing to build on cpu"),
    ],
)  # fmt: skip
def test_warm_reports_bad_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], env: dict, message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["compile", str(_bias_gelu_file(tmp_path)), "--warm", *extra])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_warm_fails_loudly_when_a_kernel_does_not_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--warm builds strictly: a kernel that fails at its first launch (where Triton compiles)
    is an error naming the failure, not a silent fallback to the PyTorch reference."""
    from warpforge.blueprint.program import KernelProgram

    def broken(self, tensors):  # type: ignore[no-untyped-def]
        raise RuntimeError("injected Triton failure")

    monkeypatch.setattr(KernelProgram, "run", broken)
    args = ["compile", str(_bias_gelu_file(tmp_path)), "--warm", "--dim", "T=4", "--dim", "H=8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "--warm:" in result.output and "injected Triton failure" in result.output
