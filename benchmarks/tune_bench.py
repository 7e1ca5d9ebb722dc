"""Does tuning pay off, and do the shortcuts hold up? Evidence for issue 7, for any registered tunable.

For each kernel (and dtype):

1. **Exhaustive** search on the training shapes, into a fresh SQLite database (``OUT/train.db``).
2. **Nearest match** on held-out shapes: the config :class:`~warpforge.tune.lookup.ConfigLookup`
   picks from the training results only, against an exhaustive search of that held-out shape
   (``OUT/heldout.db``). Quality = exhaustive best time / nearest-match time, both re-timed
   interleaved in the same run (so the exhaustive winner's lucky sample does not count). Target >= 0.95.
3. **Budgeted** search (random + coordinate descent, ``--budget`` seconds, no seeds from the database)
   on the held-out shapes, against the same exhaustive best, re-timed the same way. Target >= 0.97
   (within 3%).

Writes ``OUT/tune_bench.json`` with the environment fingerprint and every number, and prints a table.

    PYTHONPATH=src python benchmarks/tune_bench.py --out results/tune --kernels row_sum --budget 60

Shapes default to the kernel's ``sweep`` (every third one held out); ``--train``/``--heldout`` override.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from warpforge.environment import environment_fingerprint
from warpforge.tune.database import PerfDatabase
from warpforge.tune.lookup import ConfigLookup
from warpforge.tune.search import (
    HarnessTimer,
    SearchResult,
    TimingOptions,
    TuningProblem,
    budgeted_search,
    exhaustive_search,
)
from warpforge.tune.tunable import (
    TunableKernel,
    dtype_name,
    get_tunable,
    parse_dtype,
    parse_shape,
)

NEAREST_TARGET = 0.95
BUDGET_TARGET = 0.97


def _split_shapes(kernel: TunableKernel) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    shapes = [dict(s) for s in (kernel.sweep or (*kernel.shapes,))]
    if len(shapes) < 3:
        raise SystemExit(
            f"{kernel.name}: needs at least 3 sweep shapes to hold some out; pass --train/--heldout"
        )
    heldout = shapes[1::3]
    train = [s for s in shapes if s not in heldout]
    return train, heldout


def _search_summary(result: SearchResult) -> dict[str, Any]:
    best = result.best
    counts = {s: sum(t.status == s for t in result.trials) for s in ("ok", "incorrect", "error")}
    return {
        "strategy": result.strategy,
        "trials": len(result.trials),
        "rejected_by_constraints": result.rejected,
        "status_counts": counts,
        "elapsed_s": result.elapsed_s,
        "best_config": best.config if best else None,
        "best_median_s": best.median_s if best else None,
        "errors": sorted({t.error for t in result.trials if t.status == "error" and t.error})[:5],
    }


def _retime(
    problem: TuningProblem,
    configs: dict[str, dict[str, object]],
    timing: TimingOptions,
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """Median over ``rounds`` interleaved measurements of each named config (same inputs, same run)."""
    timer = HarnessTimer(timing)
    medians: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, config in configs.items():
            m = timer(
                lambda *inputs, c=config: problem.kernel.run(c, *inputs),
                problem.input_sets,
                config=config,
            )
            medians[name].append(m.median_s)
    return {
        name: {"config": configs[name], "median_s": statistics.median(v), "round_medians_s": v}
        for name, v in medians.items()
    }


def _bench_kernel(
    kernel: TunableKernel,
    dtype: torch.dtype,
    train: list[dict[str, int]],
    heldout: list[dict[str, int]],
    args: argparse.Namespace,
    out: Path,
) -> dict[str, Any]:
    device = torch.device(args.device)
    timing = TimingOptions(
        min_samples=args.min_samples,
        max_samples=args.max_samples,
        max_time_s=args.trial_time,
        target_rel_stderr=0.01,
    )
    retime_timing = TimingOptions(
        min_samples=20, max_time_s=args.retime_time, target_rel_stderr=0.005
    )
    tag = f"{kernel.name}_{dtype_name(dtype)}"
    train_url = f"sqlite:///{out / f'{tag}_train.db'}"
    heldout_url = f"sqlite:///{out / f'{tag}_heldout.db'}"
    for url in (train_url, heldout_url):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)

    report: dict[str, Any] = {
        "kernel": kernel.name,
        "dtype": dtype_name(dtype),
        "train": [],
        "heldout": [],
    }
    with PerfDatabase(train_url) as train_db:
        for shape in train:
            print(f"[train] {kernel.name} {shape} {dtype_name(dtype)}: exhaustive", flush=True)
            result = exhaustive_search(
                kernel, shape, dtype, device, timing=timing, database=train_db
            )
            report["train"].append({"shape": shape, "exhaustive": _search_summary(result)})

    lookup = ConfigLookup(database_url=train_url, shipped_dir=out / "no-shipped")
    with PerfDatabase(heldout_url) as heldout_db:
        for shape in heldout:
            features = kernel.features(shape, dtype)
            nearest = lookup.config_for(
                kernel.name, features, kernel.default_config(features), device=device
            )
            print(f"[heldout] {kernel.name} {shape}: exhaustive", flush=True)
            exhaustive = exhaustive_search(
                kernel, shape, dtype, device, timing=timing, database=heldout_db
            )
            entry: dict[str, Any] = {
                "shape": shape,
                "exhaustive": _search_summary(exhaustive),
                "nearest_config": nearest,
                "default_config": kernel.default_config(features),
            }
            if exhaustive.best is None:
                entry["note"] = "no correct config found by exhaustive search"
                report["heldout"].append(entry)
                continue
            budgeted = None
            if args.budget > 0:
                print(f"[heldout] {kernel.name} {shape}: budgeted {args.budget:g} s", flush=True)
                budgeted = budgeted_search(
                    kernel,
                    shape,
                    dtype,
                    device,
                    budget_s=args.budget,
                    timing=timing,
                    seed=args.seed,
                )
                entry["budgeted"] = _search_summary(budgeted)
            contenders = {
                "exhaustive": exhaustive.best.config,
                "nearest": nearest,
                "default": kernel.default_config(features),
            }
            if budgeted is not None and budgeted.best is not None:
                contenders["budgeted"] = budgeted.best.config
            problem = TuningProblem.build(
                kernel, shape, dtype, device, input_sets=3, seed=args.seed + 1
            )
            retimed = _retime(problem, contenders, retime_timing, args.retime_rounds)
            entry["retimed"] = retimed
            best_s = retimed["exhaustive"]["median_s"]
            entry["nearest_quality"] = best_s / retimed["nearest"]["median_s"]
            entry["default_quality"] = best_s / retimed["default"]["median_s"]
            if "budgeted" in retimed:
                entry["budget_quality"] = best_s / retimed["budgeted"]["median_s"]
            elif budgeted is not None:
                entry["budget_quality"] = 0.0  # the budget found no correct config
            report["heldout"].append(entry)
    lookup.clear()

    def _summary(key: str, target: float | None) -> dict[str, Any] | None:
        values = [e[key] for e in report["heldout"] if key in e]
        if not values:
            return None
        return {
            "min": min(values),
            "geomean": math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values)),
            "target": target,
            "shapes_meeting_target": None if target is None else sum(v >= target for v in values),
            "shapes": len(values),
        }

    report["summary"] = {
        "nearest_match": _summary("nearest_quality", NEAREST_TARGET),
        "budgeted": _summary("budget_quality", BUDGET_TARGET),
        "default_config": _summary("default_quality", None),
    }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="Directory for JSON and databases.")
    parser.add_argument(
        "--kernels", nargs="+", default=["row_sum"], help="Registered tunable names."
    )
    parser.add_argument(
        "--dtype",
        action="append",
        default=None,
        help="Repeatable; default: the kernel's first dtype.",
    )
    parser.add_argument(
        "--train", action="append", default=None, help="Training shape NAME=SIZE,... (repeatable)."
    )
    parser.add_argument(
        "--heldout", action="append", default=None, help="Held-out shape (repeatable)."
    )
    parser.add_argument(
        "--heldout-limit", type=int, default=None, help="Use only the first N held-out shapes."
    )
    parser.add_argument(
        "--budget", type=float, default=60.0, help="Seconds per budgeted search (0: skip)."
    )
    parser.add_argument(
        "--trial-time", type=float, default=0.2, help="Max timing seconds per trial."
    )
    parser.add_argument("--min-samples", type=int, default=10)
    parser.add_argument("--max-samples", type=int, default=500)
    parser.add_argument(
        "--retime-time", type=float, default=0.5, help="Max seconds per re-timing measurement."
    )
    parser.add_argument("--retime-rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if args.budget < 0:
        parser.error(f"--budget: expected seconds >= 0, got {args.budget}")

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results = []
    for name in args.kernels:
        try:
            kernel = get_tunable(name)
        except KeyError as exc:
            parser.error(str(exc.args[0]))
        if args.train or args.heldout:
            if not (args.train and args.heldout):
                parser.error("--train and --heldout go together")
            train = [kernel.check_shape(parse_shape(s)) for s in args.train]
            heldout = [kernel.check_shape(parse_shape(s)) for s in args.heldout]
        else:
            train, heldout = _split_shapes(kernel)
        if args.heldout_limit is not None:
            heldout = heldout[: args.heldout_limit]
        dtypes = [parse_dtype(d) for d in args.dtype] if args.dtype else [kernel.dtypes[0]]
        for dtype in dtypes:
            results.append(_bench_kernel(kernel, dtype, train, heldout, args, args.out))

    document = {
        "benchmark": "tune_bench",
        "environment_fingerprint": environment_fingerprint(),
        "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "wall_s": time.time() - started,
        "results": results,
    }
    path = args.out / "tune_bench.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    for r in results:
        s = r["summary"]
        print(f"{r['kernel']} {r['dtype']}:")
        for key in ("nearest_match", "budgeted", "default_config"):
            if s[key]:
                met = s[key]["shapes_meeting_target"]
                print(
                    f"  {key:15s} min {s[key]['min']:.3f}  geomean {s[key]['geomean']:.3f}"
                    + ("" if met is None else f"  meeting target {met}/{s[key]['shapes']}")
                )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
