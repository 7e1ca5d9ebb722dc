"""The registered loss, activation and rope problems verify on their CPU shapes."""

from __future__ import annotations

import importlib

import pytest
import torch

from warpforge.harness.problem import BaselineUnavailable
from warpforge.harness.registry import get_problem

MODULES = (
    "warpforge.ops.loss_problems",
    "warpforge.ops.activation_problems",
    "warpforge.ops.rope_problems",
)
NAMES = (
    "cross_entropy.fwd",
    "cross_entropy.bwd",
    "cross_entropy.fwd_bwd",
    "fused_linear_cross_entropy.fwd_bwd",
    "swiglu.fwd",
    "swiglu.bwd",
    "geglu.fwd",
    "geglu.bwd",
    "rope.fwd",
    "rope.bwd",
)

for module in MODULES:
    importlib.import_module(module)


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def to_float64(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


@pytest.mark.parametrize("name", NAMES)
def test_problem_verifies_on_cpu_shapes(name):
    problem = get_problem(name)
    assert problem.shapes and problem.cpu_shapes and problem.description
    for index, shape in enumerate(problem.cpu_shapes):
        gen = torch.Generator().manual_seed(index)
        inputs = problem.make_inputs(shape, torch.float32, torch.device("cpu"), gen)
        got = as_tuple(problem.implementation(*inputs))
        expected = as_tuple(problem.reference(*(to_float64(x) for x in inputs)))
        eager = as_tuple(problem.baselines["torch"]()(*inputs))
        assert len(got) == len(expected) == len(eager)
        for g, e, b in zip(got, expected, eager, strict=True):
            assert g.shape == e.shape and g.dtype == torch.float32
            torch.testing.assert_close(g.double(), e, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(b.double(), e, atol=1e-4, rtol=1e-4)
        assert (
            problem.bytes_moved(shape, torch.float32) > 0
            and problem.flops(shape, torch.float32) > 0
        )


def test_liger_baselines_report_unavailable_without_liger():
    try:
        importlib.import_module("liger_kernel")
    except ImportError:
        for name in NAMES:
            factory = get_problem(name).baselines.get("liger")
            if factory is not None:
                with pytest.raises(BaselineUnavailable, match="Liger-Kernel"):
                    factory()
    else:
        pytest.skip("liger_kernel is installed here; its baselines load")


def test_flce_float64_reference_in_chunks_equals_autograd_of_the_unfused_code(monkeypatch):
    """The ground truth is computed a chunk of tokens at a time (its whole logits would not fit
    on the device); it must equal autograd through the plain unfused code, chunk size aside."""
    from warpforge.ops import loss_problems

    problem = get_problem("fused_linear_cross_entropy.fwd_bwd")
    shape = {"tokens": 37, "hidden": 12, "vocab": 29}
    gen = torch.Generator().manual_seed(11)
    hidden, weight, target = problem.make_inputs(shape, torch.float64, torch.device("cpu"), gen)
    assert (target == loss_problems.IGNORE_INDEX).any()
    want = loss_problems.unfused_loss_and_grads(hidden, weight, target)
    for chunk_elements in (2**27, 29 * 5, 1):  # one chunk, several, one token each
        monkeypatch.setattr(loss_problems, "REFERENCE_CHUNK_ELEMENTS", chunk_elements)
        got = problem.reference(hidden, weight, target)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == torch.float64 and g.shape == w.shape
            torch.testing.assert_close(g, w, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("name", ["cross_entropy.fwd_bwd", "cross_entropy.bwd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradient_check_sees_the_small_values_away_from_the_target(name, dtype):
    """The logits' gradient is ~1/V away from the target and ~1 there: a gradient right at the
    targets and zero elsewhere must fail, PyTorch's own must pass."""
    from warpforge.harness import checks

    problem = get_problem(name)
    gen = torch.Generator().manual_seed(5)
    inputs = problem.make_inputs({"M": 512, "V": 2048}, dtype, torch.device("cpu"), gen)
    as64 = [t.double() if t.is_floating_point() else t for t in inputs]
    ref = checks.as_outputs(problem.reference(*as64))
    native = checks.as_outputs(problem.reference(*inputs))
    extra = problem.saved_rounding(as64, dtype)  # as the harness adds it
    tolerance = problem.tolerance
    assert checks.check_values(native, ref, native, tolerance, trial=0, extra_bounds=extra) == []
    grad = native[-1]
    target = inputs[1]
    keep = torch.zeros_like(grad, dtype=torch.bool)
    rows = torch.arange(grad.shape[0])
    valid = (target >= 0) & (target < grad.shape[1])
    keep[rows[valid], target[valid]] = True
    target_only = [*native[:-1], torch.where(keep, grad, torch.zeros_like(grad))]
    found = checks.check_values(target_only, ref, native, tolerance, trial=0, extra_bounds=extra)
    assert [f.reason.value for f in found] == ["tolerance"]


@pytest.mark.parametrize(
    ("logits", "target", "cancels"),
    [
        ([[4.766438961029053, 0.5950660705566406, -1.8418900966644287]], [0], "the loss"),
        ([[-2.8835644721984863, 3.910963535308838, -1.8371955156326294]], [1], "1 - p"),
    ],
)
def test_float32_cancellation_is_allowed_and_nothing_more(logits, target, cancels):
    """Rows where the loss (lse - x[target]) or the target's gradient (p - 1) is a small
    difference of O(1) float32 numbers: warpforge's correct results there were off by 1-3 ulps
    of the terms, beyond the bound PyTorch's luckier rounding set (a CI flake). The allowance
    (saved_rounding) covers that and is a few ulps: 1e-5 of the terms still fails."""
    from warpforge.harness import checks

    problem = get_problem("cross_entropy.fwd_bwd")
    x, t = torch.tensor(logits), torch.tensor(target)
    got = checks.as_outputs(problem.implementation(x, t))
    ref = checks.as_outputs(problem.reference(x.double(), t))
    native = checks.as_outputs(problem.reference(x, t))
    extra = problem.saved_rounding([x.double(), t], torch.float32)
    tolerance = problem.tolerance
    assert checks.check_values(got, ref, native, tolerance, trial=0, extra_bounds=extra) == []
    nudge = 1e-5 * float(x.abs().max())
    for i in range(2):
        off = [o + nudge if j == i else o for j, o in enumerate(got)]
        found = checks.check_values(off, ref, native, tolerance, trial=0, extra_bounds=extra)
        assert [f.reason.value for f in found] == ["tolerance"], (cancels, i)
