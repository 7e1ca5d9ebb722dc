"""torch.compile's own kernels for a harness problem's ``torch.compile`` baseline: the Triton
source Inductor generated, with the launch it picked and the registers and local memory each
kernel compiled to, so our kernels can be compared with the baseline that beats them.

    PYTHONPATH=src python benchmarks/inductor_code.py --out DIR --problem layer_norm.fwd \\
        --dtype bf16 --shape M=4096,N=16384 [--shape ...]                             # GPU

Writes DIR/inductor/ and DIR/triton/ (Inductor's and Triton's caches, fresh for this run) and
DIR/inductor-kernels.txt: per shape, each generated kernel's source file (its launch config
in its ``triton_heuristics`` decorator) and ``cuobjdump -res-usage`` of each compiled cubin.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path


def _parse_shape(text: str) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (part.split("=") for part in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected NAME=INT,... such as M=4096,N=16384, got {text!r}"
        ) from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--shape", action="append", type=_parse_shape, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # fresh caches, set before torch and triton read them
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(args.out / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(args.out / "triton")

    import torch
    import triton
    from sweep_common import gpu_problem

    found = gpu_problem(args.problem, args.dtype)
    if found is None:
        return 2
    problem, dtype = found
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    lines = []
    for shape in args.shape:
        seen = set(Path(args.out / "inductor").rglob("*.py"))
        cubins_before = set(Path(args.out / "triton").rglob("*.cubin"))
        gen = torch.Generator(device="cuda").manual_seed(0)
        inputs = problem.make_inputs(shape, dtype, torch.device("cuda"), gen)
        baseline = problem.baselines["torch.compile"]()
        baseline(*inputs)
        torch.cuda.synchronize()
        lines.append(f"=== {args.problem} {shape} {args.dtype}")
        for path in sorted(set(Path(args.out / "inductor").rglob("*.py")) - seen):
            text = path.read_text(errors="replace")
            if "@triton.jit" not in text:
                continue
            lines += [f"--- {path.relative_to(args.out)}", text]
        for cubin in sorted(set(Path(args.out / "triton").rglob("*.cubin")) - cubins_before):
            usage = subprocess.run([cuobjdump, "-res-usage", str(cubin)], capture_output=True,
                                   text=True).stdout  # fmt: skip
            found = re.findall(r"Function (\S+):\s*\n\s*(REG:\d+ STACK:\d+ SHARED:\d+)", usage)
            for name, resources in found:
                lines.append(f"cubin {cubin.parent.name[:12]} {name}: {resources}")
    (args.out / "inductor-kernels.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
