"""Loss-only cross-entropy forward at the sweep's vocabularies on the GPU (issue #4).

At 32768 x 256, 4096 x 50257 and 2048 x 151936 (bf16 and fp32): the per-row kernel with its
default launch and over a grid of (BLOCK, num_warps), for rows that start off 16-byte
boundaries both the plain kernel and the aligned-chunk kernel (``loss_only_rows``), for short
rows the several-rows-a-program kernel over (rows, num_warps); for unaligned rows also the
saved-lse backward, row kernel against the flat stream over (BLOCK, num_warps); then the
op as the harness runs it (``cross_entropy(logits, target)``, mean, no gradient) and a profiler
table of one call per shape (which launches it takes). Every contender's per-row losses are
first compared with a float64 reference (relative error); timing is
``triton.testing.do_bench`` (median, L2 flushed); ``of_copy`` divides the minimum bytes (read
the logits once) by the copy bandwidth measured in the same process.

    PYTHONPATH=src python benchmarks/ce_fwd_sweep.py --out DIR            # GPU, ~1-2 minutes
"""

from __future__ import annotations

import importlib
import json
import os
import time

import torch
from sweep_common import start_sweep

IGNORE = -100
SHAPES = ((32768, 256), (4096, 50257), (2048, 151936))
SHORT_GRID = ((4, 1), (8, 2), (16, 4), (32, 4), (32, 8), (64, 8))
FLAT_GRID = ((2048, 4), (4096, 8), (8192, 16), (16384, 16))
GRID = [(b, w) for b in (1024, 2048, 4096, 8192) for w in (4, 8, 16, 32) if b >= 32 * w]


def main() -> None:
    args, do_bench, copy, header = start_sweep(__doc__)
    from warpforge.ops import cross_entropy

    ce = importlib.import_module("warpforge.ops.cross_entropy")
    lines = [header]
    rows: list[dict[str, object]] = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for M, V in SHAPES:
            gen = torch.Generator(device="cuda").manual_seed(M + V)
            logits = (torch.randn(M, V, device="cuda", generator=gen) * 2).to(dtype)
            target = torch.randint(0, V, (M,), device="cuda", generator=gen)
            target[1::16] = IGNORE
            x64 = logits.double()
            valid = target != IGNORE
            ref = torch.where(
                valid,
                x64.logsumexp(-1) - x64.gather(1, torch.where(valid, target, 0)[:, None])[:, 0],
                0.0,
            )
            del x64
            nbytes = M * V * logits.element_size() + M * 8
            unaligned = ce._unaligned_rows(logits)
            shape = f"{M}x{V}"

            def record(contender, fn, *, shape=shape, nbytes=nbytes, ref=ref, dt=dtype_name):
                loss = fn()
                if isinstance(loss, tuple):
                    loss = loss[0]
                err = float((loss.double() - ref).norm() / ref.norm())
                ms = do_bench(fn, return_mode="median")
                row = {"dtype": dt, "shape": shape, "contender": contender,
                       "us": ms * 1e3, "gbps": nbytes / ms / 1e6,
                       "of_copy": nbytes / (ms * 1e-3) / copy, "rel_err": err}  # fmt: skip
                rows.append(row)
                lines.append(f"{dt} {shape} {contender}: {ms * 1e3:9.1f} us "
                             f"{row['of_copy']:6.1%} of copy  rel_err {err:.1e}")  # fmt: skip

            default = ce._fwd_launch_config(M, V, dtype, logits.device)
            args3 = (logits, target, IGNORE, 0.0, 0.0)
            record(f"plain default {default}", lambda a=args3: ce.row_losses(*a))
            if unaligned:
                record(f"aligned default {default}", lambda a=args3: ce.loss_only_rows(*a))
            if ce._short_rows(logits):
                for short in SHORT_GRID:
                    record(f"short rows {short}",
                           lambda a=args3, c=short: ce.loss_only_rows(*a, short=c))  # fmt: skip
            for launch in GRID:
                if launch[0] > 4 * V:
                    continue
                record(f"plain {launch}", lambda a=args3, c=launch: ce.row_losses(*a, launch=c))
                if unaligned:
                    record(f"aligned {launch}",
                           lambda a=args3, c=launch: ce.loss_only_rows(*a, launch=c))  # fmt: skip
            if unaligned:  # the backward from saved lse: the row kernel against the flat stream
                _, lse = ce.loss_only_rows(*args3)
                grad_loss = torch.rand(M, device="cuda", generator=gen) + 0.5
                scale = torch.where(valid, grad_loss, 0.0).double()
                want = torch.empty(M, V, device="cuda", dtype=torch.float32)
                for r in range(0, M, 512):
                    x = logits[r : r + 512].double()
                    g = torch.exp(x - x.logsumexp(-1, keepdim=True))
                    rows_r = torch.arange(g.shape[0], device="cuda")
                    g[rows_r, torch.where(valid[r : r + 512], target[r : r + 512], 0)] -= 1.0
                    want[r : r + 512] = (g * scale[r : r + 512, None]).float()
                out = torch.empty_like(logits)
                bwd_bytes = 2 * M * V * logits.element_size() + M * 16

                def grads(fn, *, out=out, want=want):
                    out.fill_(float("nan"))
                    fn()
                    return out.float(), want

                def record_bwd(contender, fn, *, nbytes=bwd_bytes, dt=dtype_name, shape=shape):
                    got, want = grads(fn)
                    err = float((got - want).double().norm() / want.double().norm())
                    ms = do_bench(fn, return_mode="median")
                    rows.append({"dtype": dt, "shape": shape, "contender": contender,
                                 "us": ms * 1e3, "of_copy": nbytes / (ms * 1e-3) / copy,
                                 "rel_err": err})  # fmt: skip
                    lines.append(f"{dt} {shape} {contender}: {ms * 1e3:9.1f} us "
                                 f"{rows[-1]['of_copy']:6.1%} of copy  rel_err {err:.1e}")  # fmt: skip

                bwd_args = (out, logits, target, lse, grad_loss, IGNORE, 0.0, 0.0)
                record_bwd("bwd row kernel", lambda a=bwd_args: ce.row_grads(*a))
                for launch in FLAT_GRID:
                    record_bwd(f"bwd flat {launch}",
                               lambda a=bwd_args, c=launch: ce.flat_row_grads(*a, c))  # fmt: skip
                del want, out
            # the op without a gradient, as the harness's cross_entropy.fwd runs it
            loss = cross_entropy(logits, target)
            mean_ref = ref.sum() / valid.sum()
            ms = do_bench(lambda a=args3: cross_entropy(*a[:2]), return_mode="median")
            rows.append({"dtype": dtype_name, "shape": shape, "contender": "op (mean)",
                         "us": ms * 1e3, "of_copy": nbytes / (ms * 1e-3) / copy,
                         "abs_err": float((loss.double() - mean_ref).abs())})  # fmt: skip
            lines.append(f"{dtype_name} {shape} op (mean): {ms * 1e3:9.1f} us "
                         f"{nbytes / (ms * 1e-3) / copy:6.1%} of copy  "
                         f"abs_err {rows[-1]['abs_err']:.1e}")  # fmt: skip
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    cross_entropy(logits, target)
                torch.cuda.synchronize()
            lines.append(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": importlib.import_module("triton").__version__,
            "commit": os.environ.get("WARPFORGE_GIT_COMMIT", "unknown"),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "copy_bytes_per_s": copy}  # fmt: skip
    (args.out / "ce_fwd_sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "ce_fwd_sweep.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
