"""Experiment (GPU): the masked softmax kernel in either launch order, on one run.

causal_attention_scores' fused kernel computes only the N tiles its mask leaves an element of,
so under a causal mask the last row blocks are the longest. ``program.LAST_ROWS_FIRST`` (on by
default since the twenty-second session, which this script's run chose) launches them first.
This times the problem's warpforge candidate in both orders and torch.compile's baseline,
interleaved in one process (the harness's timing: CUDA events, L2 flushed, shuffled order), at
the problem's shapes and the longer sequences of ``--t``, after checking both against the
float64 reference. Not a harness report: the choice it informs is the default order; the
harness then measures the result. (The twenty-second session's run,
``session22-h200-2026-11-29/masked-softmax-ab-call6.json``, also timed ``FULL_RUN_TILES``, a
switch measured slower there and since removed.)

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


VARIANTS = {"last rows first": True, "in order": False}  # name: program.LAST_ROWS_FIRST


def _variant(fn: Any, last_rows_first: bool) -> Any:
    from warpforge.blueprint import program

    def run(*inputs: Any) -> Any:
        program.LAST_ROWS_FIRST = last_rows_first  # read at each launch
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
    saved = program.LAST_ROWS_FIRST
    rows = []
    try:
        for shape in shapes:
            generator = torch.Generator(device=device).manual_seed(0)
            inputs = tuple(problem.make_inputs(shape, dtype, device, generator))
            fns = {
                name: _variant(problem.implementation, last_rows_first)
                for name, last_rows_first in VARIANTS.items()
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
        program.LAST_ROWS_FIRST = saved
    write_experiment(
        args.out,
        "masked softmax launch order A/B",
        rows,
        dtype=str(dtype).removeprefix("torch."),
        problem=PROBLEM,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
