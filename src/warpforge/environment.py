"""The environment fingerprint: versions, device, driver, cache and database locations.

``warpforge env`` prints it, and every harness report embeds it, so a number can always be traced
to the machine, software and commit that produced it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from warpforge import runtime


def cache_dir() -> Path:
    """Root of warpforge's on-disk state (``WARPFORGE_CACHE_DIR``, default ``~/.cache/warpforge``)."""
    configured = os.environ.get("WARPFORGE_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "warpforge"


def database_url() -> str:
    """The performance database (``WARPFORGE_DB_URL``, default SQLite under the cache dir)."""
    return os.environ.get("WARPFORGE_DB_URL") or f"sqlite:///{cache_dir() / 'perf.db'}"


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def _git_commit() -> str | None:
    """The commit of the source tree warpforge runs from.

    A copy of the tree without ``.git`` (the GPU machine) gets it from ``WARPFORGE_GIT_COMMIT``,
    which the caller sets from the checkout it copied.
    """
    from_env = os.environ.get("WARPFORGE_GIT_COMMIT")
    if from_env:
        return from_env
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit + ("-dirty" if dirty.stdout.strip() else "") if commit else None


PACKAGE_ROOT = Path(__file__).resolve().parent


def source_files_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """SHA-256 over (relative path, contents) pairs in path order, bytecode left out."""
    digest = hashlib.sha256()
    for name, data in sorted(f for f in files if not f[0].endswith(".pyc")):
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


def source_tree_hash(root: Path = PACKAGE_ROOT) -> str:
    """``source_files_hash`` of the package's files as they are on disk: names the code that ran
    where ``git_commit`` cannot (a copied tree whose ``.git`` or ``WARPFORGE_GIT_COMMIT`` is
    older than its files). ``scripts/report_commit.py`` finds the commit whose tree it is."""
    files = (
        (path.relative_to(root).as_posix(), path.read_bytes())
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    return source_files_hash(files)


@functools.cache
def _running_source_hash() -> str:
    """``source_tree_hash()`` once a process (a fingerprint is taken for every report and
    ceilings lookup): the package's files when first asked, after its modules have loaded."""
    return source_tree_hash()


def _driver_version() -> str | None:
    try:
        import pynvml  # from nvidia-ml-py
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        except Exception:  # NVML absent or unusable: fall through to nvidia-smi
            pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def environment_fingerprint() -> dict[str, Any]:
    """Everything that can change a kernel's result or speed, as JSON-ready values."""
    from warpforge import __version__

    caps = runtime.device_capabilities()
    cuda = torch.cuda.is_available()
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "warpforge": __version__,
        "git_commit": _git_commit(),
        "source_sha256": _running_source_hash(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": _triton_version(),
        "cuda_runtime": torch.version.cuda,
        "driver": _driver_version() if cuda else None,
        "device": caps.as_dict(),
        "device_count": torch.cuda.device_count() if cuda else 0,
        "interpreter": runtime.interpreter_enabled(),
        "execution_path": runtime.execution_path(runtime.default_device()).value,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32 if cuda else None,
        "cache_dir": str(cache_dir()),
        "database_url": database_url(),
        "redis_url": os.environ.get("WARPFORGE_REDIS_URL"),
        "executable": sys.executable,
    }
