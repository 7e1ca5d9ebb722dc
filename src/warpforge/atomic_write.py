"""Writing a file so that a crash mid-write never leaves half of it: the content goes to a
temporary file in the same folder, which is then renamed over the target (an atomic replace on
POSIX). Readers see the old file or the new one, never a mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, content: bytes | str) -> Path:
    """Write ``content`` (``str``: UTF-8) to ``path``, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
