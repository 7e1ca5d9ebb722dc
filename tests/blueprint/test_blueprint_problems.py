"""The blueprint benchmark suite: every problem verified on its CPU shapes against float64."""

from __future__ import annotations

import pytest
import torch

import warpforge.blueprint.problems  # noqa: F401 - registers the problems
from warpforge.harness import registered_problems

PROBLEMS = [p for p in registered_problems() if p.name.startswith("blueprint.")]


def test_suite_has_the_eight_blueprints() -> None:
    assert {p.name for p in PROBLEMS} >= {
        "blueprint.bias_gelu",
        "blueprint.residual_rmsnorm_swiglu",
        "blueprint.scaled_masked_softmax",
        "blueprint.layernorm_linear_gelu",
        "blueprint.causal_attention_scores",
        "blueprint.mlp_block",
        "blueprint.reduction_chain",
        "blueprint.mixed_precision_chain",
    }
    for problem in PROBLEMS:
        assert set(problem.baselines) == {"eager", "torch.compile"}
        assert callable(problem.baselines["eager"]())
        for shape in problem.shapes:
            assert problem.bytes_moved(shape, torch.bfloat16) > 0
            assert problem.flops(shape, torch.bfloat16) > 0


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_problem_matches_float64_reference_on_cpu_shapes(problem, device) -> None:  # type: ignore[no-untyped-def]
    dtype = torch.float32 if torch.float32 in problem.dtypes else torch.float16
    _verify(problem, dtype, device)


@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_problem_in_bfloat16_on_gpu(problem) -> None:  # type: ignore[no-untyped-def]
    _verify(problem, torch.bfloat16, torch.device("cuda"))


def _verify(problem, dtype: torch.dtype, device: torch.device) -> None:  # type: ignore[no-untyped-def]
    """The harness's rule: within atol + rtol*|ref| or 2x PyTorch's own error at the dtype; the
    fused kernels themselves, not a fallback to the PyTorch reference (the problems compile
    non-strictly, as training runs would)."""
    from warpforge.cache import default_metrics

    generator = torch.Generator().manual_seed(1234)
    for shape in problem.cpu_shapes:
        inputs = problem.make_inputs(shape, dtype, device, generator)
        fallbacks = default_metrics().snapshot()["fallbacks"]
        got = problem.implementation(*inputs)
        assert default_metrics().snapshot()["fallbacks"] == fallbacks, (
            f"{problem.name}: fell back to the PyTorch reference"
        )
        wide = [t.double() if t.is_floating_point() else t for t in inputs]
        want = problem.reference(*wide)
        at_dtype = problem.reference(*inputs)
        got, want, at_dtype = (v if isinstance(v, tuple) else (v,) for v in (got, want, at_dtype))
        atol, rtol = problem.tolerance.for_dtype(dtype)
        for mine, truth, torch_own in zip(got, want, at_dtype, strict=True):
            assert mine.shape == truth.shape and mine.dtype == torch_own.dtype
            error = (mine.double() - truth.double()).abs()
            allowed = torch.maximum(
                atol + rtol * truth.double().abs(),
                torch.full_like(
                    error, 2 * (torch_own.double() - truth.double()).abs().max().item()
                ),
            )
            assert bool((error <= allowed).all()), f"{problem.name}: max error {error.max().item()}"
