"""scripts/report_commit.py and the fingerprint's ``source_sha256``: a report names the code
that ran, and the script finds its commit even where the recorded ``git_commit`` is stale."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from script_module import load_script
from warpforge.environment import environment_fingerprint, source_tree_hash


@pytest.fixture(scope="module")
def report_commit():
    return load_script("scripts/report_commit.py")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with two commits of a tiny ``src/warpforge`` and a docs-only third."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    package = tmp_path / "src" / "warpforge"
    (package / "ops").mkdir(parents=True)
    (package / "ops" / "norm.py").write_text("WARPS = 16\n")
    (package / "shipped.json").write_text('{"k": 1}\n')
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "one")
    (package / "ops" / "norm.py").write_text("WARPS = 32\n")
    _git(tmp_path, "commit", "-qam", "two")
    (tmp_path / "README.md").write_text("docs\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "docs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_commits_tree_hashes_as_its_checkout(report_commit, repo: Path) -> None:
    package = repo / "src" / "warpforge"
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "norm.cpython-311.pyc").write_bytes(b"\0bytecode")
    head = _git(repo, "rev-parse", "HEAD")
    assert report_commit.commit_source_hash(head) == source_tree_hash(package)
    assert report_commit.commit_source_hash("HEAD~2") != source_tree_hash(package)


def test_the_script_names_the_commit_whose_tree_ran(report_commit, repo: Path, capsys) -> None:
    first = _git(repo, "rev-parse", "HEAD~2")
    second = _git(repo, "rev-parse", "HEAD~1")
    stale = repo / "stale.json"  # ran commit two's files with commit one's git_commit
    stale.write_text(json.dumps({"environment": {
        "git_commit": first, "source_sha256": report_commit.commit_source_hash(second)}}))  # fmt: skip
    honest = repo / "honest.json"
    honest.write_text(json.dumps({"environment_fingerprint": {
        "git_commit": first, "source_sha256": report_commit.commit_source_hash(first)}}))  # fmt: skip
    assert report_commit.main([str(stale), str(honest)]) == 0
    out = capsys.readouterr().out
    # the docs-only commit has commit two's tree and is the newest with it
    head = _git(repo, "rev-parse", "HEAD")
    assert f"stale.json: source of commit {head[:12]}, the newest searched" in out
    assert f"(the report says git_commit {first})" in out
    assert f"honest.json: source of its git_commit {first[:12]}" in out


def test_reports_without_a_match_or_a_hash_fail(report_commit, repo: Path, capsys) -> None:
    unknown = repo / "unknown.json"
    unknown.write_text(json.dumps({"environment": {"git_commit": "0" * 40,
                                                   "source_sha256": "f" * 64}}))  # fmt: skip
    old = repo / "old.json"
    old.write_text(json.dumps({"environment": {"git_commit": "abc"}}))
    assert report_commit.main([str(unknown)]) == 1
    assert "no commit among the last 3 has this source tree" in capsys.readouterr().out
    assert report_commit.main([str(old)]) == 1
    assert "no source_sha256" in capsys.readouterr().out


def test_the_fingerprint_records_the_package_source_hash() -> None:
    fingerprint = environment_fingerprint()
    assert fingerprint["source_sha256"] == source_tree_hash()
    assert len(fingerprint["source_sha256"]) == 64
