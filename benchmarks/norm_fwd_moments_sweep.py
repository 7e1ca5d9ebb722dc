"""The split LayerNorm forward's chunk moments: the mean, then the centred squares (two
reductions, one waiting for the other) against float64 sums of x and x^2 (``moments64``), the
kernel alone at the default split launch of each shape.

    PYTHONPATH=src python benchmarks/norm_fwd_moments_sweep.py --out DIR   # GPU

Writes DIR/norm-fwd-moments.txt: per dtype and shape, each variant's median (CUDA events,
``triton.testing.do_bench``), its share of the copy bandwidth measured in the same process (x
read and y written once; w and b left out) and max |y - y of the two-reduction variant|.
Inputs are shifted by 20 (rows far from zero) so the float64 variant's cancellation shows.
"""

from __future__ import annotations

import functools

import torch
from sweep_common import start_sweep

from warpforge.ops import norm

SHAPES = ((4096, 32768), (8192, 65536), (8192, 131072), (8192, 262144))


def _shape_lines(dtype: torch.dtype, M: int, N: int, do_bench, copy: float) -> list[str]:
    name = str(dtype).removeprefix("torch.")
    plan = norm.norm_fwd_split_plan(M, N, dtype.itemsize, "cuda", False)
    if plan is None:
        return [f"{name} {M}x{N}: no split plan"]
    options = norm.norm_fwd_split_options(dtype.itemsize, False, plan.chunks)
    x = (torch.randn(M, N, device="cuda") + 20.0).to(dtype)
    w = torch.randn(N, device="cuda").to(dtype)
    b = torch.randn(N, device="cuda").to(dtype)
    moved = 2 * x.numel() * x.element_size()
    lines, base = [], None
    for moments64 in (False, True):
        run = functools.partial(norm.split_norm_forward, x, w, b, None, 1e-5, 0.0, True, plan,
                                **options, moments64=moments64)  # fmt: skip
        y = run()[0].float()
        base = y if base is None else base
        ms = do_bench(run, warmup=25, rep=100, return_mode="median")
        lines.append(
            f"{name} {M}x{N} layer moments64={int(moments64)} {options or 'flags'}: "
            f"{ms * 1e3:8.1f} us {moved / (ms * 1e-3) / copy * 100:5.1f}% of copy, "
            f"max|y - two-reduction y| {(y - base).abs().max().item():.3g}"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    args, do_bench, copy, header = start_sweep(__doc__)
    lines = [header]
    for name in args.dtypes.split(","):
        for M, N in SHAPES:
            lines += _shape_lines(getattr(torch, name), M, N, do_bench, copy)
            torch.cuda.empty_cache()
    (args.out / "norm-fwd-moments.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
