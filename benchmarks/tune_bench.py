"""Does tuning pay off, and do the shortcuts hold up? Issue 7's evidence, for any registered tunables.

Phases, in this order (``--max-wall`` bounds the whole run: work not started in time is listed
under ``skipped`` in the JSON, never silently dropped):

1. **Budgeted search, cold** (``--budget`` seconds, default 60) on one held-out shape of each
   ``--budget-kernels`` kernel, *first*, while Triton's cache holds none of their configs: the
   budget pays for every compile, as it would for a user. Seeded with the kernel's default
   config only (nothing is tuned yet). Its trials go to ``OUT/budget.db``.
2. **Exhaustive** search of every kernel's training shapes into ``OUT/tune.db``.
3. **Nearest match**: for each held-out shape, the config a fresh
   :class:`~warpforge.tune.lookup.ConfigLookup` picks from the training results alone (a
   neighbour's config carried over by the kernel's transfer; ``nearest_origin`` says which), taken
   *before* the held-out shape is searched; then an **exhaustive** search of the held-out shape
   (into ``OUT/tune.db`` too).
4. **Re-timing**: exhaustive best, nearest match, default and (where run) budget best are timed
   interleaved in one run (``warpforge.harness.timing.measure_interleaved``), so a lucky sample
   in a search does not count. Quality = exhaustive best time / contender time. Targets: nearest
   >= 0.95, budget >= 0.97 (within 3%).
5. **Export**: every exhaustive best (training and held-out shapes) as a shipped-configs file,
   ``OUT/shipped-<device>.json`` (commit it as ``src/warpforge/tune/shipped/<device>.json``).

``--compile-workers N`` compiles each exhaustive search's configs ahead in N processes
(:mod:`warpforge.tune.precompile`); budgeted searches never get that head start.

    PYTHONPATH=src python benchmarks/tune_bench.py --out OUT --kernels rms_norm.fwd --dtype bf16
    PYTHONPATH=src python benchmarks/tune_bench.py --out OUT --smoke      # CPU, seconds

Shapes: ``--train``/``--heldout`` (each kernel takes those naming exactly its sizes, e.g. ``M=..,N=..``
for the norms), else the kernel's ``sweep`` with every third shape held out; then cut to
``--train-count``/``--heldout-count``. ``--kernels`` takes shell patterns (``'blueprint.*'``). ``--smoke`` uses the interpreter's
CPU shapes (held out: the first CPU shape with every size + 1).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import torch

from warpforge.environment import environment_fingerprint
from warpforge.harness.timing import measure_interleaved
from warpforge.tune.database import PerfDatabase
from warpforge.tune.lookup import ConfigLookup
from warpforge.tune.search import (
    SearchResult,
    TimingOptions,
    TuningProblem,
    budgeted_search,
    exhaustive_search,
)
from warpforge.tune.shipped import export_shipped
from warpforge.tune.space import config_key
from warpforge.tune.tunable import (
    TunableKernel,
    device_fingerprint,
    dtype_name,
    get_tunable,
    parse_dtype,
    parse_shape,
)

NEAREST_TARGET = 0.95
BUDGET_TARGET = 0.97
SMOKE_KERNELS = (
    "rms_norm.fwd",
    "add_rms_norm.bwd",
    "blueprint.bias_gelu.k0_add_gelu",
    "blueprint.layernorm_linear_gelu.k1_linear_gelu",
)


class WallClock:
    """The run's time bound: work starts only while ``remaining() > reserve``."""

    def __init__(self, max_wall_s: float | None) -> None:
        self.start = time.monotonic()
        self.max_wall_s = max_wall_s

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def allows(self, reserve_s: float = 0.0) -> bool:
        return self.max_wall_s is None or self.elapsed() + reserve_s < self.max_wall_s


# ------------------------------------------------------------------------------ shapes


def _bumped(shape: dict[str, int]) -> dict[str, int]:
    return {k: v + 1 for k, v in shape.items()}


