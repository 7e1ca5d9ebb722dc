"""A program for Nsight Compute: one harness problem's warpforge implementation and its baselines,
each warmed up (torch.compile compiles) outside the profiled range, then called ``--repeat``
times inside it (``cudaProfilerStart`` / ``Stop``), so ``ncu --profile-from-start off``
profiles exactly those calls' kernels, ours beside the baseline's, on the same inputs.

    ncu --profile-from-start off --set full -o REPORT \\
        python benchmarks/problem_ncu.py --problem rms_norm.fwd --dtype bf16 --shape M=32768,N=256

``--baseline`` (repeatable; default ``torch.compile``) names the problem's baselines to run
after ours. Runs without ncu too (it then only checks that every callable runs).
"""

from __future__ import annotations

import argparse
import sys

from warpforge.validation import parse_shape


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", required=True)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--shape", required=True, type=parse_shape)
    parser.add_argument("--baseline", action="append", default=None)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    import torch
    from sweep_common import gpu_problem

    found = gpu_problem(args.problem, args.dtype)
    if found is None:
        return 2
    problem, dtype = found
    names = args.baseline or ["torch.compile"]
    unknown = [n for n in names if n not in problem.baselines]
    if unknown:
        print(f"--baseline: {args.problem} has {sorted(problem.baselines)}, got {unknown}",
              file=sys.stderr)  # fmt: skip
        return 2
    generator = torch.Generator(device="cuda").manual_seed(0)
    inputs = problem.make_inputs(args.shape, dtype, torch.device("cuda"), generator)
    runs = [("warpforge", problem.implementation)]
    runs += [(name, problem.baselines[name]()) for name in names]
    for _, fn in runs:
        for _ in range(3):
            fn(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in runs:
        for _ in range(args.repeat):
            fn(*inputs)
        torch.cuda.synchronize()
        print(f"profiled: {name}")
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
