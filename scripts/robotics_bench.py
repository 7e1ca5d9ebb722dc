"""Stand-alone GPU check of the robotics problems, for when the full harness is not at hand.

For every robotics problem, GPU shape and dtype: verify the candidate against the float64
reference, then time the candidate and every baseline in this one process (CUDA events, warm-up,
L2 flushed before each timed call, median and quartiles), and report GB/s from the problem's
analytic ``bytes_moved`` beside the measured device copy bandwidth. Launch-bound shapes also get
a back-to-back latency (wall clock per call, host overhead included). Writes one JSON file.

    PYTHONPATH=src python scripts/robotics_bench.py --out "$OUT/robotics_bench.json"
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from warpforge.environment import environment_fingerprint
from warpforge.harness.problem import BaselineUnavailable
from warpforge.harness.registry import get_problem

PROBLEMS = (
    "resample.fwd.bf16",
    "resample.fwd.fp32",
    "resample.bwd.fp32",
    "align.fwd",
    "voxelize.occupancy",
    "voxelize.mean",
)
_FLUSH = None


def _flush_l2() -> None:
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # > 50 MB L2
    _FLUSH.zero_()


def time_cuda(fn, args, *, repeats: int, flush: bool = True) -> dict[str, float]:
    """Median and quartiles (microseconds) of ``repeats`` calls, each timed with CUDA events."""
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if flush:
            _flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    q = statistics.quantiles(times, n=4)
    return {"median_us": statistics.median(times), "q1_us": q[0], "q3_us": q[2]}


def back_to_back_us(fn, args, calls: int = 2000) -> float:
    """Wall clock per call of ``calls`` calls in a row: what a data loader sees per call."""
    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def copy_bandwidth_gbs() -> float:
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    timing = time_cuda(lambda: dst.copy_(src), (), repeats=20, flush=False)
    return 2 * src.numel() / timing["median_us"] / 1e3


def _float64(x):
    return x.double() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x


def check(problem, out, inputs, dtype) -> float:
    """Max abs error against the reference; raises when outside the problem's tolerance."""
    if not problem.float64_reference:
        expected = problem.reference(*inputs)
        if not torch.equal(out, expected):
            raise AssertionError(f"{problem.name}: differs from the reference")
        return 0.0
    expected = problem.reference(*[_float64(x) for x in inputs])
    at_dtype = problem.reference(*inputs).double()
    atol, rtol = problem.tolerance.for_dtype(dtype)
    error = (out.double() - expected).abs()
    bound = torch.maximum(atol + rtol * expected.abs(), 2 * (at_dtype - expected).abs().max())
    if not bool((error <= bound).all()):
        raise AssertionError(f"{problem.name}: max error {error.max().item():.3g} over tolerance")
    return error.max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--only", default="", help="comma-separated problem names")
    args = parser.parse_args()
    import warpforge.robotics.problems  # noqa: F401  (registers the problems)

    results = {"environment": environment_fingerprint(), "copy_gbs": copy_bandwidth_gbs(),
               "runs": []}  # fmt: skip
    names = args.only.split(",") if args.only else PROBLEMS
    device = torch.device("cuda")
    for name in names:
        problem = get_problem(name)
        for dtype in problem.dtypes:
            for shape in problem.shapes:
                inputs = problem.make_inputs(shape, dtype, device, torch.Generator().manual_seed(0))
                out = problem.implementation(*inputs)
                run = {"problem": name, "shape": dict(shape), "dtype": str(dtype)[6:],
                       "bytes": problem.bytes_moved(shape, dtype),
                       "max_error": check(problem, out, inputs, dtype), "timings": {}}  # fmt: skip
                del out
                candidates = {"warpforge": lambda p=problem: p.implementation}
                candidates.update(problem.baselines)
                for label, factory in candidates.items():
                    try:
                        fn = factory()
                    except BaselineUnavailable as error:
                        run["timings"][label] = {"unavailable": str(error)}
                        continue
                    timing = time_cuda(fn, inputs, repeats=args.repeats)
                    timing["gbs"] = run["bytes"] / timing["median_us"] / 1e3
                    timing["back_to_back_us"] = back_to_back_us(fn, inputs, calls=200)
                    run["timings"][label] = timing
                ours = run["timings"]["warpforge"]["median_us"]
                best = min((t["median_us"], k) for k, t in run["timings"].items()
                           if k != "warpforge" and "median_us" in t)  # fmt: skip
                run["best_baseline"] = best[1]
                run["speedup_vs_best"] = best[0] / ours
                run["percent_of_copy"] = (
                    100 * run["timings"]["warpforge"]["gbs"] / results["copy_gbs"]
                )
                print(json.dumps({k: run[k] for k in ("problem", "shape", "dtype",
                      "speedup_vs_best", "percent_of_copy")}), flush=True)  # fmt: skip
                results["runs"].append(run)
                del inputs
                torch.cuda.empty_cache()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
