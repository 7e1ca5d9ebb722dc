"""One GPU check for the losses, activations and rope: verify, time, report bandwidth.

For every problem registered by ``warpforge.ops.loss_problems``, ``activation_problems`` and
``rope_problems``, on its GPU shapes: checks warpforge's result against the float64 reference,
times warpforge and each available baseline (CUDA events, L2 flushed before each call, median
of repeated calls; or ``warpforge.harness.timing.measure`` when present) and reports achieved
GB/s, the percent of the copy ceiling and the speedup over the best baseline. Writes JSON.

    PYTHONPATH=src python benchmarks/ops_losses_check.py --out $OUT/ops-losses
    PYTHONPATH=src python benchmarks/ops_losses_check.py --quick --out $OUT/ops-losses  # bf16, no compile
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

MODULES = (
    "warpforge.ops.loss_problems",
    "warpforge.ops.activation_problems",
    "warpforge.ops.rope_problems",
)
COPY_CEILING_BYTES_PER_S = 3.0e12  # H100 device-to-device copy, docs BENCHMARKING.md


def _flush_l2(buffer: torch.Tensor) -> None:
    buffer.zero_()


def time_call(
    fn: Callable[..., Any], inputs: tuple[Any, ...], flush: torch.Tensor
) -> dict[str, Any]:
    try:
        from warpforge.harness.timing import measure
    except ImportError:
        measure = None
    if measure is not None:
        m = measure(fn, [inputs], max_time_s=3.0)
        return {"median_s": m.median_s, "ci_low_s": m.ci_low_s, "ci_high_s": m.ci_high_s,
                "method": "warpforge.harness.timing.measure"}  # fmt: skip
    for _ in range(3):
        fn(*inputs)
    samples = []
    for _ in range(25):
        _flush_l2(flush)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) / 1e3)
    samples.sort()
    return {"median_s": statistics.median(samples), "p10_s": samples[2], "p90_s": samples[-3],
            "method": "cuda-events, L2 flushed"}  # fmt: skip


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def verify(problem, inputs) -> dict[str, Any]:
    got = _as_tuple(problem.implementation(*inputs))
    as64 = tuple(x.double() if x.is_floating_point() else x for x in inputs)
    expected = _as_tuple(problem.reference(*as64))
    at_dtype = _as_tuple(problem.reference(*inputs))
    atol, rtol = problem.tolerance.for_dtype(inputs[0].dtype)
    worst = []
    ok = True
    for g, e, t in zip(got, expected, at_dtype, strict=True):
        error = (g.double() - e).abs()
        torch_error = float((t.double() - e).abs().max())
        allowed = torch.clamp(atol + rtol * e.abs(), min=2 * torch_error)
        ok = ok and bool((error <= allowed).all())
        worst.append({"max_abs_error": float(error.max()), "torch_max_abs_error": torch_error})
    return {"passed": ok, "outputs": worst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--quick", action="store_true", help="bfloat16 only, no torch.compile")
    parser.add_argument("--only", default="", help="comma-separated problem names")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("ops_losses_check: needs a CUDA device", file=sys.stderr)
        return 2
    from warpforge.environment import environment_fingerprint
    from warpforge.harness.problem import BaselineUnavailable
    from warpforge.harness.registry import registered_problems

    for module in MODULES:
        importlib.import_module(module)
    names = {n for n in args.only.split(",") if n}
    problems = [
        p
        for p in registered_problems()
        if p.implementation.__module__ in MODULES and (not names or p.name in names)
    ]
    device = torch.device("cuda")
    flush = torch.empty(64 * 2**20, dtype=torch.int8, device=device)
    rows = []
    for problem in problems:
        dtypes = [torch.bfloat16] if args.quick else list(problem.dtypes)
        for dtype in dtypes:
            for shape in problem.shapes:
                row: dict[str, Any] = {"problem": problem.name, "shape": dict(shape),
                                       "dtype": str(dtype).removeprefix("torch.")}  # fmt: skip
                try:
                    gen = torch.Generator(device=device).manual_seed(0)
                    inputs = problem.make_inputs(shape, dtype, device, gen)
                    try:
                        row["verify"] = verify(problem, inputs)
                    except torch.cuda.OutOfMemoryError:  # float64 reference of the largest shapes
                        row["verify"] = {
                            "passed": None,
                            "skipped": "float64 reference out of memory",
                        }
                        torch.cuda.empty_cache()
                    bytes_moved = problem.bytes_moved(shape, dtype)
                    row["bytes_moved"] = bytes_moved
                    timings = {"warpforge": time_call(problem.implementation, inputs, flush)}
                    for name, factory in problem.baselines.items():
                        if args.quick and name == "torch.compile":
                            continue
                        try:
                            timings[name] = time_call(factory(), inputs, flush)
                        except BaselineUnavailable as exc:
                            timings[name] = {"unavailable": str(exc)}
                        except Exception as exc:  # a baseline failing must not stop the run
                            timings[name] = {"error": repr(exc)[:500]}
                        torch.cuda.empty_cache()
                    for t in timings.values():
                        if "median_s" in t:
                            t["gb_per_s"] = bytes_moved / t["median_s"] / 1e9
                            t["percent_of_copy"] = (
                                100 * bytes_moved / t["median_s"] / COPY_CEILING_BYTES_PER_S
                            )
                    best = min((t["median_s"] for n, t in timings.items()
                                if n != "warpforge" and "median_s" in t), default=None)  # fmt: skip
                    if best is not None:
                        row["speedup_vs_best_baseline"] = best / timings["warpforge"]["median_s"]
                    row["timings"] = timings
                except Exception:
                    row["error"] = traceback.format_exc()[-2000:]
                torch.cuda.empty_cache()
                rows.append(row)
                w = row.get("timings", {}).get("warpforge", {})
                print(
                    f"{problem.name:38s} {row['dtype']:9s} {json.dumps(dict(shape)):70s} "
                    f"ok={row.get('verify', {}).get('passed')} "
                    f"{w.get('gb_per_s', float('nan')):8.0f} GB/s "
                    f"{w.get('percent_of_copy', float('nan')):5.1f}% "
                    f"x{row.get('speedup_vs_best_baseline', float('nan')):.2f}"
                    + ("  ERROR" if "error" in row else ""),
                    flush=True,
                )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "ops_losses_check.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"rows": rows, "environment": environment_fingerprint()},
                              indent=2, default=str))  # fmt: skip
    tmp.replace(path)
    print(f"wrote {path}")
    failed = [r for r in rows if "error" in r or r.get("verify", {}).get("passed") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
