"""The split-row norm forward (``norm_fwd_flags_kernel``, ``norm_fwd_lag_kernel``) at candidate
launches, against the chunked kernel (``_norm_forward``) and the op's default (``_forward``).

    PYTHONPATH=src python benchmarks/norm_split_fwd.py spills [bf16|fp32 [PREFIX]]  # CPU: sm_90
    PYTHONPATH=src python benchmarks/norm_split_fwd.py sweep OUT_PREFIX    # GPU: OUT_PREFIX.txt/.json
    PYTHONPATH=src python benchmarks/norm_split_fwd.py sweep OUT_PREFIX bf16:8192x131072,...
    PYTHONPATH=src python benchmarks/norm_split_fwd.py sweep OUT_PREFIX SHAPES "NAME,NAME"
    PYTHONPATH=src python benchmarks/norm_split_fwd.py sweep16k OUT.json   # GPU: 4096 x 16384

The sweep times each op (RMSNorm, add+RMSNorm, LayerNorm) at each shape of ``SHAPES`` with the
candidates named there, CUDA-event medians of ``triton.testing.do_bench``, and reports the
fraction of copy (bytes read once and written once, against ``copy_`` of the same tensor
measured in the same run) and the largest |y - chunked y|.
Given shapes (``DTYPE:MxN``, comma-separated), the sweep times those instead, each with every
candidate its dtype can run (bf16: all; fp32: the unpacked ones), or with the candidates named
after them, adding LayerNorm without a bias.
``sweep16k`` times LayerNorm at 4096 x 16384 (bfloat16), where the default is the
one-program-a-row kernel (``norm_fwd_rows_kernel``, tuned), against split launches that fit
their registers (``LAUNCHES_16K``; sm_90 ptxas of Triton 3.6, no spill), each output checked
against the default's.
"""

from __future__ import annotations

import json
import sys

import torch

from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan

