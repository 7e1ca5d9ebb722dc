"""``torch.autograd.gradcheck`` of every differentiable op's registered backward against finite
differences of its own forward, on the Triton path (the interpreter on the CPU, the compiled
kernels on CUDA).

The kernels take float32, float16 or bfloat16 and accumulate in float32, so gradcheck's float64
leaves are cast to float32 for the op and its outputs back to float64. Central differences of a
float32 forward with a step of 1e-3 carry a rounding error of about ulp(f) / 2e-3 (under 1e-3 for
the outputs here), hence the tolerances; a wrong term in a gradient formula (a missing label
smoothing, z-loss or offset term, a swapped gate and up) moves it by 1e-2 or more at these
sizes. The comparisons against float64 references in each op's own test file check the values;
these check that the backward each op registers is the derivative of the forward it runs.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from warpforge.ops import (
    cross_entropy,
    fused_linear_cross_entropy,
    geglu,
    layer_norm,
    log_softmax,
    rms_norm,
    rope,
    softmax,
    swiglu,
)

cross_entropy_module = importlib.import_module("warpforge.ops.cross_entropy")

STEP, ATOL, RTOL = 1e-3, 3e-3, 1e-2


def in_float32(op):
    """``op`` on float32 copies of the float64 leaves gradcheck perturbs, outputs in float64."""

    def run(*leaves):
        out = op(*(leaf.float() for leaf in leaves))
        if isinstance(out, tuple):
            return tuple(o.double() for o in out)
        return out.double()

    return run


def leaves(*shapes, device):
    """Fresh random float64 leaves (never zeros; scaled so no value sits near a kink)."""
    return tuple(
        torch.randn(shape, dtype=torch.float64, device=device).requires_grad_() for shape in shapes
    )


def gradcheck(op, inputs) -> None:
    assert torch.autograd.gradcheck(in_float32(op), inputs, eps=STEP, atol=ATOL, rtol=RTOL)


def check_single_backward(op, inputs) -> None:
    """gradcheck's comparison for an op whose forward writes the gradient and whose backward
    may run once per forward (it scales that buffer in place): gradcheck runs the backward of
    one forward several times, so here a fresh forward gives the one backward of
    ``sum(v * op(x))`` for a random ``v``, against central differences of each element."""
    run = in_float32(op)
    out = run(*inputs)
    weights = torch.randn_like(out)
    analytic = torch.autograd.grad((out * weights).sum(), inputs)
    with torch.no_grad():
        for leaf, grad in zip(inputs, analytic, strict=True):
            numeric = torch.empty_like(leaf)
            flat = leaf.view(-1)
            for i in range(flat.numel()):
                held = flat[i].item()
                flat[i] = held + STEP
                above = (run(*inputs) * weights).sum()
                flat[i] = held - STEP
                below = (run(*inputs) * weights).sum()
                flat[i] = held
                numeric.view(-1)[i] = (above - below) / (2 * STEP)
            torch.testing.assert_close(grad, numeric, atol=ATOL, rtol=RTOL)


def targets(rows: int, classes: int, device, *, ignored_row: int | None = None) -> torch.Tensor:
    target = torch.randint(0, classes, (rows,), device=device)
    if ignored_row is not None:
        target[ignored_row] = -100
    return target


@pytest.mark.parametrize(
    ("in_forward", "reduction", "label_smoothing", "z_loss"),
    [
        (False, "mean", 0.0, 0.0),
        (False, "mean", 0.1, 0.05),
        (False, "sum", 0.1, 0.05),
        (False, "none", 0.2, 0.05),
        (True, "mean", 0.1, 0.05),
        (True, "sum", 0.0, 0.0),
        (True, "none", 0.2, 0.05),
    ],
)
def test_cross_entropy(in_forward, reduction, label_smoothing, z_loss, device, monkeypatch):
    """Both ways the op forms the gradient, with a row of ``ignore_index``: written by the
    forward (``_cross_entropy_fwd_grad``; its backward runs once per forward) or by the backward
    from the saved log-sum-exp (``_cross_entropy_bwd``)."""
    if not in_forward:
        monkeypatch.setattr(cross_entropy_module, "_fused_gradient", lambda logits: False)
    target = targets(4, 5, device, ignored_row=1 if in_forward else 2)
    (check_single_backward if in_forward else gradcheck)(
        lambda x: cross_entropy(
            x, target, reduction=reduction, label_smoothing=label_smoothing, z_loss=z_loss
        ),
        leaves((4, 5), device=device),
    )


@pytest.mark.parametrize(
    ("with_bias", "reduction"), [(False, "mean"), (True, "none")], ids=["mean", "bias-none"]
)
def test_fused_linear_cross_entropy(with_bias, reduction, device):
    """Gradients to hidden, weight and bias, over two token chunks (``chunk_size=2`` of 4)."""
    target = targets(4, 5, device, ignored_row=3)
    shapes = [(4, 3), (5, 3)] + ([(5,)] if with_bias else [])
    gradcheck(
        lambda h, w, *b: fused_linear_cross_entropy(
            h,
            w,
            target,
            b[0] if b else None,
            reduction=reduction,
            label_smoothing=0.1,
            chunk_size=2,
        ),
        leaves(*shapes, device=device),
    )


@pytest.mark.parametrize(
    "op",
    [
        swiglu,
        lambda g, u: geglu(g, u, approximate="tanh"),
        lambda g, u: geglu(g, u, approximate="none"),
    ],
    ids=["swiglu", "geglu-tanh", "geglu-erf"],
)
def test_gated_activations(op, device):
    gradcheck(op, leaves((3, 5), (3, 5), device=device))


@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
def test_rope(interleaved, device):
    """Gradients to q and k (the backward kernel)."""
    angles = torch.rand(2, 2, dtype=torch.float64, device=device) * 6 - 3
    full = angles.repeat_interleave(2, -1) if interleaved else torch.cat([angles, angles], -1)
    cos, sin = full.cos().float(), full.sin().float()
    gradcheck(
        lambda q, k: rope(q, k, cos, sin, interleaved=interleaved),
        leaves((1, 2, 2, 4), (1, 2, 1, 4), device=device),
    )


@pytest.mark.parametrize("half_table", [False, True], ids=["table-D", "table-D/2"])
def test_rope_learned_tables(half_table, device):
    """Gradients to q, k and the tables together, one table per batch row."""
    width = 2 if half_table else 4
    gradcheck(
        lambda q, k, cos, sin: rope(q, k, cos, sin),
        leaves((2, 1, 1, 4), (2, 1, 1, 4), (2, 1, width), (2, 1, width), device=device),
    )


def test_rms_norm_with_residual_and_offset(device):
    """Both outputs (the normalised rows and the residual sum) to x, residual and weight."""
    gradcheck(
        lambda x, r, w: rms_norm(x, w, residual=r, offset=0.5),
        leaves((3, 6), (3, 6), (6,), device=device),
    )


def test_layer_norm(device):
    gradcheck(layer_norm, leaves((3, 6), (6,), (6,), device=device))


@pytest.mark.parametrize("op", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_family(op, device):
    """Over a middle dimension, so the op's transposes are in the derivative too."""
    gradcheck(lambda x: op(x, dim=1), leaves((2, 5, 3), device=device))
