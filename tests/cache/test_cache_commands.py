import json
import subprocess
import sys

import pytest
from cache_samples import make_artifact, make_key
from typer.testing import CliRunner

from warpforge.cache import KernelRegistry
from warpforge.cli import app

runner = CliRunner()


@pytest.fixture
def populated(tmp_path, monkeypatch) -> KernelRegistry:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path / "wf"))
    registry = KernelRegistry.from_environment()
    for name in "abc":
        registry.put(make_key(name), make_artifact(name))
    return registry


def test_stats_json_and_table(populated):
    result = runner.invoke(app, ["cache", "stats", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["disk"]["entries"] == 3 and info["disk"]["root"] == str(populated.disk.root)
    assert info["redis"] is None
    # the counters are the CLI process's own, and labelled so
    assert info["metrics_scope"].startswith("counters (hits, builds, fallbacks) are per process")
    table = runner.invoke(app, ["cache", "stats"])
    assert table.exit_code == 0 and "disk" in table.output and "redis" in table.output
    assert "are per process" in table.output and "snapshot()" in table.output


def test_verify_exits_non_zero_and_lists_corrupted_entries(populated):
    assert runner.invoke(app, ["cache", "verify"]).exit_code == 0
    entry = populated.disk.entry_dir(make_key("b"))
    (entry / "kernel.py").write_bytes(b"tampered")
    result = runner.invoke(app, ["cache", "verify"])
    assert result.exit_code == 1
    assert f"CORRUPTED {make_key('b').digest()}" in result.output
    assert "1 corrupted entries quarantined" in result.output
    assert runner.invoke(app, ["cache", "verify"]).exit_code == 0  # quarantined: clean now


def test_clear_asks_unless_yes(populated):
    refused = runner.invoke(app, ["cache", "clear", "--tier", "disk"], input="n\n")
    assert refused.exit_code != 0 and populated.disk.stats()["entries"] == 3
    result = runner.invoke(app, ["cache", "clear", "--tier", "disk", "--yes"])
    assert result.exit_code == 0 and "disk: removed 3 entries" in result.output
    assert populated.disk.stats()["entries"] == 0
    bad = runner.invoke(app, ["cache", "clear", "--tier", "gpu", "--yes"])
    assert bad.exit_code == 2 and "expected one of" in bad.output


def test_clear_of_an_unconfigured_tier_says_so(populated):
    result = runner.invoke(app, ["cache", "clear", "--tier", "redis", "--yes"])
    assert result.exit_code == 0 and "redis tier is not configured" in result.output
    assert populated.disk.stats()["entries"] == 3


@pytest.mark.parametrize(
    "command", [["cache", "stats"], ["cache", "verify"], ["cache", "clear", "--yes"]]
)
def test_an_unusable_redis_url_is_one_line_and_exit_code_2(populated, monkeypatch, command):
    monkeypatch.setenv("WARPFORGE_REDIS_URL", "notaurl")
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: WARPFORGE_REDIS_URL: expected a redis://")
    assert "'notaurl'" in line
    assert populated.disk.stats()["entries"] == 3  # clear did nothing


def test_clear_removes_loaded_sources_of_ended_processes_only(populated, tmp_path):
    from warpforge.cache import loaded_sources

    live = loaded_sources.write_source("bp_live", b"x = 1\n")
    modules = loaded_sources.modules_root()
    assert live.parent.parent == modules == tmp_path / "wf" / "blueprint" / "modules"
    legacy = modules / "bp_legacy.py"  # written by an older warpforge, straight into modules/
    legacy.write_text("x = 2\n")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = modules / f"{live.parent.name.split('-')[0]}-{ended.pid}-abc"
    dead.mkdir()
    (dead / "bp_dead.py").write_text("x = 3\n")
    result = runner.invoke(app, ["cache", "clear", "--tier", "disk", "--yes"])
    assert result.exit_code == 0, result.output
    assert "removed 2 files of ended processes" in result.output
    assert not legacy.exists() and not dead.exists()
    assert live.exists()  # a running process may still import from its folder
