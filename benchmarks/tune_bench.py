"""Does tuning pay off, and do the shortcuts hold up? Issue 7's evidence, for any registered tunables.

Phases, in this order (``--max-wall`` bounds the whole run: work not started in time is listed
under ``skipped`` in the JSON, never silently dropped):

1. **Budgeted search, cold** (``--budget`` seconds, default 60) on one held-out shape of each
   ``--budget-kernels`` kernel, *first*, while Triton's cache holds none of their configs: the
   budget pays for every compile, as it would for a user. Seeded with the kernel's default
   config only (nothing is tuned yet). Its trials go to ``OUT/budget.db``. Then, each in a fresh
   process with its own empty Triton cache and no compile-ahead (``OUT/wf-probe-*/probe.json``):
   with ``--short-budget S``, a second budgeted search of ``S`` seconds with no seed config
   (random sampling + descent alone) where the first took longer than ``S``; with ``--cold-exhaustive L``, where the budget could not try every valid
   config, an exhaustive search stopped after ``L`` seconds. ``budget_evidence`` in the JSON sets
   each budgeted search against the cold exhaustive wall time, so it says whether the budget was
   smaller than the whole search.
2. **Exhaustive** search of every kernel's training shapes into ``OUT/tune.db``.
3. **Nearest match**: for each held-out shape, the config a fresh
   :class:`~warpforge.tune.lookup.ConfigLookup` picks from the training results alone (the
   consensus of the 3 nearest training shapes, :mod:`warpforge.tune.consensus`;
   ``nearest_origin`` says where from), and the config the rule before it picks (the single
   nearest neighbour's best carried over, ``nearest_single_config``), taken *before* the held-out
   shape is searched; then the **refined** match: a short descent
   (:func:`~warpforge.tune.search.refine_search`, at most ``--refine-trials`` configs) from the
   configs of the 3 nearest training shapes carried over and the default config (as
   ``warpforge tune OP --refine N`` seeds it), into ``OUT/refine.db``; then an
   **exhaustive** search of the held-out shape (into ``OUT/tune.db`` too). Held-out shapes never
   inform a lookup or a refinement.
4. **Re-timing**: exhaustive best, nearest match, single nearest, refined match, default and
   (where run) budget best are timed interleaved in one run (``warpforge.harness.timing.measure_interleaved``), so a
   lucky sample in a search does not count. Quality = exhaustive best time / contender time.
   Targets: nearest (and refined) >= 0.95, budget >= 0.97 (within 3%).
5. **Budget replay** (no GPU time): the budgeted search's algorithm (random sampling + coordinate
   descent) replayed on each held-out shape's measured exhaustive times, capped at 25% and 50% of
   the valid configs, over ``--replay-seeds`` random seeds and with no seed config: how close to
   the best it gets when the budget cannot cover the space (``budget_replay`` in the JSON; qualities from search medians).
6. **Export**: every exhaustive best of the training shapes (never a held-out one) as a shipped-configs file,
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
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from warpforge.environment import environment_fingerprint
from warpforge.harness.timing import Measurement, measure_interleaved
from warpforge.tune.database import PerfDatabase
from warpforge.tune.lookup import ConfigLookup
from warpforge.tune.search import (
    SearchResult,
    TimingOptions,
    TuningProblem,
    budgeted_search,
    exhaustive_search,
    refine_search,
)
from warpforge.tune.shipped import export_shipped
from warpforge.tune.space import config_key
from warpforge.tune.tunable import (
    TunableKernel,
    device_fingerprint,
    dtype_name,
    get_tunable,
    parse_dtype,
)
from warpforge.validation import parse_shape

NEAREST_TARGET = 0.95
BUDGET_TARGET = 0.97
REPLAY_FRACTIONS = (0.25, 0.5)
"""Trial caps of the budget replay, as fractions of the valid configs."""
NEIGHBOURS = 3
LOOKUP_SAMPLES = 2000
"""Cached lookups timed per held-out shape (the issue: p99 <= 1 ms, at most one database query
per kernel and shape bucket per process)."""
"""Nearest training shapes whose configs seed the refined match."""
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


def _shape_text(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


class _ProbeStopped(Exception):
    """Raised from the probe's trial callback when its time limit has passed."""


