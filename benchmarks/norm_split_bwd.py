"""The split-row norm backward of long rows (``norm_bwd_flags_kernel``) at candidate launches.

    PYTHONPATH=src python benchmarks/norm_split_bwd.py spills      # CPU: sm_90 registers/stack
    PYTHONPATH=src python benchmarks/norm_split_bwd.py sweep OUT   # GPU: kernel alone vs before

The sweep times each op's backward (RMSNorm, add+RMSNorm with dh, LayerNorm with dweight and
dbias) at 8192 x 262144 and 8192 x 65536 with the split launches against the kernels taken
without it (``WARPFORGE_NORM_BWD_SPLIT=0``: RMSNorm's chunked kernel, LayerNorm's counter-based
split kernel), CUDA-event medians of ``triton.testing.do_bench``, and reports the fraction of
copy (x and dy, and dh, read once, dx written once; the [N] vectors left out).
"""

from __future__ import annotations

import os
import sys

import torch

from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan

LAUNCHES = tuple(  # block, warps, programs an SM, prefetch (SWEEP_LAUNCHES: "4096/4/2/1 ...")
    tuple(int(v) for v in launch.split("/"))
    for launch in os.environ.get(
        "SWEEP_LAUNCHES", "4096/8/2/1 4096/8/2/0 8192/16/1/1 4096/4/2/1"
    ).split()
)  # 4096/8w x3 and 8192/8w x2 spill 240-780 bytes a thread (``spills``)
OPS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}


def spills() -> None:
    sys.path.insert(0, "benchmarks")
    import split_launch_spills as sls

    import warpforge.ops._rows as rows
    import warpforge.ops._split_rows as split_rows
    from warpforge.ops._kernels.norm_split_bwd import norm_bwd_flags_kernel

    rows.device_capabilities = split_rows.device_capabilities = lambda device: sls.H100
    for dt in ("bf16", "fp32"):
        types = {a: "*" + dt for a in ("DY", "X", "W", "DH", "DX")}
        types.update(MEAN="*fp32", RSTD="*fp32", DW_PARTIAL="*fp32", DB_PARTIAL="*fp32",
                     WORDS="*i64", offset="fp32")  # fmt: skip
        for block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(8192, 262144, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            for op, (center, residual) in OPS.items():
                flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=center, BLOCK_N=block,
                             CHUNKS_POW2=plan.chunks_pow2, STAGE=0, CENTER=center,
                             HAS_DH=residual, PREFETCH=prefetch, FLUSH=0)  # fmt: skip
                reg, stack = sls.usage(norm_bwd_flags_kernel, types, flags, warps,
                                       aligned=("stride_dy", "stride_x", "stride_dx",
                                                "stride_dh"),
                                       maxnreg=plan.max_registers)  # fmt: skip
                print(f"{dt} {op:8s} {block}/{warps}w x{per_sm} prefetch={prefetch}: "
                      f"{reg} registers, {stack} stack bytes (cap {plan.max_registers})",
                      flush=True)  # fmt: skip


def _before(dy, x, w, mean, rstd, dh, center):
    """The backward without the split kernel (what the ops took before it)."""
    os.environ[norm.NORM_BWD_SPLIT] = "0"
    try:
        if center:
            return norm.layer_norm_backward(dy, x, w, mean, rstd, True, True)
        dx, dw = norm.rms_norm_backward(dy, x, w, rstd, dh, 0.0, True)
        return dx, dw, None
    finally:
        del os.environ[norm.NORM_BWD_SPLIT]


def _sweep_shape(dtype: torch.dtype, M: int, N: int, lines: list[str]) -> None:
    import triton.testing

    x = torch.randn(M, N, device="cuda", dtype=dtype)
    dy = torch.randn(M, N, device="cuda", dtype=dtype)
    dh = torch.randn(M, N, device="cuda", dtype=dtype)
    w = torch.randn(N, device="cuda", dtype=dtype)
    x32 = x.float()
    mean = x32.mean(-1)
    rstd = torch.rsqrt(x32.var(-1, unbiased=False) + 1e-5)
    del x32
    copy_ms = triton.testing.do_bench(lambda: dh.copy_(x), warmup=50, rep=200)
    copy_bps = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    dh = torch.randn(M, N, device="cuda", dtype=dtype)
    for op, (center, residual) in OPS.items():
        d = dh if residual else None
        moved = x.numel() * x.element_size() * (4 if residual else 3)
        ref = _before(dy, x, w, mean, rstd, d, center)
        cands = [("before", lambda c=center, d=d: _before(dy, x, w, mean, rstd, d, c))]
        for block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            if plan is None or plan.chunks_pow2 > 64:
                continue
            cands.append((f"{block}/{warps}w x{per_sm} pf={int(prefetch)}",
                          lambda p=plan, c=center, d=d: norm.split_norm_backward(
                              dy, x, w, mean, rstd, d, 0.0, c, True, c, p)))  # fmt: skip
        for name, fn in cands:
            try:
                got = fn()
                err = max((g.float() - r.float()).abs().max().item()
                          for g, r in zip(got, ref, strict=False) if r is not None)  # fmt: skip
                ms = triton.testing.do_bench(fn, warmup=25, rep=150)
            except Exception as exc:  # a launch that does not compile: report, go on
                line = f"{str(dtype)[6:]} {M}x{N} {op:8s} {name:22s} FAILED {exc!r}"[:300]
            else:
                frac = (moved / (ms * 1e-3)) / copy_bps
                line = (f"{str(dtype)[6:]} {M}x{N} {op:8s} {name:22s} {ms * 1e3:9.1f} us "
                        f"{frac * 100:5.1f}% of copy, max|out-before| {err:.3g}")  # fmt: skip
            print(line, flush=True)
            lines.append(line)
            del got
            torch.cuda.empty_cache()


def sweep(out: str) -> None:
    lines = [f"{torch.cuda.get_device_name()}"]
    dtypes = [getattr(torch, d) for d in os.environ.get("SWEEP_DTYPES", "bfloat16").split(",")]
    for dtype in dtypes:
        for M, N in ((8192, 262144), (8192, 65536)):
            _sweep_shape(dtype, M, N, lines)
            torch.cuda.empty_cache()
            with open(out, "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "spills":
        spills()
    else:
        sweep(sys.argv[2])
