"""Tune a list of (kernel, shape, dtype) problems in one process, every trial into one database.

``warpforge tune`` compiles each config inside its search, one after another; for many small
problems the compiles are most of the wall time. This compiles every problem's valid configs
ahead in ``--compile-workers`` processes (:class:`warpforge.tune.precompile.CompilePool`, as
``benchmarks/tune_bench.py`` does), then runs the searches one after another on the GPU:
exhaustive, or budgeted (seeded like ``warpforge tune --budget``: the lookup's starting configs
from the shipped table and the database, then the built-in heuristic) when a problem names a
budget. No new search starts after ``--max-wall`` seconds; what was skipped is in the summary.

    python scripts/gpu/tune_problems.py --db sqlite:///OUT/tune.db --summary OUT/summary.json \\
        rms_norm.fwd:M=32768,N=256:float32 rms_norm.bwd:M=32768,N=256:float32:25 ...

A problem is ``KERNEL:SHAPE:DTYPE`` (exhaustive) or ``KERNEL:SHAPE:DTYPE:SECONDS`` (budgeted).
Export the results with ``warpforge db export FILE --db URL``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from warpforge.tune import DEFAULT_TRIAL_TIMEOUT_S


def parse_problem(text: str) -> tuple[str, dict[str, int], str, float | None]:
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"problem: expected KERNEL:SHAPE:DTYPE[:SECONDS], got {text!r}")
    from warpforge.validation import parse_shape

    budget = float(parts[3]) if len(parts) == 4 else None
    if budget is not None and budget <= 0:
        raise ValueError(f"problem {text!r}: the budget must be > 0 seconds")
    return parts[0], parse_shape(parts[1]), parts[2], budget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", help="KERNEL:SHAPE:DTYPE[:SECONDS]")
    parser.add_argument("--db", required=True, help="database URL (sqlite:///PATH)")
    parser.add_argument("--summary", type=Path, required=True, help="JSON summary to write")
    parser.add_argument("--compile-workers", type=int, default=0)
    parser.add_argument("--max-wall", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--trial-timeout", type=float, default=DEFAULT_TRIAL_TIMEOUT_S,
        help="seconds a trial (or a worker's compile of a config) may take before the run is "
        "stopped with the trial recorded as timed out; 0: no limit",
    )  # fmt: skip
    args = parser.parse_args(argv)
    problems = [parse_problem(p) for p in args.problems]

    import torch

    from warpforge import runtime
    from warpforge.tune.database import PerfDatabase
    from warpforge.tune.lookup import ConfigLookup
    from warpforge.tune.search import budgeted_search, exhaustive_search
    from warpforge.tune.tunable import get_tunable, parse_dtype

    start = time.monotonic()
    device = runtime.default_device()
    resolved = []
    for name, shape, dtype_text, budget in problems:
        kernel = get_tunable(name)
        dtype = parse_dtype(dtype_text)
        shape = kernel.check_shape(shape)
        resolved.append((kernel, shape, dtype, budget))

    timeout_s = args.trial_timeout or None  # 0: no limit
    compiled = None
    if args.compile_workers > 0 and device.type == "cuda":
        from warpforge.tune.precompile import CompilePool

        with CompilePool(args.compile_workers, timeout_s=timeout_s) as pool:
            pool.start()
            for kernel, shape, dtype, _ in resolved:
                valid = kernel.space.valid_configs(kernel.features(shape, dtype))
                if not pool.compile(kernel.name, shape, dtype, device, valid, seed=args.seed):
                    break
            compiled = {"configs_run": pool.compiled, "broke": not pool.usable}
        print(f"compiled ahead: {compiled} at {time.monotonic() - start:.0f} s", flush=True)

    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    seeds_from = ConfigLookup(database_url=None, use_database=False)  # shipped table only
    with PerfDatabase(args.db) as database:
        for kernel, shape, dtype, budget in resolved:
            label = f"{kernel.name} {shape} {dtype}"
            if time.monotonic() - start > args.max_wall:
                skipped.append(label)
                print(f"[skip] {label} (wall bound)", flush=True)
                continue
            features = kernel.features(shape, dtype)
            default = kernel.default_config(features)
            shipped = seeds_from.config_for(kernel.name, features, default, device=device)
            t0 = time.monotonic()
            if budget is None:
                result = exhaustive_search(
                    kernel, shape, dtype, device, database=database, seed=args.seed,
                    trial_timeout_s=timeout_s,
                )  # fmt: skip
            else:
                initial = seeds_from.starting_configs(kernel.name, features, device=device)
                initial.append(default)
                result = budgeted_search(
                    kernel, shape, dtype, device, budget_s=budget, initial=initial,
                    database=database, seed=args.seed, trial_timeout_s=timeout_s,
                )  # fmt: skip
            times = {
                json.dumps(t.config, sort_keys=True): t.median_s
                for t in result.trials
                if t.status == "ok"
            }
            best = result.best
            row = {
                "kernel": kernel.name,
                "features": features,
                "mode": "exhaustive" if budget is None else f"budget {budget:g} s",
                "trials": len(result.trials),
                "ok": len(times),
                "wall_s": round(time.monotonic() - t0, 1),
                "best": best.config if best else None,
                "best_s": best.median_s if best else None,
                "heuristic": default,
                "heuristic_s": times.get(json.dumps(default, sort_keys=True)),
                "shipped_lookup": shipped,
                "shipped_lookup_s": times.get(json.dumps(shipped, sort_keys=True)),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {
        "device": str(torch.cuda.get_device_name(0)) if device.type == "cuda" else str(device),
        "compile_ahead": compiled,
        "problems": rows,
        "skipped": skipped,
        "wall_s": round(time.monotonic() - start, 1),
    }
    args.summary.write_text(json.dumps(summary, indent=2))
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
