"""Launch variants of the cross-entropy and softmax kernels on the H100 benchmark shapes.

Each contender is checked against PyTorch on the same inputs, then timed with
``triton.testing.do_bench`` (median, L2 flushed between calls). Rows report GB/s over the
minimum bytes (read the input once; write the output once where there is one) and the share of
the measured copy bandwidth. Families:

* ``cross_entropy.fwd``: the loss-only forward kernel per (BLOCK, num_warps);
* ``cross_entropy.fwd_grad``: the forward writing the gradient: the op's default strategy,
  the whole-row / chunked kernels and split plans per (block, num_warps, programs per SM);
* ``cross_entropy.bwd``: the streaming backward from the saved lse per (BLOCK, num_warps);
* ``softmax.fwd`` / ``log_softmax.fwd``: split plans per (block, num_warps, programs per SM).

    PYTHONPATH=src python benchmarks/long_rows_sweep.py --out DIR      # GPU, ~2 minutes

Writes ``long_rows_sweep.json`` and ``long_rows_sweep.txt`` to --out.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from sweep_common import copy_bandwidth

IGNORE = -100
SPLITS = (
    (8192, 8, 4, False),
    (8192, 16, 2, True),
    (4096, 8, 4, True),
    (16384, 32, 1, True),
    (4096, 4, 8, True),
)
"""(block, num_warps, programs per SM, prefetch) of the split plans timed."""


def _split_name(block: int, warps: int, per_sm: int, prefetch: bool) -> str:
    return f"split {block}/{warps} x{per_sm}" + (" prefetch" if prefetch else "")


def _logits(M: int, V: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(M + V)
    logits = (torch.randn(M, V, device="cuda", generator=gen) * 2).to(dtype)
    target = torch.randint(0, V, (M,), device="cuda", generator=gen)
    target[1::16] = IGNORE
    return logits, target


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    return bool(torch.allclose(a.float(), b.float(), atol=tol, rtol=tol))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=170.0)
    parser.add_argument(
        "--families",
        default="fwd,fwd_grad,softmax,bwd",
        help="comma-separated subset of fwd, fwd_grad, softmax, bwd",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from triton.testing import do_bench

    from warpforge.ops import softmax_ops
    from warpforge.ops._split_rows import split_row_plan

    ce = importlib.import_module("warpforge.ops.cross_entropy")
    start = time.monotonic()
    copy = copy_bandwidth(do_bench)
    rows: list[dict[str, object]] = []
    lines = [f"copy bandwidth {copy / 1e9:.0f} GB/s"]

    def record(family, shape, dtype, contender, fn: Callable[[], object], nbytes, ok):
        if time.monotonic() - start > args.budget_s:
            rows.append({"family": family, "shape": shape, "dtype": str(dtype),
                         "contender": contender, "skipped": "budget"})  # fmt: skip
            return
        try:
            ms = do_bench(fn, return_mode="median") if ok else float("nan")
        except Exception as exc:  # a config that fails to compile or launch: recorded
            rows.append({"family": family, "shape": shape, "dtype": str(dtype),
                         "contender": contender, "error": repr(exc)[:300]})  # fmt: skip
            lines.append(f"{family} {shape} {dtype} {contender}: ERROR {exc!r}"[:200])
            return
        gbs = nbytes / (ms * 1e-3) / 1e9
        rows.append({"family": family, "shape": shape, "dtype": str(dtype), "contender": contender,
                     "verified": ok, "us": ms * 1e3, "GB/s": gbs, "of_copy": gbs * 1e9 / copy})  # fmt: skip
        lines.append(
            f"{family:22s} {shape:18s} {str(dtype)[6:]:9s} {contender:34s} "
            f"{'ok ' if ok else 'BAD'} {ms * 1e3:9.1f} us {gbs:6.0f} GB/s {gbs * 1e9 / copy:5.0%}"
        )

    families = set(args.families.split(","))
    # cross_entropy.fwd (loss only)
    for (M, V), dtype in () if "fwd" not in families else (((16384, 32000), torch.bfloat16), ((16384, 32000), torch.float32),
                          ((8192, 128256), torch.bfloat16)):  # fmt: skip
        logits, target = _logits(M, V, dtype)
        ref = torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")
        default = ce.launch_heuristic(V, dtype.itemsize)
        for launch in (default, (2048, 8), (4096, 16)):
            fn = functools.partial(ce.row_losses, logits, target, IGNORE, 0.0, 0.0, launch=launch)
            ok = _close(fn()[0], ref, dtype)
            name = f"BLOCK={launch[0]} warps={launch[1]}" + (
                " (default)" if launch == default else ""
            )
            record("cross_entropy.fwd", f"M={M} V={V}", dtype, name, fn, M * V * dtype.itemsize, ok)

    # cross_entropy.fwd_grad
    for (M, V), dtype in () if "fwd_grad" not in families else (((16384, 32000), torch.bfloat16), ((8192, 128256), torch.bfloat16),
                          ((4096, 262144), torch.bfloat16), ((8192, 128256), torch.float32),
                          ((4096, 262144), torch.float32), ((16384, 32000), torch.float32)):  # fmt: skip
        logits, target = _logits(M, V, dtype)
        scale = torch.full((1,), 1.0 / M, device="cuda")
        x = logits.float().requires_grad_()
        ref_loss = torch.nn.functional.cross_entropy(x, target, reduction="none")
        (ref_grad,) = torch.autograd.grad(ref_loss.sum() / M, x)
        grad = torch.empty_like(logits)
        contenders: dict[str, dict[str, object]] = {"default": {}}
        block, warps = ce.fused_grad_launch_heuristic(V, dtype.itemsize)
        contenders[f"one program a row BLOCK={block} warps={warps}"] = {"launch": (block, warps)}
        for block, warps, per_sm in SPLITS:
            plan = split_row_plan(
                M, V, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm
            )
            if plan is not None:
                contenders[f"split {block}/{warps} x{per_sm}"] = {"split": plan}
        for name, extra in contenders.items():
            fn = functools.partial(
                ce.row_losses, logits, target, IGNORE, 0.0, 0.0, grad_out=grad, grad_loss=scale,
                **extra,
            )  # fmt: skip
            grad.fill_(float("nan"))
            loss, _ = fn()
            ok = _close(loss, ref_loss, dtype) and _close(grad * M, ref_grad * M, dtype)
            nbytes = 2 * M * V * dtype.itemsize
            record("cross_entropy.fwd_grad", f"M={M} V={V}", dtype, name, fn, nbytes, ok)

    # softmax / log_softmax forward, long rows
    for dtype in (torch.bfloat16, torch.float32) if "softmax" in families else ():
        M, N = 8192, 262144
        x = torch.randn(M, N, device="cuda").to(dtype)
        for log in (False, True):
            ref = (torch.log_softmax if log else torch.softmax)(x.float(), -1)
            family = "log_softmax.fwd" if log else "softmax.fwd"
            contenders = {"default": {}}
            for block, warps, per_sm in SPLITS:
                plan = split_row_plan(
                    M, N, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm
                )
                contenders[f"split {block}/{warps} x{per_sm}"] = {"split": plan}
            for name, extra in contenders.items():
                fn = functools.partial(softmax_ops.softmax_forward, x, log, **extra)
                ok = _close(fn(), ref, dtype)
                record(family, f"M={M} N={N}", dtype, name, fn, 2 * M * N * dtype.itemsize, ok)
        del x

    # cross_entropy.bwd (from the saved lse)
    for (M, V), dtype in () if "bwd" not in families else (((16384, 32000), torch.float32), ((16384, 32000), torch.bfloat16),
                          ((8192, 128256), torch.float32)):  # fmt: skip
        logits, target = _logits(M, V, dtype)
        lse = torch.logsumexp(logits.float(), -1)
        g = torch.rand(M, device="cuda") + 0.5
        valid = target != IGNORE
        scale = torch.where(valid, g, 0.0)
        ref = torch.exp(logits.float() - lse[:, None]) * scale[:, None]
        ref[torch.arange(M, device="cuda"), torch.where(valid, target, 0)] -= scale
        out = torch.empty_like(logits)
        default = ce.bwd_launch_heuristic(V, dtype.itemsize)
        for launch in (default,):
            fn = functools.partial(
                ce.row_grads, out, logits, target, lse, g, IGNORE, 0.0, 0.0, launch=launch
            )
            out.fill_(float("nan"))
            ok = _close(fn(), ref, dtype)
            name = f"BLOCK={launch[0]} warps={launch[1]}" + (
                " (default)" if launch == default else ""
            )
            record(
                "cross_entropy.bwd", f"M={M} V={V}", dtype, name, fn, 2 * M * V * dtype.itemsize, ok
            )

    (args.out / "long_rows_sweep.txt").write_text("\n".join(lines) + "\n")
    (args.out / "long_rows_sweep.json").write_text(
        json.dumps(
            {"copy_bandwidth": copy, "device": torch.cuda.get_device_name(), "rows": rows}, indent=1
        )
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
