"""The split-row norm forward (``norm_fwd_flags_kernel``) at candidate launches.

    PYTHONPATH=src python benchmarks/norm_split_fwd.py spills      # CPU: sm_90 registers/stack
    PYTHONPATH=src python benchmarks/norm_split_fwd.py sweep OUT   # GPU: kernel alone vs chunked

The sweep times each op (RMSNorm, add+RMSNorm, LayerNorm) at 8192 x 262144 and 8192 x 65536
with the split launches against ``_norm_forward`` (the chunked kernel), CUDA-event medians of
``triton.testing.do_bench``, and reports the fraction of copy (bytes read once, written once).
"""

from __future__ import annotations

import sys

import torch

from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan

LAUNCHES = ((8192, 8, 2, True), (8192, 8, 2, False), (8192, 8, 4, False), (8192, 8, 4, True),
            (4096, 4, 4, True))  # fmt: skip
OPS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}


def spills() -> None:
    sys.path.insert(0, "benchmarks")
    import split_launch_spills as sls

    import warpforge.ops._rows as rows
    import warpforge.ops._split_rows as split_rows
    from warpforge.ops._kernels.norm_split import norm_fwd_flags_kernel

    rows.device_capabilities = split_rows.device_capabilities = lambda device: sls.H100
    for dt in ("bf16", "fp32"):
        types = {a: "*" + dt for a in ("X", "R", "W", "B", "Y", "H")}
        types.update(MEAN="*fp32", RSTD="*fp32", WORDS="*i64", eps="fp32", offset="fp32")
        for block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(8192, 262144, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            for op, (center, residual) in OPS.items():
                flags = dict(CENTER=center, HAS_RESIDUAL=residual, HAS_WEIGHT=True,
                             HAS_BIAS=center, BLOCK_N=block, CHUNKS_POW2=plan.chunks_pow2,
                             STAGE=0, PREFETCH=prefetch)  # fmt: skip
                reg, stack = sls.usage(norm_fwd_flags_kernel, types, flags, warps,
                                       aligned=("stride_x", "stride_r", "stride_y", "stride_h"),
                                       maxnreg=plan.max_registers)  # fmt: skip
                print(f"{dt} {op:8s} {block}/{warps}w x{per_sm} prefetch={prefetch}: "
                      f"{reg} registers, {stack} stack bytes (cap {plan.max_registers})",
                      flush=True)  # fmt: skip


def _sweep_shape(dtype: torch.dtype, M: int, N: int, lines: list[str]) -> None:
    import triton.testing

    x = torch.randn(M, N, device="cuda", dtype=dtype)
    r = torch.randn(M, N, device="cuda", dtype=dtype)
    w = torch.randn(N, device="cuda", dtype=dtype)
    b = torch.randn(N, device="cuda", dtype=dtype)
    copy_ms = triton.testing.do_bench(lambda: r.copy_(x), warmup=50, rep=200)
    copy_bps = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    for op, (center, residual) in OPS.items():
        rr = r if residual else None
        bb = b if center else None
        moved = x.numel() * x.element_size() * (4 if residual else 2)
        ref = norm._norm_forward(x, w, bb, rr, 1e-6, 0.0, center)
        cands = [("chunked", lambda c=center, rr=rr, bb=bb: norm._norm_forward(
            x, w, bb, rr, 1e-6, 0.0, c))]  # fmt: skip
        for block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            if plan is None or plan.chunks_pow2 > 64:
                continue
            cands.append((f"{block}/{warps}w x{per_sm} pf={int(prefetch)}",
                          lambda p=plan, c=center, rr=rr, bb=bb: norm.split_norm_forward(
                              x, w, bb, rr, 1e-6, 0.0, c, p)))  # fmt: skip
        for name, fn in cands:
            got = fn()
            err = (got[0].float() - ref[0].float()).abs().max().item()
            ms = triton.testing.do_bench(fn, warmup=25, rep=150)
            frac = (moved / (ms * 1e-3)) / copy_bps
            line = (f"{str(dtype)[6:]} {M}x{N} {op:8s} {name:22s} {ms * 1e3:9.1f} us "
                    f"{frac * 100:5.1f}% of copy, max|y-chunked| {err:.3g}")  # fmt: skip
            print(line, flush=True)
            lines.append(line)


def sweep(out: str) -> None:
    lines = [f"{torch.cuda.get_device_name()}"]
    for dtype in (torch.bfloat16, torch.float32):
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
