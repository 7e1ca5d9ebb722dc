"""Rows at 0.98-0.99x of torch.compile (issue #4): torch.compile's own kernels beside ours.

For each row this (1) runs the harness problem's torch.compile baseline once with the Inductor
and Triton caches under ``--out`` (the generated ``.py``, the autotuned ``.best_config`` and the
PTX of both sides are then read offline), and (2) times, interleaved in one process
(``warpforge.harness.timing.measure_interleaved``: CUDA events, L2 flushed, inputs rotated), the
problem's baselines, the op as shipped, and variants of our kernels: other launch shapes and the
lean kernels (``softmax_bwd_tile_kernel``, ``cross_entropy_bwd_flat_kernel``: 32-bit offsets, no
predicates on exact tiles). Each variant is first checked against the op's own output on the
same inputs. (A lean norm forward tile kernel was timed here on 2026-11-25, no faster than the
tuned row kernel at 16384 x 4096 fp32, and removed; ``parity-sweep-2026-11-25-h100.json``.)

    PYTHONPATH=src python benchmarks/parity_sweep.py --out DIR [--only SUBSTRING ...]   # GPU
    PYTHONPATH=src python benchmarks/parity_sweep.py --out DIR --smoke                  # CPU

Writes DIR/parity_sweep.json after every case and prints a table per case.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SMOKE = "--smoke" in sys.argv
WARM = "--warm" in sys.argv  # the parallel warm-up leaves torch.compile (and its autotuning,
# which concurrent GPU work would skew) to the timed pass
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

Fn = Callable[..., Any]


# --------------------------------------------------------------------------- variants


def _activation_variants(name: str, grid) -> dict[str, Fn]:
    """The activation kernel launched with forced (BLOCK, num_warps, num_stages)."""
    from warpforge.ops._kernels import activations as kernels

    family, phase = name.split(".")
    kernel = getattr(kernels, f"{family}_{phase}_kernel")
    extra = {"APPROX_TANH": True} if family == "geglu" else {}

    def launch(inputs, n_out, block, warps, stages):
        outputs = [inputs[-1].new_empty(inputs[-1].shape) for _ in range(n_out)]
        flat = [t.view(1, -1) for t in inputs]
        cols = flat[0].shape[1]
        blocks = -(-cols // block)
        kernel[(blocks,)](
            *flat, *outputs, cols, blocks, *(cols for _ in flat),
            BLOCK=block, ONE_ROW=True, WIDE=blocks * block >= 2**31, EVEN=cols % block == 0,
            num_warps=warps, num_stages=stages, **extra,
        )  # fmt: skip
        return outputs

    out: dict[str, Fn] = {}
    for block, warps, stages in grid:
        label = f"BLOCK={block} warps={warps} stages={stages}"
        if phase == "fwd":
            out[label] = lambda g, u, b=block, w=warps, s=stages: launch([g, u], 1, b, w, s)[0]
        else:
            out[label] = lambda g, u, dy, b=block, w=warps, s=stages: tuple(
                launch([dy, g, u], 2, b, w, s)
            )
    return out


def _softmax_bwd_alone(log: bool, grid, dtype) -> tuple[dict[str, Fn], Fn]:
    """Backward kernels alone on (dy, y): torch.compile of the formula (Inductor's fused
    kernel), the op's kernel, and the tile kernel at (ROWS, num_warps)."""
    from warpforge.ops import softmax_ops

    def formula(dy, y):
        dyf, yf = dy.float(), y.float()
        if log:
            return (dyf - yf.exp() * dyf.sum(-1, keepdim=True)).to(dy.dtype)
        return (yf * (dyf - (dyf * yf).sum(-1, keepdim=True))).to(dy.dtype)

    fns: dict[str, Fn] = {
        "op bwd (rows kernel)": lambda dy, y: softmax_ops._softmax_bwd(dy, y, log)
    }
    if not (SMOKE or WARM):
        fns["torch.compile (bwd formula)"] = torch.compile(formula)
    for rows, warps in grid:
        fns[f"tile ROWS={rows} warps={warps}"] = lambda dy, y, r=rows, w=warps: (
            softmax_ops.softmax_backward_tile(dy, y, torch.empty_like(y), log, r, w)
        )
    return fns, formula


def _softmax_full_variants(log: bool, grid) -> dict[str, Fn]:
    """The problem's (x, dy) -> dx with our forward and the tile backward (no autograd)."""
    from warpforge.ops import softmax_ops

    out: dict[str, Fn] = {}
    for rows, warps in grid:

        def run(x, dy, r=rows, w=warps):
            y = softmax_ops._softmax_fwd(x, log)
            return (softmax_ops.softmax_backward_tile(dy, y, torch.empty_like(y), log, r, w),)

        out[f"fwd + tile bwd ROWS={rows} warps={warps}"] = run
    return out


def _ce_fwd_bwd_variants(n_cols: int, element_size: int) -> dict[str, Fn]:
    """The forward with gradient as the op runs it (mean loss, then its gradient in one
    pass) on the looped kernel and on the flag-word split plan, whichever the op picks."""
    ce = importlib.import_module("warpforge.ops.cross_entropy")
    from warpforge.ops.loss_problems import IGNORE_INDEX

    def run(logits, target, **kernel):
        grad = torch.empty_like(logits)
        scale = ce._reduction_scale(target, IGNORE_INDEX, "mean")
        rows, _ = ce.row_losses(logits, target, IGNORE_INDEX, 0.0, 0.0, grad_out=grad,
                                grad_loss=scale, **kernel)  # fmt: skip
        return ce._reduced_loss(rows, target, scale, IGNORE_INDEX, "mean", logits.dtype), grad

    out: dict[str, Fn] = {}
    looped = ce.fwd_grad_looped_launch(n_cols, element_size)
    if looped is not None:
        out["looped"] = lambda lg, t: run(lg, t, looped=looped)

    def split(lg, t):
        plan = ce._flag_word_plan(lg.shape[0], n_cols, element_size, lg.device)
        return run(lg, t, split=plan)

    out["split 8192/4 x4"] = split
    return out


