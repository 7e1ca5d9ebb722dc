"""The narrow-row norm backward against the persistent rows kernel, kernels alone (no autograd).

For each family (rms_norm, add_rms_norm with the residual gradient, layer_norm with dbias) and
dtype at one (M, N), the contenders are ``warpforge.ops.norm._norm_backward`` at the launch the
op looks up (shipped table or database, else the heuristic: what users get today) and
``_norm_backward_narrow`` at its default launch and at a few others (BLOCK_N, ROWS, num_warps).
Every contender is checked against the current path's output first (dx, dweight, dbias), then
all of a case are timed together with ``warpforge.harness.timing.measure_interleaved`` (L2
flushed before each call). A measurement to decide ``WARPFORGE_NORM_NARROW_BWD`` and the narrow
launch, not a harness result.

    PYTHONPATH=src python benchmarks/norm_narrow_bwd_sweep.py --out FILE.json [--M 32768 --N 256]
    PYTHONPATH=src python benchmarks/norm_narrow_bwd_sweep.py --out FILE.json --smoke   # CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

SMOKE = "--smoke" in sys.argv
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

FAMILIES = {"rms_norm": (False, False), "add_rms_norm": (False, True), "layer_norm": (True, False)}
LAUNCHES = ((8, 4), (16, 4), (16, 8), (32, 16), (8, 8), (4, 4))
"""(ROWS, num_warps) of the narrow backward tried beside its default."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--M", type=int, default=32768)
    parser.add_argument("--N", type=int, default=256)
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--max-time", type=float, default=1.5, help="timing budget per case (s)")
    parser.add_argument("--smoke", action="store_true", help="tiny shape on the CPU interpreter")
    args = parser.parse_args()

    from warpforge.environment import environment_fingerprint
    from warpforge.harness.timing import measure_interleaved
    from warpforge.ops import norm
    from warpforge.ops._rows import next_power_of_2

    device = torch.device("cpu" if args.smoke else "cuda")
    M, N = (37, 67) if args.smoke else (args.M, args.N)
    block = next_power_of_2(N)
    cases = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        if args.smoke and dtype == torch.bfloat16:
            continue  # bf16 is wrong under the interpreter
        for family, (center, residual) in FAMILIES.items():
            g = torch.Generator().manual_seed(0)

            def randn(*size, g=g, dtype=dtype):
                return torch.randn(*size, generator=g).to(device, dtype)

            x, dy, w = randn(M, N), randn(M, N), randn(N)
            dh = randn(M, N) if residual else None
            xf = x.float()
            mean = xf.mean(-1) if center else None
            rstd = torch.rsqrt((xf - mean[:, None] if center else xf).square().mean(-1) + 1e-5)
            operands = (dy, x, w, mean, rstd, dh, 0.0, center, True, center)
            fns = {"rows (op's launch)": lambda o=operands: norm._norm_backward(*o)}
            default = norm.narrow_bwd_launch(M, N)
            fns[f"narrow {default[1]}x{default[2]}w (default)"] = lambda o=operands: (
                norm._norm_backward_narrow(*o)
            )
            for rows, warps in LAUNCHES:
                if (block, rows, warps) != default:
                    launch = (block, rows, warps)
                    fns[f"narrow {rows}x{warps}w"] = lambda o=operands, launch=launch: (
                        norm._norm_backward_narrow(*o, launch=launch)
                    )
            expected = fns["rows (op's launch)"]()
            tol = 1e-4 if dtype == torch.float32 else 2e-2
            checked = {}
            for name, fn in fns.items():
                got = fn()
                ok = all(
                    torch.allclose(
                        a.float(), b.float(), atol=tol * max(1.0, b.abs().max().item()), rtol=tol
                    )
                    for a, b in zip(got, expected, strict=True)
                    if b.numel()
                )
                checked[name] = ok
            good = {name: fn for name, fn in fns.items() if checked[name]}
            t0 = time.monotonic()
            times = measure_interleaved(good, [()], max_time_s=args.max_time)
            rows_s = times["rows (op's launch)"].median_s
            row = {
                "family": family,
                "dtype": dtype_name,
                "M": M,
                "N": N,
                "rows_launch": dataclasses.asdict(
                    norm._bwd_launch_config(M, N, dtype, device, f"{family}.bwd")[0]
                ),
                "checked": checked,
                "times": {
                    name: {
                        "median_us": m.median_s * 1e6,
                        "ci_us": [m.ci_low_s * 1e6, m.ci_high_s * 1e6],
                        "vs_rows": rows_s / m.median_s,
                    }
                    for name, m in times.items()
                },
                "wall_s": round(time.monotonic() - t0, 1),
            }
            cases.append(row)
            print(f"{family} {dtype_name} {M}x{N}:")
            for name, t in sorted(row["times"].items(), key=lambda kv: kv[1]["median_us"]):
                print(f"  {t['median_us']:8.1f} us  {t['vs_rows']:.3f}x  {name}")
            bad = [name for name, ok in checked.items() if not ok]
            if bad:
                print(f"  WRONG (not timed): {bad}")
            args.out.write_text(
                json.dumps({"environment": environment_fingerprint(), "cases": cases}, indent=1)
            )
    return 0 if all(all(c["checked"].values()) for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
