"""voxelize: axis order, every reduction, dropping, batches, against a plain per-point loop."""

from __future__ import annotations

import pytest
import robotics_plain_reference as plain
import torch

from warpforge.robotics import voxelize
from warpforge.robotics.voxelize import REDUCTIONS

GRID_MIN = [-0.5, 0.25, -1.0]
VOXEL = [0.5, 0.25, 0.75]
GRID = [7, 11, 3]


def random_cloud(n: int, seed: int, channels: int = 3):
    g = torch.Generator().manual_seed(seed)
    # the box reaches past the grid on every side: some points must be dropped
    points = torch.rand(n, 3, generator=g) * torch.tensor([4.5, 3.5, 3.0]) - torch.tensor(
        [1.0, 0.0, 1.5]
    )
    features = torch.randn(n, channels, generator=g) - 1.0
    return points, features, g


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_matches_plain_reference(cpu_path: str, reduce: str) -> None:
    points, features, _ = random_cloud(600, seed=30)
    feats = features if reduce in ("sum", "mean", "max") else None
    out = voxelize(points, feats, voxel_size=VOXEL, grid_min=GRID_MIN, grid_size=GRID,
                   reduce=reduce)  # fmt: skip
    expected = plain.voxelize(points, feats, GRID_MIN, VOXEL, GRID, reduce)[0]
    assert out.shape == expected.shape
    assert out.dtype == {"occupancy": torch.bool, "count": torch.int32}.get(reduce, torch.float32)
    assert torch.allclose(out.double(), expected, atol=1e-5, rtol=1e-5)
    assert bool((out.double() != 0).any())  # the cloud really hit the grid


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_batched_matches_plain_reference(cpu_path: str, reduce: str) -> None:
    points, features, g = random_cloud(400, seed=31, channels=5)
    batch_index = torch.randint(-1, 4, (400,), generator=g)  # -1 and 3 are outside [0, 3)
    feats = features if reduce in ("sum", "mean", "max") else None
    out = voxelize(points, feats, voxel_size=VOXEL, grid_min=GRID_MIN, grid_size=GRID,
                   reduce=reduce, batch_index=batch_index, batch_size=3)  # fmt: skip
    expected = plain.voxelize(points, feats, GRID_MIN, VOXEL, GRID, reduce, batch_index, 3)
    assert out.shape == expected.shape
    assert torch.allclose(out.double(), expected, atol=1e-5, rtol=1e-5)


def test_axis_order_is_x_y_z(cpu_path: str) -> None:
    points = torch.tensor([[2.5, 0.5, 0.5], [0.5, 1.5, 0.5], [0.5, 0.5, 3.5]])
    out = voxelize(points, voxel_size=1.0, grid_min=0.0, grid_size=[4, 5, 6], reduce="count")
    assert out.shape == (4, 5, 6)
    assert out[2, 0, 0] == 1 and out[0, 1, 0] == 1 and out[0, 0, 3] == 1
    assert int(out.sum()) == 3


def test_max_of_negative_features_and_empty_voxels_are_zero(cpu_path: str) -> None:
    points = torch.tensor([[0.1, 0.1, 0.1], [0.2, 0.2, 0.2], [1.5, 0.1, 0.1]])
    features = torch.tensor([[-3.0, -7.0], [-5.0, -2.0], [-1.0, 4.0]])
    out = voxelize(points, features, voxel_size=1.0, grid_min=0.0, grid_size=[3, 2, 2],
                   reduce="max")  # fmt: skip
    assert out[0, 0, 0].tolist() == [-3.0, -2.0]
    assert out[1, 0, 0].tolist() == [-1.0, 4.0]
    assert int((out != 0).any(-1).sum()) == 2  # every other voxel holds exactly 0


def test_out_of_grid_and_nan_points_are_dropped(cpu_path: str) -> None:
    points = torch.tensor(
        [[-0.01, 0.5, 0.5], [2.0, 0.5, 0.5], [0.5, float("nan"), 0.5], [0.5, 0.5, 1.99],
         [float("inf"), 0.5, 0.5]]
    )  # fmt: skip
    out = voxelize(points, voxel_size=1.0, grid_min=0.0, grid_size=2, reduce="count")
    assert int(out.sum()) == 1 and out[0, 0, 1] == 1


def test_deterministic_reductions_repeat_bitwise(cpu_path: str) -> None:
    """Two calls on the same cloud give bitwise equal grids on the CPU tier's paths (outputs
    fully written each call); the GPU's atomic orderings are checked the same way in
    ``test_robotics_gpu.py``."""
    points, features, _ = random_cloud(300, seed=32)
    for reduce in ("occupancy", "count", "max"):
        feats = features if reduce == "max" else None
        kwargs = {"voxel_size": VOXEL, "grid_min": GRID_MIN, "grid_size": GRID, "reduce": reduce}
        assert torch.equal(voxelize(points, feats, **kwargs), voxelize(points, feats, **kwargs))