def _fitting_shapes(
    kernel: TunableKernel, texts: list[str] | tuple[str, ...]
) -> list[dict[str, int]]:
    """The given shapes that name exactly ``kernel``'s sizes (others are for other kernels)."""
    shapes = []
    for text in texts:
        try:
            shapes.append(kernel.check_shape(parse_shape(text)))
        except ValueError:
            continue
    return shapes


def expand_kernel_names(patterns: list[str]) -> list[str]:
    """Registered tunable names matching ``patterns`` (shell-style), in the order given."""
    import fnmatch

    from warpforge.tune.tunable import registered_tunables

    known = [k.name for k in registered_tunables()]
    names: dict[str, None] = {}
    for pattern in patterns:
        matched = (
            sorted(fnmatch.filter(known, pattern))
            if any(c in pattern for c in "*?[")
            else [pattern]
        )
        if not matched:
            raise SystemExit(f"--kernels: {pattern!r} matches no registered tunable")
        names.update(dict.fromkeys(matched))
    return list(names)


def split_shapes(
    kernel: TunableKernel, args: argparse.Namespace
) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """(training, held-out) shapes of ``kernel`` for this run."""
    given_train = _fitting_shapes(kernel, args.train or ())
    given_heldout = _fitting_shapes(kernel, args.heldout or ())
    if given_train and given_heldout:
        train, heldout = given_train, given_heldout
    elif args.smoke:
        cpu = [dict(s) for s in kernel.cpu_shapes]
        train = cpu[:1]
        heldout = [cpu[1] if len(cpu) > 1 else _bumped(cpu[0])]
    else:
        shapes = [dict(s) for s in (kernel.sweep or kernel.shapes)]
        if len(shapes) < 3:
            raise SystemExit(
                f"{kernel.name}: needs at least 3 sweep shapes to hold some out; "
                "pass --train/--heldout"
            )
        heldout = shapes[1::3]
        train = [s for s in shapes if s not in heldout]
        if args.train_count is not None:
            train = train[: args.train_count]
        if args.heldout_count is not None:
            heldout = heldout[: args.heldout_count]
    return train, heldout


# ------------------------------------------------------------------------------ searching


def search_summary(result: SearchResult, valid: int) -> dict[str, Any]:
    best = result.best
    counts = {s: sum(t.status == s for t in result.trials) for s in ("ok", "incorrect", "error")}
    return {
        "strategy": result.strategy,
        "trials": len(result.trials),
        "valid_configs": valid,
        "covered_space": len(result.trials) >= valid,
        "rejected_by_constraints": result.rejected,
        "status_counts": counts,
        "elapsed_s": result.elapsed_s,
        "best_config": best.config if best else None,
        "best_median_s": best.median_s if best else None,
        "errors": sorted({t.error for t in result.trials if t.status == "error" and t.error})[:5],
    }


