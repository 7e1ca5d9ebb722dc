"""The robotics harness problems: inputs, candidate, reference and eager baselines agree."""

from __future__ import annotations

import pytest
import torch

from warpforge.harness.registry import get_problem

PROBLEMS = (
    "resample.fwd.bf16",
    "resample.fwd.fp32",
    "resample.bwd.fp32",
    "align.fwd",
    "align8.fwd",
    "voxelize.occupancy",
    "voxelize.mean",
)


def float64_copy(x: object) -> object:
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
        return x.double()
    return x


@pytest.mark.parametrize("name", PROBLEMS)
def test_problem_on_cpu_shapes(name: str) -> None:
    import warpforge.robotics.problems  # noqa: F401  (registers)

    problem = get_problem(name)
    # bfloat16 loads are wrong under the CPU interpreter: float16 stands in for it here
    dtype = torch.float16 if problem.dtypes[0] == torch.bfloat16 else problem.dtypes[0]
    for shape in problem.cpu_shapes:
        inputs = problem.make_inputs(shape, dtype, torch.device("cpu"),
                                     torch.Generator().manual_seed(0))  # fmt: skip
        out = problem.implementation(*inputs)
        if problem.float64_reference:
            expected = problem.reference(*[float64_copy(x) for x in inputs])
            assert torch.allclose(out.double(), expected.double(), atol=2e-3, rtol=2e-3)
        else:
            expected = problem.reference(*inputs)
            assert torch.equal(out, expected)
        assert bool((out != 0).any())
        for baseline_name, factory in problem.baselines.items():
            if "compile" in baseline_name:
                continue  # compiled baselines run in the GPU suite
            got = factory()(*inputs)
            assert torch.allclose(got.double(), expected.double(), atol=2e-3, rtol=2e-3), (
                baseline_name
            )
        assert problem.bytes_moved(shape, dtype) > 0 and problem.flops(shape, dtype) > 0
