"""Running a script in a new Python process against one cache directory (the disk-hit tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"


def run_child(script: str, ir: Any, cache: Path) -> subprocess.CompletedProcess:
    """Run ``script`` in a new Python process with the blueprint's JSON on stdin and ``cache``
    as its cache directory; it must succeed."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "WARPFORGE_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=ir.to_json(),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done
