"""Sweep the launch knobs of the robotics resample/align kernels on the issue #5 shapes.

For every shape (resample forward bf16 x3 and fp32, the fp32 backward, three-stream align) the
sweep runs two stages, each timed with the harness (cold L2, CUDA events, contenders interleaved
in shuffled order) next to the public implementation and ``torch.compile`` of the problem's
baseline:

1. ``search``: the interval search (binary; guided with 2, 3 or 4 probes) at the default tile;
   for align also three separate single-stream launches instead of one multi-stream launch; for
   the backward the atomic kernel with each search and the deterministic sort + gather path.
2. ``tile``: with the fastest search of stage 1, query block x column block x ``num_warps``
   around the default tile (for align: the camera stream's query block x warps).

Optional stages: ``prefetch`` (the L2 prefetch of rows) and ``staged`` (forward cases: the
staged kernel, ``launch_staged``, at the tiles of :data:`STAGED_PICKS`, which stage the row's
values on chip and gather from shared memory).

Every variant is first checked against the problem's float64 reference on the same inputs
(the harness's tolerance rule); a wrong variant is recorded and not timed. A time budget keeps
the whole run under four minutes on an H100: variants past it are recorded as skipped.

Usage (GPU): ``PYTHONPATH=src python benchmarks/robotics_sweep.py --out DIR``; writes
``DIR/robotics-sweep.json`` (environment fingerprint, copy ceiling, every row) and prints one
table per shape. ``--smoke`` runs tiny shapes on the CPU through the Triton interpreter with a
token grid, to keep the script working (its times mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Case:
    """One shape of one problem, and how its variants launch."""

    problem: Any
    shape: dict[str, int]
    dtype: torch.dtype
    kind: str
    """``"fwd"``, ``"bwd"`` or ``"align"``."""

    @property
    def name(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"{self.problem.name} {dims}"


@dataclass
class Row:
    variant: str
    stage: str
    config: list[dict[str, int]] | None
    status: str = "ok"
    detail: str = ""
    measurement: dict[str, Any] | None = None
    median_s: float | None = None

    def as_dict(self, bytes_moved: float, copy_rate: float | None, compiled_s: float | None):
        gbps = bytes_moved / self.median_s / 1e9 if self.median_s else None
        return {
            "variant": self.variant,
            "stage": self.stage,
            "config": self.config,
            "status": self.status,
            "detail": self.detail,
            "median_us": self.median_s * 1e6 if self.median_s else None,
            "gb_per_s": gbps,
            "fraction_of_copy": (gbps * 1e9 / copy_rate) if gbps and copy_rate else None,
            "speedup_vs_torch_compile": (
                compiled_s / self.median_s if compiled_s and self.median_s else None
            ),
            "measurement": self.measurement,
        }


@dataclass
class Budget:
    """Wall-clock budget of the whole sweep (compiles, checks and timing), shared out so every
    case gets its turn: a case may spend its even share of what is left when it starts."""

    seconds: float
    start: float = field(default_factory=time.perf_counter)
    case_deadline: float = 0.0

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)

    def start_case(self, cases_left: int) -> None:
        self.case_deadline = time.perf_counter() + max(0.0, self.left()) / max(1, cases_left)

    def case_left(self) -> float:
        return self.case_deadline - time.perf_counter()


def config_dict(config) -> dict[str, int]:
    from warpforge.robotics.resample import GatherTile, StagedConfig

    if isinstance(config, StagedConfig):
        return {"block_q": config.block_q, "block_w": config.block_w,
                "num_warps": config.num_warps, "word_bits": config.word_bits,
                "probes": config.probes, "staged": 1,
                "staged_search": int(config.staged_search)}  # fmt: skip
    if isinstance(config, GatherTile):
        return {"block_s": config.block_s, "block_d": config.block_d,
                "num_warps": config.num_warps}  # fmt: skip
    if config is None:
        return {"atomic": 1}
    return {
        "block_t": config.block_t,
        "block_d": config.block_d,
        "num_warps": config.num_warps,
        "probes": config.probes,
        "prefetch": int(config.prefetch),
    }


def search_name(probes: int) -> str:
    return "binary" if probes == 0 else f"guided{probes}"


def config_name(config) -> str:
    name = f"{search_name(config.probes)} t{config.block_t} d{config.block_d} w{config.num_warps}"
    return name + " prefetch" if config.prefetch else name


# ----------------------------------------------------------------------------------------------
# variants: callables with the problem's input signature
# ----------------------------------------------------------------------------------------------


def resample_variant(config, poison: bool) -> Callable[..., torch.Tensor]:
    from warpforge.robotics.resample import launch_single

    def run(values: torch.Tensor, times: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        shape = (query.shape[0], query.shape[1], values.shape[2])
        out = (
            torch.full(shape, float("nan"), dtype=values.dtype, device=values.device)
            if poison
            else values.new_empty(shape)
        )
        launch_single(values, times, query, None, out, None, "linear", "clamp", config)
        return out

    return run


def staged_variant(config, poison: bool) -> Callable[..., torch.Tensor]:
    from warpforge.robotics.resample import launch_staged

    def run(values: torch.Tensor, times: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        shape = (query.shape[0], query.shape[1], values.shape[2])
        out = (
            torch.full(shape, float("nan"), dtype=values.dtype, device=values.device)
            if poison
            else values.new_empty(shape)
        )
        if not launch_staged(values, times, query, None, out, None, "linear", "clamp", config):
            raise ValueError("launch_staged refused this shape and config")
        return out

    return run


def backward_variant(config, gather, poison: bool) -> Callable[..., torch.Tensor]:
    """``gather`` None: the atomic kernel; else the deterministic sort + gather path."""
    from warpforge.robotics.resample import run_backward_kernel

    def run(values, times, query, grad_out) -> torch.Tensor:
        grad, _ = run_backward_kernel(
            grad_out, values, times, query, None, "linear", "clamp", False, config, gather,
            deterministic=gather is not None,
        )  # fmt: skip
        return grad  # a fresh buffer inside, every element written: nothing to poison

    del poison
    return run


def align_variant(configs, poison: bool, *, separate: bool = False) -> Callable[..., torch.Tensor]:
    from warpforge.robotics.resample import StreamLaunch, launch_single, launch_streams

    def run(*args: torch.Tensor) -> torch.Tensor:
        query = args[-1]
        pairs = [(args[k], args[k + 1]) for k in range(0, len(args) - 1, 2)]
        width = sum(v.shape[2] for v, _ in pairs)
        shape = (query.shape[0], query.shape[1], width)
        out = (
            torch.full(shape, float("nan"), device=query.device)
            if poison
            else torch.empty(shape, device=query.device)
        )
        column = 0
        launches = []
        for (values, times), config in zip(pairs, configs, strict=True):
            columns = out[:, :, column : column + values.shape[2]]
            if separate:
                launch_single(values, times, query, None, columns, None, "linear", "clamp",
                              config)  # fmt: skip
            else:
                launches.append(StreamLaunch(values, times, out, column, "linear", None))
            column += values.shape[2]
        if not separate:
            launch_streams(launches, query, "clamp", configs)
        return out

    return run


# ----------------------------------------------------------------------------------------------
# the grid
# ----------------------------------------------------------------------------------------------


def stream_shapes(case: Case) -> list[tuple[int, int, int]]:
    """(queries, width, element size) of each stream of a case."""
    s = case.shape
    if case.kind == "align":
        queries = 50 * s["seconds"]
        return [(queries, s["D_camera"], 2), (queries, s["D_joint"], 4), (queries, s["D_force"], 4)]
    return [(s["T"], s["D"], case.dtype.itemsize)]


def defaults(case: Case) -> list:
    """The launch each stream gets when the caller gives none (the tile stages start there)."""
    from warpforge.robotics.resample import default_config, single_stream_config

    choose = single_stream_config if case.kind == "fwd" else default_config
    return [choose(t, d, size, "linear") for t, d, size in stream_shapes(case)]


def with_probes(configs: Sequence, probes: int) -> list:
    from warpforge.robotics.resample import LaunchConfig

    return [LaunchConfig(c.block_t, c.block_d, c.num_warps, probes) for c in configs]


def search_grid(case: Case, smoke: bool) -> list[tuple[str, list, bool]]:
    """(name, configs per stream, separate launches) of stage 1."""
    base = defaults(case)
    probes = (0, 4) if smoke else (0, 2, 3, 4)
    grid = [(f"{search_name(p)} (default tile)", with_probes(base, p), False) for p in probes]
    if case.kind == "bwd":
        from warpforge.robotics.resample import default_gather_tile

        # the atomic kernel with each search (above), and the deterministic sort + gather path
        grid = [(name, [*configs, None], False) for name, configs, _ in grid]
        grid.append(("gather, default tiles", [*base, default_gather_tile(case.shape["D"])],
                     False))  # fmt: skip
    if case.kind == "align":
        grid.append(("3 launches, default tiles", base, True))
    return grid


# stage 2 around the main stream's default tile: (query block, column block, warps) factors, the
# likeliest first, so a case whose share of the budget runs out drops the least likely
TILE_STEPS = [(2, 1, 1), (1, 1, 2), (2, 1, 2), (4, 1, 2), (4, 1, 1), (0.5, 1, 1), (2, 0.5, 1),
              (8, 1, 2), (1, 1, 0.5), (0.5, 1, 0.5), (0.25, 1, 1)]  # fmt: skip


def tile_grid(case: Case, best: list, smoke: bool) -> list[tuple[str, list, bool]]:
    """Stage 2: query block x column block x warps around the default of the main stream
    (stream 0; for align the camera stream), with the search of ``best``."""
    from warpforge.robotics.resample import LaunchConfig

    main = best[0]
    if case.kind == "bwd":
        return gather_tile_grid(case, main, smoke)
    steps = [(0.5, 1, 1)] if smoke else TILE_STEPS
    grid, seen = [], {main}
    for t_factor, d_factor, w_factor in steps:
        block_t, block_d = int(main.block_t * t_factor), int(main.block_d * d_factor)
        num_warps = min(16, int(main.num_warps * w_factor))
        if not (1 <= block_t <= 1024 and num_warps >= 1) or (d_factor < 1 and main.block_d < 64):
            continue  # narrow rows keep their whole-row column block
        config = LaunchConfig(block_t, block_d, num_warps, main.probes)
        if config in seen:
            continue
        seen.add(config)
        # the launch runs the largest num_warps of its streams: the main stream's choice rules
        others = [LaunchConfig(c.block_t, c.block_d, min(c.num_warps, num_warps), c.probes)
                  for c in best[1:]]  # fmt: skip
        grid.append((config_name(config), [config, *others], False))
    return grid


def gather_tile_grid(case: Case, search, smoke: bool) -> list[tuple[str, list, bool]]:
    """Stage 2 of the backward: the gather pass's samples per program x warps, and the
    per-query pass's query block, with the search of stage 1."""
    from warpforge.robotics.resample import GatherTile, LaunchConfig, default_gather_tile

    base = default_gather_tile(case.shape["D"])
    grid = []
    picks = [(0.5, 1)] if smoke else [(0.5, 1), (2, 1), (1, 0.5), (1, 2), (0.5, 0.5), (0.25, 0.5),
                                      (2, 2)]  # fmt: skip
    for s_factor, w_factor in picks:
        block_s, num_warps = int(base.block_s * s_factor), int(base.num_warps * w_factor)
        if block_s < 1 or num_warps < 1:
            continue
        tile = GatherTile(block_s, base.block_d, num_warps)
        grid.append((f"gather s{block_s} d{base.block_d} w{num_warps}", [search, tile], False))
    if not smoke:
        for block_t, num_warps in ((2 * search.block_t, 4), (4 * search.block_t, 4)):
            pass_one = LaunchConfig(block_t, search.block_d, num_warps, search.probes)
            grid.append((f"gather, pass 1 t{block_t} w{num_warps}", [pass_one, base], False))
    return grid


