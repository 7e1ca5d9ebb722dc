"""Gated activations (swiglu, geglu; forward and backward kernels): launch choices against
torch.compile and Liger-Kernel, timed together.

The ops run at the copy ceiling yet trailed torch.compile by 1-5% on some rows of the full run
(`ops-2026-11-22-h100.json`). A pointwise kernel's remaining costs are its tail (the last,
partly filled wave of programs) and per-program overhead, both set by (BLOCK, num_warps): this
times every choice of a small grid beside the baselines of the harness problem, on the
problem's own shapes and inputs. Every contender is first checked against the problem's float64
reference on the same inputs; the verified ones are timed with
``warpforge.harness.timing.measure_interleaved`` (CUDA events, L2 flushed before each call,
contenders interleaved, inputs rotated).

    PYTHONPATH=src python benchmarks/activation_launch_sweep.py --out DIR            # GPU
    PYTHONPATH=src python benchmarks/activation_launch_sweep.py --out DIR --smoke    # CPU

Writes DIR/activation_launch_sweep.json (after every case) and prints a table per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SMOKE = "--smoke" in sys.argv
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

GRID = [(block, warps) for block in (1024, 2048, 4096, 8192) for warps in (4, 8)]
SMOKE_GRID = [(64, 1), (128, 2)]


def _kernel_call(problem_name: str, launch_config: tuple[int, int]):
    """The problem's kernel launched with a forced (BLOCK, num_warps), same argument order as
    the problem's implementation (gate, up[, grad_out])."""
    from warpforge.ops import activations
    from warpforge.ops._kernels import activations as kernels

    family, phase = problem_name.split(".")
    kernel = getattr(kernels, f"{family}_{phase}_kernel")
    extra = {"APPROX_TANH": True} if family == "geglu" else {}

    if phase == "fwd":

        def run(gate, up):
            (out,) = activations._launch(
                kernel, [gate, up], 1, launch_config=launch_config, **extra
            )
            return out
    else:

        def run(gate, up, grad_out):
            return tuple(
                activations._launch(
                    kernel, [grad_out, gate, up], 2, launch_config=launch_config, **extra
                )
            )

    return run


def _relative_error(got: Any, want: Any) -> float:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        diff = (g.double() - w.double()).norm() / w.double().norm().clamp_min(1e-30)
        worst = max(worst, float(diff))
    return worst


def _case(problem, shape: dict, dtype: torch.dtype, grid, device, max_time_s: float) -> dict:
    from warpforge.harness.timing import measure_interleaved

    input_sets = []
    for seed in range(2 if device.type == "cuda" else 1):
        gen = torch.Generator(device=device).manual_seed(1000 + seed)
        input_sets.append(tuple(problem.make_inputs(shape, dtype, device, gen)))
    first = input_sets[0]
    expected = problem.reference(*(t.double() for t in first))
    contenders: dict[str, Any] = {"op (default launch)": problem.implementation}
    contenders.update({f"BLOCK={b} warps={w}": _kernel_call(problem.name, (b, w)) for b, w in grid})
    skipped = {}
    if not SMOKE:
        for name, factory in problem.baselines.items():
            try:
                contenders[name] = factory()
            except Exception as exc:  # a missing Liger-Kernel is reported, not fatal
                skipped[name] = f"{type(exc).__name__}: {exc}"
    tolerance = 1e-2 if dtype == torch.bfloat16 else 1e-5
    verified, errors = {}, {}
    for name, fn in contenders.items():
        try:
            err = _relative_error(fn(*first), expected)
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {exc}"
            continue
        errors[name] = err
        if err <= tolerance:
            verified[name] = fn
        else:
            skipped[name] = f"rejected: relative error {err:.2e} > {tolerance:.0e}"
    measured = measure_interleaved(verified, input_sets, max_time_s=max_time_s)
    moved = problem.bytes_moved(shape, dtype)
    rows = []
    for name, m in measured.items():
        rows.append(
            {
                "contender": name,
                "median_us": m.median_s * 1e6,
                "ci95_us": [m.ci_low_s * 1e6, m.ci_high_s * 1e6],
                "gb_per_s": moved / m.median_s / 1e9,
                "relative_error": errors[name],
            }
        )
    rows.sort(key=lambda r: r["median_us"])
    return {
        "problem": problem.name,
        "shape": shape,
        "dtype": str(dtype).removeprefix("torch."),
        "bytes_moved": moved,
        "rows": rows,
        "skipped": skipped,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--smoke", action="store_true", help="tiny fp32 shapes, interpreter")
    parser.add_argument("--max-time", type=float, default=1.5, help="timing budget per case (s)")
    args = parser.parse_args()

    from warpforge.environment import environment_fingerprint
    from warpforge.ops import activation_problems as problems

    device = torch.device("cpu" if args.smoke else "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "activation_launch_sweep",
        "environment": environment_fingerprint(),
        "grid": SMOKE_GRID if args.smoke else GRID,
        "cases": [],
    }
    dtypes = (torch.float32,) if args.smoke else (torch.bfloat16, torch.float32)
    grid = SMOKE_GRID if args.smoke else GRID
    start = time.perf_counter()
    activation_problems = (
        problems.SWIGLU_FWD,
        problems.SWIGLU_BWD,
        problems.GEGLU_FWD,
        problems.GEGLU_BWD,
    )
    for problem in activation_problems:
        shapes = problem.cpu_shapes if args.smoke else problem.shapes
        for shape in shapes:
            for dtype in dtypes:
                case = _case(problem, dict(shape), dtype, grid, device, args.max_time)
                report["cases"].append(case)
                (args.out / "activation_launch_sweep.json").write_text(json.dumps(report, indent=1))
                print(f"\n{case['problem']} {case['shape']} {case['dtype']}")
                for r in case["rows"]:
                    gbs = r["gb_per_s"]
                    print(f"  {r['contender']:<24} {r['median_us']:9.1f} us {gbs:7.0f} GB/s")
                for name, why in case["skipped"].items():
                    print(f"  {name:<24} skipped: {why[:100]}")
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    wall = time.perf_counter() - start
    print(f"\nwrote {args.out / 'activation_launch_sweep.json'} in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
