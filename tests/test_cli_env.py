import json
import subprocess
import sys

import torch
from typer.testing import CliRunner

from warpforge import runtime
from warpforge.cli import app


def test_env_json_reports_versions_and_device():
    result = CliRunner().invoke(app, ["env", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["torch"] == torch.__version__
    assert info["triton"]
    assert info["device"]["arch"] == runtime.device_capabilities().arch
    assert info["interpreter"] == runtime.interpreter_enabled()
    assert info["database_url"].startswith(("sqlite:///", "postgresql://"))


def test_env_table_renders():
    result = CliRunner().invoke(app, ["env"])
    assert result.exit_code == 0, result.output
    assert "torch" in result.output and "device.arch" in result.output


def test_env_honours_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["env", "--json"])
    info = json.loads(result.output)
    assert info["cache_dir"] == str(tmp_path)
    assert info["database_url"] == f"sqlite:///{tmp_path / 'perf.db'}"


def test_import_is_cheap():
    # import warpforge must not import triton or compile anything
    code = "import sys, warpforge; print('triton' in sys.modules, 'warpforge.ops' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
