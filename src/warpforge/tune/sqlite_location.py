"""Where a ``sqlite:///`` database URL points, without importing the database layer.

The launch-config lookup asks this on a process's first launch to learn whether a database file
exists at all; importing :mod:`warpforge.tune.database` for that alone cost a new process
several milliseconds of its first result.
"""

from __future__ import annotations

from pathlib import Path


def sqlite_path(url: str) -> str | None:
    """The file path of a ``sqlite:///PATH`` URL (``:memory:`` kept), or ``None`` if not SQLite."""
    if not url.startswith("sqlite:"):
        return None
    if not url.startswith("sqlite:///"):
        raise ValueError(f"url: expected sqlite:///PATH, got {url!r}")
    path = url[len("sqlite:///") :]
    if path == ":memory:":
        return path
    return str(Path(path).expanduser())