CANDIDATES = {
    # name: (block, warps, programs an SM, prefetch, lag_depth, hold_weight, packed)
    "flags 8192/8w x2 pf": (8192, 8, 2, True, 0, False, False),
    "flags 8192/8w x2": (8192, 8, 2, False, 0, False, False),
    "flags 8192/8w x4": (8192, 8, 4, False, 0, False, False),
    "lag1 8192/8w x2": (8192, 8, 2, False, 1, False, False),
    "lag1 8192/8w x2 pf": (8192, 8, 2, True, 1, False, False),  # the shipped bf16 launch
    "lag1 8192/8w x2 pk": (8192, 8, 2, False, 1, False, True),
    "lag1 8192/8w x2 pk hold": (8192, 8, 2, False, 1, True, True),
    "lag2 8192/8w x2 pk": (8192, 8, 2, False, 2, False, True),
    "lag2 8192/8w x2 pk hold": (8192, 8, 2, False, 2, True, True),
    "lag1 8192/8w x4 pk": (8192, 8, 4, False, 1, False, True),
    "lag2 4096/4w x4 pk hold": (4096, 4, 4, False, 2, True, True),
    "lag1 4096/4w x8 pk": (4096, 4, 8, False, 1, False, True),
    "lag1 4096/4w x4": (4096, 4, 4, False, 1, False, False),
    "lag1 4096/4w x8": (4096, 4, 8, False, 1, False, False),
    # LayerNorm's chunk moments in one reduction (the lag kernel's ONE_PASS): names ending " 1p"
    "lag1 8192/8w x2 pf 1p": (8192, 8, 2, True, 1, False, False),
    "lag1 8192/8w x2 pk 1p": (8192, 8, 2, False, 1, False, True),
    "lag2 8192/8w x2 pk 1p": (8192, 8, 2, False, 2, False, True),
    "lag1 4096/4w x4 1p": (4096, 4, 4, False, 1, False, False),
    # one 16-warp program an SM over twice the columns (the same 32 a thread): half the
    # programs a row meets (the H200's bf16 softmax backward ran 15% faster that way)
    "lag1 16384/16w x1 pf": (16384, 16, 1, True, 1, False, False),
    "lag1 16384/16w x1 pk 1p": (16384, 16, 1, False, 1, False, True),
    "flags 16384/16w x1 pf": (16384, 16, 1, True, 0, False, False),
}
REREAD_CANDIDATES = {
    # name: (block, warps, programs an SM, prefetch, reread lag, hold w, hold b, one-pass
    # moments, L2 hints): norm_fwd_reread_kernel (no residual), each chunk read again for y
    # LAG steps later; "hold": w and b held, "holdw": w only, " 1p": LayerNorm's one-pass moments
    "reread1 8192/8w x2 pf hold": (8192, 8, 2, True, 1, True, True, False, True),
    "reread2 8192/8w x2 pf hold": (8192, 8, 2, True, 2, True, True, False, True),
    "reread2 8192/8w x2 pf hold nohint": (8192, 8, 2, True, 2, True, True, False, False),
    "reread2 8192/8w x2 pf": (8192, 8, 2, True, 2, False, False, False, True),
    "reread2 8192/8w x2 hold": (8192, 8, 2, False, 2, True, True, False, True),
    "reread3 8192/8w x2 pf hold": (8192, 8, 2, True, 3, True, True, False, True),
    "reread4 8192/8w x2 pf hold": (8192, 8, 2, True, 4, True, True, False, True),
    "reread2 8192/8w x4 pf": (8192, 8, 4, True, 2, False, False, False, True),
    "reread2 4096/4w x8 pf": (4096, 4, 8, True, 2, False, False, False, True),
    "reread2 4096/8w x4 pf hold": (4096, 8, 4, True, 2, True, True, False, True),
    "reread2 16384/16w x1 pf hold": (16384, 16, 1, True, 2, True, True, False, True),
    # 16 elements a thread (float32 holds three chunks and w in 128 registers)
    "reread2 4096/8w x2 pf hold": (4096, 8, 2, True, 2, True, True, False, True),
    "reread3 4096/8w x2 pf hold": (4096, 8, 2, True, 3, True, True, False, True),
    "reread2 8192/16w x1 pf hold": (8192, 16, 1, True, 2, True, True, False, True),
    # LayerNorm: the bias not held (bf16 spilled holding both), one-pass moments
    "reread2 8192/8w x2 pf holdw": (8192, 8, 2, True, 2, True, False, False, True),
    "reread2 8192/8w x2 pf holdw 1p": (8192, 8, 2, True, 2, True, False, True, True),
    "reread2 8192/8w x2 pf 1p": (8192, 8, 2, True, 2, False, False, True, True),
    "reread3 8192/8w x2 pf holdw": (8192, 8, 2, True, 3, True, False, False, True),
    "reread2 4096/8w x4 pf holdw 1p": (4096, 8, 4, True, 2, True, False, True, True),
    "reread2 16384/16w x1 pf holdw": (16384, 16, 1, True, 2, True, False, False, True),
    "reread2 4096/8w x2 pf holdw": (4096, 8, 2, True, 2, True, False, False, True),
    "reread2 4096/8w x2 pf holdw 1p": (4096, 8, 2, True, 2, True, False, True, True),
}
ONE_PASS_SUFFIX = " 1p"
OLD_SUFFIX = " old"
"""A candidate name with this suffix (given on the command line): the lag kernel without its
LEAN arithmetic, offset elision and unmasked whole chunks (``lean=False``)."""
BF16_ALL = [
    name
    for name in CANDIDATES
    if name not in ("flags 8192/8w x2", "lag1 4096/4w x8", "lag1 8192/8w x2 pf")
]
BF16_TOP = ["flags 8192/8w x2 pf", "lag1 8192/8w x2 pk", "lag2 8192/8w x2 pk",
            "lag2 8192/8w x2 pk hold"]  # fmt: skip
FP32 = ["flags 8192/8w x2 pf", "flags 8192/8w x2", "lag1 8192/8w x2", "lag1 4096/4w x4",
        "lag1 4096/4w x8"]  # fmt: skip
FP32_TOP = ["flags 8192/8w x2 pf", "flags 8192/8w x2", "lag1 4096/4w x4"]
SHAPES = [  # (dtype, M, N, candidates)
    (torch.bfloat16, 8192, 262144, BF16_ALL),
    (torch.float32, 8192, 262144, FP32),
    (torch.bfloat16, 8192, 65536, BF16_TOP),
    (torch.float32, 8192, 65536, FP32_TOP),
    (torch.bfloat16, 4096, 32768, BF16_TOP),
]
OPS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}
SWEEP_ONLY_OPS = {"layer_nobias": (True, False)}
"""Ops the shape sweep also times when its candidates are named: LayerNorm without a bias
(whether reading the bias every row is what LayerNorm costs over RMSNorm)."""
# (block, warps, programs an SM, prefetch) at 4096 x 16384 bf16 with no spill on sm_90 (Triton
# 3.6: 128 registers for the first three, 63-64 for the others; 8192/8w x2 and the prefetching
# 16-elements-a-thread launches at 64 registers spill 56-344 bytes in LayerNorm)
LAUNCHES_16K = ((4096, 4, 4, True), (2048, 2, 8, True), (1024, 1, 16, True), (2048, 8, 4, True),
                (2048, 4, 8, False), (1024, 2, 16, False), (4096, 8, 4, False))  # fmt: skip


