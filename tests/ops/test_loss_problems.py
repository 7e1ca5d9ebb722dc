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
    assert checks.check_values(native, ref, native, problem.tolerance, trial=0) == []
    grad = native[-1]
    target = inputs[1]
    keep = torch.zeros_like(grad, dtype=torch.bool)
    rows = torch.arange(grad.shape[0])
    valid = (target >= 0) & (target < grad.shape[1])
    keep[rows[valid], target[valid]] = True
    target_only = [*native[:-1], torch.where(keep, grad, torch.zeros_like(grad))]
    found = checks.check_values(target_only, ref, native, problem.tolerance, trial=0)
    assert [f.reason.value for f in found] == ["tolerance"]
