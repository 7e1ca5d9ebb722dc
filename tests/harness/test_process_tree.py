"""Finding and ending the processes a candidate started, whatever group or session they moved to
(Linux: a child subreaper and the parent links in /proc)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from warpforge.harness import isolation, process_tree

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="child subreapers and /proc are Linux's"
)

# A subreaper with a child in a session of its own and a daemon (fork, setsid, fork again; the
# middle process exits, so its child is an orphan). process_tree is loaded by its path: importing
# warpforge would import torch, a second or two per test.
_SUBREAPER_WITH_ESCAPEES = textwrap.dedent(
    """
    import importlib.util, os, sys, time
    spec = importlib.util.spec_from_file_location("process_tree", sys.argv[1])
    process_tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(process_tree)
    process_tree.become_subreaper()
    session_made, session_made_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        os.write(session_made_w, b"x")  # "ready" waits for this: a loaded machine may run the
        time.sleep(60)                  # child's setsid after the parent's print otherwise
        os._exit(0)
    os.read(session_made, 1)
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    print("ready", flush=True)
    time.sleep(60)
    """
)


def _session(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[3])


@linux_only
def test_a_subreaper_keeps_escaped_orphans_in_reach_and_they_are_all_killed() -> None:
    root = subprocess.Popen(
        [sys.executable, "-c", _SUBREAPER_WITH_ESCAPEES, process_tree.__file__],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert root.stdout is not None and root.stdout.readline() == "ready\n"
        escaped = process_tree.living_descendants(root.pid)
        assert len(escaped) == 2, escaped  # the orphaned daemon too, re-parented to the root
        assert all(_session(pid) != _session(root.pid) for pid in escaped)
        assert process_tree.end_descendants(root.pid) == sorted(escaped)
        assert process_tree.living_descendants(root.pid) == []
        assert root.poll() is None  # the root itself is left alone
    finally:
        root.kill()
        root.wait()


def test_without_linux_or_proc_nothing_is_found_and_nothing_fails(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(OSError, match="no child subreaper on darwin"):
        process_tree.become_subreaper()
    monkeypatch.setattr(process_tree, "PROC", str(tmp_path / "no-proc"))
    assert process_tree.living_descendants(os.getpid()) == []
    assert process_tree.end_descendants(os.getpid(), within_s=0.1) == []


def test_descendants_are_found_after_their_parents_and_signalled_before_them(
    monkeypatch, tmp_path
) -> None:
    """A fake /proc of root 1 -> 2 -> (3 -> 5, 4) plus a zombie 6 under 2 and a stranger 7: the
    scan lists each process after its parent and leaves the zombie and the stranger out; a kill
    pass signals children before their parents, so a process waiting for its parent (a worker)
    to die is killed while the parent still lives."""
    links = {2: 1, 3: 2, 4: 2, 5: 3, 6: 2, 7: 99}
    for pid, ppid in links.items():
        (tmp_path / str(pid)).mkdir()
        state = "Z" if pid == 6 else "S"
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) {state} {ppid} 0 0\n")
    monkeypatch.setattr(process_tree, "PROC", str(tmp_path))
    found = process_tree.living_descendants(1)
    assert sorted(found) == [2, 3, 4, 5]
    assert all(found.index(links[pid]) < found.index(pid) for pid in found if links[pid] != 1)
    signalled: list[int] = []
    scans = iter([found, []])
    monkeypatch.setattr(process_tree, "living_descendants", lambda root: next(scans))
    monkeypatch.setattr(process_tree.os, "kill", lambda pid, sig: signalled.append(pid))
    assert process_tree.end_descendants(1) == [2, 3, 4, 5]
    assert signalled == found[::-1]
    assert all(signalled.index(pid) < signalled.index(links[pid]) for pid in (3, 4, 5))


def test_process_tree_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match=r"root: expected a process id \(int\), got str '1'"):
        process_tree.living_descendants("1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="within_s: expected a number of seconds > 0, got 0"):
        process_tree.end_descendants(os.getpid(), within_s=0)
    with pytest.raises(TypeError, match="within_s: expected a number of seconds, got str '2'"):
        process_tree.end_descendants(os.getpid(), within_s="2")  # type: ignore[arg-type]


def test_a_worker_without_subreaper_is_logged_once_per_reason(caplog) -> None:
    isolation._note_no_subreaper.cache_clear()
    with caplog.at_level(logging.WARNING, logger="warpforge.harness.isolation"):
        for _ in range(2):
            isolation._note_no_subreaper("no child subreaper on darwin (Linux only)")
    assert len(caplog.records) == 1
    assert "not ended after the run" in caplog.records[0].getMessage()
