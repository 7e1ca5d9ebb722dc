"""The custom ops trace under torch.compile(fullgraph=True) (aot_eager: no C++ compiler needed;
the GPU suite compiles with Inductor)."""

from __future__ import annotations

import torch

from warpforge.robotics import align, resample, voxelize


def test_fullgraph_forward_and_backward(cpu_path: str) -> None:
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(50)
    values = torch.randn(2, 6, 3, generator=g, requires_grad=True)
    times = torch.sort(torch.rand(2, 6, generator=g), dim=1).values
    query = torch.rand(2, 5, generator=g)

    def loss(v: torch.Tensor) -> torch.Tensor:
        a = resample(v, times, query, assume_sorted=True)
        b = align([(v, times), (v[..., :1].detach(), times)], query, assume_sorted=True)
        return a.square().sum() + b.sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    (grad,) = torch.autograd.grad(compiled(values), values)
    (expected,) = torch.autograd.grad(loss(values), values)
    assert torch.allclose(grad, expected, atol=1e-6)

    points = torch.rand(50, 3, generator=g)
    kwargs = {"voxel_size": 0.25, "grid_min": 0.0, "grid_size": 4, "reduce": "count"}
    voxels = torch.compile(lambda p: voxelize(p, **kwargs), fullgraph=True, backend="aot_eager")
    assert torch.equal(voxels(points), voxelize(points, **kwargs))
