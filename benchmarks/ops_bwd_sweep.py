"""Backward kernels and cross entropy: the default launch against a small grid of knob variants.

For each case (problem family x shape x dtype) every contender is first verified against a
float64 reference on the case's inputs, then the verified ones are timed together through
``warpforge.harness.timing.measure_interleaved`` (CUDA events, L2 flushed before each call,
contenders interleaved so clock drift hits all alike). Families:

* ``cross_entropy.bwd``: the gradient of the logits from the saved lse (read logits, write
  gradient) - the op's streaming backward at its default (BLOCK, num_warps) and a grid of others;
  eager and ``torch.compile`` of the same closed form for context.
* ``cross_entropy.fwd_bwd``: mean loss and gradient - the public op (default strategy), the
  gradient-in-forward kernels (whole row in registers, or chunked with an L2 re-read) and the
  split strategy (loss-only forward + streaming backward), Liger and ``torch.compile``.
* ``layer_norm.bwd`` / ``rms_norm.bwd``: the backward kernel alone from the saved statistics,
  default launch against (ROWS, num_warps) tiles, partials in registers or in memory, one
  program per SM and the chunked kernel; the public forward+backward, ``torch.compile`` and
  Liger forward+backward for context (counted with the harness problem's byte model, ``scope``
  says which).

Writes ``ops_bwd_sweep.json`` (environment fingerprint, measured copy bandwidth, every
contender's config, verification and timing) and ``ops_bwd_sweep.txt`` (the table) to --out.

    PYTHONPATH=src python benchmarks/ops_bwd_sweep.py --out DIR           # GPU, < 4 minutes
    PYTHONPATH=src python benchmarks/ops_bwd_sweep.py --out DIR --smoke   # CPU interpreter

``--smoke`` runs tiny fp32 shapes through the Triton interpreter with small knob values, to
check that every contender runs and verifies (its timings mean nothing).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SMOKE = "--smoke" in sys.argv
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

IGNORE = -100
GPU_BUDGET_S = 200.0
"""Wall-clock budget of a GPU run: baselines that need compiling are skipped past 75% of it and
remaining cases are skipped past all of it (each recorded as skipped, with the reason)."""


# --------------------------------------------------------------------------- data model


@dataclass
class Contender:
    name: str
    run: Callable[..., Any]
    config: dict[str, Any]
    scope: str = "kernel"
    """What is timed: ``kernel`` (the family's byte model) or ``fwd+bwd`` (context rows)."""
    bytes_moved: float | None = None
    """Bytes for GB/s when the scope differs from the case's model."""
    needs_compile: bool = False
    clone_inputs: bool = False
    """Verify on private copies: the contender writes into its inputs (Liger)."""


@dataclass
class Case:
    family: str
    shape: dict[str, int]
    dtype: torch.dtype
    inputs: tuple[Any, ...]
    bytes_moved: float
    check: Callable[[Any], float]
    """Outputs -> worst error as a fraction of the tolerance (<= 1 passes)."""
    contenders: list[Contender] = field(default_factory=list)


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol as a fraction of max|ref|, rtol): scale-free, since a mean-reduced gradient is tiny."""
    return (1e-5, 1e-4) if dtype == torch.float32 else (4e-3, 1.6e-2)


def _error(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> float:
    """max |out - ref| / (atol * max|ref| + rtol * |ref|); NaN anywhere counts as a failure."""
    atol, rtol = _tolerance(dtype)
    out, ref = out.double(), ref.double()
    if out.shape != ref.shape or not bool(torch.isfinite(out).all()):
        return float("inf")
    bound = atol * ref.abs().max().clamp_min(1e-30) + rtol * ref.abs()
    return float(((out - ref).abs() / bound).max())


# --------------------------------------------------------------------------- cross entropy


def _ce():
    # ``warpforge.ops.cross_entropy`` as an attribute is the function; load the module by path
    return importlib.import_module("warpforge.ops.cross_entropy")


def _sample_rows(n_rows: int, device: torch.device) -> torch.Tensor:
    return torch.unique(torch.linspace(0, n_rows - 1, min(n_rows, 256), device=device).long())


def _ce_grad64(logits, target, rows, scale_rows) -> torch.Tensor:
    """float64 gradient of sum_rows scale_row * loss_row for the sampled rows."""
    x = logits[rows].double()
    t = target[rows]
    valid = t != IGNORE
    grad = torch.softmax(x, dim=-1)
    grad[torch.arange(len(rows), device=x.device), torch.where(valid, t, 0)] -= 1.0
    return grad * torch.where(valid, scale_rows.double(), 0.0)[:, None]


def _ce_mean_loss64(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """float64 mean cross entropy over the non-ignored rows, in row chunks of <= 1 GiB."""
    n_rows, vocab = logits.shape
    chunk = max(1, 2**27 // vocab)
    total = torch.zeros((), dtype=torch.float64, device=logits.device)
    for start in range(0, n_rows, chunk):
        x = logits[start : start + chunk].double()
        t = target[start : start + chunk]
        valid = t != IGNORE
        picked = x.gather(1, torch.where(valid, t, 0)[:, None])[:, 0]
        total += torch.where(valid, torch.logsumexp(x, dim=-1) - picked, 0.0).sum()
    return total / (target != IGNORE).sum()


def _ce_bwd_case(shape, dtype, device, generator, knobs) -> Case:
    from warpforge.ops import loss_problems as lp

    ce = _ce()
    logits, target, lse, grad_output = lp._backward_inputs(shape, dtype, device, generator)
    rows = _sample_rows(shape["M"], device)
    expected = _ce_grad64(logits, target, rows, grad_output[rows])
    case = Case(
        "cross_entropy.bwd", shape, dtype, (logits, target, lse, grad_output),
        lp.CROSS_ENTROPY_BWD.bytes_moved(shape, dtype),
        lambda out: _error(out[rows], expected, dtype),
    )  # fmt: skip
    block, warps = ce.bwd_launch_heuristic(shape["V"], dtype.itemsize)
    case.contenders.append(
        Contender("default", lp.cross_entropy_backward_implementation, {"BLOCK": block, "num_warps": warps})
    )  # fmt: skip

    def streaming(launch):
        def run(logits, target, lse, grad_output):
            grad = torch.empty_like(logits)
            return ce.row_grads(grad, logits, target, lse, grad_output, IGNORE, 0.0, 0.0,
                                launch=launch)  # fmt: skip

        return run

    for b in knobs["ce_blocks"]:
        for w in knobs["ce_warps"]:
            # GPU: 4 to 32 elements a thread (fewer leaves threads idle, more costs registers)
            per_thread = b // (32 * w)
            low, high = knobs["ce_per_thread"]
            if (b, w) != (block, warps) and low <= per_thread <= high:
                case.contenders.append(
                    Contender(f"BLOCK={b} warps={w}", streaming((b, w)), {"BLOCK": b, "num_warps": w})
                )  # fmt: skip
    case.contenders.append(Contender("torch (closed form)", lp._grad_from_lse, {}))
    if knobs["compile"] and case.family in knobs["compile_families"]:
        case.contenders.append(
            Contender("torch.compile (closed form)", torch.compile(lp._grad_from_lse, dynamic=True),
                      {"dynamic": True}, needs_compile=True)
        )  # fmt: skip
    return case


def _ce_fwd_bwd_case(shape, dtype, device, generator, knobs) -> Case:
    from warpforge.ops import loss_problems as lp

    ce = _ce()
    logits, target = lp._logits_and_target(shape, dtype, device, generator)
    rows = _sample_rows(shape["M"], device)
    count = (target != IGNORE).sum().double()
    expected_grad = _ce_grad64(logits, target, rows, (1.0 / count).expand(len(rows)))
    expected_loss = _ce_mean_loss64(logits, target)

    def check(out):
        loss, grad = out
        return max(_error(loss.reshape(()), expected_loss, dtype),
                   _error(grad[rows], expected_grad, dtype))  # fmt: skip

    case = Case(
        "cross_entropy.fwd_bwd", shape, dtype, (logits, target),
        lp.CROSS_ENTROPY_FWD_BWD.bytes_moved(shape, dtype), check,
    )  # fmt: skip
    vocab = shape["V"]
    size = logits.element_size()
    if not ce.gradient_in_forward(shape["M"], vocab, size, logits.device):
        strategy = "streaming backward"
    elif ce._fwd_grad_split_plan(shape["M"], vocab, size, logits.device) is not None:
        strategy = "split rows"
    else:
        strategy = "whole rows"
    case.contenders.append(
        Contender("default (public op)", lp._loss_and_grad(lp.cross_entropy_implementation),
                  {"strategy": strategy, "FUSED_GRAD_MAX_COLS": ce.FUSED_GRAD_MAX_COLS})
    )  # fmt: skip

    def fused(launch):
        def run(logits, target):
            grad = torch.empty_like(logits)
            scale = ce._reduction_scale(target, IGNORE, "mean")
            loss_rows, _ = ce.row_losses(logits, target, IGNORE, 0.0, 0.0, grad_out=grad,
                                         grad_loss=scale, launch=launch)  # fmt: skip
            return ce.reduce_rows(loss_rows, target, IGNORE, "mean").to(logits.dtype), grad

        return run

    def split(bwd_launch):
        def run(logits, target):
            loss_rows, lse = ce.row_losses(logits, target, IGNORE, 0.0, 0.0)
            scale = ce._reduction_scale(target, IGNORE, "mean")
            grad = ce.row_grads(torch.empty_like(logits), logits, target, lse, scale, IGNORE,
                                0.0, 0.0, launch=bwd_launch)  # fmt: skip
            return ce.reduce_rows(loss_rows, target, IGNORE, "mean").to(logits.dtype), grad

        return run

    whole = max(16, ce.next_power_of_2(vocab))
    if whole <= ce.WHOLE_ROW_MAX_BLOCK:
        for w in knobs["ce_row_warps"]:
            case.contenders.append(
                Contender(f"fused whole row warps={w}", fused((whole, w)),
                          {"strategy": "fused", "BLOCK": whole, "num_warps": w})
            )  # fmt: skip
    for b, w in knobs["ce_chunked"]:
        if b < vocab:
            case.contenders.append(
                Contender(f"fused chunked BLOCK={b} warps={w}", fused((b, w)),
                          {"strategy": "fused", "BLOCK": b, "num_warps": w})
            )  # fmt: skip
    bwd_default = ce.bwd_launch_heuristic(vocab, dtype.itemsize)
    for launch in (bwd_default, *knobs["ce_split_bwd"]):
        if launch == bwd_default or launch[0] >= 32 * launch[1]:
            name = (
                "split"
                if launch == bwd_default
                else f"split bwd BLOCK={launch[0]} warps={launch[1]}"
            )
            case.contenders.append(
                Contender(name, split(launch), {"strategy": "split", "bwd_BLOCK": launch[0],
                                                "bwd_num_warps": launch[1]})
            )  # fmt: skip
    _add_baselines(case, lp.CROSS_ENTROPY_FWD_BWD, knobs)
    return case


# --------------------------------------------------------------------------- norms


def _norm_bwd_case(family: str, shape, dtype, device, generator, knobs) -> Case:
    from warpforge.harness.registry import get_problem
    from warpforge.ops import norm
    from warpforge.ops import norm_problems as npb
    from warpforge.ops._rows import RowLaunchConfig, next_power_of_2, row_launch_shape

    center = family == "layer_norm.bwd"
    problem = get_problem(family)
    M, N = shape["M"], shape["N"]
    if center:
        x, w, b, dy = npb._ln_bwd_inputs(shape, dtype, device, generator)
    else:
        (x, w, dy), b = npb._rms_bwd_inputs(shape, dtype, device, generator), None
    eps = npb.LN_EPS if center else npb.EPS
    _, _, mean, rstd = norm._norm_forward(x, w, b, None, eps, 0.0, center)

    x64, w64 = x.double().requires_grad_(), w.double().requires_grad_()
    leaves = [x64, w64]
    if center:
        b64 = b.double().requires_grad_()
        leaves.append(b64)
        y64 = npb.layer_norm_reference(x64, w64, b64)
    else:
        y64 = npb.rms_norm_reference(x64, w64)
    expected = [g.detach() for g in torch.autograd.grad(y64, leaves, dy.double())]
    del x64, w64, leaves, y64

    def check(out):
        return max(_error(o, e, dtype) for o, e in zip(out, expected, strict=True))

    size = dtype.itemsize  # read x, dy, w; write dx, dw (, db); the saved statistics
    kernel_bytes = 3 * M * N * size + (3 if center else 2) * N * size + (8 if center else 4) * M
    inputs = (x, w, b, dy, mean, rstd)
    case = Case(family, shape, dtype, inputs, float(kernel_bytes), check)

    def backward(launch, in_memory=None, prefetch=None):
        def run(x, w, b, dy, mean, rstd):
            dx, dw, db = norm._norm_backward(
                dy, x, w, mean if center else None, rstd, None, 0.0, center, True, center,
                launch=launch, in_memory=in_memory, prefetch=prefetch,
            )  # fmt: skip
            return (dx, dw, db) if center else (dx, dw)

        return run

    heuristic = norm.bwd_launch_heuristic(M, N, dtype, device)
    operands = norm._bwd_row_operands(center, True, center)

    def describe(config: RowLaunchConfig, in_memory=None, prefetch=None) -> dict[str, Any]:
        memory = (norm.partials_in_memory(config, operands, dtype.itemsize)
                  if in_memory is None else in_memory)  # fmt: skip
        ahead = norm.prefetch_tiles(config) if prefetch is None else prefetch
        return {"BLOCK_N": config.block_n, "ROWS": config.rows_per_program,
                "num_warps": config.num_warps, "single_pass": config.single_pass,
                "partials_in_memory": memory and config.single_pass,
                "prefetch": ahead and config.single_pass,
                "programs_before_clamp": config.num_programs}  # fmt: skip

    case.contenders.append(Contender("default", backward(None), describe(heuristic)))
    if heuristic.single_pass:
        flipped = not norm.partials_in_memory(heuristic, operands, dtype.itemsize)
        case.contenders.append(
            Contender(f"default, partials in {'memory' if flipped else 'registers'}",
                      backward(heuristic, flipped), describe(heuristic, flipped))
        )  # fmt: skip
        ahead = not norm.prefetch_tiles(heuristic)
        case.contenders.append(
            Contender(f"default, {'with' if ahead else 'without'} prefetch",
                      backward(heuristic, prefetch=ahead), describe(heuristic, prefetch=ahead))
        )  # fmt: skip
        sm_count = norm.device_capabilities(device).sm_count or 1
        one_per_sm = RowLaunchConfig(heuristic.block_n, heuristic.rows_per_program, True,
                                     heuristic.num_warps, min(heuristic.num_programs, sm_count))  # fmt: skip
        case.contenders.append(
            Contender("default, 1 program per SM", backward(one_per_sm), describe(one_per_sm))
        )  # fmt: skip
    block = next_power_of_2(N)
    tiles = knobs["norm_tiles_small"] if block <= 1024 else knobs["norm_tiles_wide"]
    for rows, warps in tiles:
        if block * rows < 32 * warps or rows > next_power_of_2(M):
            continue
        config = row_launch_shape(M, N, dtype, device, block_n=block, rows_per_program=rows,
                                  num_warps=warps, reread_operands=2, resident_warps=64)  # fmt: skip
        if (rows, warps) == (
            heuristic.rows_per_program,
            heuristic.num_warps,
        ) or not config.single_pass:
            continue
        for memory in (False, True) if rows == 1 else (False,):
            case.contenders.append(
                Contender(f"ROWS={rows} warps={warps}{' mem' if memory else ''}",
                          backward(config, memory), describe(config, memory))
            )  # fmt: skip
    if block >= knobs["norm_chunked_from"]:
        for chunk, warps in knobs["norm_chunked"]:
            if chunk < N:
                config = row_launch_shape(M, N, dtype, device, block_n=chunk, rows_per_program=1,
                                          num_warps=warps, reread_operands=2)  # fmt: skip
                case.contenders.append(
                    Contender(f"chunked BLOCK_N={chunk} warps={warps}", backward(config),
                              describe(config))
                )  # fmt: skip

    def public(fn):
        def run(x, w, b, dy, mean, rstd):
            return npb.gradients(fn)(*((x, w, b, dy) if center else (x, w, dy)))

        return run

    implementation = npb._warpforge_layer_norm if center else npb._warpforge_rms_norm
    case.contenders.append(
        Contender("warpforge fwd+bwd (public)", public(implementation), {},
                  scope="fwd+bwd", bytes_moved=problem.bytes_moved(shape, dtype))
    )  # fmt: skip
    eager = npb._eager_layer_norm if center else npb._eager_rms_norm
    liger = npb._liger_layer_norm if center else npb._liger_rms_norm
    fwd_bwd_bytes = problem.bytes_moved(shape, dtype)
    compile_this = family in knobs["compile_families"] and shape["N"] <= knobs["compile_max_n"]
    if knobs["compile"] and compile_this:
        case.contenders.append(
            Contender("torch.compile fwd+bwd", public(torch.compile(eager, dynamic=True)),
                      {"dynamic": True}, scope="fwd+bwd", bytes_moved=fwd_bwd_bytes,
                      needs_compile=True)
        )  # fmt: skip
    if knobs["liger"]:
        try:
            case.contenders.append(
                Contender("liger fwd+bwd", public(liger()), {}, scope="fwd+bwd",
                          bytes_moved=fwd_bwd_bytes)
            )  # fmt: skip
        except Exception as exc:  # BaselineUnavailable or an import error: context only
            case.contenders.append(Contender(f"liger (unavailable: {exc})", None, {}))
    return case


def _add_baselines(case: Case, problem, knobs) -> None:
    """torch.compile (dynamic shapes: one compile per dtype) and Liger, whose cross entropy
    writes its gradient over the logits: verified on copies; timing is unaffected."""
    if knobs["compile"] and case.family in knobs["compile_families"]:
        from warpforge.ops import loss_problems as lp

        compiled = torch.compile(lp.cross_entropy_reference, dynamic=True)
        case.contenders.append(
            Contender("torch.compile", lp._loss_and_grad(compiled), {"dynamic": True},
                      needs_compile=True)
        )  # fmt: skip
    if knobs["liger"] and "liger" in problem.baselines:
        try:
            fn = problem.baselines["liger"]()
        except Exception as exc:  # BaselineUnavailable or an import error: context only
            case.contenders.append(Contender(f"liger (unavailable: {exc})", None, {}))
            return
        case.contenders.append(Contender("liger", fn, {}, clone_inputs=True))


# --------------------------------------------------------------------------- plan and run


GPU_KNOBS: dict[str, Any] = {
    "ce_blocks": (2048, 4096, 8192),
    "ce_warps": (4, 8, 16),
    "ce_per_thread": (4, 32),
    "ce_row_warps": (16, 32),
    "ce_chunked": ((4096, 16), (8192, 32), (16384, 32)),
    "ce_split_bwd": ((8192, 8), (2048, 4)),
    "norm_tiles_small": ((4, 4), (16, 16), (32, 16)),
    "norm_tiles_wide": ((1, 16),),
    "norm_chunked": ((4096, 16), (8192, 32)),
    "norm_chunked_from": 16384,
    # torch.compile only where it was the strongest baseline (H100 run of 2026-11-21), since
    # every compile costs seconds of the sweep's budget; Liger is cheap and always included
    "compile_families": ("cross_entropy.bwd", "layer_norm.bwd", "rms_norm.bwd"),
    "compile_max_n": 1024,
}
SMOKE_KNOBS: dict[str, Any] = {
    "ce_blocks": (16, 32),
    "ce_warps": (1,),
    "ce_per_thread": (0, 32),
    "ce_row_warps": (1,),
    "ce_chunked": ((16, 1),),
    "ce_split_bwd": ((32, 1),),
    "norm_tiles_small": ((2, 1),),
    "norm_tiles_wide": ((1, 2),),
    "norm_chunked": ((32, 1),),
    "norm_chunked_from": 64,
    "compile_families": (),
    "compile_max_n": 0,
}
GPU_PLAN = (
    ("cross_entropy.bwd", ({"M": 16384, "V": 32000}, {"M": 8192, "V": 128256}, {"M": 4096, "V": 262144})),
    ("cross_entropy.fwd_bwd", ({"M": 16384, "V": 32000}, {"M": 8192, "V": 128256}, {"M": 4096, "V": 262144})),
    ("layer_norm.bwd", ({"M": 4096, "N": 16384}, {"M": 32768, "N": 256})),
    ("rms_norm.bwd", ({"M": 4096, "N": 16384}, {"M": 32768, "N": 256})),
)  # fmt: skip
SMOKE_PLAN = (
    ("cross_entropy.bwd", ({"M": 3, "V": 37},)),
    ("cross_entropy.fwd_bwd", ({"M": 5, "V": 37},)),
    ("layer_norm.bwd", ({"M": 5, "N": 70},)),
    ("rms_norm.bwd", ({"M": 5, "N": 70},)),
)


def _build(family, shape, dtype, device, generator, knobs) -> Case:
    if family == "cross_entropy.bwd":
        return _ce_bwd_case(shape, dtype, device, generator, knobs)
    if family == "cross_entropy.fwd_bwd":
        return _ce_fwd_bwd_case(shape, dtype, device, generator, knobs)
    return _norm_bwd_case(family, shape, dtype, device, generator, knobs)


def _clone(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _verify(case: Case, contender: Contender) -> dict[str, Any]:
    inputs = _clone(case.inputs) if contender.clone_inputs else case.inputs
    try:
        error = case.check(contender.run(*inputs))
    except Exception as exc:  # a contender that crashes is reported, never timed
        return {"verified": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"verified": error <= 1.0, "error_vs_tolerance": error}


def _run_case(case: Case, *, max_time_s: float, smoke: bool, allow_compile: bool) -> dict[str, Any]:
    from warpforge.harness.timing import measure_interleaved

    rows: list[dict[str, Any]] = []
    timed: dict[str, Callable[..., Any]] = {}
    for c in case.contenders:
        row: dict[str, Any] = {"contender": c.name, "config": c.config, "scope": c.scope}
        rows.append(row)
        if c.run is None:
            row["skipped"] = "unavailable"
            continue
        if c.needs_compile and not allow_compile:
            row["skipped"] = "time budget (compiling baselines skipped late in the run)"
            continue
        row.update(_verify(case, c))
        if row["verified"]:
            timed[c.name] = c.run
    if timed:
        options = {"min_samples": 2, "warmup": 1} if smoke else {"min_samples": 10}
        measured = measure_interleaved(timed, [case.inputs], max_time_s=max_time_s, **options)
        by_name = {c.name: c for c in case.contenders}
        default = measured.get(case.contenders[0].name)  # the op's default comes first
        for row in rows:
            m = measured.get(row["contender"])
            if m is None:
                continue
            c = by_name[row["contender"]]
            moved = c.bytes_moved if c.bytes_moved is not None else case.bytes_moved
            row.update(
                median_us=m.median_s * 1e6, ci95_us=[m.ci_low_s * 1e6, m.ci_high_s * 1e6],
                samples=m.samples, bytes_moved=moved, gb_per_s=moved / m.median_s / 1e9,
                speedup_vs_default=(default.median_s / m.median_s) if default else None,
                clock=m.clock,
            )  # fmt: skip
    return {
        "family": case.family,
        "shape": case.shape,
        "dtype": str(case.dtype).removeprefix("torch."),
        "bytes_moved": case.bytes_moved,
        "contenders": rows,
    }


def _copy_bytes_per_s(device: torch.device, smoke: bool) -> float:
    from warpforge.harness.timing import measure

    n = (2**20 if smoke else 2**30) // 4
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    m = measure(lambda s, d: d.copy_(s), [(src, dst)], cold=False, max_time_s=0.5, min_samples=5)
    return 2.0 * n * 4 / m.median_s


def _table(report: dict[str, Any]):
    from rich.table import Table

    copy = report["copy_bytes_per_s"]
    table = Table(title=f"ops backward sweep - copy {copy / 1e9:,.0f} GB/s")
    for column in ("case", "contender", "ok", "us", "GB/s", "% copy", "vs default"):
        table.add_column(column, justify="left" if column in ("case", "contender") else "right")
    for case in report["cases"]:
        dims = " ".join(f"{k}={v}" for k, v in case["shape"].items())
        label = f"{case['family']} {dims} {case['dtype']}"
        if "skipped" in case:
            table.add_row(label, f"skipped: {case['skipped']}", "", "", "", "", "")
            continue
        ordered = sorted(case["contenders"], key=lambda r: r.get("median_us", float("inf")))
        for row in ordered:
            ok = "-" if "verified" not in row else ("yes" if row["verified"] else "NO")
            if "median_us" in row:
                name = row["contender"] + (" [fwd+bwd]" if row["scope"] != "kernel" else "")
                table.add_row(
                    label, name, ok, f"{row['median_us']:,.1f}", f"{row['gb_per_s']:,.0f}",
                    f"{100 * row['gb_per_s'] * 1e9 / copy:.0f}%",
                    f"{row['speedup_vs_default']:.2f}x" if row["speedup_vs_default"] else "",
                )  # fmt: skip
            else:
                why = row.get("skipped") or row.get("error") or "not verified"
                table.add_row(label, f"{row['contender']} ({why})", ok, "", "", "", "")
            label = ""
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON and table")
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes")
    parser.add_argument("--only", default="", help="run only families containing this text")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile baselines")
    parser.add_argument("--max-time", type=float, default=1.0, help="timing budget per case (s)")
    args = parser.parse_args(argv)

    from rich.console import Console

    from warpforge.environment import environment_fingerprint

    started = time.perf_counter()
    console = Console(record=True, width=150)
    device = torch.device("cpu" if args.smoke else "cuda")
    if not args.smoke and not torch.cuda.is_available():
        parser.error("no CUDA device: run on the GPU machine, or pass --smoke on a CPU")
    knobs = dict(SMOKE_KNOBS if args.smoke else GPU_KNOBS)
    knobs["compile"] = not (args.smoke or args.no_compile)
    knobs["liger"] = not args.smoke
    plan = SMOKE_PLAN if args.smoke else GPU_PLAN
    dtypes = (torch.float32,) if args.smoke else (torch.bfloat16, torch.float32)
    max_time = 0.05 if args.smoke else args.max_time
    report: dict[str, Any] = {
        "script": "benchmarks/ops_bwd_sweep.py",
        "smoke": args.smoke,
        "environment_fingerprint": environment_fingerprint(),
        "copy_bytes_per_s": _copy_bytes_per_s(device, args.smoke),
        "timing": "warpforge.harness.timing.measure_interleaved (CUDA events, L2 flushed, "
        "contenders interleaved)",
        "tolerance": "max|out - ref64| <= atol * max|ref64| + rtol * |ref64|; "
        "fp32 (1e-5, 1e-4), 16-bit (4e-3, 1.6e-2)",
        "cases": [],
    }
    for family, shapes in plan:
        if args.only not in family:
            continue
        for shape in shapes:
            for dtype in dtypes:
                elapsed = time.perf_counter() - started
                entry = {
                    "family": family,
                    "shape": shape,
                    "dtype": str(dtype).removeprefix("torch."),
                }
                if not args.smoke and elapsed > GPU_BUDGET_S:
                    report["cases"].append({**entry, "skipped": "time budget"})
                    continue
                generator = torch.Generator(device=device).manual_seed(len(report["cases"]))
                case = None
                try:
                    case = _build(family, shape, dtype, device, generator, knobs)
                    result = _run_case(
                        case, max_time_s=max_time, smoke=args.smoke,
                        allow_compile=args.smoke or elapsed < 0.75 * GPU_BUDGET_S,
                    )  # fmt: skip
                except torch.cuda.OutOfMemoryError as exc:
                    result = {**entry, "skipped": f"out of memory: {exc}"[:300]}
                report["cases"].append(result)
                console.print(
                    f"[dim]{time.perf_counter() - started:6.1f}s[/dim] {family} {shape} {entry['dtype']}"
                )
                del case
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    report["wall_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ops_bwd_sweep.json").write_text(json.dumps(report, indent=1, default=str))
    console.print(_table(report))
    (args.out / "ops_bwd_sweep.txt").write_text(console.export_text())
    failed = [
        (c["family"], c["shape"], c["dtype"], r["contender"])
        for c in report["cases"]
        for r in c.get("contenders", ())
        if r.get("verified") is False and not r["contender"].startswith(("liger", "torch"))
    ]
    if failed:
        console.print(f"[red]{len(failed)} warpforge contenders failed verification: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