def _ce_variants(grid_flat, grid_rows) -> dict[str, Fn]:
    ce = importlib.import_module("warpforge.ops.cross_entropy")
    from warpforge.ops.loss_problems import IGNORE_INDEX

    out: dict[str, Fn] = {}
    for block, warps in grid_flat:
        out[f"flat BLOCK={block} warps={warps}"] = lambda lg, t, lse, g, b=block, w=warps: (
            ce.flat_row_grads(torch.empty_like(lg), lg, t, lse, g, IGNORE_INDEX, 0.0, 0.0, (b, w))
        )
    for block, warps in grid_flat[:2]:  # the logits loaded evict_first

        def evicting(lg, t, lse, g, b=block, w=warps):
            grad = torch.empty_like(lg)
            return ce.flat_row_grads(
                grad, lg, t, lse, g, IGNORE_INDEX, 0.0, 0.0, (b, w), evict_first=True
            )

        out[f"flat BLOCK={block} warps={warps} evict_first"] = evicting
    for block, warps in grid_rows:
        out[f"rows BLOCK={block} warps={warps}"] = lambda lg, t, lse, g, b=block, w=warps: (
            ce.row_grads(torch.empty_like(lg), lg, t, lse, g, IGNORE_INDEX, 0.0, 0.0, launch=(b, w))
        )
    for block, warps in grid_rows[:2]:  # the logits loaded without evict_first

        def plain(lg, t, lse, g, b=block, w=warps):
            grad = torch.empty_like(lg)
            return ce.row_grads(
                grad, lg, t, lse, g, IGNORE_INDEX, 0.0, 0.0, launch=(b, w), evict_first=False
            )

        out[f"rows BLOCK={block} warps={warps} plain"] = plain
    return out


def _launch_label(launch) -> str:
    """A ``WideLaunch``'s options in a contender's name."""
    if launch.chunk:
        kind = f"looped {launch.chunk}/{launch.num_warps}w"
        tags = " forwards" * launch.forwards + " unrolled" * launch.unrolled
    else:
        kind = f"whole-row {launch.num_warps}w"
        tags = " early" * launch.early_w + " reload" * launch.reload
    cap = f" maxnreg={launch.max_registers}" if launch.max_registers else ""
    return (kind + tags + cap + " one-reduction" * launch.one_reduction
            + " specialized" * launch.specialized)  # fmt: skip