def test_float16_features_and_strided_points(cpu_path: str) -> None:
    points, features, _ = random_cloud(200, seed=33)
    wide = torch.cat([points, torch.zeros(200, 2)], dim=1)[:, :3]  # row stride 5
    out = voxelize(wide, features.half(), voxel_size=VOXEL, grid_min=GRID_MIN, grid_size=GRID,
                   reduce="mean")  # fmt: skip
    expected = plain.voxelize(points, features.half(), GRID_MIN, VOXEL, GRID, "mean")[0]
    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"points": torch.rand(5, 2)}, ValueError, r"points: expected shape \[N, 3\]"),
        ({"voxel_size": 0.0}, ValueError, r"voxel_size\[x\]: expected a finite number > 0"),
        (
            {"voxel_size": [1.0, float("inf"), 1.0]},
            ValueError,
            r"voxel_size\[y\]: expected a finite number > 0, got inf",
        ),
        ({"grid_min": float("nan")}, ValueError, r"grid_min\[x\]: expected a finite number"),
        (
            {"grid_min": [0.0, 0.0, float("-inf")]},
            ValueError,
            r"grid_min\[z\]: expected a finite number, got -inf",
        ),
        ({"grid_min": "0"}, ValueError, r"grid_min: expected a number or three"),
        ({"grid_min": [0, "1", 2]}, TypeError, r"grid_min\[y\]: expected a number, got str"),
        ({"features": torch.rand(5, 0), "reduce": "sum"}, ValueError, "at least one channel"),
        (
            {"batch_index": torch.full((5,), -1, dtype=torch.long)},
            ValueError,
            "batch_index: expected some index >= 0 to read batch_size from",
        ),
        ({"voxel_size": [1.0, 2.0]}, ValueError, "voxel_size: expected a number or three"),
        ({"grid_size": [4, 0, 4]}, ValueError, r"grid_size\[y\]: expected an int >= 1"),
        ({"reduce": "median"}, ValueError, "reduce: expected one of"),
        ({"reduce": "mean"}, ValueError, "features: reduce='mean' needs features"),
        ({"features": torch.rand(5, 2)}, ValueError, "reduce='occupancy' uses no features"),
        ({"reduce": "sum", "features": torch.rand(4, 2)}, ValueError, "expected 5 rows"),
        ({"batch_index": torch.zeros(4, dtype=torch.long)}, ValueError, "expected 5 entries"),
        ({"batch_size": 2}, ValueError, "batch_size: given without batch_index"),
        ({"batch_index": torch.zeros(5)}, TypeError, "batch_index: expected dtype"),
    ],
)
def test_invalid_arguments(kwargs: dict, error: type, match: str) -> None:
    args = {"points": torch.rand(5, 3), "voxel_size": 1.0, "grid_min": 0.0, "grid_size": 4}
    args.update(kwargs)
    points, features = args.pop("points"), args.pop("features", None)
    with pytest.raises(error, match=match):
        voxelize(points, features, **args)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_empty_cloud_gives_an_empty_grid(reduce: str, cpu_path: str) -> None:
    """A frame with no points is a legitimate input: a grid of the asked shape and dtype with
    every voxel empty, batched too; an empty batch_index without batch_size is an error."""
    features = torch.rand(0, 3) if reduce in ("sum", "mean", "max") else None
    out = voxelize(torch.rand(0, 3), features, voxel_size=1.0, grid_min=0.0, grid_size=[2, 3, 4],
                   reduce=reduce)  # fmt: skip
    expected = voxelize(torch.full((1, 3), 9.0), None if features is None else torch.rand(1, 3),
                        voxel_size=1.0, grid_min=0.0, grid_size=[2, 3, 4], reduce=reduce)  # fmt: skip
    assert out.shape == expected.shape and out.dtype == expected.dtype  # the point is dropped
    assert not out.any()
    batched = voxelize(torch.rand(0, 3), features, voxel_size=1.0, grid_min=0.0, grid_size=2,
                       reduce=reduce, batch_index=torch.zeros(0, dtype=torch.long), batch_size=3)  # fmt: skip
    assert batched.shape[:4] == (3, 2, 2, 2) and not batched.any()
    with pytest.raises(ValueError, match="batch_size: needed with an empty batch_index"):
        voxelize(torch.rand(0, 3), features, voxel_size=1.0, grid_min=0.0, grid_size=2,
                 reduce=reduce, batch_index=torch.zeros(0, dtype=torch.long))  # fmt: skip
