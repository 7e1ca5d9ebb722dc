"""Every process a candidate started, found and ended whatever group or session it moved to.

The worker leads a process group that the harness kills, but a process can leave the group
(``setsid()``, or a daemon's double fork into a session of its own) and run on: rewriting files
after the run, loading the GPU while the next contender is timed. On Linux the worker becomes a
*child subreaper* before the candidate runs: an orphan among its descendants is re-parented to
the worker instead of to init, so while the worker lives every process the candidate started is
in the worker's subtree of parent links (``/proc/<pid>/stat``), whatever its group or session,
and :func:`end_descendants` finds and kills them all. Elsewhere nothing here finds anything, and
the group kill is all there is.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` option (``<linux/prctl.h>``, Linux 3.4 and later)."""
PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when its parent dies."""
PROC = "/proc"


def _prctl():
    """The C library's ``prctl``; OSError where there is none."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError) as exc:
        raise OSError(f"no prctl in this process' C library: {exc}") from exc


def become_subreaper() -> None:
    """Make this process a child subreaper: orphans among its descendants are re-parented to it,
    not to init. OSError where it cannot be one (not Linux, no ``prctl``, the kernel refused)."""
    if not sys.platform.startswith("linux"):
        raise OSError(f"no child subreaper on {sys.platform} (Linux only)")
    if _prctl()(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(errno)}")


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent (``parent``) dies; at once if it already has. Linux
    only; elsewhere nothing happens."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        _prctl()(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def living_descendants(root: int) -> list[int]:
    """The descendants of process ``root`` that have not exited (zombies left out), found by
    the parent links in ``/proc/<pid>/stat``, each after its parent; none where there is no
    ``/proc``."""
    if isinstance(root, bool) or not isinstance(root, int):
        raise TypeError(f"root: expected a process id (int), got {type(root).__name__} {root!r}")
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{PROC}/{name}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue  # it exited while the directory was read
        # "pid (name) state ppid ...": the name may itself hold spaces and parentheses
        state, ppid = stat[stat.rindex(b")") + 2 :].split(maxsplit=2)[:2]
        if state not in (b"Z", b"X"):
            children.setdefault(int(ppid), []).append(int(name))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.pop(pending.pop(), ()):
            found.append(child)
            pending.append(child)
    return found


def end_descendants(root: int, *, within_s: float = 2.0) -> list[int]:
    """SIGKILL every living descendant of process ``root`` (not ``root`` itself), over and over
    until none is left or ``within_s`` has passed; the ids of the processes killed.

    Over and over, because one not yet killed can fork while the others are; a killed one's
    children stay in reach when ``root`` is a subreaper (they are re-parented to it). Each pass
    signals the deepest first, descendants before their ancestors, so no process sees an
    ancestor die (a worker it waits to outlive) while it is still running. Returns once all
    have exited, so a subreaper can reap them next (:func:`reap_children`)."""
    if isinstance(within_s, bool) or not isinstance(within_s, (int, float)):
        raise TypeError(
            f"within_s: expected a number of seconds, got {type(within_s).__name__} {within_s!r}"
        )
    if not within_s > 0:  # NaN fails too
        raise ValueError(f"within_s: expected a number of seconds > 0, got {within_s!r}")
    killed: set[int] = set()
    deadline = time.monotonic() + within_s
    while (living := living_descendants(root)) and time.monotonic() < deadline:
        for pid in reversed(living):  # found parents first: children are signalled first
            # signalled at once: for its id to name another process by now, the kernel would
            # have had to hand out every other free id since the scan
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if killed.issuperset(living):
            time.sleep(0.005)  # all signalled already, still exiting
        killed.update(living)
    return sorted(killed)


def reap_children() -> None:
    """Collect the exit status of every child of this process that has exited (its own, and
    the orphans a subreaper adopted), so none is left a zombie."""
    if not hasattr(os, "WNOHANG"):
        return
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
