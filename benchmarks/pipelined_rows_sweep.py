"""The norm backward's rows kernel with its tile loop software-pipelined by Triton against its
default launch, kernel alone.

``tl.range(num_stages=S)`` on the persistent tile loop makes Triton issue the next S - 1 tiles'
loads as asynchronous copies into shared memory, so several tiles are in flight without the
registers that the default's one-tile prefetch holds (on the H200, whose copy bandwidth needs
more bytes in flight per SM than the H100's, the bf16 backward of rows of <= 16384 columns runs
at 79-90% of copy). Each variant keeps the op's launch (tile, warps, knobs) and changes the
pipeline depth and the programs an SM; its dx must equal the default's bit for bit (the same
arithmetic per element) and its dweight / dbias agree within float32 summation order.

    PYTHONPATH=src python benchmarks/pipelined_rows_sweep.py OUT.json             # GPU
    SMOKE=1 TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/pipelined_rows_sweep.py OUT.json

Prints a line per (op, shape, variant) with its median and the fraction of a copy of the same
bytes (x and dy read, dx written), and writes every row with the environment to OUT.json.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from warpforge.environment import environment_fingerprint
from warpforge.harness.timing import measure_interleaved
from warpforge.ops import norm

SMOKE = os.environ.get("SMOKE") == "1"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SHAPES = ((7, 96),) if SMOKE else ((16384, 2048), (16384, 4096), (8192, 8192), (4096, 16384),
                                    (32768, 1024))  # fmt: skip
STAGES = (2, 3)
PROGRAMS_PER_SM = (0, 3, 4)  # 0: the op's own choice (its knob, else the register model)


def _case(op: str, M: int, N: int, dtype: torch.dtype, rows: list[dict]) -> None:
    center = op == "layer_norm"
    g = torch.Generator(device=DEVICE).manual_seed(M * 31 + N)
    x = torch.randn(M, N, device=DEVICE, generator=g).to(dtype)
    dy = torch.randn(M, N, device=DEVICE, generator=g).to(dtype)
    w = torch.randn(N, device=DEVICE, generator=g).to(dtype)
    x32 = x.float()
    mean = x32.mean(-1) if center else None
    rstd = torch.rsqrt(
        x32.var(-1, unbiased=False) + 1e-5 if center else x32.square().mean(-1) + 1e-6
    )
    del x32
    launch, knobs = norm._bwd_launch_config(M, N, dtype, DEVICE, f"{op}.bwd")

    def backward(**options):
        return lambda _marker: norm._norm_backward(
            dy, x, w, mean, rstd, None, 0.0, center, True, center, **options
        )

    fns = {"default": backward()}
    for stages in STAGES:
        for per_sm in PROGRAMS_PER_SM:
            fns[f"stages={stages} programs/SM={per_sm or 'op'}"] = backward(
                launch=launch, knobs=norm.BwdKnobs(knobs.reload, per_sm or knobs.programs_per_sm),
                stages=stages,
            )  # fmt: skip
    want = fns["default"](None)
    for name, fn in list(fns.items())[1:]:
        got = fn(None)
        if not torch.equal(got[0], want[0]):
            print(f"{op} {M}x{N} {name}: dx differs from the default's, skipped", flush=True)
            del fns[name]
            continue
        for g_, w_ in zip(got[1:], want[1:], strict=True):
            torch.testing.assert_close(g_.float(), w_.float(), rtol=2e-2, atol=2e-2 * M**0.5)
    src = torch.empty(3 * M * N * x.element_size() // 2, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    fns["copy (same bytes)"] = lambda _marker: dst.copy_(src)
    marker = (torch.empty(1, device=DEVICE),)  # the device the timer reads from its inputs
    timings = measure_interleaved(fns, [marker], max_time_s=0.3 if SMOKE else 1.0)
    copy_s = timings["copy (same bytes)"].median_s
    config = {"block_n": launch.block_n, "rows": launch.rows_per_program,
              "num_warps": launch.num_warps, "reload": knobs.reload,
              "programs_per_sm": knobs.programs_per_sm}  # fmt: skip
    for name, m in timings.items():
        rows.append({"op": op, "M": M, "N": N, "dtype": str(dtype)[6:], "variant": name,
                     "launch": config, "median_us": m.median_s * 1e6,
                     "ci_us": [m.ci_low_s * 1e6, m.ci_high_s * 1e6],
                     "fraction_of_copy": copy_s / m.median_s})  # fmt: skip
        print(f"{op:10s} {M}x{N} {name:28s} {m.median_s * 1e6:9.1f} us "
              f"{copy_s / m.median_s * 100:5.1f}% of copy", flush=True)  # fmt: skip


def main() -> None:
    out = sys.argv[1]
    start = time.perf_counter()
    rows: list[dict] = []
    dtype = torch.float16 if SMOKE else torch.bfloat16  # the interpreter's bf16 loads are wrong
    for M, N in SHAPES:
        for op in ("rms_norm", "layer_norm"):
            _case(op, M, N, dtype, rows)
            with open(out, "w") as f:
                json.dump({"benchmark": "pipelined_rows_sweep", "environment":
                           environment_fingerprint(), "rows": rows}, f, indent=1)  # fmt: skip
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
