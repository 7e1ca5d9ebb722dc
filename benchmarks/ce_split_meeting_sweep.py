"""bf16 split cross-entropy forward+gradient: the arrival-counter meeting against the flag-word
meeting (``cross_entropy_fwd_grad_flags_kernel``), and the flag-word kernel's launch shapes, on
the H100 (issue #4).

Every contender first writes into a NaN-poisoned gradient buffer and is compared with a float64
reference (``||out - ref|| / ||ref||`` of the gradient and of the per-row losses; bf16 lands
near 3e-3), then is timed with ``triton.testing.do_bench`` (median, L2 flushed between calls).
GB/s counts reading the logits once and writing the gradient once; ``of_copy`` divides by the
copy bandwidth measured in the same process.

    PYTHONPATH=src python benchmarks/ce_split_meeting_sweep.py --out DIR      # GPU, ~1 minute
    (``--shapes 4096x262144:bf16 --only "262144:words 8192/8 x4,counter 8192/8 x4" --repeat 3``)
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/ce_split_meeting_sweep.py --out DIR --smoke

A contender is named ``KIND BLOCK/WARPS xPROGRAMS_PER_SM [cp64]``: KIND ``counter`` (the
arrival counter) or ``words`` (``cross_entropy_fwd_grad_flags_kernel``); ``cp64`` lays out the
workspace and word vectors of a 64-chunk row whatever the chunks (the code path of 33-64
chunks, timed at fewer). ``--only`` takes any such name, ``default`` (the op's own plan,
``_fwd_grad_split_plan``) or ``op`` (``cross_entropy`` + ``torch.autograd.grad``, as the harness's
``cross_entropy.fwd_bwd`` runs it) or ``looped`` (one program a row, ``FWD_GRAD_LOOPED_LAUNCHES``'
launch, where it has one). Shapes take ``bf16``, ``fp16`` or ``fp32``. After the
timings the registers and spilled bytes of every compiled flag-word kernel are listed. (Commits 06ba1e8-81cb494 also had a
``lanes`` kernel: per-thread statistics, a deferred target store, words polled as pairs, chunk 0
polling the loss's words apart, logits loaded past L1; all slower,
benchmarks/results/ce262k-2026-11-25-notes.md.)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
import time
from pathlib import Path

import torch
from ce_softmax_bf16_sweep import rel_err  # the same float64 check as the first sweep
from softmax_split_sweep import kernel_usage, sweep_json

IGNORE = -100
SHAPES = ((8192, 128256, "bf16"), (4096, 262144, "bf16"), (8192, 128256, "fp32"))
LAUNCHES = {
    # contenders timed per dtype when --only names none (see the module docstring); 2-byte
    # rows prefetch. (Commit 4c86366 also had a one-word-a-lane poll, a pause between polls and
    # balanced chunks: all slower, benchmarks/results/ce16c-2026-11-25-notes.md.)
    "bf16": (
        "counter 8192/8 x4",
        "words 8192/8 x4",
        "words 4096/4 x8",
        "words 2048/2 x16",
        "words 8192/4 x4",
    ),
    "fp32": ("counter 8192/8 x4", "words 8192/8 x4", "words 4096/4 x8"),
}
LAUNCHES["fp16"] = LAUNCHES["bf16"]
"""Launches past 64 chunks a row (the flag-word kernel's limit) are skipped; ``default`` is the
op's own plan (``_fwd_grad_split_plan``)."""


def contender_plan(name, M, V, dev, prefetch, shrink=1):
    """The split plan of a contender name (see the module docstring)."""
    from warpforge.ops._split_rows import split_row_plan

    kind, launch, per_sm, *options = name.split()
    block, warps = (int(v) for v in launch.split("/"))
    plan = split_row_plan(
        M, V, dev, block=block // shrink, num_warps=warps, programs_per_sm=int(per_sm[1:]),
        prefetch=prefetch, release_only=True, flag_words=kind == "words",
    )  # fmt: skip
    if plan is not None and "cp64" in options:
        plan = dataclasses.replace(plan, chunks_pow2=64)
    return plan


def _reference(logits: torch.Tensor, target: torch.Tensor, scale: float):
    """(float64 per-row losses, gradient of ``scale * sum(losses)``), a block of rows at a time."""
    loss = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    grad = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
    for start in range(0, logits.shape[0], 1024):
        rows = slice(start, start + 1024)
        x = logits[rows].double()
        t = target[rows]
        valid = t != IGNORE
        safe = torch.where(valid, t, 0)
        lse = torch.logsumexp(x, -1)
        loss[rows] = torch.where(valid, lse - x.gather(1, safe[:, None])[:, 0], 0.0)
        g = torch.exp(x - lse[:, None])
        g[torch.arange(g.shape[0], device=g.device), safe] -= 1.0
        grad[rows] = (g * (valid.double() * scale)[:, None]).float()
    return loss, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes under the interpreter")
    parser.add_argument("--shapes", default="", help="e.g. 4096x262144:bf16,8192x128256:bf16")
    parser.add_argument("--only", default="",
                        help="contender names, comma-separated; 'V:name' for rows of V only")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="timing passes (median reported)")
    parser.add_argument("--once", action="store_true",
                        help="launch each contender once, unchecked and untimed (under ncu)")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ce = importlib.import_module("warpforge.ops.cross_entropy")
    dev, shapes, shrink = "cuda", SHAPES, 1
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if args.smoke:  # the interpreter gets bfloat16 wrong
        dev, shapes, shrink = "cpu", ((7, 300, "bf16"), (5, 1000, "fp32")), 128
        dtypes["bf16"] = torch.float16

        def do_bench(fn, return_mode="median"):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

        copy = 1.0
    elif args.once:
        copy = 1.0
    else:
        from triton.testing import do_bench

        x = torch.empty(2**30, dtype=torch.uint8, device=dev)
        y = torch.empty_like(x)
        copy = 2 * x.numel() / (do_bench(lambda: y.copy_(x), return_mode="median") * 1e-3)
        del x, y
    if args.shapes:
        shapes = tuple((int(m), int(v), dt) for m, v, dt in
                       (re.split("[x:]", item) for item in args.shapes.split(",")))  # fmt: skip
    only = set(filter(None, args.only.split(",")))
    device = torch.cuda.get_device_name() if dev == "cuda" else "cpu (smoke)"
    lines = [f"copy bandwidth {copy / 1e9:.0f} GB/s ({device})"]
    rows_out: list[dict[str, object]] = []
    for M, V, dt in shapes:
        dtype = dtypes[dt]
        gen = torch.Generator(device=dev).manual_seed(M + V)
        logits = (torch.randn(M, V, device=dev, generator=gen) * 2).to(dtype)
        target = torch.randint(0, V, (M,), device=dev, generator=gen)
        target[1::16] = IGNORE
        count = int((target != IGNORE).sum())
        if args.once:
            grad, scale = torch.empty_like(logits), torch.full((1,), 1.0 / count, device=dev)
            for name in filter(None, args.only.split(",")):
                shape_name = name.split(":", 1)[1] if ":" in name else name
                if ":" in name and name.split(":", 1)[0] != str(V):
                    continue
                plan = contender_plan(shape_name, M, V, dev, True, shrink)
                ce.row_losses(logits, target, IGNORE, 0.0, 0.0, grad_out=grad, grad_loss=scale,
                              split=plan)  # fmt: skip
                if dev == "cuda":
                    torch.cuda.synchronize()
                print(f"M={M} V={V} {shape_name}: launched once", flush=True)
            del logits, grad
            continue
        ref_loss, ref_grad = _reference(logits, target, 1.0 / count)
        scale = torch.full((1,), 1.0 / count, device=dev)
        grad = torch.empty_like(logits)
        plans = {}
        names = LAUNCHES[dt] if not only else sorted(
            {n for n in only if ":" not in n}
            | {n.split(":", 1)[1] for n in only if n.split(":", 1)[0] == str(V)}
        )  # fmt: skip
        for name in names:
            if name not in ("default", "op", "looped"):
                plans[name] = contender_plan(name, M, V, dev, logits.element_size() == 2, shrink)
        if not args.smoke and (not only or "default" in names):
            plans["default"] = ce._fwd_grad_split_plan(M, V, logits.element_size(), logits.device)
        for name in ("op", "looped"):
            if name in names:
                plans[name] = None
        timed = []
        for name, plan in plans.items():
            skipped = plan is None or (plan.flag_words and plan.chunks_pow2 > 64)
            if name not in ("op", "looped") and skipped:
                continue

            def run(plan=plan, io=(logits, target, grad, scale)):
                x, t, g, s = io
                return ce.row_losses(x, t, IGNORE, 0.0, 0.0, grad_out=g, grad_loss=s, split=plan)

            if name == "looped":  # one program a row in chunks, where the op has such a launch
                looped = ce.fwd_grad_looped_launch(V, logits.element_size())
                if looped is None:
                    continue

                def run(looped=looped, io=(logits, target, grad, scale)):
                    x, t, g, s = io
                    return ce.row_losses(
                        x, t, IGNORE, 0.0, 0.0, grad_out=g, grad_loss=s, looped=looped
                    )

            if name == "op":
                plan = ce.fwd_grad_plan(M, V, logits.element_size(), logits.device)

                def run(io=(logits, target)):  # (mean loss, a new gradient tensor)
                    x = io[0].detach().requires_grad_()
                    loss = ce.cross_entropy(x, io[1], ignore_index=IGNORE)
                    return loss.detach(), torch.autograd.grad(loss, x)[0]

            name = f"{dt} {name}" + (
                f" ({plan.block}/{plan.num_warps})" if name == "default" else ""
            )
            row = {"shape": f"M={M} V={V}", "contender": name,
                   "chunks": plan.chunks if plan else None,
                   "programs": plan.programs if plan else None}  # fmt: skip
            if name.endswith(" op") and plan is not None:
                row["plan"] = f"{plan.block}/{plan.num_warps} maxnreg {plan.max_registers}"
            try:
                grad.fill_(float("nan"))
                if name.endswith(" op"):  # the op's own gradient, in a freed NaN block
                    torch.full_like(logits, float("nan"))
                    loss, out = run()
                    mean = float(ref_loss.sum()) / count
                    err = max(rel_err(out, ref_grad), abs(float(loss) - mean) / abs(mean))
                    del out
                else:
                    loss, _ = run()
                    err = max(rel_err(grad, ref_grad), rel_err(loss[:, None], ref_loss[:, None]))
                passes = [do_bench(run, return_mode="median")]
            except Exception as exc:  # recorded, the sweep goes on
                row["error"] = repr(exc)[:300]
                rows_out.append(row)
                lines.append(f"M={M} V={V} {name}: ERROR {exc!r}"[:200])
                continue
            row.update(rel_err=err, verified=err == err and err <= 1e-2)
            rows_out.append(row)
            timed.append((row, run, passes))
        # further passes round-robin over the contenders: a drift of the clocks or the
        # temperature over the sweep lands on all of them, not on the last ones
        for _ in range(args.repeat - 1):
            for _, run, passes in timed:
                passes.append(do_bench(run, return_mode="median"))
        for row, _, passes in timed:
            ms = sorted(passes)[len(passes) // 2]
            ok = row["verified"]
            gbs = 2 * M * V * logits.element_size() / (ms * 1e-3)
            row.update(us=ms * 1e3, passes_us=[t * 1e3 for t in passes], gbs=gbs / 1e9,
                       of_copy=gbs / copy)  # fmt: skip
            label = row["contender"] + (f" ({row['plan']})" if "plan" in row else "")
            lines.append(
                f"M={M:<5d} V={V:<7d} {label:30s} "
                f"{'ok ' if ok else 'BAD'} "
                f"err {row['rel_err']:.1e} {ms * 1e3:8.1f} us {gbs / 1e9:6.0f} GB/s "
                f"{gbs / copy:6.1%}  passes " + " ".join(f"{t * 1e3:.1f}" for t in passes)
            )
        del logits, ref_grad, grad
        # written after every shape: a sweep cut short by its time limit keeps what it timed
        (args.out / "ce_split_meeting_sweep.txt").write_text("\n".join(lines) + "\n")
        (args.out / "ce_split_meeting_sweep.json").write_text(sweep_json(copy, device, rows_out))
    from warpforge.ops._kernels.cross_entropy import cross_entropy_fwd_grad_flags_kernel

    usage = kernel_usage(cross_entropy_fwd_grad_flags_kernel)
    lines.append("compiled flag-word kernel versions (num_warps, maxnreg, n_regs, n_spills):")
    lines += [f"  {u}" for u in usage]
    rows_out.append({"kernel_usage": usage})
    (args.out / "ce_split_meeting_sweep.txt").write_text("\n".join(lines) + "\n")
    (args.out / "ce_split_meeting_sweep.json").write_text(sweep_json(copy, device, rows_out))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
