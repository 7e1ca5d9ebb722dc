"""Peak memory of FLCE's float32-accumulator steps on the GPU, each alone: the first chunk's
``grad_weight = grad_logits.T @ hidden`` and a later chunk's ``grad_weight += ...`` (cuBLAS
out_dtype) and the backward's scaled rounding to bf16. Prints bytes above the live tensors (a temporary the size of the accumulator shows).

Usage (GPU, repository root): PYTHONPATH=src python scripts/gpu/flce_accumulator_memory.py
"""

from __future__ import annotations

import importlib

import torch

flce = importlib.import_module("warpforge.ops.fused_linear_cross_entropy")


def extra_peak(step) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def main() -> None:
    vocab, width, rows = 128256, 4096, 4096
    grad_logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
    hidden = torch.randn(rows, width, device="cuda", dtype=torch.bfloat16)
    accumulator = torch.empty(vocab, width, device="cuda", dtype=torch.float32)
    write = lambda: flce._product_into(accumulator, grad_logits.t(), hidden, False)  # noqa: E731
    accumulate = lambda: flce._product_into(accumulator, grad_logits.t(), hidden, True)  # noqa: E731
    write()  # warm-up (cuBLAS workspace)
    accumulate()
    print(f"accumulator {accumulator.numel() * 4} bytes; "
          f"mixed-dtype matmul works: {flce._MIXED_DTYPE_MATMUL}")  # fmt: skip
    print(f"write step extra peak: {extra_peak(write)} bytes")
    print(f"accumulate step extra peak: {extra_peak(accumulate)} bytes")
    want = 2 * (grad_logits[:256].double().t() @ hidden[:256].double())
    small = torch.full((vocab, width), float("nan"), device="cuda", dtype=torch.float32)
    flce._product_into(small, grad_logits[:256].t(), hidden[:256], False)
    flce._product_into(small, grad_logits[:256].t(), hidden[:256], True)
    print(f"write + accumulate max |error| vs float64 (256 rows, NaN-poisoned start): "
          f"{(small.double() - want).abs().max()}")  # fmt: skip
    scale = torch.tensor(0.5, device="cuda")
    out = []
    print(f"scaled rounding extra peak (bf16 result "
          f"{accumulator.numel() * 2} bytes): "
          f"{extra_peak(lambda: out.append(flce._scaled_to(accumulator, scale, torch.bfloat16)))}")  # fmt: skip


if __name__ == "__main__":
    main()
