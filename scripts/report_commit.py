"""Find the commit whose ``src/warpforge`` a report's code was.

Every report's environment records ``git_commit`` (from ``.git`` or ``WARPFORGE_GIT_COMMIT``)
and ``source_sha256``, a hash of the package's files as they were on disk when it ran
(``warpforge.environment.source_tree_hash``). The first can be stale on a copied tree; this
hashes ``src/warpforge`` at each of the last commits and names the one that matches:

    python scripts/report_commit.py REPORT.json [...] [--commits 200]

Exit status 1 when a report has no ``source_sha256`` or no commit among those searched matches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from warpforge.environment import source_files_hash

PACKAGE = "src/warpforge"


def _git(*args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], input=data, capture_output=True, check=True).stdout


def commit_source_hash(commit: str) -> str:
    """``source_files_hash`` of ``src/warpforge`` at ``commit``, as the package's files."""
    listing = _git("ls-tree", "-r", "-z", commit, "--", PACKAGE).split(b"\0")
    entries = []  # (path under the package, blob id)
    for line in filter(None, listing):
        meta, path = line.split(b"\t", 1)
        entries.append((path.decode()[len(PACKAGE) + 1 :], meta.split()[2].decode()))
    batch = _git("cat-file", "--batch", data="".join(f"{b}\n" for _, b in entries).encode())
    files, offset = [], 0
    for name, _ in entries:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        files.append((name, batch[header_end + 1 : header_end + 1 + size]))
        offset = header_end + 1 + size + 1  # the blob and its trailing newline
    return source_files_hash(files)


def _tree_of(commit: str, hashes: dict[str, str | None]) -> str | None:
    """``commit_source_hash(commit)``, remembered; None for a commit this clone lacks."""
    if commit not in hashes:
        try:
            hashes[commit] = commit_source_hash(commit)
        except subprocess.CalledProcessError:
            hashes[commit] = None
    return hashes[commit]


def _environment(report: dict) -> dict:
    return report.get("environment") or report.get("environment_fingerprint") or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--commits", type=int, default=200, help="how many commits to search")
    args = parser.parse_args(argv)
    commits = _git("rev-list", f"--max-count={args.commits}", "HEAD").decode().split()
    hashes: dict[str, str | None] = {}
    status = 0
    for path in args.reports:
        env = _environment(json.loads(path.read_text()))
        wanted, recorded = env.get("source_sha256"), env.get("git_commit")
        if not wanted:
            print(f"{path}: no source_sha256 (written before reports recorded it)")
            status = 1
            continue
        recorded_commit = str(recorded or "").removesuffix("-dirty")
        if recorded_commit and _tree_of(recorded_commit, hashes) == wanted:
            print(f"{path}: source of its git_commit {recorded_commit[:12]}")
            continue
        found = next((c for c in commits if _tree_of(c, hashes) == wanted), None)
        if found is None:
            print(f"{path}: no commit among the last {len(commits)} has this source tree"
                  f" (the report says git_commit {recorded})")  # fmt: skip
            status = 1
        else:
            print(f"{path}: source of commit {found[:12]}, the newest searched with this tree"
                  f" (the report says git_commit {recorded})")  # fmt: skip
    return status


if __name__ == "__main__":
    sys.exit(main())
