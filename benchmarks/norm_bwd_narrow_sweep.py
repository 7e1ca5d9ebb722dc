"""The norm backward of rows of 16385-65536 columns: the split-row kernels
(``norm_bwd_flags_kernel``, ``norm_bwd_lag_flags_kernel``) at candidate launches against the
default dispatch, the kernel alone.

    PYTHONPATH=src python benchmarks/norm_bwd_narrow_sweep.py spills     # CPU: sm_90 resources
    PYTHONPATH=src python benchmarks/norm_bwd_narrow_sweep.py sweep OUT  # GPU: OUT and OUT's .json

The sweep times each op's backward (RMSNorm, add+RMSNorm with dh, LayerNorm with dweight and
dbias; SWEEP_OPS "rms,add_rms,layer" names fewer) at SWEEP_SHAPES ("4096x32768 4096x16411
8192x65536" by default), CUDA-event medians of ``triton.testing.do_bench``: "default" is what
the ops take (``norm.rms_norm_backward`` / ``layer_norm_backward``), then each kernel at each
launch (SWEEP_LAUNCHES, "kernel/block/warps/programs an SM/prefetch"; kernel "flags", "lag",
"lagold", the lagged kernel without its LEAN arithmetic, or "laghint", with L2 eviction
hints). The recorded run
(``benchmarks/results/widebwd-2026-11-25/run1-widebwd-sweep.txt``) also timed "hold", a variant
of the lag kernel holding x and dy in registers, since removed (wrong dx on the H100). The
fraction of copy counts x and dy (and dh) read once and dx written once, the [N] vectors left
out; the copy is timed in the same process. Rows this short that the whole-row kernels take
time the Python dispatch more than the kernel here (``session42-h200-2026-12-01/
normbwd-rows-call9.txt``): use the harness for them.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import torch

from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan

LAUNCHES = tuple(
    (kernel, *(int(v) for v in rest.split("/")))
    for kernel, rest in (
        launch.split("/", 1)
        for launch in os.environ.get(
            "SWEEP_LAUNCHES",
            "flags/4096/4/2/1 flags/2048/4/4/1 lag/2048/4/4/0 lag/4096/8/2/0 lag/1024/2/8/0 "
            "lag/4096/4/2/0",
        ).split()
    )
)
SHAPES = tuple(
    tuple(int(v) for v in s.split("x"))
    for s in os.environ.get("SWEEP_SHAPES", "4096x32768 4096x16411 8192x65536").split()
)
OPS = {
    op: flags
    for op, flags in {
        "rms": (False, False),
        "add_rms": (False, True),
        "layer": (True, False),
    }.items()
    if op in os.environ.get("SWEEP_OPS", "rms,add_rms,layer").split(",")
}
RUNS = {
    "flags": norm.split_norm_backward,
    "lag": norm.lag_norm_backward,
    "lagold": functools.partial(norm.lag_norm_backward, lean=False),  # before the LEAN math
    "laghint": functools.partial(norm.lag_norm_backward, l2_hints=True),  # L2 eviction hints
}


def spills() -> None:
    sys.path.insert(0, "benchmarks")
    import split_launch_spills as sls

    import warpforge.ops._rows as rows
    import warpforge.ops._split_rows as split_rows
    from warpforge.ops._kernels.norm_lag_bwd import norm_bwd_lag_flags_kernel
    from warpforge.ops._kernels.norm_split_bwd import norm_bwd_flags_kernel

    kernels = {"flags": norm_bwd_flags_kernel, "lag": norm_bwd_lag_flags_kernel,
               "lagold": norm_bwd_lag_flags_kernel,
               "laghint": norm_bwd_lag_flags_kernel}  # fmt: skip
    rows.device_capabilities = split_rows.device_capabilities = lambda device: sls.H100
    for dt in os.environ.get("SPILL_DTYPES", "bf16").split(","):
        types = {a: "*" + dt for a in ("DY", "X", "W", "DH", "DX")}
        types.update(MEAN="*fp32", RSTD="*fp32", DW_PARTIAL="*fp32", DB_PARTIAL="*fp32",
                     WORDS="*i64", offset="fp32")  # fmt: skip
        for kernel, block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(4096, 32768, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            for op, (center, residual) in OPS.items():
                flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=center, BLOCK_N=block,
                             CHUNKS_POW2=plan.chunks_pow2, STAGE=0, CENTER=center,
                             HAS_DH=residual)  # fmt: skip
                if kernel == "flags":
                    flags.update(PREFETCH=bool(prefetch), FLUSH=0)
                elif kernel in ("lag", "laghint") and dt != "fp32":  # as the op, offset 0
                    flags.update(LEAN=True, HAS_OFFSET=False, EVEN=32768 % block == 0)
                if kernel == "laghint":
                    flags.update(KEEP="evict_last", DROP="evict_first")
                reg, stack, count = sls.resources(
                    kernels[kernel], types, flags, warps,
                    aligned=("stride_dy", "stride_x", "stride_dx", "stride_dh"),
                    maxnreg=plan.max_registers,
                )  # fmt: skip
                print(f"{dt} {op:8s} {kernel} {block}/{warps}w x{per_sm} pf={prefetch}: "
                      f"{reg} registers, {stack} stack bytes (cap {plan.max_registers}), "
                      f"{count} instructions", flush=True)  # fmt: skip


def _default(dy, x, w, mean, rstd, dh, center):
    if center:
        return norm.layer_norm_backward(dy, x, w, mean, rstd, True, True)
    dx, dw = norm.rms_norm_backward(dy, x, w, rstd, dh, 0.0, True)
    return dx, dw, None


def _sweep_shape(dtype: torch.dtype, M: int, N: int, lines: list[str], rows: list[dict]) -> None:
    import triton.testing

    x = torch.randn(M, N, device="cuda", dtype=dtype)
    dy = torch.randn(M, N, device="cuda", dtype=dtype)
    dh = torch.randn(M, N, device="cuda", dtype=dtype)
    w = torch.randn(N, device="cuda", dtype=dtype)
    x32 = x.float()
    mean = x32.mean(-1)
    rstd = torch.rsqrt(x32.var(-1, unbiased=False) + 1e-5)
    del x32
    copy_ms = triton.testing.do_bench(lambda: dh.copy_(x), warmup=25, rep=100)
    copy_bps = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    dh = torch.randn(M, N, device="cuda", dtype=dtype)
    for op, (center, residual) in OPS.items():
        d = dh if residual else None
        moved = x.numel() * x.element_size() * (4 if residual else 3)
        ref = _default(dy, x, w, mean, rstd, d, center)
        cands = [("default", lambda c=center, d=d: _default(dy, x, w, mean, rstd, d, c))]
        for kernel, block, warps, per_sm, prefetch in LAUNCHES:
            plan = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            if plan is None or plan.chunks_pow2 > 64:
                continue
            cands.append((f"{kernel} {block}/{warps}w x{per_sm} pf={prefetch}",
                          lambda p=plan, c=center, d=d, r=RUNS[kernel]: r(
                              dy, x, w, mean, rstd, d, 0.0, c, True, c, p)))  # fmt: skip
        for name, fn in cands:
            try:
                got = fn()
                err = max((g.float() - r.float()).abs().max().item()
                          for g, r in zip(got, ref, strict=False) if r is not None)  # fmt: skip
                ms = triton.testing.do_bench(fn, warmup=10, rep=60)
            except Exception as exc:  # a launch that does not compile: report, go on
                line = f"{str(dtype)[6:]} {M}x{N} {op:8s} {name:26s} FAILED {exc!r}"[:300]
            else:
                frac = (moved / (ms * 1e-3)) / copy_bps
                line = (f"{str(dtype)[6:]} {M}x{N} {op:8s} {name:26s} {ms * 1e3:9.1f} us "
                        f"{frac * 100:5.1f}% of copy, max|out-default| {err:.3g}")  # fmt: skip
                rows.append(dict(dtype=str(dtype)[6:], M=M, N=N, op=op, launch=name,
                                 us=ms * 1e3, fraction_of_copy=frac,
                                 copy_tbps=copy_bps / 1e12, max_abs_diff_vs_default=err))  # fmt: skip
            print(line, flush=True)
            lines.append(line)
            got = None
        torch.cuda.empty_cache()


def sweep(out: str) -> None:
    """The table into ``out`` and its rows, with the environment (device, versions, commit,
    date), into ``out`` with a ``.json`` suffix, both rewritten after each shape."""
    from warpforge.environment import environment_fingerprint

    lines = [f"{torch.cuda.get_device_name()}"]
    rows: list[dict] = []
    environment = environment_fingerprint()
    dtypes = [getattr(torch, d) for d in os.environ.get("SWEEP_DTYPES", "bfloat16").split(",")]
    for dtype in dtypes:
        for M, N in SHAPES:
            _sweep_shape(dtype, M, N, lines, rows)
            torch.cuda.empty_cache()
            with open(out, "w") as f:
                f.write("\n".join(lines) + "\n")
            with open(os.path.splitext(out)[0] + ".json", "w") as f:
                json.dump({"environment": environment, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "spills":
        spills()
    else:
        sweep(sys.argv[2])
