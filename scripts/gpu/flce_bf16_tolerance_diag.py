"""FLCE bf16 against the float64 reference next to the unfused bf16 PyTorch path, over several
random gradient outputs: the max |error| of the loss and each gradient for both, as the GPU test
(`test_gpu_bf16_as_exact_as_the_unfused_bf16_path`) compares them.

Usage (GPU, repository root): PYTHONPATH=src python scripts/gpu/flce_bf16_tolerance_diag.py
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, "tests/ops")  # the test's own inputs, float64 reference and error measure

import test_fused_linear_cross_entropy as flce_test

from warpforge.ops import fused_linear_cross_entropy


def main() -> None:
    for reduction in ("none", "mean"):
        for seed in range(6):
            tensors = flce_test.make_inputs((2, 1000), 512, 32000, with_bias=True, seed=13 + seed)
            inputs = [
                t.cuda().to(torch.bfloat16) if t.is_floating_point() else t.cuda() for t in tensors
            ]
            options = {"reduction": reduction, "label_smoothing": 0.1}
            fused = flce_test.errors_against_float64(
                fused_linear_cross_entropy, inputs, seed, chunk_size=512, **options
            )
            unfused = flce_test.errors_against_float64(
                flce_test.unfused_linear_cross_entropy, inputs, seed, **options
            )
            parts = [f"{reduction} seed {seed}"]
            for name in ("loss", "hidden", "weight", "bias"):
                parts.append(
                    f"{name} fused {fused[name]:.3g} unfused {unfused[name]:.3g} "
                    f"(max |value| {fused[name + ' scale']:.3g})"
                )
            print("; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