class Bench:
    """One run: its options, databases, compile pool and time bound."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.device = torch.device(args.device)
        self.clock = WallClock(args.max_wall)
        self.timing = TimingOptions(
            min_samples=args.min_samples,
            max_samples=args.max_samples,
            max_time_s=args.trial_time,
            target_rel_stderr=0.01,
            input_sets=args.input_sets,
        )
        self.tune_url = f"sqlite:///{args.out / 'tune.db'}"
        self.budget_url = f"sqlite:///{args.out / 'budget.db'}"
        for url in (self.tune_url, self.budget_url):
            for suffix in ("", "-wal", "-shm"):
                Path(url.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
        self.pool: Any = None
        self.skipped: list[dict[str, Any]] = []

    def skip(self, what: str, **details: Any) -> None:
        self.skipped.append({"what": what, "at_s": round(self.clock.elapsed(), 1), **details})
        print(f"[skip] {what} {details} (wall-time bound)", flush=True)

    def start_pool(self) -> None:
        if self.args.compile_workers > 0 and self.pool is None:
            from warpforge.tune.precompile import CompilePool

            self.pool = CompilePool(self.args.compile_workers)
            self.pool.start()

    def exhaustive(
        self, kernel: TunableKernel, shape: dict[str, int], dtype: torch.dtype, db: PerfDatabase
    ) -> tuple[SearchResult, int]:
        valid = kernel.space.valid_configs(kernel.features(shape, dtype))
        if self.pool is not None and self.pool.usable:
            self.pool.compile(kernel.name, shape, dtype, self.device, valid, seed=self.args.seed)
        result = exhaustive_search(
            kernel, shape, dtype, self.device, timing=self.timing, database=db, seed=self.args.seed
        )
        return result, len(valid)

    def budgeted(
        self, kernel: TunableKernel, shape: dict[str, int], dtype: torch.dtype, db: PerfDatabase
    ) -> dict[str, Any]:
        features = kernel.features(shape, dtype)
        valid = len(kernel.space.valid_configs(features))
        result = budgeted_search(
            kernel,
            shape,
            dtype,
            self.device,
            budget_s=self.args.budget,
            initial=[kernel.default_config(features)],
            timing=self.timing,
            database=db,
            seed=self.args.seed,
        )
        return search_summary(result, valid)

    def retime(
        self,
        kernel: TunableKernel,
        shape: dict[str, int],
        dtype: torch.dtype,
        contenders: dict[str, dict[str, object]],
    ) -> dict[str, dict[str, Any]]:
        """Median time of each named config, all timed interleaved in one run."""
        unique: dict[str, dict[str, object]] = {}
        for config in contenders.values():
            unique.setdefault(config_key(config), config)
        problem = TuningProblem.build(
            kernel,
            shape,
            dtype,
            self.device,
            input_sets=self.args.input_sets,
            seed=self.args.seed + 1,
        )
        fns = {
            key: (lambda *inputs, c=config: kernel.run(c, *inputs))
            for key, config in unique.items()
        }
        measured = measure_interleaved(
            fns,
            problem.input_sets,
            min_samples=max(self.args.min_samples, 5),
            max_samples=2000,
            max_time_s=self.args.retime_time,
            target_rel_stderr=0.005,
            seed=self.args.seed,
        )
        return {
            name: {
                "config": config,
                "median_s": measured[config_key(config)].median_s,
                "ci_s": [
                    measured[config_key(config)].ci_low_s,
                    measured[config_key(config)].ci_high_s,
                ],
                "samples": len(measured[config_key(config)].samples_s),
            }
            for name, config in contenders.items()
        }


# ------------------------------------------------------------------------------ phases


def run_budget_phase(
    bench: Bench, plan: list[dict[str, Any]], budget_names: set[str]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Phase 1: cold budgeted searches; returns summaries by (kernel, dtype, shape key)."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    if bench.args.budget <= 0:
        return found
    with PerfDatabase(bench.budget_url) as db:
        for item in plan:
            kernel, dtype = item["kernel"], item["dtype"]
            if kernel.name not in budget_names or not item["heldout"]:
                continue
            for shape in item["heldout"][: bench.args.budget_shapes]:
                if not bench.clock.allows(bench.args.budget + bench.args.reserve):
                    bench.skip("budgeted search", kernel=kernel.name, shape=shape)
                    continue
                print(f"[budget] {kernel.name} {shape}: {bench.args.budget:g} s", flush=True)
                found[(kernel.name, dtype_name(dtype), config_key(shape))] = bench.budgeted(
                    kernel, shape, dtype, db
                )
    return found


def run_kernel(
    bench: Bench,
    item: dict[str, Any],
    budgets: dict[tuple[str, str, str], dict[str, Any]],
    db: PerfDatabase,
) -> dict[str, Any]:
    """Phases 2-4 for one (kernel, dtype)."""
    kernel: TunableKernel = item["kernel"]
    dtype: torch.dtype = item["dtype"]
    report: dict[str, Any] = {
        "kernel": kernel.name,
        "dtype": dtype_name(dtype),
        "train": [],
        "heldout": [],
    }
    for shape in item["train"]:
        if not bench.clock.allows(bench.args.reserve):
            bench.skip("training shape", kernel=kernel.name, shape=shape)
            continue
        print(f"[train] {kernel.name} {shape} {dtype_name(dtype)}: exhaustive", flush=True)
        result, valid = bench.exhaustive(kernel, shape, dtype, db)
        report["train"].append({"shape": shape, "exhaustive": search_summary(result, valid)})
    if not report["train"]:
        return _summarise(report)

    # Nearest matches from the training results alone, before any held-out shape is stored.
    lookup = ConfigLookup(
        database_url=bench.tune_url, shipped_dir=bench.args.out / "no-shipped", use_database=True
    )
    nearest, origins = {}, {}
    for shape in item["heldout"]:
        features = kernel.features(shape, dtype)
        nearest[config_key(shape)] = lookup.config_for(
            kernel.name, features, kernel.default_config(features), device=bench.device
        )
        origins[config_key(shape)] = lookup.origin(kernel.name, features, device=bench.device)
    lookup.clear()

    for shape in item["heldout"]:
        features = kernel.features(shape, dtype)
        if not bench.clock.allows(bench.args.reserve):
            bench.skip("held-out shape", kernel=kernel.name, shape=shape)
            continue
        print(f"[heldout] {kernel.name} {shape}: exhaustive", flush=True)
        result, valid = bench.exhaustive(kernel, shape, dtype, db)
        entry: dict[str, Any] = {
            "shape": shape,
            "features": features,
            "exhaustive": search_summary(result, valid),
            "nearest_config": nearest[config_key(shape)],
            "nearest_origin": origins[config_key(shape)],
            "default_config": kernel.default_config(features),
        }
        budget = budgets.get((kernel.name, dtype_name(dtype), config_key(shape)))
        if budget is not None:
            entry["budgeted"] = budget
        if result.best is None:
            entry["note"] = "no correct config found by exhaustive search"
            report["heldout"].append(entry)
            continue
        contenders = {
            "exhaustive": result.best.config,
            "nearest": entry["nearest_config"],
            "default": entry["default_config"],
        }
        if budget is not None and budget["best_config"] is not None:
            contenders["budgeted"] = budget["best_config"]
        retimed = bench.retime(kernel, shape, dtype, contenders)
        entry["retimed"] = retimed
        best_s = retimed["exhaustive"]["median_s"]
        entry["nearest_quality"] = best_s / retimed["nearest"]["median_s"]
        entry["default_quality"] = best_s / retimed["default"]["median_s"]
        if "budgeted" in retimed:
            entry["budget_quality"] = best_s / retimed["budgeted"]["median_s"]
        elif budget is not None:
            entry["budget_quality"] = 0.0  # the budget found no correct config
        report["heldout"].append(entry)
    return _summarise(report)


def _summarise(report: dict[str, Any]) -> dict[str, Any]:
    def summary(key: str, target: float | None) -> dict[str, Any] | None:
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
        "nearest_match": summary("nearest_quality", NEAREST_TARGET),
        "budgeted": summary("budget_quality", BUDGET_TARGET),
        "default_config": summary("default_quality", None),
    }
    return report


def write_plan(plan: list[dict[str, Any]], budget_names: set[str], args: argparse.Namespace) -> int:
    """``--plan-only``: every (kernel, dtype, shape) the run would search and its valid configs."""
    rows = []
    for item in plan:
        kernel, dtype = item["kernel"], item["dtype"]
        for role in ("train", "heldout"):
            for shape in item[role]:
                features = kernel.features(shape, dtype)
                rows.append(
                    {
                        "kernel": kernel.name,
                        "dtype": dtype_name(dtype),
                        "role": role,
                        "shape": shape,
                        "valid_configs": len(kernel.space.valid_configs(features)),
                        "budget": role == "heldout" and kernel.name in budget_names,
                    }
                )
    document = {"benchmark": "tune_bench plan", "budget_s": args.budget, "searches": rows}
    path = args.out / "plan.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    for row in rows:
        print(f"{row['kernel']:60s} {row['role']:8s} {row['shape']} {row['valid_configs']} configs")
    trials = sum(r["valid_configs"] for r in rows)
    print(f"{len(rows)} exhaustive searches, {trials} trials; wrote {path}")
    return 0


def device_slug(fingerprint: str) -> str:
    """A file name for a device fingerprint: ``NVIDIA H100 80GB HBM3/sm_90`` ->
    ``nvidia-h100-80gb-hbm3-sm_90``."""
    return re.sub(r"[^a-z0-9_]+", "-", fingerprint.lower()).strip("-") or "device"


# ------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="Directory for JSON and databases.")
    parser.add_argument(
        "--kernels", nargs="+", default=None, help="Registered tunable names or shell patterns."
    )
    parser.add_argument("--dtype", action="append", default=None, help="Repeatable; default: the kernel's first dtype.")  # fmt: skip
    parser.add_argument("--train", action="append", default=None, help="Training shape NAME=SIZE,... (repeatable); used by the kernels whose sizes it names.")  # fmt: skip
    parser.add_argument("--heldout", action="append", default=None, help="Held-out shape (repeatable); as --train.")  # fmt: skip
    parser.add_argument("--train-count", type=int, default=None, help="Use only the first N training shapes of a sweep.")  # fmt: skip
    parser.add_argument("--heldout-count", "--heldout-limit", type=int, default=None, help="Use only the first N held-out shapes of a sweep.")  # fmt: skip
    parser.add_argument("--budget", type=float, default=60.0, help="Seconds per budgeted search (0: skip).")  # fmt: skip
    parser.add_argument("--budget-kernels", nargs="+", default=None, help="Kernels given the budget check (default: all).")  # fmt: skip
    parser.add_argument("--budget-shapes", type=int, default=1, help="Held-out shapes per budget kernel.")  # fmt: skip
    parser.add_argument("--max-wall", type=float, default=None, help="Start no new work after this many seconds.")  # fmt: skip
    parser.add_argument("--reserve", type=float, default=10.0, help="Seconds kept for the work after a step (re-timing, export).")  # fmt: skip
    parser.add_argument("--compile-workers", type=int, default=0, help="Processes compiling exhaustive searches' configs ahead.")  # fmt: skip
    parser.add_argument("--trial-time", type=float, default=0.05, help="Max timing seconds per trial.")  # fmt: skip
    parser.add_argument("--min-samples", type=int, default=10)
    parser.add_argument("--max-samples", type=int, default=500)
    parser.add_argument("--input-sets", type=int, default=2, help="Random input sets rotated while timing.")  # fmt: skip
    parser.add_argument("--retime-time", type=float, default=0.3, help="Seconds of the interleaved re-timing per held-out shape.")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="Default: cuda when available, else cpu.")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes, seconds: checks the plumbing only.")  # fmt: skip
    parser.add_argument("--plan-only", action="store_true", help="Resolve kernels and shapes, count valid configs, write plan.json; run nothing.")  # fmt: skip
    parser.add_argument("--no-export", action="store_true", help="Do not write the shipped-configs file.")  # fmt: skip
    args = parser.parse_args(argv)
    if args.smoke:
        args.device = args.device or "cpu"
        args.kernels = args.kernels or list(SMOKE_KERNELS)
        args.budget = min(args.budget, 1.0)
        args.trial_time, args.min_samples, args.max_samples = 0.002, 2, 3
        args.input_sets, args.retime_time = 1, 0.002
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if not args.kernels:
        parser.error("--kernels: name at least one registered tunable (or pass --smoke)")
    if (args.train or args.heldout) and not (args.train and args.heldout):
        parser.error("--train and --heldout go together")
    for text in (*(args.train or ()), *(args.heldout or ())):
        try:
            parse_shape(text)
        except ValueError as exc:
            parser.error(f"--train/--heldout: {exc}")
    for name in ("budget", "trial_time", "retime_time", "reserve"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}: expected >= 0, got {getattr(args, name)}")
    for name in ("compile_workers", "budget_shapes"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}: expected >= 0, got {getattr(args, name)}")
    if args.max_wall is not None and args.max_wall <= 0:
        parser.error(f"--max-wall: expected seconds > 0, got {args.max_wall}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    plan: list[dict[str, Any]] = []
    for name in expand_kernel_names(args.kernels):
        try:
            kernel = get_tunable(name)
        except KeyError as exc:
            raise SystemExit(f"--kernels: {exc.args[0]}") from None
        train, heldout = split_shapes(kernel, args)
        dtypes = [parse_dtype(d) for d in args.dtype] if args.dtype else [kernel.dtypes[0]]
        for dtype in dtypes:
            if dtype not in kernel.dtypes:
                raise SystemExit(f"--dtype: {name} is tuned for {list(map(dtype_name, kernel.dtypes))}, got {dtype_name(dtype)}")  # fmt: skip
            plan.append({"kernel": kernel, "dtype": dtype, "train": train, "heldout": heldout})
    budget_names = set(expand_kernel_names(args.budget_kernels or args.kernels))
    if args.plan_only:
        return write_plan(plan, budget_names, args)

    fingerprint = device_fingerprint(bench.device)
    shipped_path = None if args.no_export else args.out / f"shipped-{device_slug(fingerprint)}.json"
    results: list[dict[str, Any]] = []
    compile_ahead = {"workers": args.compile_workers, "configs_run": 0, "broke": False}

    def write(complete: bool) -> Path:
        """The evidence so far (rewritten after every kernel: a killed run keeps what it did)."""
        if bench.pool is not None:
            compile_ahead.update(configs_run=bench.pool.compiled, broke=not bench.pool.usable)
        if shipped_path is not None and Path(bench.tune_url.removeprefix("sqlite:///")).exists():
            with PerfDatabase(bench.tune_url) as db:
                names = [i["kernel"].name for i in plan]
                export_shipped(names, shipped_path, database=db, device=fingerprint)
        document = {
            "benchmark": "tune_bench",
            "complete": complete,  # False: the run was interrupted after these results
            "environment_fingerprint": environment,
            "device_fingerprint": fingerprint,
            "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "method": {
                "budget": "cold: budgeted searches ran first, before any config of their kernel "
                "was compiled, seeded with the default config only; no compile-ahead workers",
                "budget_kernels": sorted(budget_names) if args.budget > 0 else [],
                "nearest": "ConfigLookup over the training shapes' exhaustive results only",
                "quality": "exhaustive best median / contender median, re-timed interleaved",
                "targets": {"nearest": NEAREST_TARGET, "budget": BUDGET_TARGET},
            },
            "compile_ahead": compile_ahead,
            "wall_s": bench.clock.elapsed(),
            "max_wall_s": args.max_wall,
            "skipped": bench.skipped,
            "shipped_file": None if shipped_path is None else shipped_path.name,
            "results": results,
        }
        path = args.out / "tune_bench.json"
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        return path

    environment = environment_fingerprint()
    budgets = run_budget_phase(bench, plan, budget_names)
    finished = False
    try:
        bench.start_pool()
        with PerfDatabase(bench.tune_url) as db:
            # Kernels given a budget check come first: their comparison needs the exhaustive run.
            ordered = sorted(plan, key=lambda i: i["kernel"].name not in budget_names)
            for item in ordered:
                results.append(run_kernel(bench, item, budgets, db))
                write(complete=False)
        finished = True
    finally:
        path = write(complete=finished)
        if bench.pool is not None:
            bench.pool.close()
    if shipped_path is not None:
        print(f"exported the tuned configs to {shipped_path}")
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
    if bench.skipped:
        print(f"{len(bench.skipped)} step(s) skipped by the wall-time bound (listed in the JSON)")
    print(f"wrote {path} in {bench.clock.elapsed():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
