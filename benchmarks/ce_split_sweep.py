"""Cross-entropy forward with gradient over rows that start off 16-byte boundaries (issue #4):
the flag-word split kernel with chunks counted from aligned addresses, over split launches.

At 4096 x 50257 (bf16 and fp32) each launch (BLOCK, num_warps, programs an SM, prefetch)
builds its flag-word plan for ``n_cols + ALIGN - 1`` columns and runs ``row_losses`` with a
gradient buffer (what the op's forward with gradient launches); the op's own choice is timed
too. Each contender's gradient is first compared with a float64 reference (max abs error);
timing is ``triton.testing.do_bench`` (median, L2 flushed); ``of_copy`` divides the minimum
bytes (read the logits, write the gradient) by the copy bandwidth measured in the same process.

    PYTHONPATH=src python benchmarks/ce_split_sweep.py --out DIR            # GPU, ~2 minutes
"""

from __future__ import annotations

import functools
import importlib
import json
import time

import torch
from sweep_common import start_sweep

IGNORE = -100
SHAPE = (4096, 50257)
LAUNCHES = {
    2: [(8192, 4, 4, True), (8192, 4, 4, False), (4096, 4, 8, True), (4096, 2, 8, True),
        (8192, 8, 4, True), (8192, 4, 3, True), (16384, 8, 2, True)],
    4: [(8192, 8, 4, False), (8192, 8, 4, True), (4096, 4, 8, False), (4096, 8, 4, False),
        (16384, 16, 2, False), (8192, 4, 4, False)],
}  # fmt: skip


def _contenders(ce, split_row_plan, logits, target, grad_loss, out, align):
    """name -> call: the flag-word split over each launch of ``LAUNCHES`` that fits, writing
    the gradient into ``out``, and the op's own forward with gradient."""
    M, V = logits.shape
    contenders = {}
    for block, warps, per_sm, prefetch in LAUNCHES[logits.element_size()]:
        plan = split_row_plan(
            M,
            V + align - 1,
            "cuda",
            block=block,
            num_warps=warps,
            programs_per_sm=per_sm,
            prefetch=prefetch,
            flag_words=True,
        )
        if plan is None or plan.chunks_pow2 > 64:
            continue
        name = f"split {block}/{warps}w x{per_sm}{' prefetch' if prefetch else ''}"
        contenders[name] = functools.partial(
            ce.row_losses,
            logits,
            target,
            IGNORE,
            0.0,
            0.0,
            grad_out=out,
            grad_loss=grad_loss,
            split=plan,
        )
    contenders["op forward with gradient"] = functools.partial(
        ce._cross_entropy_fwd_grad, logits, target, IGNORE, 0.0, 0.0, "mean"
    )
    return contenders


def main() -> None:
    args, do_bench, copy, header = start_sweep(__doc__)
    from warpforge.ops._split_rows import split_row_plan

    ce = importlib.import_module("warpforge.ops.cross_entropy")
    lines = [header]
    rows: list[dict[str, object]] = []
    M, V = SHAPE
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        gen = torch.Generator(device="cuda").manual_seed(M + V)
        logits = (torch.randn(M, V, device="cuda", generator=gen) * 2).to(dtype)
        target = torch.randint(0, V, (M,), device="cuda", generator=gen)
        grad_loss = torch.full((M,), 1.0 / M, device="cuda")
        check = slice(0, 64)  # float64 reference of the first rows
        x64 = logits[check].double().requires_grad_()
        loss64 = torch.nn.functional.cross_entropy(x64, target[check], reduction="sum") / M
        (expected,) = torch.autograd.grad(loss64, x64)
        align = ce._aligned_split_align(logits, logits)
        minimum_bytes = 2 * logits.numel() * logits.element_size()
        out = torch.empty_like(logits)
        contenders = _contenders(ce, split_row_plan, logits, target, grad_loss, out, align)
        for name, run in contenders.items():
            out.fill_(float("nan"))
            result = run()
            grad = result[1] if name.startswith("op") else out
            error = (grad[check].double() - expected).abs().max().item()
            torch.cuda.synchronize()
            start = time.perf_counter()
            ms = do_bench(run, return_mode="median")
            row = {"dtype": dtype_name, "shape": [M, V], "contender": name, "us": ms * 1e3,
                   "of_copy": minimum_bytes / (ms * 1e-3) / copy, "max_abs_error": error,
                   "align": align, "seconds": time.perf_counter() - start}  # fmt: skip
            rows.append(row)
            lines.append(f"{dtype_name} {M}x{V} {name:34s} {ms * 1e3:8.1f} us "
                         f"{row['of_copy']:6.1%} err {error:.2e}")  # fmt: skip
            print(lines[-1], flush=True)
    (args.out / "ce_split_sweep.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "copy_bytes_per_s": copy, "rows": rows}, indent=1))  # fmt: skip
    (args.out / "ce_split_sweep.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
