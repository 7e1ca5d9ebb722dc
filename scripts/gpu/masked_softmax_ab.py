"""Experiment (GPU): the masked softmax kernel with and without its switches, on one run.

causal_attention_scores' fused kernel computes only the N tiles its mask leaves an element of.
Two switches of ``warpforge.blueprint.program``, off by default, may speed it up:
``FULL_RUN_TILES`` has it take the run of tiles the mask keeps throughout without loading the
mask there, ``LAST_ROWS_FIRST`` launches the longest row blocks of a causal mask (the last)
first. This times the problem's warpforge candidate with each combination and torch.compile's
baseline, interleaved in one process (the harness's timing: CUDA events,
L2 flushed, shuffled order), at the problem's shapes and the longer sequences of ``--t``, after
checking both variants against the float64 reference. Not a harness report: the choice it
informs is which switches to turn on; the harness then measures the result.

Usage (GPU): ``PYTHONPATH=src python3 scripts/gpu/masked_softmax_ab.py OUT.json [--t 2048 4096]``
``--device cpu`` runs a tiny shape under Triton's interpreter (the tests use it; its times mean
nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

PROBLEM = "blueprint.causal_attention_scores"


VARIANTS = {  # name: (program.FULL_RUN_TILES, program.LAST_ROWS_FIRST)
    "default": (False, False),
    "full run": (True, False),
    "last rows first": (False, True),
    "both": (True, True),
}


def _variant(fn: Any, full_run: bool, last_rows_first: bool) -> Any:
    from warpforge.blueprint import program

    def run(*inputs: Any) -> Any:
        program.FULL_RUN_TILES = full_run  # read at each launch
        program.LAST_ROWS_FIRST = last_rows_first
        return fn(*inputs)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--t", type=int, nargs="*", default=[2048, 4096], help="more lengths")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--max-time", type=float, default=2.0, help="seconds of timing a shape")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("masked_softmax_ab.py: no CUDA device (--device cpu for a smoke run)")

    from warpforge.blueprint import program
    from warpforge.catalog import load_builtin_problems
    from warpforge.harness.checks import require_reference_match
    from warpforge.harness.registry import get_problem
    from warpforge.harness.report import experiment_row, write_experiment
    from warpforge.harness.timing import measure_interleaved

    load_builtin_problems()
    problem = get_problem(PROBLEM)
    device = torch.device(args.device)
    if args.device == "cuda":
        base = dict(problem.shapes[0])
        shapes = [base, *({**base, "T": t} for t in args.t)]
        dtype = torch.bfloat16
    else:
        shapes, dtype = [dict(problem.cpu_shapes[0])], torch.float32
    saved = program.FULL_RUN_TILES, program.LAST_ROWS_FIRST
    rows = []
    try:
        for shape in shapes:
            generator = torch.Generator(device=device).manual_seed(0)
            inputs = tuple(problem.make_inputs(shape, dtype, device, generator))
            fns = {
                name: _variant(problem.implementation, *switches)
                for name, switches in VARIANTS.items()
            }
            errors = {
                name: require_reference_match(problem, fn, inputs) for name, fn in fns.items()
            }
            if args.device == "cuda":  # max-autotune-no-cudagraphs, as the harness runs it
                fns["torch.compile"] = problem.baselines["torch.compile"]()
            timed = measure_interleaved(fns, [inputs], max_time_s=args.max_time, seed=0)
            row = experiment_row(timed, shape=shape, max_abs_error=errors)
            rows.append(row)
            print(json.dumps(row))
    finally:
        program.FULL_RUN_TILES, program.LAST_ROWS_FIRST = saved
    write_experiment(
        args.out,
        "masked softmax FULL_RUN A/B",
        rows,
        dtype=str(dtype).removeprefix("torch."),
        problem=PROBLEM,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