def run_probe(args: argparse.Namespace) -> int:
    """``--probe KERNEL``: one search in this (fresh) process, writing its progress to
    ``OUT/probe.json`` after every trial: budgeted for ``--probe-budget`` seconds with no seed
    (random sampling + descent alone: the default config is the best on some problems, and a seed
    would hide what the search does), or exhaustive (``--probe-budget 0``) stopped after
    ``--probe-limit`` seconds."""
    kernel = get_tunable(args.probe)
    shape = kernel.check_shape(parse_shape(args.probe_shape))
    dtype = parse_dtype(args.dtype[0]) if args.dtype else kernel.dtypes[0]
    device = torch.device(args.device)
    features = kernel.features(shape, dtype)
    valid = len(kernel.space.valid_configs(features))
    timing = TimingOptions(
        min_samples=args.min_samples,
        max_samples=args.max_samples,
        max_time_s=args.trial_time,
        target_rel_stderr=0.01,
        input_sets=args.input_sets,
    )
    path = args.out / "probe.json"
    trials: list[Any] = []
    start = time.monotonic()
    strategy = "budgeted" if args.probe_budget > 0 else "exhaustive"

    def write(finished: bool) -> None:
        good = [t for t in trials if t.ok and t.median_s is not None]
        best = min(good, key=lambda t: t.median_s) if good else None
        document = {
            "kernel": kernel.name,
            "shape": shape,
            "strategy": strategy,
            "budget_s": args.probe_budget if args.probe_budget > 0 else None,
            "valid_configs": valid,
            "trials": len(trials),
            "covered_space": len(trials) >= valid,
            "finished": finished,
            "search_wall_s": time.monotonic() - start,
            "best_config": best.config if best else None,
            "best_median_s": best.median_s if best else None,
            "status_counts": {
                s: sum(t.status == s for t in trials) for s in ("ok", "incorrect", "error")
            },
        }
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")

    def on_trial(trial: Any) -> None:
        trials.append(trial)
        write(finished=False)
        late = time.monotonic() - start >= args.probe_limit
        if strategy == "exhaustive" and late and len(trials) < valid:
            raise _ProbeStopped

    common = {"timing": timing, "on_trial": on_trial, "seed": args.seed}
    try:
        if strategy == "budgeted":
            budgeted_search(
                kernel, shape, dtype, device, budget_s=args.probe_budget, **common,
            )  # fmt: skip
        else:
            exhaustive_search(kernel, shape, dtype, device, **common)
        write(finished=True)
    except _ProbeStopped:
        write(finished=False)
    return 0