def prefetch_grid(case: Case, smoke: bool) -> list[tuple[str, list, bool]]:
    """Stage ``prefetch`` (forward cases): the default with and without the L2 prefetch of each
    program's share of its row, and the prefetch around the default tile and search."""
    from dataclasses import replace

    if case.kind != "fwd":
        return []
    (base,) = defaults(case)
    off, on = replace(base, prefetch=False), replace(base, prefetch=True)
    t, w = base.block_t, base.num_warps
    picks = [off, on]
    if not smoke:
        picks += [replace(on, block_t=max(1, t // 2), num_warps=max(1, w // 2)),
                  replace(on, block_t=2 * t, num_warps=2 * w), replace(on, num_warps=2 * w),
                  replace(on, probes=8), replace(off, probes=8), replace(on, probes=2)]  # fmt: skip
    grid, seen = [], set()
    for config in picks:
        if config not in seen:
            seen.add(config)
            grid.append((config_name(config), [config], False))
    return grid


# stage ``staged``: (block_q, block_w, num_warps, word_bits, probes, staged_search) per forward
# shape (S, D), chosen by register count and programs per SM from sm_90 compiles (ptxas -v) on
# the CPU; staged_search False probes the times in global memory and stages only the values
STAGED_PICKS: dict[tuple[int, int], list[tuple[int, int, int, int, int, bool]]] = {
    (500, 64): [(512, 4, 4, 64, 4, False), (1024, 4, 8, 64, 4, False), (256, 16, 8, 64, 4, False),
                (512, 8, 8, 64, 4, False), (256, 4, 4, 64, 4, False), (512, 4, 4, 64, 0, True),
                (256, 16, 8, 64, 0, True)],
    (50, 128): [(64, 8, 4, 64, 0, True), (32, 16, 2, 64, 0, True), (32, 32, 4, 64, 0, True),
                (32, 8, 2, 64, 0, True), (64, 16, 4, 64, 0, True), (128, 8, 4, 64, 0, True),
                (64, 8, 4, 64, 4, False)],
    (1000, 32): [(1024, 4, 8, 64, 4, False), (512, 8, 8, 64, 4, False), (2048, 4, 8, 64, 4, False),
                 (1024, 8, 8, 32, 4, False)],
}  # fmt: skip


def staged_grid(case: Case, smoke: bool) -> list[tuple[str, list, bool]]:
    """Stage ``staged``: the gather kernel at its default tile (the default before the staged
    kernel existed, wherever the public API now runs the staged one), and the staged tiles."""
    from warpforge.robotics.resample import StagedConfig

    if case.kind != "fwd":
        return []
    picks = STAGED_PICKS.get((case.shape["S"], case.shape["D"]), [])
    if smoke:  # float32 rows of 5 columns split only into 32-bit words; float16 ones into none
        picks = [(4, 1, 1, 32, 4, True), (8, 2, 2, 32, 0, False)]
    (gather,) = defaults(case)
    grid = [(f"gather kernel, {config_name(gather)}", [gather], False)]
    for block_q, block_w, num_warps, word_bits, probes, staged_search in picks:
        config = StagedConfig(block_q, block_w, num_warps, word_bits, probes, staged_search)
        search = f"{search_name(probes)} {'staged' if staged_search else 'global'}"
        name = f"staged {search} q{block_q} w{block_w}x{word_bits}b nw{num_warps}"
        grid.append((name, [config], False))
    return grid


def make_variant(case: Case, configs: list, separate: bool, poison: bool):
    from warpforge.robotics.resample import StagedConfig

    if case.kind == "fwd" and isinstance(configs[0], StagedConfig):
        return staged_variant(configs[0], poison)
    if case.kind == "fwd":
        return resample_variant(configs[0], poison)
    if case.kind == "bwd":
        return backward_variant(configs[0], configs[1] if len(configs) > 1 else None, poison)
    return align_variant(configs, poison, separate=separate)


# ----------------------------------------------------------------------------------------------
# checking and timing
# ----------------------------------------------------------------------------------------------


def check_against_reference(case: Case, fn, inputs: tuple) -> str:
    """'' when ``fn`` matches the float64 reference within the problem's tolerance, else why."""
    from warpforge.harness import checks

    try:
        found, _ = checks.check_against_reference(case.problem, fn, inputs)
    except Exception as exc:  # a variant that cannot compile or launch is a finding, not a crash
        return f"raised {type(exc).__name__}: {str(exc)[:300]}"
    return "; ".join(f.detail for f in found)


def time_stage(
    case: Case,
    stage: str,
    grid: list[tuple[str, list, bool]],
    context: dict[str, Callable[..., Any]],
    input_sets: list[tuple],
    budget: Budget,
    args: argparse.Namespace,
) -> list[Row]:
    from warpforge.harness.timing import measure_interleaved

    rows: list[Row] = []
    fns: dict[str, Callable[..., Any]] = {}
    for name, fn in context.items():
        rows.append(Row(name, stage, None))
        fns[name] = fn
    for name, configs, separate in grid:
        row = Row(name, stage, [config_dict(c) for c in configs])
        rows.append(row)
        # the search and prefetch stages always run whole; tile variants only within the
        # case's share
        if stage == "tile" and budget.case_left() < args.reserve_s:
            row.status, row.detail = "skipped", "time budget spent"
            continue
        problem_check = check_against_reference(
            case, make_variant(case, configs, separate, poison=True), input_sets[0]
        )
        if problem_check:
            row.status, row.detail = "wrong", problem_check
            continue
        fns[name] = make_variant(case, configs, separate, poison=False)
    on_gpu = input_sets[0][0].is_cuda
    measured = measure_interleaved(
        fns,
        input_sets,
        cold=on_gpu,
        min_samples=args.min_samples,
        max_time_s=args.time_per_stage,
        seed=0,
    )
    for row in rows:
        if row.variant in measured:
            m = measured[row.variant]
            row.measurement = m.as_dict()
            row.median_s = m.median_s
    return rows


def context_fns(
    case: Case, smoke: bool, with_compile: bool = True
) -> tuple[dict[str, Callable[..., Any]], list[Row]]:
    """The public implementation, and torch.compile of the baseline (GPU only)."""
    fns = {"warpforge (public API)": case.problem.implementation}
    notes = []
    if smoke or not with_compile:
        why = "not on the smoke run" if smoke else "--no-compile"
        notes.append(Row("torch.compile", "context", None, "skipped", why))
    else:
        try:
            fns["torch.compile"] = case.problem.baselines["torch.compile"]()
        except Exception as exc:
            notes.append(Row("torch.compile", "context", None, "error", str(exc)[:300]))
    return fns, notes


def copy_ceiling(device: torch.device) -> float | None:
    """Bytes read + written per second of a 1 GiB device copy (the harness's ceiling)."""
    if device.type != "cuda":
        return None
    from warpforge.harness.timing import measure

    src = torch.randn(2**28, device=device)
    dst = torch.empty_like(src)
    m = measure(lambda s, d: d.copy_(s), [(src, dst)], cold=False, max_time_s=1.0)
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * 2**30 / m.median_s


def sweep_case(case: Case, device, budget: Budget, args) -> dict[str, Any]:
    generator = torch.Generator(device=device)
    input_sets = []
    for seed in range(1 if args.smoke else 2):
        generator.manual_seed(1000 + seed)
        input_sets.append(tuple(case.problem.make_inputs(case.shape, case.dtype, device,
                                                         generator)))  # fmt: skip
    context, notes = context_fns(case, args.smoke, not args.no_compile)
    for name, fn in list(context.items()):  # compiles torch.compile once; a failure is a row
        try:
            fn(*input_sets[0])
        except Exception as exc:
            del context[name]
            notes.append(Row(name, "context", None, "error", f"{type(exc).__name__}: {exc}"[:300]))
    if args.stages & {"prefetch", "staged"} and case.kind == "fwd":
        # the floor of one launch that writes the output once (a fill, no reads): what a
        # launch-bound shape cannot go under
        def fill(values: torch.Tensor, times: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
            shape = (query.shape[0], query.shape[1], values.shape[2])
            return values.new_empty(shape).fill_(0)

        context["floor: fill the output"] = fill
    current = check_against_reference(case, case.problem.implementation, input_sets[0])
    if current:
        notes.append(Row("warpforge (public API)", "check", None, "wrong", current))
    rows = list(notes)
    if "prefetch" in args.stages and case.kind == "fwd":
        rows += time_stage(case, "prefetch", prefetch_grid(case, args.smoke), context,
                           input_sets, budget, args)  # fmt: skip
    if "staged" in args.stages and case.kind == "fwd":
        rows += time_stage(case, "staged", staged_grid(case, args.smoke), context, input_sets,
                           budget, args)  # fmt: skip
    if "search" in args.stages:
        rows += time_stage(case, "search", search_grid(case, args.smoke), context, input_sets,
                           budget, args)  # fmt: skip
    searched = [r for r in rows if r.stage == "search" and r.config and r.median_s]
    if searched and "tile" in args.stages:
        best_search = min(searched, key=lambda r: r.median_s)
        best = with_probes(defaults(case), best_search.config[0]["probes"])
        rows += time_stage(case, "tile", tile_grid(case, best, args.smoke), context, input_sets,
                           budget, args)  # fmt: skip
    del input_sets
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"case": case.name, "problem": case.problem.name, "shape": case.shape,
            "dtype": str(case.dtype).removeprefix("torch."), "kind": case.kind,
            "rows": rows}  # fmt: skip


def cases(smoke: bool) -> list[Case]:
    from warpforge.robotics import problems

    pick = (lambda p: p.cpu_shapes[:1]) if smoke else (lambda p: p.shapes)
    found = []
    for problem, kind in [(problems.RESAMPLE_BF16, "fwd"), (problems.RESAMPLE_FP32, "fwd"),
                          (problems.ALIGN, "align"), (problems.RESAMPLE_BWD_FP32, "bwd")]:  # fmt: skip
        dtype = problem.dtypes[0]
        if smoke and dtype == torch.bfloat16:
            dtype = torch.float16  # the interpreter mishandles bfloat16
        # the largest shape first: it is where the memory system has to be kept busy
        for shape in reversed(pick(problem)):
            found.append(Case(problem, dict(shape), dtype, kind))
    return found


def warm_share(selected: list[Case], part: int, parts: int, args, device) -> None:
    """Compile this process's share (every ``parts``-th) of the variants of the selected cases
    into Triton's on-disk cache by one launch each, so that processes running side by side
    compile a sweep's variants in parallel; nothing is checked or timed."""
    index = 0
    for case in selected:
        grid = []
        if "staged" in args.stages and case.kind == "fwd":
            grid += staged_grid(case, args.smoke)
        mine = []
        for name, configs, separate in grid:
            if index % parts == part:
                mine.append((name, configs, separate))
            index += 1
        if not mine:
            continue
        generator = torch.Generator(device=device).manual_seed(1000)
        inputs = tuple(case.problem.make_inputs(case.shape, case.dtype, device, generator))
        for name, configs, separate in mine:
            try:
                make_variant(case, configs, separate, poison=False)(*inputs)
            except Exception as exc:  # the sweep itself records it
                print(f"warm {name}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        if device.type == "cuda":
            torch.cuda.synchronize()


def finish_rows(result: dict[str, Any], bytes_moved: float, copy_rate: float | None) -> None:
    # speedups against the torch.compile timed in the same stage (interleaved with the row)
    compiled = {
        r.stage: r.median_s for r in result["rows"] if r.variant == "torch.compile" and r.median_s
    }
    result["bytes_moved"] = bytes_moved
    rows = [r.as_dict(bytes_moved, copy_rate, compiled.get(r.stage)) for r in result["rows"]]
    timed = [r for r in rows if r["median_us"] and r["config"]]
    result["best_variant"] = min(timed, key=lambda r: r["median_us"])["variant"] if timed else None
    result["rows"] = rows


def print_tables(results: list[dict[str, Any]], smoke: bool) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text where rich is not installed
        for result in results:
            print(result["case"])
            for r in result["rows"]:
                print(f"  {r['stage']:7} {r['variant']:32} {r['status']:8} "
                      f"{r['median_us'] or float('nan'):9.1f} us  {r['detail'][:80]}")  # fmt: skip
        return
    console = Console(width=150)
    for result in results:
        title = result["case"] + ("  [smoke: times mean nothing]" if smoke else "")
        table = Table(title=title, title_justify="left")
        for column in ("stage", "variant", "status", "µs", "GB/s", "% copy", "x compile"):
            table.add_column(column, justify="right" if column[0] in "µG%x" else "left")
        for r in result["rows"]:
            best = r["variant"] == result["best_variant"]
            table.add_row(
                r["stage"],
                f"[bold]{r['variant']}[/bold]" if best else r["variant"],
                r["status"] if r["status"] == "ok" else f"{r['status']}: {r['detail'][:60]}",
                f"{r['median_us']:.1f}" if r["median_us"] else "",
                f"{r['gb_per_s']:.0f}" if r["gb_per_s"] else "",
                f"{100 * r['fraction_of_copy']:.0f}%" if r["fraction_of_copy"] else "",
                f"{r['speedup_vs_torch_compile']:.2f}x" if r["speedup_vs_torch_compile"] else "",
            )
        console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for robotics-sweep.json")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes on the CPU (Triton interpreter), token grid")  # fmt: skip
    parser.add_argument(
        "--only",
        default=None,
        help="run only cases whose name contains one of these (comma-separated)",
    )
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile context rows (saves its compile time)")  # fmt: skip
    parser.add_argument("--budget-s", type=float, default=None,
                        help="wall-clock budget (default 190 s on GPU, 120 s smoke)")  # fmt: skip
    parser.add_argument("--time-per-stage", type=float, default=None,
                        help="timing seconds per stage (default 2.5 on GPU)")  # fmt: skip
    parser.add_argument("--stages", default="search,tile",
                        help="comma-separated stages: search, tile, prefetch (forward cases: "
                             "the L2 prefetch of rows, with a fill of the output as the floor), "
                             "staged (forward cases: the staged kernel's tiles)")  # fmt: skip
    parser.add_argument("--warm-only", default=None, metavar="K/N",
                        help="only compile share K of N of the variants (a launch each) into "
                             "Triton's cache, for N such processes side by side; no report")  # fmt: skip
    args = parser.parse_args(argv)
    args.stages = {part for part in args.stages.split(",") if part}
    if not args.stages <= {"search", "tile", "prefetch", "staged"}:
        parser.error(f"--stages: unknown stage in {sorted(args.stages)}")
    if args.budget_s is None:
        args.budget_s = 120.0 if args.smoke else 190.0
    if args.time_per_stage is None:
        args.time_per_stage = 0.05 if args.smoke else 2.5
    if args.budget_s <= 0 or args.time_per_stage <= 0:
        parser.error("--budget-s and --time-per-stage must be > 0")
    args.min_samples = 2 if args.smoke else 10
    # what a stage still needs after its last compile: timing plus the next case's setup
    args.reserve_s = args.time_per_stage + (1.0 if args.smoke else 8.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    on_gpu = torch.cuda.is_available() and not args.smoke
    if not on_gpu:
        if not args.smoke:
            print("no CUDA device: run with --smoke for the CPU check", file=sys.stderr)
            return 2
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernel module is first imported
    device = torch.device("cuda" if on_gpu else "cpu")
    from warpforge.environment import environment_fingerprint

    wanted = None if args.only is None else [part for part in args.only.split(",") if part]
    selected = [c for c in cases(args.smoke) if wanted is None or any(w in c.name for w in wanted)]
    if args.warm_only is not None:
        part, parts = (int(x) for x in args.warm_only.split("/"))
        warm_share(selected, part, parts, args, device)
        return 0
    budget = Budget(args.budget_s)
    copy_rate = copy_ceiling(device)
    results = []
    for index, case in enumerate(selected):
        started = time.perf_counter()
        budget.start_case(len(selected) - index)
        result = sweep_case(case, device, budget, args)
        finish_rows(result, case.problem.bytes_moved(case.shape, case.dtype), copy_rate)
        result["wall_s"] = time.perf_counter() - started
        results.append(result)
        print(f"{case.name}: {result['wall_s']:.1f} s, best {result['best_variant']}",
              file=sys.stderr)  # fmt: skip
    report = {
        "environment": environment_fingerprint(),
        "smoke": args.smoke,
        "copy_bytes_per_s": copy_rate,
        "wall_s": time.perf_counter() - budget.start,
        "cases": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "robotics-sweep.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    print_tables(results, args.smoke)
    print(f"wrote {path} ({report['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
