"""Triton's per-process start-up cost on a warm cache hit, remembered between processes.

The first kernel launch of a process makes Triton compute ``triton_key()``: a SHA-256 over its
own Python sources and the whole ``libtriton`` shared library (about 500 MB), roughly 0.3 s,
even when the compiled kernel is already in Triton's cache. The result depends only on those
files, so warpforge records it beside its cache after the first launch and, in later processes,
hands Triton the recorded value instead of hashing again.

The record is trusted only while the files it was computed from are unchanged: it stores a
fingerprint of Triton's version and the path, size and modification time of every Python file
of the triton package and of ``libtriton`` (a superset of what ``triton_key()`` reads). Any difference (an upgrade, a reinstall, an edited file) makes it stale
and Triton hashes as usual; the next launch records the new value. ``WARPFORGE_TRITON_STARTUP_MEMO=0``
turns the whole mechanism off.

The same record holds Triton's ``platform_key()`` (machine, system and
``platform.architecture()`` of the Python executable). Computing it runs the ``file`` command in a
subprocess when Triton's CUDA driver is created (about 12 ms of a warm start on the H100); the
recorded value is used only while the executable's path, size and modification time and the
machine and system names are the ones it was recorded with.

Only ``triton.runtime.cache.triton_key`` and ``triton.runtime.build.platform_key`` (and modules
that imported those same function objects) are replaced, and only with functions returning the
values Triton itself computed, so every cache key Triton builds is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from warpforge.atomic_write import write_atomically

logger = logging.getLogger("warpforge.blueprint")

MEMO_FILE = "triton-startup.json"
SWITCH = "WARPFORGE_TRITON_STARTUP_MEMO"
_FORMAT = 2
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {
    "installed": None,
    "platform_installed": False,
    "recorded": False,
    "fingerprint": None,
    "hashing": None,
}


def enabled() -> bool:
    """False when ``WARPFORGE_TRITON_STARTUP_MEMO`` is ``0``/``false``/``no``/``off``."""
    from warpforge.runtime import switch_on

    return switch_on(SWITCH)


def memo_path() -> Path:
    from warpforge.environment import cache_dir

    return cache_dir() / "blueprint" / MEMO_FILE


# Where Triton 3.x releases define triton_key() (its home moved between releases).
_HOMES = ("triton.runtime.cache", "triton.compiler.compiler", "triton.runtime.jit")


def _original_triton_key() -> Any:
    """Triton's own ``triton_key`` (an lru_cache wrapper), or None if this Triton differs."""
    import importlib

    for home in _HOMES:
        try:
            module = sys.modules.get(home) or importlib.import_module(home)
        except ImportError:
            continue
        function = getattr(module, "triton_key", None)
        function = getattr(function, "__warpforge_original__", function)
        if function is not None and hasattr(function, "cache_info"):
            return function
    return None


def _original_platform_key() -> Any:
    """Triton's own ``platform_key`` (``triton.runtime.build``), or None if this Triton lacks it."""
    import importlib

    try:
        module = sys.modules.get("triton.runtime.build") or importlib.import_module(
            "triton.runtime.build"
        )
    except ImportError:
        return None
    function = getattr(module, "platform_key", None)
    return getattr(function, "__warpforge_original__", function)


def executable_fingerprint() -> str:
    """What Triton's ``platform_key()`` depends on: the machine and system names (``uname``) and
    the Python executable that ``platform.architecture()`` runs ``file`` on (path, size, mtime)."""
    executable = os.path.realpath(sys.executable)
    stat = os.stat(executable)
    return (
        f"{platform.machine()} {platform.system()} {executable} {stat.st_size} {stat.st_mtime_ns}"
    )


def _python_files(directory: str) -> Iterator[os.DirEntry[str]]:
    """Every ``*.py`` file below ``directory`` (``__pycache__`` skipped) in sorted top-down
    order, through ``os.scandir`` (half the time of ``os.walk`` plus ``Path.stat`` here)."""
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    folders = []
    for entry in entries:
        if entry.is_dir():
            if entry.name != "__pycache__":
                folders.append(entry.path)
        elif entry.name.endswith(".py"):
            yield entry
    for folder in folders:
        yield from _python_files(folder)


