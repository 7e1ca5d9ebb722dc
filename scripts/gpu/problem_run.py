"""Run one harness problem's warpforge candidate or a baseline a few times, for a profiler (GPU).

A driver for Nsight Compute or Nsight Systems, not a benchmark (the harness's numbers are the
ones to report): the problem's inputs at its first timed shape (or ``--shape``), ``--warmup``
calls, then ``--iters`` calls inside an NVTX range ``profile``, synchronised. Nsight Compute
then profiles only those (not the warm-up's, nor torch.compile's autotuning launches):

    ncu --nvtx --nvtx-include profile/ --set full -o OUT/causal \\
        python3 scripts/gpu/problem_run.py blueprint.causal_attention_scores --iters 1

``--impl`` names a baseline (``torch.compile``, ``eager``, ``liger``) instead of warpforge.
``--device cpu`` runs the problem's first CPU shape (Triton's interpreter): the tests use it.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _shape(text: str) -> dict[str, int]:
    """``"B=4,NH=16"`` -> ``{"B": 4, "NH": 16}`` (``warpforge.validation.parse_shape``)."""
    from warpforge.validation import parse_shape

    try:
        return parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--shape: expected NAME=INT,... ({exc})") from None


@contextlib.contextmanager
def _profiled_range(device: str) -> Iterator[None]:
    """The timed calls inside an NVTX range named ``profile`` (``ncu --nvtx --nvtx-include
    profile/`` then skips warm-up and autotuning launches, however many there are)."""
    if device != "cuda":
        yield
        return
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("profile"):
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", help="a registered problem, e.g. blueprint.mlp_block")
    parser.add_argument("--impl", default="warpforge", help="warpforge or a baseline's name")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16")
    parser.add_argument("--shape", type=_shape, help="NAME=INT,... (default: its first shape)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("problem_run.py: no CUDA device (--device cpu runs a CPU shape)")

    from warpforge.catalog import load_builtin_problems
    from warpforge.harness.registry import get_problem

    load_builtin_problems()
    problem = get_problem(args.problem)
    if args.impl == "warpforge":
        fn = problem.implementation
    elif args.impl in problem.baselines:
        fn = problem.baselines[args.impl]()
    else:
        raise SystemExit(
            f"--impl: expected warpforge or one of {sorted(problem.baselines)}, got {args.impl!r}"
        )
    shapes = problem.shapes if args.device == "cuda" else problem.cpu_shapes
    shape = args.shape or dict(shapes[0])
    device = torch.device(args.device)
    generator = torch.Generator(device=device).manual_seed(0)
    inputs = problem.make_inputs(shape, _DTYPES[args.dtype], device, generator)
    for _ in range(args.warmup):
        fn(*inputs)
    with _profiled_range(args.device):
        for _ in range(args.iters):
            fn(*inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
    print(f"{args.problem} {args.impl} {shape} {args.dtype}: {args.warmup}+{args.iters} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
