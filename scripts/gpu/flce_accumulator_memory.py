"""Peak memory of FLCE's two float32-accumulator steps on the GPU, each alone: the chunk's
``grad_weight += grad_logits.T @ hidden`` (cuBLAS out_dtype) and the backward's scaled rounding
to bf16. Prints bytes above the live tensors (a temporary the size of the accumulator shows).

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
    accumulator = torch.zeros(vocab, width, device="cuda", dtype=torch.float32)
    accumulate = lambda: flce._accumulate_product(accumulator, grad_logits.t(), hidden)  # noqa: E731
    accumulate()  # warm-up (cuBLAS workspace)
    print(f"accumulator {accumulator.numel() * 4} bytes; "
          f"mixed-dtype addmm works: {flce._MIXED_DTYPE_ADDMM}")  # fmt: skip
    print(f"accumulate step extra peak: {extra_peak(accumulate)} bytes")
    want = grad_logits[:256].double().t() @ hidden[:256].double()
    small = torch.zeros(vocab, width, device="cuda", dtype=torch.float32)
    flce._accumulate_product(small, grad_logits[:256].t(), hidden[:256])
    print(f"accumulate max |error| vs float64 (256 rows): {(small.double() - want).abs().max()}")
    scale = torch.tensor(0.5, device="cuda")
    out = []
    print(f"scaled rounding extra peak (bf16 result "
          f"{accumulator.numel() * 2} bytes): "
          f"{extra_peak(lambda: out.append(flce._scaled_to(accumulator, scale, torch.bfloat16)))}")  # fmt: skip


if __name__ == "__main__":
    main()