def spills(dt: str, only: str = "") -> None:
    """Registers, stack and SASS instructions of every candidate (or those whose name starts
    with ``only``) in sm_90 compiles."""
    sys.path.insert(0, "benchmarks")
    import split_launch_spills as sls

    import warpforge.ops._rows as rows
    import warpforge.ops._split_rows as split_rows
    from warpforge.ops._kernels.norm_split import (
        norm_fwd_flags_kernel,
        norm_fwd_lag_kernel,
        norm_fwd_reread_kernel,
    )

    rows.device_capabilities = split_rows.device_capabilities = lambda device: sls.H100
    types = {a: "*" + dt for a in ("X", "R", "W", "B", "Y", "H")}
    types.update(MEAN="*fp32", RSTD="*fp32", WORDS="*i64", eps="fp32", offset="fp32")
    for name, (block, warps, per_sm, prefetch, lag, hold, packed) in CANDIDATES.items():
        if (packed and dt == "fp32") or not name.startswith(only):
            continue
        plan = split_row_plan(8192, 262144, "cuda", block=block, num_warps=warps,
                              programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
        for op, (center, residual) in OPS.items():
            flags = dict(CENTER=center, HAS_RESIDUAL=residual, HAS_WEIGHT=True,
                         HAS_BIAS=center, BLOCK_N=block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0)  # fmt: skip
            variants = [("", flags)]
            if lag:
                kernel = norm_fwd_lag_kernel
                flags.update(
                    DEPTH=lag, HOLD_W=hold, PACKED=packed, ONE_PASS=name.endswith(ONE_PASS_SUFFIX)
                )
                if dt != "fp32":  # as the op launches 2-byte rows of whole chunks, offset 0
                    variants = [(OLD_SUFFIX, flags),
                                ("", dict(flags, LEAN=True, HAS_OFFSET=False, EVEN=True))]  # fmt: skip
            else:
                kernel = norm_fwd_flags_kernel
                flags.update(PREFETCH=prefetch)
            for suffix, variant in variants:
                # N and M as a launch specialises them (multiples of 16): 16-byte vectors
                reg, stack, count = sls.resources(
                    kernel, types, variant, warps,
                    aligned=("stride_x", "stride_r", "stride_y", "stride_h", "N", "M"),
                    maxnreg=plan.max_registers,
                )  # fmt: skip
                print(f"{dt} {op:8s} {name + suffix:28s}: {reg} registers, {stack} stack bytes "
                      f"(cap {plan.max_registers}), {count} instructions", flush=True)  # fmt: skip
    reread_types = {a: "*" + dt for a in ("X", "W", "B", "Y")}
    reread_types.update(MEAN="*fp32", RSTD="*fp32", WORDS="*i64", eps="fp32", offset="fp32")
    for name, spec in REREAD_CANDIDATES.items():
        block, warps, per_sm, prefetch, lag, hold, hold_b, one_pass, hints = spec
        if not name.startswith(only):
            continue
        plan = split_row_plan(8192, 262144, "cuda", block=block, num_warps=warps,
                              programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
        for op in ("rms", "layer"):
            center = op == "layer"
            flags = dict(CENTER=center, HAS_WEIGHT=True, HAS_BIAS=center, BLOCK_N=block,
                         CHUNKS_POW2=plan.chunks_pow2, STAGE=0, LAG=lag, PREFETCH=prefetch,
                         HOLD_W=hold, HOLD_B=hold_b, ONE_PASS=one_pass and center,
                         LEAN=dt != "fp32", HAS_OFFSET=False, EVEN=True,
                         KEEP="evict_last" if hints else "",
                         DROP="evict_first" if hints else "")  # fmt: skip
            reg, stack, count = sls.resources(
                norm_fwd_reread_kernel, reread_types, flags, warps,
                aligned=("stride_x", "stride_y", "N", "M"), maxnreg=plan.max_registers,
            )  # fmt: skip
            print(f"{dt} {op:8s} {name:28s}: {reg} registers, {stack} stack bytes "
                  f"(cap {plan.max_registers}), {count} instructions", flush=True)  # fmt: skip


def _sweep_shape(dtype, M, N, names, lines, rows, ops=OPS) -> None:
    import triton.testing

    x = torch.randn(M, N, device="cuda", dtype=dtype)
    r = torch.randn(M, N, device="cuda", dtype=dtype)
    w = torch.randn(N, device="cuda", dtype=dtype)
    b = torch.randn(N, device="cuda", dtype=dtype)
    copy_ms = triton.testing.do_bench(lambda: r.copy_(x), warmup=20, rep=100)
    copy_bps = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    dt = str(dtype)[6:]
    lines.append(f"{dt} {M}x{N} copy {copy_ms * 1e3:.1f} us = {copy_bps / 1e12:.3f} TB/s")
    for op, (center, residual) in ops.items():
        rr = r if residual else None
        bb = b if center and op != "layer_nobias" else None
        moved = x.numel() * x.element_size() * (4 if residual else 2)
        ref = norm._norm_forward(x, w, bb, rr, 1e-6, 0.0, center)
        cands = [("chunked", lambda c=center, rr=rr, bb=bb: norm._norm_forward(
            x, w, bb, rr, 1e-6, 0.0, c)),
                 ("default", lambda c=center, rr=rr, bb=bb: norm._forward(
            x, w, bb, rr, 1e-6, 0.0, c))]  # fmt: skip
        for name in names:
            if name in REREAD_CANDIDATES:
                if residual:
                    continue
                block, warps, per_sm, prefetch, lag, hold, hold_b, one_pass, hints = (
                    REREAD_CANDIDATES[name]
                )
                plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                      programs_per_sm=per_sm, prefetch=prefetch,
                                      flag_words=True, reread_lag=lag)  # fmt: skip
                if plan is None or plan.chunks_pow2 > 64:
                    continue
                cands.append((name, lambda p=plan, c=center, bb=bb, hold=hold, hold_b=hold_b,
                              one_pass=one_pass, hints=hints: norm.split_norm_forward(
                                  x, w, bb, None, 1e-6, 0.0, c, p, hold_weight=hold,
                                  hold_bias=hold_b, one_pass=one_pass, l2_hints=hints)))  # fmt: skip
                continue
            old = name.endswith(OLD_SUFFIX)  # the lag kernel without its LEAN arithmetic
            base = name.removesuffix(OLD_SUFFIX)
            block, warps, per_sm, prefetch, lag, hold, packed = CANDIDATES[base]
            one_pass = base.endswith(ONE_PASS_SUFFIX)
            if one_pass and not center:
                continue  # RMSNorm has no mean: the same kernel as without
            plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            if plan is None or plan.chunks_pow2 > 64:
                continue
            cands.append((name, lambda p=plan, c=center, rr=rr, bb=bb, lag=lag, hold=hold,
                          packed=packed, one_pass=one_pass, lean=False if old else None:
                          norm.split_norm_forward(
                              x, w, bb, rr, 1e-6, 0.0, c, p, lag_depth=lag, hold_weight=hold,
                              packed=packed, one_pass=one_pass, lean=lean)))  # fmt: skip
        for name, fn in cands:
            try:
                got = fn()
                err = max((g.float() - e.float()).abs().max().item()
                          for g, e in zip(got, ref, strict=True) if g.numel())  # fmt: skip
                del got
                ms = triton.testing.do_bench(fn, warmup=20, rep=100)
            except Exception as exc:  # a launch that fails to compile or run: report, go on
                line = f"{dt} {M}x{N} {op:8s} {name:24s} FAILED {type(exc).__name__}: {exc}"[:300]
                print(line, flush=True)
                lines.append(line)
                continue
            frac = (moved / (ms * 1e-3)) / copy_bps
            line = (f"{dt} {M}x{N} {op:8s} {name:24s} {ms * 1e3:9.1f} us "
                    f"{frac * 100:5.1f}% of copy, max|out-chunked| {err:.3g}")  # fmt: skip
            print(line, flush=True)
            lines.append(line)
            rows.append(dict(dtype=dt, M=M, N=N, op=op, launch=name, us=ms * 1e3,
                             fraction_of_copy=frac, copy_tbps=copy_bps / 1e12,
                             max_abs_diff_vs_chunked=err))  # fmt: skip
        del ref


def parse_shapes(text: str) -> list[tuple[torch.dtype, int, int, list[str]]]:
    """``bf16:8192x131072,fp32:8192x65536`` as ``SHAPES`` entries, every candidate the dtype
    runs (packed launches move 2-byte elements only)."""
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    shapes = []
    for item in text.split(","):
        name, _, size = item.partition(":")
        M, _, N = size.partition("x")
        if name not in dtypes or not (M.isdigit() and N.isdigit()):
            raise SystemExit(f"shapes: expected DTYPE:MxN (bf16, fp16, fp32), got {item!r}")
        dtype = dtypes[name]
        names = [c for c, spec in CANDIDATES.items() if dtype.itemsize == 2 or not spec[6]]
        names += list(REREAD_CANDIDATES)
        shapes.append((dtype, int(M), int(N), names))
    return shapes


def sweep(prefix: str, shapes: list | None = None, names: list[str] | None = None) -> None:
    """Every op at each shape with its candidates, or only the ``names`` given (then LayerNorm
    without a bias too, ``SWEEP_ONLY_OPS``)."""
    import triton

    from warpforge.environment import environment_fingerprint

    lines = [
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    ]
    environment = environment_fingerprint()  # device, versions, commit, date in the report
    rows: list[dict] = []
    for dtype, M, N, candidates in shapes or SHAPES:
        if names:
            _sweep_shape(dtype, M, N, names, lines, rows, OPS | SWEEP_ONLY_OPS)
        else:
            _sweep_shape(dtype, M, N, candidates, lines, rows)
        torch.cuda.empty_cache()
        with open(prefix + ".txt", "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(prefix + ".json", "w") as f:
            json.dump(
                {"environment": environment, "device": lines[0], "candidates": CANDIDATES,
                 "reread_candidates": REREAD_CANDIDATES, "rows": rows},
                f,
                indent=1,
            )  # fmt: skip


def sweep16k(out: str) -> None:
    """LayerNorm forward at 4096 x 16384 bf16: the default launch (timed first and
    again last) against ``LAUNCHES_16K``; JSON rows with us and the fraction of copy."""
    import json

    import triton.testing

    M, N, dtype = 4096, 16384, torch.bfloat16
    torch.manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=dtype) * 2 + 1
    w = torch.randn(N, device="cuda", dtype=dtype)
    b = torch.randn(N, device="cuda", dtype=dtype)
    y = torch.empty_like(x)
    copy_ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=50, rep=200,
                                      return_mode="median")  # fmt: skip
    copy_bps = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    report = {"device": torch.cuda.get_device_name(), "copy_bytes_per_s": copy_bps, "rows": []}
    for op in ("layer",):
        center = op == "layer"
        bb = b if center else None
        moved = 2 * x.numel() * x.element_size()
        ref = norm._norm_forward(x, w, bb, None, 1e-5, 0.0, center)
        default = lambda c=center, bb=bb: norm._norm_forward(x, w, bb, None, 1e-5, 0.0, c)  # noqa: E731
        cands = [("default", default)]
        for block, warps, per_sm, prefetch in LAUNCHES_16K:
            plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            cands.append((f"split {block}/{warps}w x{per_sm} pf={int(prefetch)}",
                          lambda p=plan, c=center, bb=bb: norm.split_norm_forward(
                              x, w, bb, None, 1e-5, 0.0, c, p)))  # fmt: skip
        cands.append(("default (again)", default))
        for name, fn in cands:
            got = fn()
            errs = [((g.float() - r.float()).abs().max() / r.float().abs().max()).item()
                    for g, r in zip(got, ref, strict=True) if r.numel()]  # fmt: skip
            ms = triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")
            row = {"op": op, "contender": name, "us": ms * 1e3, "max_rel_diff": errs,
                   "fraction_of_copy": moved / (ms * 1e-3) / copy_bps}  # fmt: skip
            print(json.dumps(row), flush=True)
            report["rows"].append(row)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    for row in report["rows"]:
        print(
            f"{row['op']:6s} {row['contender']:28s} {row['us']:8.1f} us "
            f"{row['fraction_of_copy']:6.1%} diff {max(row['max_rel_diff']):.2g}"
        )


if __name__ == "__main__":
    if sys.argv[1] == "spills":
        spills(*sys.argv[2:4]) if len(sys.argv) > 2 else spills("bf16")
    elif sys.argv[1] == "sweep16k":
        sweep16k(sys.argv[2])
    else:
        sweep(
            sys.argv[2],
            parse_shapes(sys.argv[3]) if len(sys.argv) > 3 else None,
            sys.argv[4].split(",") if len(sys.argv) > 4 else None,
        )
