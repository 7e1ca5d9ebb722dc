"""Run a helper script that compiles kernels for Hopper (sm_90) in a child process without
Triton's interpreter (under it @triton.jit yields functions the compiler cannot take), and read
the JSON summary it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def compile_in_child(helper: Path, triton_cache: Path) -> dict[str, Any]:
    """``helper``'s printed JSON; ``triton_cache`` is private to it: other processes compiling
    the same kernel into a shared cache can make Triton read an entry still being written."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "WARPFORGE_INTERPRET": "0",
           "TRITON_DEFAULT_FP_FUSION": "1", "TRITON_CACHE_DIR": str(triton_cache)}  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(helper)], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)
