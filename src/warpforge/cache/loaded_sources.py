"""The files generated kernels are imported from: one folder per process, gone when it ends.

Triton's JIT reads a kernel's source from the file its module was imported from (the
interpreter does so again at the first call), so generated source must exist as a file for as
long as the process may run it. The kept copy lives in the cache tiers; these files are only
the import vehicle, so each process writes into its own folder::

    <cache dir>/blueprint/modules/<host>-<pid>-<random>/<name>.py

The folder is deleted when the process exits. Folders of processes that ended without doing so
(killed) are deleted when another process on the same host creates its folder, and by
``warpforge cache clear`` (with the ``bp_*.py`` files older warpforge versions wrote straight
into ``modules/``). The files therefore never outlive their process for long, and a running
process's files are never deleted under it. Folders of other hosts sharing the cache directory
are left to processes on those hosts, which can tell whether their owner still runs.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

from warpforge.atomic_write import write_atomically

_LOCK = threading.Lock()
# (pid, modules root) -> this process's folder there; the pid keeps a forked child out of its
# parent's folder (and its exit from deleting it).
_FOLDERS: dict[tuple[int, Path], Path] = {}


def modules_root() -> Path:
    from warpforge.environment import cache_dir

    return cache_dir() / "blueprint" / "modules"


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _owner(folder: Path) -> tuple[str, int] | None:
    """(host, pid) a process folder's name records, or None for anything else."""
    host, _, rest = folder.name.partition("-")
    pid, _, token = rest.partition("-")
    return (host, int(pid)) if host and pid.isdigit() and token else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove_folder(folder: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # a forked child exiting leaves its parent's folder alone
        shutil.rmtree(folder, ignore_errors=True)


def process_folder() -> Path:
    """This process's folder under :func:`modules_root` (created, and stale ones swept, once)."""
    pid, root = os.getpid(), modules_root()
    folder = _FOLDERS.get((pid, root))
    if folder is not None and folder.is_dir():
        return folder
    with _LOCK:
        folder = _FOLDERS.get((pid, root))
        if folder is None or not folder.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            if folder is None:
                remove_ended(root)
                first = not any(p == pid for p, _ in _FOLDERS)
                if first:
                    atexit.register(_remove_own_folders, pid)
            folder = Path(tempfile.mkdtemp(prefix=f"{_host()}-{pid}-", dir=root))
            _FOLDERS[(pid, root)] = folder
    return folder


def _remove_own_folders(pid: int) -> None:
    for (owner, _), folder in list(_FOLDERS.items()):
        if owner == pid:
            _remove_folder(folder, owner)


def write_source(name: str, source: bytes) -> Path:
    """``source`` as ``<process folder>/<name>.py`` (atomically; kept if already equal)."""
    path = process_folder() / f"{name}.py"
    if path.exists() and path.read_bytes() == source:
        return path
    return write_atomically(path, source)


def remove_ended(root: Path | None = None, *, legacy: bool = False) -> int:
    """Delete the folders of this host's processes that have ended; with ``legacy``, also the
    files older versions wrote directly into the root. Returns how many files went."""
    root = modules_root() if root is None else root
    if not root.is_dir():
        return 0
    host, removed = _host(), 0
    for item in root.iterdir():
        owner = _owner(item) if item.is_dir() else None
        if owner is not None and owner[0] == host and not _running(owner[1]):
            removed += sum(1 for _ in item.glob("*.py"))
            shutil.rmtree(item, ignore_errors=True)
        elif legacy and item.is_file() and item.suffix == ".py":
            with contextlib.suppress(FileNotFoundError):
                item.unlink()
                removed += 1
    return removed
