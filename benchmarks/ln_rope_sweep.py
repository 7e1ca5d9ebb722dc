"""GPU micro-sweep (issue 4): LayerNorm backward launch knobs *with* the bias gradient, and RoPE
launch shapes. Kernel time only (triton.testing.do_bench, L2 flushed), every contender checked
against a float64 reference first. Writes OUT/ln_rope_sweep.json as it goes.

    PYTHONPATH=src [ORIG_KERNELS=old_norm.py] python benchmarks/ln_rope_sweep.py OUT [BUDGET_S] [all|rope|layer_norm]

The committed run: benchmarks/results/lnbwd-rope-sweep-2026-11-22-h100.json (commit 11bcbd4,
ORIG_KERNELS = _kernels/norm.py of d23ab05; its rope launches are (BLOCK_HQ, BLOCK_HK, warps) of
that commit's unpaired one-launch kernel, ``None`` being its default (32, 8, 4)).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton.testing

OUT = sys.argv[1]
BUDGET = float(sys.argv[2]) if len(sys.argv) > 2 else 150.0
START = time.perf_counter()
ONLY = sys.argv[3] if len(sys.argv) > 3 else "all"  # "rope", "layer_norm" or "all"
REP_MS = 40 if ONLY == "all" else 120
results: list[dict] = []


def save() -> None:
    with open(f"{OUT}/ln_rope_sweep.json", "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=REP_MS) * 1e3  # us


def ln_case(M: int, N: int, dtype: torch.dtype, budget: float) -> None:
    from warpforge.ops import norm

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", generator=g).to(dtype)
    dy = torch.randn(M, N, device="cuda", generator=g).to(dtype)
    w = torch.randn(N, device="cuda", generator=g).to(dtype)
    xf = x.double()
    mean = xf.mean(-1)
    rstd = torch.rsqrt((xf - mean[:, None]).square().mean(-1) + 1e-5)
    xhat = (xf - mean[:, None]) * rstd[:, None]
    wdy = dy.double() * w.double()
    ref_dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True) - wdy.mean(-1, keepdim=True)) * rstd[
        :, None
    ]
    ref_dw = (dy.double() * xhat).sum(0)
    ref_db = dy.double().sum(0)
    mean, rstd = mean.float(), rstd.float()
    nbytes = 3 * M * N * x.element_size()

    def run(launch=None, knobs=None, prefetch=None):
        return norm._norm_backward(
            dy,
            x,
            w,
            mean,
            rstd,
            None,
            0.0,
            True,
            True,
            True,
            launch=launch,
            knobs=knobs,
            prefetch=prefetch,
        )

    def record(name, launch=None, knobs=None, prefetch=None):
        try:
            dx, dw, db = run(launch, knobs, prefetch)
            err = max(
                ((dx.double() - ref_dx).abs().max() / ref_dx.abs().max()).item(),
                ((dw.double() - ref_dw).abs().max() / ref_dw.abs().max()).item(),
                ((db.double() - ref_db).abs().max() / ref_db.abs().max()).item(),
            )
            us = bench(lambda: run(launch, knobs, prefetch))
            row = {
                "case": f"layer_norm.bwd M={M} N={N} {dtype}",
                "contender": name,
                "us": us,
                "tb_s": nbytes / us / 1e6,
                "rel_err": err,
            }
        except Exception as exc:
            row = {
                "case": f"layer_norm.bwd M={M} N={N} {dtype}",
                "contender": name,
                "error": repr(exc)[:300],
            }
        results.append(row)
        print(row, flush=True)
        save()

    record("op default (tuned)")
    t0 = time.perf_counter()
    first = len(results)
    warps_set = (16, 32) if N >= 16384 else (8, 16, 4, 32)
    configs = [
        (pre, reload, warps, rows, pps)
        for pre in (None, True)
        for rows in ((1,) if N >= 16384 else (1, 2))
        for warps in warps_set
        for reload in (True, False)
        for pps in (0, 1, 2, 3, 4)
        if pps * warps <= 64
        and (N < 16384 or pps <= 1)
        and rows * N // (32 * warps) <= 32
        and rows * N >= 64 * warps
    ]
    for pre, reload, warps, rows, pps in configs:
        if time.perf_counter() - t0 > budget:
            break
        launch = _launch(M, N, dtype, rows, warps)
        knobs = norm.BwdKnobs(reload, pps)
        record(f"ROWS={rows} warps={warps} reload={reload} P={pps} pre={pre}", launch, knobs, pre)
    # the best few again with another kernel source, when $ORIG_KERNELS names one (a copy of
    # _kernels/norm.py from another commit): the same launches, two versions of the kernel
    if not os.environ.get("ORIG_KERNELS"):
        return
    best = sorted((r for r in results[first:] if "us" in r), key=lambda r: r["us"])[:4]
    other = _swap_kernels()
    try:
        for r in best:
            cfg = dict(kv.split("=") for kv in r["contender"].split())
            launch = _launch(M, N, dtype, int(cfg["ROWS"]), int(cfg["warps"]))
            knobs = norm.BwdKnobs(cfg["reload"] == "True", int(cfg["P"]))
            pre = None if cfg["pre"] == "None" else True
            record(f"{r['contender']} [{other}]", launch, knobs, pre)
    finally:
        _swap_kernels()


def _launch(M, N, dtype, rows, warps):
    from warpforge.ops._rows import row_launch_shape

    return row_launch_shape(
        M,
        N,
        dtype,
        "cuda",
        block_n=N,
        rows_per_program=rows,
        num_warps=warps,
        reread_operands=2,
        resident_warps=32,
    )


_SWAPPED: list = []


def _swap_kernels() -> str:
    """Swap ``warpforge.ops._kernels.norm`` with the file ``$ORIG_KERNELS`` and back; returns
    the name of the source now in use."""
    import importlib.util
    import os

    import warpforge.ops._kernels as package

    if _SWAPPED:
        package.norm = _SWAPPED.pop()
        return "current"
    spec = importlib.util.spec_from_file_location("orig_norm_kernels", os.environ["ORIG_KERNELS"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _SWAPPED.append(package.norm)
    package.norm = module
    return "original"


def rope_case(shape: dict, dtype: torch.dtype, backward: bool) -> None:
    import importlib

    from warpforge.ops import rope as _  # noqa: F401

    rope_module = importlib.import_module("warpforge.ops.rope")
    g = torch.Generator(device="cuda").manual_seed(1)
    b, s, hq, hk, d = (shape[k] for k in ("batch", "seq", "q_heads", "k_heads", "head_dim"))
    q = torch.randn(b, s, hq, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(b, s, hk, d, device="cuda", generator=g).to(dtype)
    ang = torch.rand(s, d // 2, device="cuda", generator=g) * 10
    cos = torch.cat([ang, ang], -1).cos().to(dtype)
    sin = torch.cat([ang, ang], -1).sin().to(dtype)
    nbytes = (2 * b * s * (hq + hk) * d + 2 * s * d) * q.element_size()
    want = (
        rope_module._reference_rotate(q, cos, sin, False, backward),
        rope_module._reference_rotate(k, cos, sin, False, backward),
    )
    variants = [
        None,
        (32, 8, 4, False),
        (64, 8, 8, False),
        (32, 8, 4, True),
        (64, 8, 8, True),
        (64, 8, 4, True),
        (16, 8, 4, True),
    ]
    liger = None
    try:
        from liger_kernel.ops.rope import LigerRopeFunction

        def liger():
            return LigerRopeFunction.apply(
                q.transpose(1, 2), k.transpose(1, 2), cos[None], sin[None]
            )
    except Exception as exc:
        print("no liger", exc)
    case = f"rope.{'bwd' if backward else 'fwd'} {shape} {dtype}"
    for v in variants:
        fn = lambda v=v: rope_module._rotate(q, k, cos, sin, False, backward, launch=v)  # noqa: E731
        got = fn()
        err = max(
            (a.float() - w.float()).abs().max().item() for a, w in zip(got, want, strict=True)
        )
        us = bench(fn)
        row = {
            "case": case,
            "contender": str(v),
            "us": us,
            "tb_s": nbytes / us / 1e6,
            "abs_err": err,
        }
        results.append(row)
        print(row, flush=True)
    if liger is not None and not backward:
        us = bench(liger)
        results.append({"case": case, "contender": "liger", "us": us, "tb_s": nbytes / us / 1e6})
        print(results[-1], flush=True)
    save()


if __name__ == "__main__":
    from warpforge.ops.rope_problems import SHAPES

    for shape in SHAPES if ONLY in ("all", "rope") else ():
        for dtype in (torch.bfloat16, torch.float32):
            for backward in (False, True):
                rope_case(shape, dtype, backward)
    cases = [
        (4096, 16384, torch.bfloat16),
        (16384, 4096, torch.bfloat16),
        (4096, 16384, torch.float32),
        (16384, 4096, torch.float32),
    ]
    for i, (M, N, dt) in enumerate(cases if ONLY in ("all", "layer_norm") else ()):
        left = BUDGET - (time.perf_counter() - START)
        ln_case(M, N, dt, left / (len(cases) - i))
    print("wall", time.perf_counter() - START)