def replay_budget(
    kernel: TunableKernel,
    shape: dict[str, int],
    dtype: torch.dtype,
    result: SearchResult,
    *,
    seeds: int,
) -> list[dict[str, Any]]:
    """The budgeted search's algorithm on ``result``'s measured times (no GPU work): for each
    :data:`REPLAY_FRACTIONS` cap of the valid configs, the best found over ``seeds`` random seeds,
    with no seed config (random sampling + descent alone)."""
    measured = {config_key(t.config): t for t in result.trials}
    best = result.best
    if best is None or best.median_s is None:
        return []
    features = dict(result.features)

    def run(config: dict[str, object], x: torch.Tensor) -> torch.Tensor:
        trial = measured.get(config_key(config))
        if trial is None or not trial.ok:
            raise RuntimeError(f"{trial.status if trial else 'not measured'} in the exhaustive run")
        return x

    def timer(fn: Any, input_sets: Any, *, config: dict[str, object]) -> Measurement:
        m = measured[config_key(config)].median_s
        return Measurement((m,), m, m, m, 0.0, "replayed", False, m)

    stand_in = dataclasses.replace(
        kernel,
        features=lambda s, d: features,
        make_inputs=lambda s, d, dev, g: (torch.ones(1),),
        run=run,
        reference=lambda x: x,
    )
    valid = len(kernel.space.valid_configs(features))
    out = []
    for fraction in REPLAY_FRACTIONS:
        cap = max(1, math.floor(fraction * valid))
        qualities = []
        for seed in range(seeds):
            found = budgeted_search(
                stand_in, shape, dtype, "cpu", budget_s=1e9, max_trials=cap,
                timer=timer, seed=seed,
            ).best  # fmt: skip
            qualities.append(best.median_s / found.median_s if found and found.median_s else 0.0)
        out.append(
            {
                "fraction": fraction,
                "max_trials": cap,
                "valid_configs": valid,
                "seeds": seeds,
                "quality_min": min(qualities),
                "quality_median": statistics.median(qualities),
                "runs_within_3pct": sum(q >= BUDGET_TARGET for q in qualities),
            }
        )
    return out


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
        self.refine_url = f"sqlite:///{args.out / 'refine.db'}"
        for url in (self.tune_url, self.budget_url, self.refine_url):
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
        return {**search_summary(result, valid), "budget_s": self.args.budget}

    def refine(
        self,
        kernel: TunableKernel,
        shape: dict[str, int],
        dtype: torch.dtype,
        seeds: list[dict[str, object]],
        db: PerfDatabase,
    ) -> dict[str, Any]:
        """The refined match: a short descent from the neighbours' configs carried over."""
        valid = len(kernel.space.valid_configs(kernel.features(shape, dtype)))
        result = refine_search(
            kernel,
            shape,
            dtype,
            self.device,
            initial=seeds,
            max_trials=self.args.refine_trials,
            timing=self.timing,
            database=db,
            seed=self.args.seed,
        )
        return {**search_summary(result, valid), "seeds": len(seeds)}

    def probe(
        self,
        kernel: TunableKernel,
        shape: dict[str, int],
        dtype: torch.dtype,
        *,
        budget_s: float,
        limit_s: float,
    ) -> dict[str, Any]:
        """One search of one problem in a fresh process with an empty Triton cache and no
        compile-ahead, so it pays for every compile: budgeted for ``budget_s`` seconds, or
        exhaustive (``budget_s`` 0) stopped after ``limit_s`` seconds. Returns the JSON the probe
        wrote (how far it got, its best) plus the process's own wall time."""
        probe_dir = Path(tempfile.mkdtemp(prefix="wf-probe-", dir=self.args.out))
        env = {
            **os.environ,
            "TRITON_CACHE_DIR": str(probe_dir / "triton"),
            "WARPFORGE_CACHE_DIR": str(probe_dir / "cache"),
        }
        report = probe_dir / "probe.json"
        command = [
            sys.executable, str(Path(__file__).resolve()), "--out", str(probe_dir),
            "--probe", kernel.name, "--probe-shape", _shape_text(shape),
            "--probe-budget", f"{budget_s:g}", "--probe-limit", f"{limit_s:g}",
            "--dtype", dtype_name(dtype), "--device", str(self.device),
            "--trial-time", f"{self.args.trial_time:g}",
            "--min-samples", str(self.args.min_samples),
            "--max-samples", str(self.args.max_samples),
            "--input-sets", str(self.args.input_sets), "--seed", str(self.args.seed),
        ]  # fmt: skip
        started = time.monotonic()
        allowed = max(budget_s, limit_s) + 120  # + start-up, imports and building the inputs
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=allowed)
            failure = None if done.returncode == 0 else (done.stderr or done.stdout)[-2000:]
        except subprocess.TimeoutExpired:
            failure = f"the probe process did not finish within {allowed:g} s"
        out: dict[str, Any] = {"process_wall_s": time.monotonic() - started, "limit_s": limit_s}
        for cache in ("triton", "cache"):  # compiled kernels: not evidence, and large
            shutil.rmtree(probe_dir / cache, ignore_errors=True)
        if report.exists():
            out.update(json.loads(report.read_text()))
        if failure is not None:
            out["failure"] = failure
        return out

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
    """Phase 1: cold budgeted searches; returns summaries by (kernel, dtype, shape key).

    Per budget problem: the ``--budget`` search in this process, first (so cold); then, each in a
    fresh process with an empty Triton cache, the ``--short-budget`` search (``"short"``; only
    when the ``--budget`` search took longer than the short budget) and,
    when the budget did not cover the space, an exhaustive search stopped after
    ``--cold-exhaustive`` seconds (``"exhaustive_cold"``)."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    args = bench.args
    if args.budget <= 0:
        return found
    with PerfDatabase(bench.budget_url) as db:
        for item in plan:
            kernel, dtype = item["kernel"], item["dtype"]
            if kernel.name not in budget_names or not item["heldout"]:
                continue
            for shape in item["heldout"][: args.budget_shapes]:
                if not bench.clock.allows(args.budget + args.reserve):
                    bench.skip("budgeted search", kernel=kernel.name, shape=shape)
                    continue
                print(f"[budget] {kernel.name} {shape}: {args.budget:g} s", flush=True)
                key = (kernel.name, dtype_name(dtype), config_key(shape))
                budget = found[key] = bench.budgeted(kernel, shape, dtype, db)
                # A shorter budget only tells something when the space takes longer, cold.
                if 0 < args.short_budget < budget["elapsed_s"]:
                    if bench.clock.allows(args.short_budget + 60 + args.reserve):
                        print(f"[budget] {kernel.name} {shape}: {args.short_budget:g} s, fresh process", flush=True)  # fmt: skip
                        budget["short"] = bench.probe(
                            kernel, shape, dtype, budget_s=args.short_budget, limit_s=0
                        )
                    else:
                        bench.skip("short budgeted search", kernel=kernel.name, shape=shape)
                limit = args.cold_exhaustive
                if limit <= 0 or budget["covered_space"]:
                    continue  # a budget that tried every config was an exhaustive search, cold
                if not bench.clock.allows(limit + 60 + args.reserve):
                    bench.skip("cold exhaustive search", kernel=kernel.name, shape=shape)
                    continue
                print(f"[cold exhaustive] {kernel.name} {shape}: up to {limit:g} s", flush=True)
                budget["exhaustive_cold"] = bench.probe(
                    kernel, shape, dtype, budget_s=0, limit_s=limit
                )
    return found


def budget_evidence(
    budget: dict[str, Any], qualities: dict[str, float | None]
) -> list[dict[str, Any]]:
    """What each budgeted search of a problem proves: configs tried of the valid ones, its wall
    time against a cold exhaustive search's, and the quality it reached (re-timed).

    The cold exhaustive time is the fresh-process exhaustive probe's when it finished; else the
    ``--budget`` search's own time when that search tried every valid config (it then was an
    exhaustive search, cold); else unknown, with how long the stopped probe ran."""
    cold = budget.get("exhaustive_cold") or {}
    if cold.get("finished"):
        cold_s, source = cold["search_wall_s"], "exhaustive search in a fresh process"
    elif budget["covered_space"]:
        cold_s, source = budget["elapsed_s"], "the budgeted search tried every valid config"
    else:
        cold_s, source = None, None
    stopped = None if cold.get("finished") or not cold else cold.get("search_wall_s")
    rows = []
    searches = [("budget", budget, "this process, before any other compile")]
    if budget.get("short"):
        searches.append(("short", budget["short"], "fresh process, empty Triton cache"))
    for name, search, where in searches:
        wall = search.get("elapsed_s", search.get("search_wall_s"))
        covered = bool(search.get("covered_space"))
        rows.append(
            {
                "search": name,
                "where": where,
                "budget_s": search.get("budget_s"),
                "configs_tried": search.get("trials"),
                "valid_configs": search.get("valid_configs"),
                "covered_space": covered,
                "budget_wall_s": wall,
                "exhaustive_cold_wall_s": cold_s,
                "exhaustive_cold_source": source,
                "exhaustive_cold_stopped_after_s": stopped,
                "best_over_exhaustive_best": qualities.get(name),
                "failure": search.get("failure"),
                # the check means something only when the search could not try every config
                # and a cold exhaustive search took (or would take) longer than it did
                "budget_below_exhaustive": not covered
                and wall is not None
                and ((cold_s is not None and cold_s > wall) or (stopped or 0) > wall),
            }
        )
    return rows


def timed_lookup(
    lookup: ConfigLookup,
    kernel: str,
    features: dict[str, Any],
    default: dict[str, Any],
    device: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The lookup's config for ``features`` and what asking cost on the host: the first call
    (the kernel's one database query and the consensus) and :data:`LOOKUP_SAMPLES` cached calls
    (``time.perf_counter_ns`` around each), with the database queries the lookup made."""
    start = time.perf_counter_ns()
    config = lookup.config_for(kernel, features, default, device=device)
    first_ns = time.perf_counter_ns() - start
    samples = []
    for _ in range(LOOKUP_SAMPLES):
        start = time.perf_counter_ns()
        lookup.config_for(kernel, features, default, device=device)
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return config, {
        "first_us": first_ns / 1e3,
        "cached_samples": len(samples),
        "cached_p50_us": samples[len(samples) // 2] / 1e3,
        "cached_p99_us": samples[int(0.99 * len(samples))] / 1e3,
        "cached_max_us": samples[-1] / 1e3,
        "db_queries": lookup.db_queries,
    }


def run_kernel(
    bench: Bench,
    item: dict[str, Any],
    budgets: dict[tuple[str, str, str], dict[str, Any]],
    db: PerfDatabase,
    refine_db: PerfDatabase,
) -> dict[str, Any]:
    """Phases 2-5 for one (kernel, dtype)."""
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
    lookup, single_lookup = (
        ConfigLookup(
            database_url=bench.tune_url,
            shipped_dir=bench.args.out / "no-shipped",
            use_database=True,
            selection=selection,
        )
        for selection in ("consensus", "nearest")
    )
    nearest, origins, seeds, single, latency = {}, {}, {}, {}, {}
    for shape in item["heldout"]:
        features = kernel.features(shape, dtype)
        nearest[config_key(shape)], latency[config_key(shape)] = timed_lookup(
            lookup, kernel.name, features, kernel.default_config(features), bench.device
        )
        origins[config_key(shape)] = lookup.origin(kernel.name, features, device=bench.device)
        # the rule before the consensus: the single nearest neighbour's best, carried over
        single[config_key(shape)] = single_lookup.config_for(
            kernel.name, features, kernel.default_config(features), device=bench.device
        )
        # as ``warpforge tune OP --refine N`` seeds it: the neighbours' configs, the heuristic last
        seeds[config_key(shape)] = [
            *lookup.starting_configs(kernel.name, features, device=bench.device, k=NEIGHBOURS),
            kernel.default_config(features),
        ]
    lookup.clear()
    single_lookup.clear()

    for shape in item["heldout"]:
        features = kernel.features(shape, dtype)
        if not bench.clock.allows(bench.args.reserve):
            bench.skip("held-out shape", kernel=kernel.name, shape=shape)
            continue
        refined = None
        if bench.args.refine_trials > 0:
            print(
                f"[refine] {kernel.name} {shape}: <= {bench.args.refine_trials} trials", flush=True
            )
            try:
                refined = bench.refine(kernel, shape, dtype, seeds[config_key(shape)], refine_db)
            except ValueError as exc:  # no carried config is valid here
                refined = {"error": str(exc), "best_config": None, "trials": 0, "elapsed_s": 0.0}
        print(f"[heldout] {kernel.name} {shape}: exhaustive", flush=True)
        result, valid = bench.exhaustive(kernel, shape, dtype, db)
        entry: dict[str, Any] = {
            "shape": shape,
            "features": features,
            "exhaustive": search_summary(result, valid),
            "nearest_config": nearest[config_key(shape)],
            "nearest_origin": origins[config_key(shape)],
            "lookup_latency": latency[config_key(shape)],
            "nearest_single_config": single[config_key(shape)],
            "refine_seeds": seeds[config_key(shape)],
            "default_config": kernel.default_config(features),
        }
        if refined is not None:
            entry["refined"] = refined
        if bench.args.replay_seeds > 0 and valid >= 8:
            entry["budget_replay"] = replay_budget(
                kernel, shape, dtype, result, seeds=bench.args.replay_seeds
            )
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
            "nearest_single": entry["nearest_single_config"],
            "default": entry["default_config"],
        }
        if refined is not None and refined["best_config"] is not None:
            contenders["refined"] = refined["best_config"]
        if budget is not None and budget["best_config"] is not None:
            contenders["budgeted"] = budget["best_config"]
        if budget is not None and (budget.get("short") or {}).get("best_config") is not None:
            contenders["budgeted_short"] = budget["short"]["best_config"]
        retimed = bench.retime(kernel, shape, dtype, contenders)
        entry["retimed"] = retimed
        best_s = retimed["exhaustive"]["median_s"]
        entry["nearest_quality"] = best_s / retimed["nearest"]["median_s"]
        entry["nearest_single_quality"] = best_s / retimed["nearest_single"]["median_s"]
        entry["default_quality"] = best_s / retimed["default"]["median_s"]
        if "refined" in retimed:
            entry["refined_quality"] = best_s / retimed["refined"]["median_s"]
        elif refined is not None:
            entry["refined_quality"] = 0.0  # the refinement found no correct config
        if "budgeted" in retimed:
            entry["budget_quality"] = best_s / retimed["budgeted"]["median_s"]
        elif budget is not None:
            entry["budget_quality"] = 0.0  # the budget found no correct config
        if "budgeted_short" in retimed:
            entry["short_budget_quality"] = best_s / retimed["budgeted_short"]["median_s"]
        elif budget is not None and budget.get("short"):
            entry["short_budget_quality"] = 0.0
        if budget is not None:
            entry["budget_evidence"] = budget_evidence(
                budget,
                {"budget": entry["budget_quality"], "short": entry.get("short_budget_quality")},
            )
        report["heldout"].append(entry)
    return _summarise(report)