def _specialized_variants(name: str, N: int, element_size: int) -> dict[str, Fn]:
    """A norm forward's one-row-a-program launches compiled for the row length and not
    (``specialized``): the shipped launch (if any), whole-row launches of the two warp counts
    that fit the row with x read again, and three looped launches (torch.compile's 2048-column
    chunks on 16 warps, unrolled 2048 / 8, and 4096 / 16 at 64 registers)."""
    from dataclasses import replace

    from warpforge.ops import norm
    from warpforge.ops._rows import next_power_of_2
    from warpforge.ops._wide_rows import WIDE_MAX_N, WideLaunch

    center = name.startswith("layer")
    shipped = norm.norm_fwd_wide_launch(N, element_size, name, enabled=True)
    launches = [shipped] if shipped is not None else []
    if N <= WIDE_MAX_N:
        per_warp = next_power_of_2(N) // 32
        launches += [WideLaunch(min(32, max(1, per_warp // d)), reload=True) for d in (32, 16)]
    launches += [WideLaunch(16, chunk=2048, forwards=True),
                 WideLaunch(8, chunk=2048, forwards=True, unrolled=True),
                 WideLaunch(16, chunk=4096, forwards=True, unrolled=True, max_registers=64)]  # fmt: skip
    out: dict[str, Fn] = {}
    for launch in dict.fromkeys(launches):
        for spec in (False, True):
            la = replace(launch, specialized=spec)
            label = ("shipped " if launch == shipped else "") + _launch_label(la)
            out[label] = _wide_variant(la, center)
    return out


def _problem_forward(forward, center: bool, residual: bool) -> Fn:
    """``forward(x, weight, bias, residual)`` -> (y, h, mean, rstd) of a norm as the problem
    calls it: on its inputs ((x, residual, weight) with a residual, (x, weight, bias) for
    LayerNorm, else (x, weight)), returning its outputs ((y, h) with a residual, else y)."""
    if residual:
        return lambda x, r, wt: forward(x, wt, None, r)[:2]
    if center:
        return lambda x, wt, b: forward(x, wt, b, None)[0]
    return lambda x, wt: forward(x, wt, None, None)[0]


def _norm_eps(center: bool) -> float:
    from warpforge.ops.norm_problems import EPS, LN_EPS

    return LN_EPS if center else EPS


def _wide_variant(launch, center: bool, residual: bool = False) -> Fn:
    """A norm forward through ``norm.wide_norm_forward`` on ``launch`` (:func:`_problem_forward`)."""
    from warpforge.ops import norm

    eps = _norm_eps(center)
    return _problem_forward(
        lambda x, wt, b, r: norm.wide_norm_forward(x, wt, b, r, eps, 0.0, center, launch),
        center,
        residual,
    )


def tile_launches(N: int, smoke: bool = False) -> list[tuple[int, int]]:
    """(rows a program, warps) of ``norm_fwd_tile_kernel`` at rows of N columns: powers of 2,
    at most 16 rows and 16 warps, each thread holding 16-32 elements (the fastest of 8-64 in
    ``session39-h200-2026-12-01/parity-tile-call2``; smoke: 2 launches)."""
    grid = [(rows, warps) for rows in (1, 2, 4, 8, 16) for warps in (1, 2, 4, 8, 16)
            if 16 <= rows * N // (32 * warps) <= 32]  # fmt: skip
    return grid[:2] if smoke else grid


def _tile_variants(name: str, N: int, smoke: bool) -> dict[str, Fn]:
    """The norm forward through ``norm.tile_norm_forward`` at each of :func:`tile_launches`,
    weight and bias loaded early and late."""
    from warpforge.ops import norm

    center, residual = name.startswith("layer"), name.startswith("add")
    eps = _norm_eps(center)
    out: dict[str, Fn] = {}
    for (rows, warps), early in itertools.product(tile_launches(N, smoke), (False, True)):
        launch = norm.TileLaunch(rows, warps, early)

        def forward(x, wt, b, r, launch=launch):
            return norm.tile_norm_forward(x, wt, b, r, eps, 0.0, center, launch)

        out[f"tile {rows} rows/{warps}w{' early' * early}"] = _problem_forward(
            forward, center, residual
        )
    return out


def _one_reduction_variants(warps: tuple[int, ...]) -> dict[str, Fn]:
    """LayerNorm's whole-row forward at each of ``warps``, x held and read again, its moments
    from one reduction (``one_reduction``) and from two, and the looped launch of 4096-column
    chunks on 16 warps at 64 registers a thread."""
    from warpforge.ops._wide_rows import WideLaunch

    launches = [WideLaunch(16, chunk=4096, forwards=True, unrolled=True, max_registers=64)]
    for w in warps:
        launches += [WideLaunch(w, reload=reload, one_reduction=one)
                     for reload in (False, True) for one in (False, True)]  # fmt: skip
    return {_launch_label(la): _wide_variant(la, center=True) for la in launches}


def _norm_fwd_variants(
    center: bool,
    N: int,
    warps: tuple[int, ...],
    rows: tuple[tuple[int, int, int], ...],
    residual: bool = False,
    looped: tuple[tuple[int, int, bool, bool], ...] = (),
) -> dict[str, Fn]:
    """The norm forward (add+RMSNorm with ``residual``) through the whole-row kernel (one row a
    program, read once) at each of ``warps``, weight loaded late and early, x held or read
    again, through the row kernels at each (BLOCK_N, rows a program, num_warps) of ``rows``:
    the tile kernel where the block covers the row, else the chunked kernel (the row read twice,
    the second time from L2), and through the looped kernel (one row a program in chunks) at
    each (chunk, num_warps, output pass in order, statistics pass unrolled) of ``looped``."""
    from warpforge.ops import norm
    from warpforge.ops._rows import row_launch_shape
    from warpforge.ops._wide_rows import WideLaunch

    eps = _norm_eps(center)

    launches = [
        WideLaunch(w, early_w=early, reload=reload)
        for w in warps
        for early, reload in ((False, False), (True, False), (False, True), (True, True))
    ]
    launches += [WideLaunch(w, chunk=chunk, forwards=forwards, unrolled=unrolled)
                 for chunk, w, forwards, unrolled in looped]  # fmt: skip
    out = {_launch_label(la): _wide_variant(la, center, residual) for la in launches}
    for block, per_program, w in rows:

        def rows_forward(x, wt, b, r, block=block, per_program=per_program, w=w):
            M, N = x.shape
            launch = row_launch_shape(M, N, x.dtype, x.device, block_n=block,
                                      rows_per_program=per_program, num_warps=w)  # fmt: skip
            return norm._norm_forward(x, wt, b, r, eps, 0.0, center, launch)

        kind = "chunked" if block < N else "tiles"
        out[f"{kind} {block}/{per_program}/{w}w"] = _problem_forward(rows_forward, center, residual)
    return out


# --------------------------------------------------------------------------- one case


def _norm_bwd_variants(kernel: str, launches) -> dict[str, Fn]:
    """The norm backward alone on (dy, x, weight, mean, rstd, dh) (``kernel``: layer_norm.bwd,
    rms_norm.bwd or add_rms_norm.bwd, whose dh is the residual stream's gradient): "op bwd"
    through the public backward (``norm.layer_norm_backward`` / ``rms_norm_backward``), "tuned"
    through ``norm._norm_backward`` at the tuned launch, then the rows kernel at each
    (BLOCK_N, rows a tile, num_warps, programs an SM, prefetch, reload, registers a thread) of
    ``launches``; each returns (dx, dweight[, dbias])."""
    from warpforge.ops import norm

    center = kernel.startswith("layer")

    def rows_kernel(dy, x, w, mean, rstd, dh, **overrides):
        dx, dw, db = norm._norm_backward(dy, x, w, mean if center else None, rstd, dh, 0.0,
                                         center, True, center, **overrides)  # fmt: skip
        return (dx, dw, db) if center else (dx, dw)

    def public(dy, x, w, mean, rstd, dh):
        if center:
            return norm.layer_norm_backward(dy, x, w, mean, rstd, True, True)
        return norm.rms_norm_backward(dy, x, w, rstd, dh, 0.0, True)

    out: dict[str, Fn] = {"op bwd": public, "tuned": rows_kernel}
    for block, rows, warps, per_sm, prefetch, reload, cap, *memory in launches:
        in_memory = memory[0] if memory else None  # partials in memory: the kernel's own rule
        launch = norm.BwdRowLaunch(block, rows, warps, per_sm, prefetch, reload, cap)

        def run(dy, x, w, mean, rstd, dh, launch=launch, mem=in_memory):
            M, N = x.shape
            keywords = norm.bwd_row_keywords(M, N, x.dtype, x.device, launch)
            return rows_kernel(dy, x, w, mean, rstd, dh, in_memory=mem, **keywords)

        tags = " prefetch" * prefetch + " reload" * reload + (f" maxnreg={cap}" if cap else "")
        tags += " partials in memory" * bool(in_memory)
        out[f"{block}/{rows}/{warps}w x{per_sm}{tags}"] = run
    return out


def tuned_neighbours(kernel: str, M: int, N: int, dtype, device) -> list[tuple]:
    """Launches around the tuned one of ``kernel`` at (M, N) (``NORM_BWD_LAUNCHES``' tuples):
    prefetch toggled (the tuner leaves it to ``norm.prefetch_tiles``), one program an SM more
    and fewer, and tiles of twice and half the rows, each with and without prefetch."""
    from warpforge.ops import norm

    config, knobs = norm._bwd_launch_config(M, N, dtype, device, kernel)
    if not config.single_pass:
        return []
    rows, warps, per_sm, reload = (config.rows_per_program, config.num_warps,
                                   knobs.programs_per_sm, knobs.reload)  # fmt: skip
    shapes = {(rows, per_sm), (rows, per_sm + 1), (rows, max(1, per_sm - 1)), (rows * 2, per_sm),
              (max(1, rows // 2), per_sm)}  # fmt: skip
    return [(config.block_n, r, warps, p, pf, reload, None)
            for r, p in sorted(shapes) for pf in (False, True)]  # fmt: skip


def _relative_error(got: Any, want: Any) -> float:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        diff = (g.double() - w.double()).norm() / w.double().norm().clamp_min(1e-30)
        worst = max(worst, float(diff))
    return worst


def _case(
    label: str,
    input_sets: list[tuple[Any, ...]],
    contenders: dict[str, Fn],
    reference_name: str,
    moved: float,
    dtype: torch.dtype,
    max_time_s: float,
    warm_only: bool = False,
) -> dict[str, Any]:
    from warpforge.harness.timing import measure_interleaved

    first = input_sets[0]
    skipped: dict[str, str] = {}
    outputs: dict[str, Any] = {}
    for name, fn in contenders.items():
        try:
            # a fresh copy each: Liger's cross-entropy writes its gradient into the logits
            outputs[name] = fn(*(t.clone() if torch.is_tensor(t) else t for t in first))
        except Exception as exc:  # a missing baseline or a failed compile is reported
            skipped[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    want = outputs.get(reference_name)
    tolerance = 1e-2 if dtype == torch.bfloat16 else 1e-5
    verified, errors = {}, {}
    for name, out in outputs.items():
        err = _relative_error(out, want) if want is not None else float("nan")
        errors[name] = err
        if want is not None and (err <= tolerance or name.startswith(("torch", "liger"))):
            verified[name] = contenders[name]
        elif want is not None:
            skipped[name] = f"rejected: relative error {err:.2e} > {tolerance:.0e} against op"
    del outputs, want
    if warm_only:  # compile caches filled (a parallel warm-up pass); nothing timed
        return {"case": label, "warm_only": True, "skipped": skipped, "rows": []}
    # the smoke run checks the plumbing: a few interpreted calls a contender, not the 30 a
    # median needs on the GPU
    sampling = {"min_samples": 3, "warmup": 1} if SMOKE else {}
    measured = measure_interleaved(
        verified, input_sets, max_time_s=max_time_s, target_rel_stderr=0.001, **sampling
    )
    rows = []
    for name, m in measured.items():
        rows.append(
            {
                "contender": name,
                "median_us": m.median_s * 1e6,
                "ci95_us": [m.ci_low_s * 1e6, m.ci_high_s * 1e6],
                "samples": m.samples,
                "gb_per_s": moved / m.median_s / 1e9,
                "relative_error_vs_op": errors[name],
            }
        )
    rows.sort(key=lambda r: r["median_us"])
    return {"case": label, "dtype": str(dtype).removeprefix("torch."), "bytes_moved": moved,
            "rows": rows, "skipped": skipped}  # fmt: skip


def _problem_inputs(problem, shape, dtype, device, sets: int):
    out = []
    for seed in range(sets):
        gen = torch.Generator(device=device).manual_seed(1000 + seed)
        out.append(tuple(problem.make_inputs(shape, dtype, device, gen)))
    return out


def _with_baselines(problem, variants: dict[str, Fn], skip: tuple[str, ...] = ("torch",)):
    contenders: dict[str, Fn] = {"op": problem.implementation}
    for name, factory in problem.baselines.items():
        if name in skip or SMOKE or WARM:  # none under the interpreter or in the warm-up
            continue
        try:
            contenders[name] = factory()
        except Exception as exc:  # BaselineUnavailable: Liger missing
            print(f"  baseline {name} unavailable: {exc}")
    contenders.update(variants)
    return contenders


# --------------------------------------------------------------------------- the cases

FP32, BF16 = torch.float32, torch.bfloat16
ACT_SHAPE = {"tokens": 8192, "intermediate": 14336}
ACT_FWD_GRID = [(1024, 8, 3), (1024, 4, 1), (512, 8, 1), (512, 4, 1), (512, 2, 1), (256, 2, 1),
                (256, 4, 1), (256, 1, 1), (2048, 8, 1), (1024, 8, 1)]  # fmt: skip
ACT_BWD_GRID = [(1024, 8, 3), (1024, 4, 1), (512, 8, 1), (512, 4, 1), (256, 2, 1)]
SM_GRID = [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 2), (8, 4), (16, 8)]
SM_GRID_SHORT = [(2, 1), (2, 2), (4, 1), (4, 4), (8, 2), (16, 8)]
SM_GRID_WIDE = [(1, 8), (1, 16), (1, 32), (2, 32)]
"""(ROWS, num_warps) of the tile backward at 16384 columns (16-64 elements a thread)."""
CE_FLAT_GRID = [(1024, 4), (512, 2), (256, 2), (512, 4), (1024, 2), (1024, 8), (2048, 4), (2048, 8),
                (4096, 8), (8192, 16)]  # fmt: skip
"""(BLOCK, num_warps) of the flat backward; the first two also without evict_first."""
CE_ROWS_GRID = [(1024, 2), (2048, 4), (2048, 8), (4096, 4), (8192, 8), (8192, 16), (16384, 16)]
CE_ROWS_GRID_SMALL = [(256, 1), (512, 1), (1024, 1), (512, 2), (2048, 2), (1024, 4)]
"""Smaller row-kernel programs, timed in bf16 after 1024 / 2 won all four shapes there
(``session41-h200-2026-12-01/parity-ce-bwd-bf16-call1.json``)."""
CHUNKED = ((2048, 1, 4), (4096, 1, 8), (8192, 1, 8), (8192, 1, 16))
NORM_FWD_CASES = [
    ("rms_norm.fwd", BF16, 4096, 32768, (16, 32), CHUNKED),
    ("layer_norm.fwd", FP32, 4096, 16384, (16, 32), ((16384, 1, 16), (16384, 1, 32), *CHUNKED)),
    ("layer_norm.fwd", FP32, 16384, 4096, (4, 8), ((4096, 1, 4), (4096, 1, 8), (4096, 2, 8),
                                                   (4096, 2, 16), (4096, 4, 16))),
    ("rms_norm.fwd", BF16, 16384, 4096, (4, 8), ((4096, 1, 4), (4096, 2, 4), (4096, 2, 8),
                                                 (4096, 4, 8), (4096, 4, 16))),
    ("rms_norm.fwd", FP32, 4096, 32768, (16, 32), CHUNKED),
    ("layer_norm.fwd", BF16, 4096, 32768, (16, 32), CHUNKED),
    ("rms_norm.fwd", FP32, 8192, 8192, (8, 16), ((8192, 1, 8), (8192, 1, 16), (8192, 2, 16))),
    ("layer_norm.fwd", BF16, 8192, 8192, (8, 16), ((8192, 1, 8), (8192, 1, 16), (8192, 2, 16))),
    ("rms_norm.fwd", BF16, 32768, 1024, (1, 2, 4), ((1024, 1, 1), (1024, 4, 4), (1024, 8, 4))),
    *((name, dtype, M, N, warps, ())  # the rest of the sweep's rows of 2048-16384 columns
      for name in ("rms_norm.fwd", "layer_norm.fwd") for dtype in (BF16, FP32)
      for M, N, warps in ((16384, 2048, (2, 4)), (16384, 4096, (4, 8)), (8192, 8192, (8, 16)),
                          (4096, 16384, (16, 32)))
      if (name, dtype, N) not in {("layer_norm.fwd", FP32, 16384), ("layer_norm.fwd", FP32, 4096),
                                  ("rms_norm.fwd", BF16, 4096), ("rms_norm.fwd", FP32, 8192),
                                  ("layer_norm.fwd", BF16, 8192)}),
    *(("add_rms_norm.fwd", dtype, M, N, warps, ())  # not timed with the whole-row kernel yet
      for dtype in (BF16, FP32)
      for M, N, warps in ((16384, 2048, (2, 4)), (16384, 4096, (4, 8)), (8192, 8192, (8, 16)),
                          (4096, 16384, (16, 32)), (4096, 32768, (16, 32)))),
]  # fmt: skip
"""Norm forwards under torch.compile on the H200 (``session16 fwd-bf16-call3``,
``session17 normfwd-fp32-call6``: 0.90x, 0.92x, 0.93x, 0.95x), against the whole-row kernel and
the row kernels at other launches (``(name, dtype, M, N, whole-row warps, (BLOCK_N, rows a
program, num_warps) of the row kernels)``); then the rest of the issue's sweep rows of
2048-16384 columns (``session19 parity-sweep-call6``) and add+RMSNorm's, not yet timed."""


def looped_grid(chunk_warps) -> tuple[tuple[int, int, bool, bool], ...]:
    """(chunk, warps, forwards, unrolled) launches of the looped kernel: each (chunk, warps)
    rolled and unrolled, its output pass backwards and forwards."""
    return tuple((chunk, w, forwards, unrolled) for chunk, w in chunk_warps
                 for forwards in (False, True) for unrolled in (False, True))  # fmt: skip


LOOPED_GRID = looped_grid(((1024, 8), (2048, 8), (2048, 16), (4096, 16)))
NORM_FWD_LOOPED_CASES = [
    *(("layer_norm.fwd", BF16, M, N) for M, N in ((4096, 16384), (8192, 8192), (16384, 4096),
                                                  (4096, 32768))),
    *(("rms_norm.fwd", BF16, M, N) for M, N in ((4096, 16384), (8192, 8192), (4096, 32768))),
    *(("layer_norm.fwd", FP32, M, N) for M, N in ((4096, 16384), (4096, 32768))),
    ("add_rms_norm.fwd", BF16, 4096, 16384),
    *(("layer_norm.fwd", BF16, 8192, N) for N in (65536, 131072)),
    ("rms_norm.fwd", BF16, 8192, 65536),
]  # fmt: skip
"""The looped kernel (one row a program walked in chunks, torch.compile's shape of a norm
forward; its output pass backwards or in order) against the op as shipped and the baselines,
at the norm forwards under 90% of copy or under torch.compile on the H200 (``session25
normfwd-bf16-call1``: bf16 LayerNorm 4096 x 16384 0.95x, 84%; ``session19 fwd-bf16-call7``:
4096 x 32768 71%), and past 32768 columns, where the split kernel runs bf16 LayerNorm at 63-67%
of copy and RMSNorm at 78-81% (``session19 fwd-bf16-call7``)."""
ONE_REDUCTION_CASES = [(FP32, 4096, 16384, (16, 32)), (FP32, 2048, 16384, (32,)),
                       (FP32, 16384, 16384, (32,)), (FP32, 4096, 12288, (16, 32)),
                       (FP32, 4096, 10240, (32,)), (FP32, 4096, 32768, (32,)),
                       (FP32, 4096, 24576, (32,)), (FP32, 8192, 8192, (16, 32))]  # fmt: skip
"""float32 LayerNorm forwards of 8192-32768 columns through the whole-row kernel with its
moments from one reduction: at 4096 x 16384, 32 warps with x read again, 133.0 us against
140.4 for the op (``session37-h200-2026-11-30/parity-stats-reload-call3.json``)."""
SPECIALIZED_CASES = [("layer_norm.fwd", BF16, 4096, 16384), ("layer_norm.fwd", BF16, 8192, 8192),
                     ("layer_norm.fwd", BF16, 4096, 32768), ("layer_norm.fwd", BF16, 16384, 4096),
                     ("rms_norm.fwd", BF16, 4096, 16384), ("rms_norm.fwd", BF16, 8192, 8192),
                     ("layer_norm.fwd", FP32, 4096, 16384), ("layer_norm.fwd", BF16, 4096, 12288),
                     ("layer_norm.fwd", BF16, 4096, 14336), ("layer_norm.fwd", BF16, 2048, 16384),
                     ("layer_norm.fwd", BF16, 16384, 16384), ("layer_norm.fwd", BF16, 4096, 8704),
                     ("layer_norm.fwd", BF16, 4096, 9216), ("layer_norm.fwd", BF16, 4096, 10240),
                     ("layer_norm.fwd", BF16, 4096, 11264), ("rms_norm.fwd", BF16, 4096, 12288),
                     ("rms_norm.fwd", BF16, 4096, 10240)]  # fmt: skip
"""Norm forwards compiled for their row length (``WideLaunch.specialized``), as torch.compile's
kernels are (``session37-h200-2026-11-30/inductor-layer_norm.fwd-call6.txt``: N, M and the row
stride compiled in), where bf16 LayerNorm trails torch.compile (4096 x 16384) or RMSNorm."""
NORM_BWD_LAUNCHES = {
    4096: [(4096, 1, 4, 3, False, False, None), (4096, 1, 16, 2, False, False, None),
           (4096, 1, 16, 2, True, False, None), (4096, 1, 16, 2, True, False, 64),
           (4096, 1, 16, 2, True, True, 64), (4096, 1, 16, 1, True, False, 64),
           (4096, 1, 8, 3, False, False, 80), (4096, 1, 8, 3, True, False, 80),
           (4096, 1, 8, 3, False, False, None)],
    8192: [(8192, 1, 32, 1, True, False, None), (8192, 1, 16, 2, False, False, None),
           (8192, 1, 16, 2, True, False, 64), (8192, 1, 16, 1, True, False, 80),
           (8192, 1, 16, 2, False, False, 64), (8192, 1, 16, 2, False, False, None, True),
           (8192, 1, 16, 2, True, False, None, True), (8192, 1, 32, 1, True, False, None, True),
           (8192, 1, 16, 3, False, False, None, True)],
    2048: [(2048, 1, 8, 4, True, False, None), (2048, 1, 8, 4, True, False, 64),
           (2048, 1, 8, 4, False, False, 64), (2048, 1, 4, 6, False, False, 80),
           (2048, 1, 4, 4, True, False, 80), (2048, 2, 8, 3, True, False, 80)],
    1024: [(1024, 2, 4, 4, True, False, None), (1024, 4, 4, 3, True, False, None),
           (1024, 4, 4, 3, True, False, 168), (1024, 2, 4, 5, True, False, 96),
           (1024, 1, 2, 8, True, False, None), (1024, 2, 8, 3, True, False, 80),
           (1024, 2, 4, 6, False, False, 80), (1024, 1, 2, 10, True, False, 96)],
}  # fmt: skip
"""Row length -> (BLOCK_N, rows a tile, num_warps, programs an SM, prefetch, reload, registers a
thread or None[, partials in memory]) launches of the backward rows kernel. The exhaustive H200 search of the bf16 LayerNorm backward
(``session27-h200-2026-11-29/tune-lnbwd-bf16-trials.json``) timed 16 warps at 16384 x 4096 at
210-227 us against 121.8 for its pick (4 warps, three an SM) and RMSNorm's 107.3 at 16 warps:
there the prefetch the rows kernel takes at 8 elements a thread costs LayerNorm 75 registers
(an sm_90 compile with Triton 3.6's ptxas on the development machine), so only one 16-warp
program fits an SM where two were asked;
capped at 64 it compiles without spilling. Without prefetch it ran 137.4 us there
(``session38-h200-2026-11-30/parity-norm-bwd-call2.json``)."""
NORM_BWD_CASES = [
    (name, BF16, M, N)
    for name in ("layer_norm.bwd", "rms_norm.bwd")
    for M, N in ((16384, 4096), (8192, 8192), (16384, 2048), (32768, 1024))
]
"""The bf16 norm backwards at the issue's rows of 1024-8192 columns, kernel alone."""
NORM_BWD_NEIGHBOUR_CASES = [
    (name, dtype, M, N)
    for name in ("layer_norm.bwd", "rms_norm.bwd", "add_rms_norm.bwd")
    for dtype in (BF16, FP32)
    for M, N in ((32768, 256), (32768, 1024), (16384, 2048), (16384, 4096))
]
"""The norm backwards at the issue's rows of 256-4096 columns around their tuned launches
(``tuned_neighbours``): prefetch past 8 elements a thread gained 4-7% at bf16 1024 columns
(``session38-h200-2026-11-30/parity-norm-bwd-call3.json``)."""
NARROW_SPECIALIZED_CASES = [("rms_norm.fwd", FP32, 16384, 2048), ("rms_norm.fwd", FP32, 16384, 4096),
                            ("rms_norm.fwd", FP32, 32768, 1024), ("layer_norm.fwd", FP32, 16384, 2048),
                            ("layer_norm.fwd", FP32, 32768, 1024), ("rms_norm.fwd", BF16, 32768, 1024),
                            ("layer_norm.fwd", BF16, 32768, 1024)]  # fmt: skip
"""The norm forwards of 1024-4096 columns under torch.compile on the H200 (float32 rms_norm.fwd
16384 x 2048 0.96x, 16384 x 4096 0.98x, 32768 x 1024 0.99x; layer_norm.fwd 0.99x; bf16 at 32768 x
1024 0.99-1.00x) through ``SPECIALIZED_CASES``' launches, each compiled for the row length and
not."""
TILE_CASES = [(name, dtype, M, N) for M, N in ((32768, 256), (32768, 1024), (16384, 2048))
              for name in ("rms_norm.fwd", "layer_norm.fwd", "add_rms_norm.fwd")
              for dtype in (BF16, FP32)]  # fmt: skip
"""The norm forwards of 256-2048 columns, the sweep's rows where torch.compile's kernel (on the
H200 0.97-0.99x ours at 256 and 1024 columns) is compiled for the row: the tiled row kernel as
tuned against ``norm_fwd_tile_kernel`` (compiled for N) at :func:`tile_launches`."""
CE_BWD_SHAPES = [(16384, 32000), (8192, 128256), (4096, 50257), (4096, 262144)]
"""The float32 backward where its launches were once told apart: rows that pad the row
kernel's last slice, wide rows, rows off 16-byte boundaries and whole slices."""


CE_FWD_BWD_SHAPES = [(16384, 32000), (8192, 32768), (16384, 24576), (16384, 20000), (16384, 16392)]
"""2-byte rows of the looped forward with gradient's reach (16385-32768 classes), the op as
the harness runs it against that kernel and the split plan (``SPLIT_OVER_LOOPED_BY_MODEL``)."""


def cases(device, smoke: bool, looped: tuple = LOOPED_GRID):
    """(label, thunk) pairs; each thunk builds (input_sets, contenders, reference, bytes, dtype);
    the looped cases time ``looped``'s launches."""
    from warpforge.harness.registry import get_problem

    sets = 1 if smoke else 2

    def activation(name, dtype, grid):
        def build():
            problem = get_problem(name)
            shape = {"tokens": 3, "intermediate": 1024} if smoke else ACT_SHAPE
            contenders = _with_baselines(
                problem, _activation_variants(name, grid), ("torch", "liger")
            )
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"{name} {ACT_SHAPE} {dtype}", build

    def softmax_full(name, dtype, grid, M=32768, N=256):
        log = name.startswith("log")

        def build():
            problem = get_problem(name)
            shape = {"M": 64, "N": 256} if smoke else {"M": M, "N": N}
            contenders = _with_baselines(problem, _softmax_full_variants(log, grid))
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"{name} M={M} N={N} {dtype} (fwd+bwd)", build

    def softmax_alone(log, dtype, grid):
        def build():
            M, N = (64, 256) if smoke else (32768, 256)
            fns, _ = _softmax_bwd_alone(log, grid, dtype)
            input_sets = []
            for seed in range(sets):
                gen = torch.Generator(device=device).manual_seed(2000 + seed)
                x = torch.randn(M, N, generator=gen, device=device)
                y = (torch.log_softmax if log else torch.softmax)(x, -1).to(dtype)
                dy = torch.randn(M, N, generator=gen, device=device).to(dtype)
                input_sets.append((dy, y))
            return input_sets, fns, "op bwd (rows kernel)", 3.0 * M * N * dtype.itemsize, dtype

        return f"{'log_' if log else ''}softmax backward alone M=32768 N=256 {dtype}", build

    def softmax_fwd_alone(log, dtype):
        def build():
            from warpforge.ops import softmax_ops

            M, N = (64, 256) if smoke else (32768, 256)
            eager = torch.log_softmax if log else torch.softmax
            fns = {"op fwd": lambda x: softmax_ops._softmax_fwd(x, log)}
            if not (smoke or WARM):
                fns["torch.compile (fwd)"] = torch.compile(lambda x: eager(x, -1))
            input_sets = []
            for seed in range(sets):
                gen = torch.Generator(device=device).manual_seed(3000 + seed)
                input_sets.append((torch.randn(M, N, generator=gen, device=device).to(dtype),))
            return input_sets, fns, "op fwd", 2.0 * M * N * dtype.itemsize, dtype

        return f"{'log_' if log else ''}softmax forward alone M=32768 N=256 {dtype}", build

    def ce_bwd(dtype, rows, classes):
        dtype = FP32 if smoke else dtype  # bf16 loads are wrong under the interpreter

        def build():
            problem = get_problem("cross_entropy.bwd")
            shape = {"M": 8, "V": 320} if smoke else {"M": rows, "V": classes}
            flat = [(64, 1), (256, 2)] if smoke else CE_FLAT_GRID
            rows_grid = CE_ROWS_GRID + (CE_ROWS_GRID_SMALL if dtype == BF16 else [])
            contenders = _with_baselines(problem, _ce_variants(flat, [] if smoke else rows_grid))
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"cross_entropy.bwd M={rows} V={classes} {dtype}", build

    def ce_fwd_bwd(dtype, rows, classes):
        dtype = FP32 if smoke else dtype  # bf16 loads are wrong under the interpreter

        def build():
            problem = get_problem("cross_entropy.fwd_bwd")
            shape = {"M": 8, "V": 320} if smoke else {"M": rows, "V": classes}
            variants = _ce_fwd_bwd_variants(shape["V"], dtype.itemsize)
            contenders = _with_baselines(problem, variants)
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"cross_entropy.fwd_bwd M={rows} V={classes} {dtype}", build

    def norm_fwd(name, dtype, M, N, warps, rows, looped=()):
        dtype = FP32 if smoke else dtype  # bf16 loads are wrong under the interpreter

        def build():
            problem = get_problem(name)
            shape = {"M": 8, "N": 256} if smoke else {"M": M, "N": N}
            variants = _norm_fwd_variants(
                name.startswith("layer"),
                shape["N"],
                (4,) if smoke and not looped else warps,
                ((256, 2, 2), (128, 1, 1)) if smoke and not looped else rows,
                residual=name.startswith("add"),
                looped=((128, 2, False, False), (128, 2, True, True))
                if smoke and looped
                else looped,
            )
            contenders = _with_baselines(problem, variants)
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"{name} M={M} N={N} {dtype}{' looped' * bool(looped)}", build

    def norm_bwd(name, dtype, M, N, neighbours=False):
        center = name.startswith("layer")
        residual = name.startswith("add")
        dtype = FP32 if smoke else dtype  # bf16 loads are wrong under the interpreter

        def build():
            from warpforge.ops import norm

            m, n = (8, 256) if smoke else (M, N)
            if neighbours:
                launches = tuned_neighbours(name, m, n, dtype, device)
            else:
                launches = NORM_BWD_LAUNCHES.get(N, [])
            if smoke:  # the grid's knobs at a row the interpreter runs quickly
                launches = [(256, *launch[1:2], 1, *launch[3:]) for launch in launches[:4]]
            input_sets = []
            for seed in range(sets):
                gen = torch.Generator(device=device).manual_seed(4000 + seed)
                x, dy = (torch.randn(m, n, generator=gen, device=device).to(dtype) for _ in "xy")
                w = (1 + 0.1 * torch.randn(n, generator=gen, device=device)).to(dtype)
                b = torch.randn(n, generator=gen, device=device).to(dtype)
                dh = torch.randn(m, n, generator=gen, device=device).to(dtype) if residual else None
                eps = 1e-5 if center else 1e-6
                _, _, mean, rstd = norm._norm_forward(x, w, b if center else None, None, eps,
                                                      0.0, center)  # fmt: skip
                input_sets.append((dy, x, w, mean, rstd, dh))
            moved = (3.0 + residual) * m * n * dtype.itemsize
            return input_sets, _norm_bwd_variants(name, launches), "op bwd", moved, dtype

        tag = " around the tuned launch" * neighbours
        return f"{name} M={M} N={N} {dtype} backward alone{tag}", build

    def launches(name, dtype, M, N, tag, variants_for):
        """A case timing ``variants_for(N, element size)``'s contenders (smoke: a small row)."""
        dtype = FP32 if smoke else dtype  # bf16 loads are wrong under the interpreter

        def build():
            problem = get_problem(name)
            shape = {"M": 4, "N": 512} if smoke else {"M": M, "N": N}
            contenders = _with_baselines(problem, variants_for(shape["N"], dtype.itemsize))
            return (_problem_inputs(problem, shape, dtype, device, sets), contenders, "op",
                    problem.bytes_moved(shape, dtype), dtype)  # fmt: skip

        return f"{name} M={M} N={N} {dtype} {tag}", build

    return [
        *(norm_bwd(*case) for case in NORM_BWD_CASES),
        *(norm_bwd(*case, neighbours=True) for case in NORM_BWD_NEIGHBOUR_CASES),
        *(
            launches(
                name,
                dtype,
                M,
                N,
                "specialized",
                lambda n, size, name=name: _specialized_variants(name, n, size),
            )
            for name, dtype, M, N in SPECIALIZED_CASES + NARROW_SPECIALIZED_CASES
        ),
        *(
            launches(
                "layer_norm.fwd",
                dtype,
                M,
                N,
                "one-reduction",
                lambda n, size, warps=warps: _one_reduction_variants(warps),
            )
            for dtype, M, N, warps in ONE_REDUCTION_CASES
        ),
        *(
            launches(
                name, dtype, M, N, "tile", lambda n, size, name=name: _tile_variants(name, n, smoke)
            )
            for name, dtype, M, N in TILE_CASES
        ),
        *(norm_fwd(*case) for case in NORM_FWD_CASES),
        *(norm_fwd(*case, (), (), looped) for case in NORM_FWD_LOOPED_CASES),
        activation("swiglu.fwd", FP32, ACT_FWD_GRID),
        *(ce_bwd(FP32, rows, classes) for rows, classes in CE_BWD_SHAPES),
        # bf16 keeps the row kernel, whose slices start where each row does: 71% of copy at
        # 4096 x 50257, 94-95% at the others (session33-h200-2026-11-30/ce-bf16-call2.json)
        *(ce_bwd(BF16, rows, classes) for rows, classes in (*CE_BWD_SHAPES, (2048, 151936))),
        *(ce_fwd_bwd(BF16, *shape) for shape in CE_FWD_BWD_SHAPES[: 1 if smoke else None]),
        softmax_alone(False, FP32, SM_GRID),
        softmax_alone(True, FP32, SM_GRID),
        softmax_fwd_alone(False, FP32),
        softmax_full("softmax.bwd", FP32, SM_GRID_SHORT),
        softmax_full("log_softmax.bwd", FP32, SM_GRID_SHORT),
        activation("geglu.fwd", FP32, ACT_FWD_GRID[:6]),
        activation("swiglu.bwd", FP32, ACT_BWD_GRID),
        softmax_alone(False, BF16, SM_GRID_SHORT),
        softmax_full("softmax.bwd", BF16, SM_GRID_SHORT),
        activation("geglu.bwd", FP32, ACT_BWD_GRID[:4]),
        # bf16 softmax.bwd at 4096 x 16384, 0.97x Liger on the H200's tuned row kernel
        # (session25-h200-2026-11-29/smbwd-bf16-call4.json): the tile kernel's whole rows
        softmax_full("softmax.bwd", BF16, SM_GRID_WIDE, M=4096, N=16384),
    ]


def _chunk_warps(text: str) -> tuple[int, int]:
    """``--looped-grid``'s CHUNK/WARPS: a power-of-two chunk and warp count."""
    chunk, _, warps = text.partition("/")
    if not (chunk.isdigit() and warps.isdigit()):
        raise argparse.ArgumentTypeError(f"expected CHUNK/WARPS such as 2048/8, got {text!r}")
    c, w = int(chunk), int(warps)
    if c & (c - 1) or w & (w - 1) or not 0 < w <= 32 or c < 16:
        raise argparse.ArgumentTypeError(
            f"expected a power-of-two chunk of at least 16 and 1-32 warps (a power of two), "
            f"got {text!r}"
        )
    return c, w


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, interpreter")
    parser.add_argument("--max-time", type=float, default=1.5, help="timing budget per case (s)")
    parser.add_argument("--only", nargs="*", default=[], help="run cases whose label has one")
    parser.add_argument(
        "--warm", action="store_true", help="compile and check only (fill the caches), no timing"
    )
    parser.add_argument(
        "--looped-grid",
        nargs="*",
        type=_chunk_warps,
        default=[],
        metavar="CHUNK/WARPS",
        help="the looped cases' launches instead of LOOPED_GRID's, each rolled and unrolled, "
        "its output pass backwards and forwards",
    )
    args = parser.parse_args()
    grid = looped_grid(args.looped_grid) if args.looped_grid else LOOPED_GRID

    from warpforge.catalog import load_builtin_problems
    from warpforge.environment import environment_fingerprint

    load_builtin_problems()
    device = torch.device("cpu" if args.smoke else "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"benchmark": "parity_sweep", "environment": environment_fingerprint(),
                              "cases": []}  # fmt: skip
    start = time.perf_counter()
    done: set[str] = set()
    for label, build in cases(device, args.smoke, grid):
        if args.only and not any(s in label for s in args.only):
            continue
        if label in done:  # the smoke run times bf16 cases in float32: one of each suffices
            continue
        done.add(label)
        t0 = time.perf_counter()
        try:
            input_sets, contenders, reference, moved, dtype = build()
            case = _case(
                label, input_sets, contenders, reference, moved, dtype, args.max_time, args.warm
            )
        except Exception as exc:  # one broken case must not cost the others
            case = {"case": label, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        case["wall_s"] = time.perf_counter() - t0
        report["cases"].append(case)
        name = "parity_warm.json" if args.warm else "parity_sweep.json"
        (args.out / name).write_text(json.dumps(report, indent=1))
        print(f"\n{label}  ({case['wall_s']:.0f} s)", flush=True)
        for r in case.get("rows", []):
            lo, hi = r["ci95_us"]
            print(f"  {r['contender']:<40} {r['median_us']:9.2f} us [{lo:.2f}, {hi:.2f}] "
                  f"{r['gb_per_s']:7.0f} GB/s", flush=True)  # fmt: skip
        for name, why in case.get("skipped", {}).items():
            print(f"  {name:<40} skipped: {why[:160]}", flush=True)
        if "error" in case:
            print(f"  ERROR {case['error']}", flush=True)
        input_sets = contenders = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    print(f"\nwrote {args.out / 'parity_sweep.json'} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
