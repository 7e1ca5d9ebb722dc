"""bf16 cross-entropy forward+gradient and long-row softmax variants on the H100 (issue #4).

Every contender is first run into a NaN-poisoned output and compared with a float64 reference
(relative error ``||out - ref|| / ||ref||``; bf16 outputs land near 2e-3), then timed with
``triton.testing.do_bench`` (median, L2 flushed between calls). GB/s counts the minimum bytes
(read the input once, write the output once); ``of_copy`` divides by the copy bandwidth measured
in the same process. Families:

* ``ce.fwd_grad``: the forward writing the gradient of a mean loss (one launch) at the three
  harness shapes: the whole-row kernel with its loads after / before the reductions, the
  persistent whole-row kernel prefetching its next row (32 or 16 warps), split plans with and
  without the early target loads (``EARLY``) and the release-only arrival;
* ``ce.op``: ``cross_entropy`` + ``torch.autograd.grad`` as the harness runs it, next to the
  default kernel alone (the difference is what the small launches around it cost), and a
  profiler table of one call at 16384 x 32000;
* ``ce.scale``: the in-place gradient scaling with per-row factors (not the unit factor the
  harness skips), against ``torch.mul_``;
* ``softmax`` / ``log_softmax`` 8192 x 262144: the split plan with and without the release-only
  arrival.

    PYTHONPATH=src python benchmarks/ce_softmax_bf16_sweep.py --out DIR     # GPU, ~3 minutes
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import time
from pathlib import Path

import torch
from sweep_common import copy_bandwidth

IGNORE = -100
BF16 = torch.bfloat16
DEV = "cuda"
DTYPE = BF16
"""bfloat16 (float16 under --smoke: the interpreter gets bfloat16 wrong)."""
WHOLE = 32768
"""The whole-row block (smaller under --smoke)."""
SHRINK = 1
SPLITS = ((4096, 4, 8), (8192, 8, 4))
"""(block, num_warps, programs an SM) of the split plans timed (all prefetching)."""
"""Split blocks are divided by this (256 under --smoke, so that tiny rows still split)."""


def rel_err(out: torch.Tensor, ref: torch.Tensor, rows: int = 1024) -> float:
    """||out - ref|| / ||ref|| in float64, a block of rows at a time (NaN stays NaN)."""
    num = den = 0.0
    for start in range(0, out.shape[0], rows):
        o = out[start : start + rows].double()
        r = ref[start : start + rows].double()
        num += float(((o - r) ** 2).sum())
        den += float((r**2).sum())
    return (num / den) ** 0.5 if den else num**0.5


def _ce_inputs(M: int, V: int):
    gen = torch.Generator(device=DEV).manual_seed(M + V + 7)
    logits = (torch.randn(M, V, device=DEV, generator=gen) * 2).to(DTYPE)
    target = torch.randint(0, V, (M,), device=DEV, generator=gen)
    target[1::16] = IGNORE
    return logits, target


def _ce_reference(logits: torch.Tensor, target: torch.Tensor):
    """(float64 per-row losses, gradient of the mean loss) computed a block of rows at a time."""
    M, V = logits.shape
    valid = target != IGNORE
    count = int(valid.sum())
    loss = torch.empty(M, dtype=torch.float64, device=DEV)
    grad = torch.empty(M, V, dtype=torch.float32, device=DEV)  # fp32 copy of the f64 values
    for start in range(0, M, 1024):
        rows = slice(start, min(start + 1024, M))
        x = logits[rows].double()
        t = target[rows]
        v = valid[rows]
        lse = torch.logsumexp(x, -1)
        safe = torch.where(v, t, 0)
        loss[rows] = torch.where(v, lse - x.gather(1, safe[:, None])[:, 0], 0.0)
        g = torch.exp(x - lse[:, None])
        g[torch.arange(g.shape[0], device=DEV), safe] -= 1.0
        grad[rows] = (g * (v.double() / count)[:, None]).float()
    return loss, grad, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=200.0)
    parser.add_argument("--families", default="fwd_grad,op,scale,softmax")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny shapes on the CPU (TRITON_INTERPRET=1)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    global DEV, WHOLE, DTYPE, SHRINK
    if args.smoke:
        DEV, WHOLE, DTYPE, SHRINK = "cpu", 64, torch.float16, 256

        def do_bench(fn, return_mode="median"):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

    else:
        from triton.testing import do_bench

    from warpforge.ops import cross_entropy as ce_fn
    from warpforge.ops import softmax_ops
    from warpforge.ops._kernels import cross_entropy as ck
    from warpforge.ops._split_rows import split_row_plan

    ce = importlib.import_module("warpforge.ops.cross_entropy")
    families = set(args.families.split(","))
    start = time.monotonic()
    copy = copy_bandwidth(do_bench, DEV)
    rows: list[dict[str, object]] = []
    device_name = torch.cuda.get_device_name() if DEV == "cuda" else "cpu (smoke)"
    lines = [f"copy bandwidth {copy / 1e9:.0f} GB/s ({device_name})"]

    def record(family, shape, contender, fn, nbytes, err, tol):
        ok = err == err and err <= tol  # NaN fails
        row = {"family": family, "shape": shape, "contender": contender, "rel_err": err,
               "verified": ok}  # fmt: skip
        if time.monotonic() - start > args.budget_s:
            row["skipped"] = "budget"
            rows.append(row)
            lines.append(f"{family} {shape} {contender}: skipped (budget)")
            return
        try:
            ms = do_bench(fn, return_mode="median")
        except Exception as exc:  # recorded, the sweep goes on
            row["error"] = repr(exc)[:300]
            rows.append(row)
            lines.append(f"{family} {shape} {contender}: ERROR {exc!r}"[:200])
            return
        gbs = nbytes / (ms * 1e-3) / 1e9
        row.update({"us": ms * 1e3, "GB/s": gbs, "of_copy": gbs * 1e9 / copy})
        rows.append(row)
        lines.append(
            f"{family:12s} {shape:16s} {contender:44s} {'ok ' if ok else 'BAD'} err {err:.1e} "
            f"{ms * 1e3:8.1f} us {gbs:6.0f} GB/s {gbs * 1e9 / copy:5.1%}"
        )

    def guarded(label, thunk):
        try:
            return thunk()
        except Exception as exc:  # a variant that fails to build: recorded, the sweep goes on
            rows.append({"contender": label, "error": repr(exc)[:300]})
            lines.append(f"{label}: ERROR {exc!r}"[:200])
            return None

    shapes = ((16384, 32000), (8192, 128256), (4096, 262144))
    if args.smoke:
        shapes = ((5, 40), (7, 300), (3, 1000))
    if "fwd_grad" in families:
        for M, V in shapes:
            logits, target = _ce_inputs(M, V)
            ref_loss, ref_grad, count = _ce_reference(logits, target)
            scale = torch.full((1,), 1.0 / count, device=DEV)
            grad = torch.empty_like(logits)
            loss = torch.empty(M, device=DEV)
            lse = torch.empty(M, device=DEV)
            contenders = {}
            common = (V, IGNORE, 0.0, 0.0)
            if V <= WHOLE:
                for early in (True,):

                    def whole_row(early=early, io=(logits, target, loss, lse, grad, scale),
                                  common=common):  # fmt: skip
                        x, t, loss_rows, lse_rows, g, s = io
                        ck.cross_entropy_fwd_grad_row_kernel[(x.shape[0],)](
                            x, t, loss_rows, lse_rows, g, s, 0, x.stride(0), g.stride(0),
                            *common, BLOCK=WHOLE, HAS_SMOOTHING=False, CHECK_TARGETS=False,
                            EARLY=early, num_warps=max(1, min(32, WHOLE // 1024)),
                        )  # fmt: skip
                        return loss_rows, lse_rows

                    contenders[f"whole row {WHOLE}/32 EARLY={early}"] = whole_row
            # (block, warps, programs an SM, prefetch, EARLY, release-only)
            splits = [(b, w, n, True, True, True) for b, w, n in SPLITS]
            if V <= WHOLE:
                splits = []
            for block, warps, per_sm, prefetch, early, release in splits:
                plan = split_row_plan(
                    M, V, DEV, block=block // SHRINK, num_warps=warps, programs_per_sm=per_sm,
                    prefetch=prefetch, release_only=release,
                )  # fmt: skip

                def run(plan=plan, early=early, io=(logits, target, grad, scale)):
                    x, t, g, s = io
                    ce.SPLIT_EARLY_TARGET = early
                    try:
                        return ce.row_losses(
                            x, t, IGNORE, 0.0, 0.0, grad_out=g, grad_loss=s, split=plan
                        )
                    finally:
                        ce.SPLIT_EARLY_TARGET = True

                name = f"split {block}/{warps} x{per_sm}" + (" pf" if prefetch else "")
                contenders[f"{name} EARLY={early} REL={release}"] = run
            for name, fn in contenders.items():
                grad.fill_(float("nan"))
                out = guarded(name, fn)
                if out is None:
                    continue
                err = max(rel_err(out[0][:, None], ref_loss[:, None]), rel_err(grad, ref_grad))
                record("ce.fwd_grad", f"M={M} V={V}", name, fn, 2 * M * V * 2, err, 1e-2)
            del ref_grad, grad

    if "op" in families:
        for M, V in shapes:
            logits, target = _ce_inputs(M, V)
            ref_loss, ref_grad, count = _ce_reference(logits, target)

            def op(logits=logits, target=target):
                x = logits.detach().requires_grad_()
                loss = ce_fn(x, target, ignore_index=IGNORE)
                (g,) = torch.autograd.grad(loss, x)
                return loss, g

            loss, g = op()
            ref_mean = float(ref_loss.sum() / count)
            err = max(abs(float(loss.detach()) - ref_mean) / ref_mean, rel_err(g, ref_grad))
            record("ce.op", f"M={M} V={V}", "cross_entropy + autograd.grad", op,
                   2 * M * V * 2 + M * 8, err, 1e-2)  # fmt: skip
            grad = torch.full_like(logits, float("nan"))
            scale = ce._reduction_scale(target, IGNORE, "mean")
            kernel = functools.partial(
                ce.row_losses, logits, target, IGNORE, 0.0, 0.0, grad_out=grad, grad_loss=scale
            )
            kernel()
            record("ce.op", f"M={M} V={V}", "default forward-with-gradient kernel alone", kernel,
                   2 * M * V * 2, rel_err(grad, ref_grad), 1e-2)  # fmt: skip
            if shapes[0][1] == V:
                from torch.profiler import ProfilerActivity, profile

                op()
                activities = [ProfilerActivity.CUDA if DEV == "cuda" else ProfilerActivity.CPU]
                with profile(activities=activities) as prof:
                    for _ in range(3):
                        op()
                    if DEV == "cuda":
                        torch.cuda.synchronize()
                sort = "cuda_time_total" if DEV == "cuda" else "cpu_time_total"
                table = prof.key_averages().table(sort_by=sort, row_limit=25)
                (args.out / "ce_op_profile_16384x32000.txt").write_text(table)
            del ref_grad, grad

    if "scale" in families:
        M, V = (16384, 32000) if not args.smoke else (5, 37)
        gen = torch.Generator(device=DEV).manual_seed(3)
        g0 = torch.randn(M, V, device=DEV, generator=gen).to(DTYPE)
        factors = torch.rand(M, device=DEV, generator=gen) + 0.5
        ref = (g0.double() * factors.double()[:, None]).float()
        g = g0.clone()
        ce.scale_row_grads(g, factors)
        err = rel_err(g, ref)
        record("ce.scale", f"M={M} V={V}", "scale_row_grads per-row factors",
               lambda: ce.scale_row_grads(g, factors), 2 * M * V * 2, err, 1e-2)  # fmt: skip
        record("ce.scale", f"M={M} V={V}", "torch mul_ per-row factors",
               lambda: g.mul_(factors[:, None]), 2 * M * V * 2, err, 1e-2)  # fmt: skip
        ones = torch.ones((), device=DEV)
        record("ce.scale", f"M={M} V={V}", "scale_row_grads unit factor (skipped)",
               lambda: ce.scale_row_grads(g, ones), 1, 0.0, 1e-2)  # fmt: skip
        del g0, g, ref

    if "softmax" in families:
        M, N = (8192, 262144) if not args.smoke else (6, 300)
        gen = torch.Generator(device=DEV).manual_seed(5)
        x = torch.randn(M, N, device=DEV, generator=gen).to(DTYPE)
        for log in (False, True):
            ref = torch.empty(M, N, dtype=torch.float32, device=DEV)
            for s in range(0, M, 512):
                xd = x[s : s + 512].double()
                ref[s : s + 512] = (torch.log_softmax if log else torch.softmax)(xd, -1).float()
            family = "log_softmax" if log else "softmax"
            y = torch.empty_like(x)
            for block, warps, per_sm in SPLITS:
                plan = split_row_plan(M, N, DEV, block=block // SHRINK, num_warps=warps,
                                      programs_per_sm=per_sm, prefetch=True,
                                      release_only=True)  # fmt: skip
                fn = functools.partial(softmax_ops.softmax_forward, x, log, split=plan)
                # the allocator hands the freed NaN block to the op's output: unwritten shows
                y.fill_(float("nan"))
                del y
                y = fn()
                record(family, f"M={M} N={N}", f"split {block}/{warps} x{per_sm} pf REL",
                       fn, 2 * M * N * 2, rel_err(y, ref), 1e-2)  # fmt: skip
            fn = functools.partial(softmax_ops.softmax_forward, x, log)
            y = fn()
            record(family, f"M={M} N={N}", "default", fn, 2 * M * N * 2, rel_err(y, ref), 1e-2)
            del ref, y

    (args.out / "ce_softmax_bf16_sweep.txt").write_text("\n".join(lines) + "\n")
    (args.out / "ce_softmax_bf16_sweep.json").write_text(
        json.dumps({"copy_bandwidth": copy, "device": device_name, "rows": rows}, indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
