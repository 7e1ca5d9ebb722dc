"""Count the instruction classes of a Triton kernel's compiled variants in a Triton cache.

Usage: ``python scripts/gpu/ptx_census.py CACHE_DIR KERNEL_NAME`` prints one line per compiled
variant of KERNEL_NAME found under CACHE_DIR (Triton's on-disk cache): warp shuffles, shared
and global loads and stores, barriers (static PTX counts), shared memory and warps from the
metadata, and registers from ``cuobjdump --dump-resource-usage`` where it runs. Used to see how
Triton lowered an op (for example whether a ``tl.gather`` became shuffles or shared memory).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

CLASSES = {"shfl": r"shfl\.sync", "ld.shared": r"ld\.shared", "st.shared": r"st\.shared",
           "bar": r"bar\.sync|barrier\.sync", "ld.global": r"ld\.global",
           "st.global": r"st\.global"}  # fmt: skip


def registers(cubin: Path) -> str:
    tool = shutil.which("cuobjdump")
    if tool is None or not cubin.exists():
        return "?"
    result = subprocess.run([tool, "--dump-resource-usage", str(cubin)], capture_output=True,
                            text=True, check=False)  # fmt: skip
    found = re.search(r"REG:(\d+)", result.stdout)
    return found.group(1) if found else "?"


def main(cache: str, name: str) -> int:
    for ptx_path in sorted(Path(cache).rglob(f"{name}.ptx")):
        ptx = ptx_path.read_text()
        counts = " ".join(f"{k} {len(re.findall(p, ptx))}" for k, p in CLASSES.items())
        meta_path = ptx_path.with_suffix(".json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        print(f"{ptx_path.parent.name[:12]} warps {meta.get('num_warps')} smem "
              f"{meta.get('shared')} regs {registers(ptx_path.with_suffix('.cubin'))} {counts}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