def _summarise(report: dict[str, Any]) -> dict[str, Any]:
    def summary(key: str, target: float | None) -> dict[str, Any] | None:
        values = [e[key] for e in report["heldout"] if key in e]
        if not values:
            return None
        return {
            "min": min(values),
            "geomean": statistics.geometric_mean([max(v, 1e-12) for v in values]),
            "target": target,
            "shapes_meeting_target": None if target is None else sum(v >= target for v in values),
            "shapes": len(values),
        }

    report["summary"] = {
        "nearest_match": summary("nearest_quality", NEAREST_TARGET),
        "nearest_single": summary("nearest_single_quality", NEAREST_TARGET),
        "refined_match": summary("refined_quality", NEAREST_TARGET),
        "budgeted": summary("budget_quality", BUDGET_TARGET),
        "budgeted_short": summary("short_budget_quality", BUDGET_TARGET),
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
    ``nvidia-h100-80gb-hbm3-sm_90`` (the name of its shipped configs file, less ``.json``)."""
    from warpforge.tune.shipped import shipped_file_name

    return shipped_file_name(fingerprint).removesuffix(".json")


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
    parser.add_argument("--refine-trials", type=int, default=12, help="Trials of the refined match per held-out shape (0: skip).")  # fmt: skip
    parser.add_argument("--cold-exhaustive", type=float, default=0.0, help="Seconds of a cold exhaustive search of each budget problem in a fresh process (0: skip).")  # fmt: skip
    parser.add_argument("--replay-seeds", type=int, default=20, help="Seeds of the budget replay per held-out shape (0: skip).")  # fmt: skip
    parser.add_argument("--short-budget", type=float, default=0.0, help="Seconds of a second, shorter budgeted search of each budget problem in a fresh process (0: skip).")  # fmt: skip
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # a probe's own process
    parser.add_argument("--probe-shape", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--probe-budget", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--probe-limit", type=float, default=0.0, help=argparse.SUPPRESS)
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
        args.refine_trials = min(args.refine_trials, 4)
        args.replay_seeds = min(args.replay_seeds, 3)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.probe:
        return args
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
    for name in ("cold_exhaustive", "short_budget"):
        if getattr(args, name) < 0:
            parser.error(
                f"--{name.replace('_', '-')}: expected seconds >= 0, got {getattr(args, name)}"
            )
    for name in ("compile_workers", "budget_shapes", "refine_trials", "replay_seeds"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}: expected >= 0, got {getattr(args, name)}")
    if args.max_wall is not None and args.max_wall <= 0:
        parser.error(f"--max-wall: expected seconds > 0, got {args.max_wall}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.probe:
        return run_probe(args)
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
    # Held-out shapes never reach the shipped file: a later check of the nearest match on them
    # (this benchmark on the committed file's results, or a user's lookup) must not find them.
    heldout_problems = [
        (i["kernel"].name, i["kernel"].features(shape, i["dtype"]))
        for i in plan
        for shape in i["heldout"]
    ]
    results: list[dict[str, Any]] = []
    compile_ahead = {"workers": args.compile_workers, "configs_run": 0, "broke": False}

    def write(complete: bool) -> Path:
        """The evidence so far (rewritten after every kernel: a killed run keeps what it did)."""
        if bench.pool is not None:
            compile_ahead.update(configs_run=bench.pool.compiled, broke=not bench.pool.usable)
        if shipped_path is not None and Path(bench.tune_url.removeprefix("sqlite:///")).exists():
            with PerfDatabase(bench.tune_url) as db:
                names = [i["kernel"].name for i in plan]
                export_shipped(
                    names, shipped_path, database=db, device=fingerprint, exclude=heldout_problems
                )
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
                "nearest": "ConfigLookup over the training shapes' exhaustive results only: the "
                "consensus of the 3 nearest training shapes (warpforge.tune.consensus)",
                "nearest_single": "the same lookup with selection='nearest': the single nearest "
                "training shape's best carried over (the rule before the consensus)",
                "refined": f"refine_search from the configs of the {NEIGHBOURS} nearest training "
                "shapes carried over, then the default config (as warpforge tune --refine), at "
                f"most {args.refine_trials} trials, before the held-out "
                "shape's exhaustive search (Triton's disk cache holds the training searches' "
                "compiles, as it would after shipping tuned configs)",
                "budget_replay": "budgeted_search replayed on the held-out exhaustive search's "
                f"medians (no GPU work), capped at {list(REPLAY_FRACTIONS)} of the valid configs, "
                "no seed config; quality = exhaustive best median / found median",
                "short_budget": f"a second budgeted search of {args.short_budget:g} s per budget "
                "problem in a fresh process with an empty Triton cache, with no seed config "
                "(random sampling + descent alone)",
                "cold_exhaustive": "exhaustive search of each budget problem whose budget did not "
                "cover the space, in a fresh process with an empty Triton cache, serial, no "
                f"compile-ahead; stopped after {args.cold_exhaustive:g} s",
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
        with PerfDatabase(bench.tune_url) as db, PerfDatabase(bench.refine_url) as refine_db:
            # Kernels given a budget check come first: their comparison needs the exhaustive run.
            ordered = sorted(plan, key=lambda i: i["kernel"].name not in budget_names)
            for item in ordered:
                results.append(run_kernel(bench, item, budgets, db, refine_db))
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
        for key in (
            "nearest_match",
            "nearest_single",
            "refined_match",
            "budgeted",
            "budgeted_short",
            "default_config",
        ):
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
