"""FLCE bf16 gradients against the float64 reference, as the GPU test checks them, over several
random gradient outputs: the worst |error| / (atol + rtol |want|) per output (> 1 fails the test).

Usage (GPU, repository root): PYTHONPATH=src python scripts/gpu/flce_bf16_tolerance_diag.py
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, "tests/ops")  # the test's own inputs and float64 reference

import test_fused_linear_cross_entropy as flce_test

from warpforge.ops import fused_linear_cross_entropy

TOLERANCE = 3e-2  # the GPU test's atol and rtol


def worst_ratio(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float, float]:
    """The worst error over the tolerance, with the got/want values where it happens."""
    ratio = (got.double() - want).abs() / (TOLERANCE + TOLERANCE * want.abs())
    where = ratio.argmax()
    return ratio.max().item(), got.double().flatten()[where].item(), want.flatten()[where].item()


def main() -> None:
    for reduction in ("none", "mean"):
        for seed in range(6):
            torch.manual_seed(seed)
            tensors = flce_test.make_inputs((2, 1000), 512, 32000, with_bias=True, seed=13)
            hidden, weight, target, bias = [
                t.cuda().to(torch.bfloat16) if t.is_floating_point() else t.cuda() for t in tensors
            ]
            params = [t.clone().requires_grad_() for t in (hidden, weight, bias)]
            options = {"reduction": reduction, "label_smoothing": 0.1}
            loss = fused_linear_cross_entropy(
                params[0], params[1], target, params[2], chunk_size=512, **options
            )
            grad_out = torch.rand(loss.shape, dtype=torch.float64, device="cuda") + 0.5
            grads = torch.autograd.grad(loss, params, grad_out.to(loss.dtype))
            params64 = [p.detach().double().requires_grad_() for p in params]
            expected = flce_test.reference_linear_cross_entropy(
                params64[0], params64[1], target, params64[2], **options
            )
            expected_grads = torch.autograd.grad(expected, params64, grad_out)
            parts = [f"{reduction} seed {seed} loss {worst_ratio(loss, expected)[0]:.3f}"]
            for name, got, want in zip(
                ("hidden", "weight", "bias"), grads, expected_grads, strict=True
            ):
                ratio, at_got, at_want = worst_ratio(got, want)
                parts.append(f"{name} {ratio:.3f} (got {at_got:.4g}, want {at_want:.4g})")
            print("; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