def triton_fingerprint() -> str:
    """SHA-256 over Triton's version and (path, size, mtime) of every Python file in the triton
    package and of ``libtriton``: a superset of what ``triton_key()`` reads in any Triton 3.x
    (which files it hashes has moved between releases), for a few milliseconds of ``stat``."""
    import triton

    root = Path(triton.__file__).resolve().parent
    lines = [f"triton {triton.__version__}", f"root {root}"]
    files: list[os.DirEntry[str] | Path] = [*_python_files(str(root))]
    files += sorted((root / "_C").glob("libtriton.*"))
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            lines.append(f"{os.fspath(file)} missing")
            continue
        lines.append(f"{os.fspath(file)} {stat.st_size} {stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def process_fingerprint() -> str:
    """:func:`triton_fingerprint` computed once per process: Triton's files do not change under
    a running process that imported them (used before launches, where each ms counts)."""
    value = _STATE["fingerprint"]
    if value is None:
        value = _STATE["fingerprint"] = triton_fingerprint()
    return value


def _read_memo() -> dict[str, Any] | None:
    try:
        data = json.loads(memo_path().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    if not isinstance(data.get("triton_key"), str) or not isinstance(data.get("fingerprint"), str):
        return None
    recorded_platform = data.get("platform")
    if recorded_platform is not None and not (
        isinstance(recorded_platform, dict)
        and all(isinstance(recorded_platform.get(k), str) for k in ("executable", "platform_key"))
    ):
        return None
    return data


def _triton_modules() -> list[Any]:
    """Triton's loaded modules (only these: other modules' __getattr__ may do anything)."""
    return [
        module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "triton" or name.startswith("triton."))
    ]


def install() -> bool:
    """Before a process's first Triton launch: use the recorded ``triton_key`` if it is current.

    Returns True when Triton will use the recorded value. Also hands Triton the folder of the
    libcuda already loaded (:func:`hint_libcuda_location`). Safe to call repeatedly (cheap after
    the first call) and from several threads.
    """
    if _STATE["installed"] is not None:
        return _STATE["installed"]
    with _LOCK:
        if _STATE["installed"] is not None:
            return _STATE["installed"]
        hint_libcuda_location()
        _STATE["installed"] = _install()
        return _STATE["installed"]


def _install() -> bool:
    if not enabled():
        return False
    original = _original_triton_key()
    if original is None or original.cache_info().currsize:
        return False  # another Triton layout, or already computed in this process
    memo = _read_memo()
    if memo is None:
        return False
    try:
        current = process_fingerprint()
    except (ImportError, OSError):
        return False
    if memo["fingerprint"] != current:
        return False
    _STATE["platform_installed"] = _install_platform_key(memo.get("platform"))
    _hand_to_triton("triton_key", original, memo["triton_key"])
    return True


def _hand_to_triton(name: str, original: Any, value: str) -> None:
    """Replace Triton's function ``name`` (``original``, wherever a Triton module holds that
    object) with one returning ``value``; :func:`reset_for_tests` puts the original back."""

    def remembered() -> str:
        return value

    _replace_in_triton(name, original, remembered)


def _replace_in_triton(name: str, original: Any, replacement: Any) -> None:
    replacement.__warpforge_original__ = original
    replacement.__wrapped__ = original
    for module in _triton_modules():
        if getattr(module, name, None) is original:
            setattr(module, name, replacement)


def hash_in_background() -> bool:
    """When Triton is about to hash itself (no current record: a first compile on this
    machine), start that hash now in a thread, so that it overlaps what Triton does before it
    asks for the value (creating its CUDA driver, which builds a helper module with the host
    compiler, then the kernel's front end). Triton's own call then waits for the thread and
    gets the value Triton's function computed (its cache holds it, so :func:`record` stores
    it as usual). Returns True when the thread started. Off with the rest of this module."""
    if not enabled():
        return False
    with _LOCK:
        if _STATE["installed"] or _STATE["hashing"] is not None:
            return False
        original = _original_triton_key()
        if original is None or original.cache_info().currsize:
            return False  # another Triton layout, or computed already in this process

        def compute() -> None:
            try:
                original()
            except Exception as error:  # Triton's call computes (and raises) it itself then
                logger.debug("Triton's key was not computed in the background: %s", error)

        thread = threading.Thread(target=compute, name="warpforge-triton-key", daemon=True)
        _STATE["hashing"] = thread

        def after_the_thread() -> str:
            thread.join()
            return original()

        thread.start()
        _replace_in_triton("triton_key", original, after_the_thread)
        return True


def _install_platform_key(recorded: dict[str, str] | None) -> bool:
    """Hand Triton the recorded ``platform_key()`` when the executable and machine match."""
    original = _original_platform_key()
    if recorded is None or original is None:
        return False
    if hasattr(original, "cache_info") and original.cache_info().currsize:
        return False  # already computed in this process
    try:
        if recorded["executable"] != executable_fingerprint():
            return False
    except OSError:
        return False
    _hand_to_triton("platform_key", original, recorded["platform_key"])
    return True


def loaded_libcuda_folder(maps: str) -> str | None:
    """The folder of the ``libcuda.so`` this process has mapped (``/proc/self/maps`` text)."""
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address perms offset device inode [path]
        path = fields[5].strip() if len(fields) == 6 else ""
        name = os.path.basename(path)
        if name.startswith("libcuda.so") and os.path.isabs(path):
            return os.path.dirname(path)
    return None


def hint_libcuda_location() -> bool:
    """Tell Triton where the already-loaded ``libcuda.so.1`` lives, unless the user did.

    Triton's driver, created at the first launch of a process, otherwise runs ``ldconfig -p`` in
    a subprocess to find it (~6 ms of a warm start measured on the H100), only to hand the folder
    to the linker of launchers it has already built. The folder of the library CUDA loaded is
    the one ldconfig would name; it is used only when ``libcuda.so.1`` is there. Off with the
    rest of this module (``WARPFORGE_TRITON_STARTUP_MEMO=0``)."""
    if not enabled():
        return False
    try:
        from triton import knobs

        knobs_nvidia = getattr(knobs, "nvidia", None)
        if knobs_nvidia is None or getattr(knobs_nvidia, "libcuda_path", None):
            return False
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            folder = loaded_libcuda_folder(maps.read())
        if folder is None or not os.path.exists(os.path.join(folder, "libcuda.so.1")):
            return False
        knobs_nvidia.libcuda_path = folder
    except Exception as error:  # only a shortcut: Triton finds the library itself otherwise
        logger.debug("libcuda location not handed to Triton: %s", error)
        return False
    return True


def record() -> bool:
    """After a successful Triton launch: store this process's ``triton_key`` if it is not
    recorded for the current files yet. Returns True when a record was written."""
    if _STATE["recorded"] or not enabled() or _STATE["installed"]:
        return False
    _STATE["recorded"] = True
    original = _original_triton_key()
    if original is None or not original.cache_info().currsize:
        return False  # Triton did not compute it (interpreter, or another layout)
    try:
        fingerprint = triton_fingerprint()
        memo = _read_memo()
        if memo is not None and memo["fingerprint"] == fingerprint:
            return False
        payload: dict[str, Any] = {
            "format": _FORMAT,
            "fingerprint": fingerprint,
            "triton_key": original(),
        }
        platform_key = _original_platform_key()
        if platform_key is not None:
            # computed once more here if this Triton does not cache it: after the launch, once
            payload["platform"] = {
                "executable": executable_fingerprint(),
                "platform_key": platform_key(),
            }
        write_atomically(memo_path(), json.dumps(payload))
    except (ImportError, OSError) as error:  # an optimisation only: never fail a launch
        logger.debug("could not record Triton's start-up key: %s", error)
        return False
    return True


def reset_for_tests() -> None:
    """Undo :func:`install` in this process and forget what was done (tests only)."""
    with _LOCK:
        for name, original in (
            ("triton_key", _original_triton_key()),
            ("platform_key", _original_platform_key()),
        ):
            if original is None:
                continue
            for module in _triton_modules():
                current = getattr(module, name, None)
                if getattr(current, "__warpforge_original__", None) is original:
                    setattr(module, name, original)
        _STATE["installed"] = None
        _STATE["platform_installed"] = False
        _STATE["recorded"] = False
        _STATE["fingerprint"] = None
        thread = _STATE["hashing"]
        if thread is not None:
            thread.join()
        _STATE["hashing"] = None
