"""Point-cloud voxelization: ``voxelize(points, features, voxel_size=..., grid_min=..., ...)``.

A point ``(x, y, z)`` falls in voxel ``[ix, iy, iz]`` with ``ix = floor((x - grid_min_x) /
voxel_size_x)`` (computed in float64 on every path, so CPU and GPU agree on the voxel), and the
output's axes are ``[X, Y, Z]`` in that order (``[B, X, Y, Z]`` with ``batch_index``). Points
outside the grid, with a NaN coordinate or with a batch index outside ``[0, batch_size)`` are
dropped. Empty voxels hold 0 for every reduction.

Output dtypes: ``occupancy`` bool, ``count`` int32, ``sum``/``mean``/``max`` float32 (features are
accumulated in float32). ``occupancy``, ``count`` and ``max`` are deterministic; ``sum`` and
``mean`` on the GPU add in a run-dependent order (float32 atomics).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from warpforge.dispatch import dispatcher_required
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import (
    check_choice,
    check_positive,
    check_same_device,
    check_tensor,
    describe,
)

REDUCTIONS: tuple[str, ...] = ("occupancy", "count", "sum", "mean", "max")
_FEATURE_REDUCTIONS = ("sum", "mean", "max")
_POINT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_FEATURE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_INDEX_DTYPES = (torch.int32, torch.int64)


def _triple(name: str, value: object, *, positive: bool) -> list[float]:
    items = (
        [value] * 3 if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    )
    if isinstance(items, torch.Tensor):
        items = items.tolist()
    if not isinstance(items, Sequence) or len(items) != 3:
        raise ValueError(f"{name}: expected a number or three (x, y, z), got {describe(value)}")
    out = []
    for index, item in enumerate(items):  # no zip(strict=...): this runs under torch.compile
        axis = "xyz"[index]
        if positive:
            out.append(check_positive(f"{name}[{axis}]", item, finite=True))
        elif isinstance(item, bool) or not isinstance(item, (int, float)):
            raise TypeError(f"{name}[{axis}]: expected a number, got {describe(item)}")
        elif not math.isfinite(item):
            raise ValueError(f"{name}[{axis}]: expected a finite number, got {item!r}")
        else:
            out.append(float(item))
    return out


def _grid_size(value: object) -> list[int]:
    items = [value] * 3 if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(items, Sequence) or len(items) != 3:
        raise ValueError(
            f"grid_size: expected an int or three ints (X, Y, Z), got {describe(value)}"
        )
    for index, item in enumerate(items):
        axis = "xyz"[index]
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise ValueError(f"grid_size[{axis}]: expected an int >= 1, got {describe(item)}")
    return [int(i) for i in items]


def _voxel_indices(
    points: torch.Tensor,
    grid_min: Sequence[float],
    voxel_size: Sequence[float],
    size: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per point: (flat spatial voxel index, inside-grid flag), in float64 like the kernel."""
    cells = torch.floor(
        (points.to(torch.float64) - points.new_tensor(grid_min, dtype=torch.float64))
        / points.new_tensor(voxel_size, dtype=torch.float64)
    )
    limits = points.new_tensor(size, dtype=torch.float64)
    inside = ((cells >= 0) & (cells < limits)).all(dim=1)  # NaN compares False
    cells = torch.where(inside.unsqueeze(1), cells, torch.zeros_like(cells)).to(torch.int64)
    flat = (cells[:, 0] * size[1] + cells[:, 1]) * size[2] + cells[:, 2]
    return flat, inside


def voxelize_reference(
    points: torch.Tensor,
    features: torch.Tensor | None,
    batch_index: torch.Tensor | None,
    grid_min: Sequence[float],
    voxel_size: Sequence[float],
    grid_size: Sequence[int],
    batch_size: int,
    reduce: str,
) -> torch.Tensor:
    """Scatter-based PyTorch voxelization with the semantics of :func:`voxelize` ([B, X, Y, Z...])."""
    flat, keep = _voxel_indices(points, grid_min, voxel_size, grid_size)
    cells = grid_size[0] * grid_size[1] * grid_size[2]
    if batch_index is not None:
        b = batch_index.to(torch.int64)
        keep = keep & (b >= 0) & (b < batch_size)
        flat = flat + torch.where(keep, b, torch.zeros_like(b)) * cells
    flat = flat[keep]
    total = batch_size * cells
    shape = [batch_size, *grid_size]
    counts = torch.zeros(total, dtype=torch.int32, device=points.device)
    counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    if reduce == "occupancy":
        return (counts > 0).view(shape)
    if reduce == "count":
        return counts.view(shape)
    accumulate = torch.float64 if features.dtype == torch.float64 else torch.float32
    feats = features[keep].to(accumulate)
    channels = feats.shape[1]
    out = torch.zeros(total, channels, dtype=accumulate, device=points.device)
    index = flat.unsqueeze(1).expand(-1, channels)
    if reduce == "max":
        out.scatter_reduce_(0, index, feats, reduce="amax", include_self=False)
    else:
        out.index_add_(0, flat, feats)
        if reduce == "mean":
            out = out / counts.clamp(min=1).unsqueeze(1).to(accumulate)
    return out.view(*shape, channels)


def _voxelize_impl(
    points: torch.Tensor,
    features: torch.Tensor | None,
    batch_index: torch.Tensor | None,
    grid_min: list[float],
    voxel_size: list[float],
    grid_size: list[int],
    batch_size: int,
    reduce: str,
) -> torch.Tensor:
    # an empty cloud launches nothing: the scatter reference returns its empty grid
    if execution_path(points.device) is ExecutionPath.TORCH_REFERENCE or points.shape[0] == 0:
        return voxelize_reference(
            points, features, batch_index, grid_min, voxel_size, grid_size, batch_size, reduce
        )
    from warpforge.robotics._kernels import voxelize as kernels

    device = points.device
    total = batch_size * grid_size[0] * grid_size[1] * grid_size[2]
    shape = [batch_size, *grid_size]
    channels = features.shape[1] if features is not None else 1
    write_occupancy = reduce in ("occupancy", "max")
    write_count = reduce in ("count", "mean")
    # buffers a reduction does not use are one-element placeholders, never written
    occupancy = (torch.zeros if write_occupancy else torch.empty)(
        total if write_occupancy else 1, dtype=torch.uint8, device=device
    )
    count = (torch.zeros if write_count else torch.empty)(
        total if write_count else 1, dtype=torch.int32, device=device
    )
    if reduce in _FEATURE_REDUCTIONS:
        fill = float("-inf") if reduce == "max" else 0.0
        accum = torch.full((total, channels), fill, dtype=torch.float32, device=device)
    else:
        accum = count
    block_n, num_warps = _launch_config(channels)
    params = _grid_parameters(tuple(grid_min), tuple(voxel_size), str(device))

    def run(accumulate: int, count_pass: bool, divide: bool) -> None:
        kernels.voxelize_kernel[(triton_cdiv(points.shape[0], block_n),)](
            points, points.stride(0), points.stride(1),
            features if features is not None else points,
            features.stride(0) if features is not None else 0,
            batch_index if batch_index is not None else points,
            accum, count, occupancy,
            points.shape[0], channels, batch_size, params, *grid_size,
            ACCUMULATE=accumulate,
            WRITE_COUNT=count_pass,
            DIVIDE_BY_COUNT=divide,
            HAS_BATCH=batch_index is not None,
            WRITE_OCCUPANCY=write_occupancy,
            BLOCK_N=block_n,
            BLOCK_C=1 << max(0, (channels - 1).bit_length()),
            num_warps=num_warps,
        )  # fmt: skip

    if reduce == "mean":
        run(kernels.NO_FEATURES.value, count_pass=True, divide=False)
        run(kernels.SUM.value, count_pass=False, divide=True)
    else:
        accumulate = {"sum": kernels.SUM, "max": kernels.MAX}.get(reduce, kernels.NO_FEATURES)
        run(accumulate.value, count_pass=write_count, divide=False)
    if reduce == "occupancy":
        return occupancy.view(torch.bool).view(shape)
    if reduce == "count":
        return count.view(shape)
    if reduce == "max":  # empty voxels still hold -inf
        accum.masked_fill_(occupancy.view(torch.bool).logical_not().unsqueeze(1), 0.0)
    return accum.view(*shape, channels)


def _launch_config(channels: int) -> tuple[int, int]:
    """Tuning knobs of the voxelize kernel: ``(BLOCK_N, num_warps)``. Many points per program
    keep enough scattered stores in flight; fewer when each point carries many features."""
    return (1024 if channels <= 4 else 256), 4


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=64)
def _grid_parameters(
    grid_min: tuple[float, ...], voxel_size: tuple[float, ...], device: str
) -> torch.Tensor:
    """grid_min and voxel_size as a float64 device tensor, cached: a fresh one per call would
    cost a host-to-device copy (and a sync) each time."""
    return torch.tensor([*grid_min, *voxel_size], dtype=torch.float64, device=device)


@torch.library.custom_op("warpforge_robotics::voxelize", mutates_args=())
def _voxelize_op(
    points: torch.Tensor,
    features: torch.Tensor | None,
    batch_index: torch.Tensor | None,
    grid_min: list[float],
    voxel_size: list[float],
    grid_size: list[int],
    batch_size: int,
    reduce: str,
) -> torch.Tensor:
    return _voxelize_impl(
        points, features, batch_index, grid_min, voxel_size, grid_size, batch_size, reduce
    )


@_voxelize_op.register_fake
def _(points, features, batch_index, grid_min, voxel_size, grid_size, batch_size, reduce):
    shape = [batch_size, *grid_size]
    if reduce == "occupancy":
        return points.new_empty(shape, dtype=torch.bool)
    if reduce == "count":
        return points.new_empty(shape, dtype=torch.int32)
    return points.new_empty([*shape, features.shape[1]], dtype=torch.float32)


def voxelize(
    points: torch.Tensor,
    features: torch.Tensor | None = None,
    *,
    voxel_size: float | Sequence[float],
    grid_min: float | Sequence[float],
    grid_size: int | Sequence[int],
    reduce: str = "occupancy",
    batch_index: torch.Tensor | None = None,
    batch_size: int | None = None,
) -> torch.Tensor:
    """Scatter ``points`` [N, 3] (x, y, z) into a voxel grid with axes [X, Y, Z].

    Args:
        points: [N, 3] floating point coordinates.
        features: [N, C] float32/float16/bfloat16; required for ``sum``, ``mean`` and ``max``,
            not accepted for ``occupancy`` and ``count``.
        voxel_size: edge length, one number or three (x, y, z), > 0.
        grid_min: coordinates of the grid's lower corner, one number or three.
        grid_size: voxels per axis, one int or three (X, Y, Z).
        reduce: ``"occupancy"`` (bool), ``"count"`` (int32), ``"sum"``, ``"mean"``, ``"max"``
            (float32, [..., C]). Empty voxels hold 0.
        batch_index: [N] int, the cloud each point belongs to; adds a leading batch dimension.
        batch_size: number of clouds; with ``batch_index`` and no ``batch_size`` it is read as
            ``batch_index.max() + 1`` (one device sync).

    Returns:
        [X, Y, Z] or [X, Y, Z, C]; [B, X, Y, Z(, C)] with ``batch_index``.
    """
    check_choice("reduce", reduce, REDUCTIONS)
    points = check_tensor("points", points, dtypes=_POINT_DTYPES, ndim=2, allow_empty=True)
    if points.shape[1] != 3:
        raise ValueError(f"points: expected shape [N, 3] (x, y, z), got {describe(points)}")
    sizes = _triple("voxel_size", voxel_size, positive=True)
    corner = _triple("grid_min", grid_min, positive=False)
    grid = _grid_size(grid_size)
    if reduce in _FEATURE_REDUCTIONS:
        if features is None:
            raise ValueError(f"features: reduce={reduce!r} needs features [N, C], got None")
        features = check_tensor(
            "features", features, dtypes=_FEATURE_DTYPES, ndim=2, allow_empty=True
        )
        if features.shape[1] < 1:
            raise ValueError(f"features: expected at least one channel, got {describe(features)}")
        if features.shape[0] != points.shape[0]:
            raise ValueError(
                f"features: expected {points.shape[0]} rows (one per point), got {describe(features)}"
            )
        if features.stride(1) != 1:
            features = features.contiguous()
    elif features is not None:
        raise ValueError(
            f"features: reduce={reduce!r} uses no features; pass None or reduce='sum', 'mean' "
            f"or 'max', got {describe(features)}"
        )
    if batch_index is not None:
        batch_index = check_tensor(
            "batch_index", batch_index, dtypes=_INDEX_DTYPES, ndim=1, allow_empty=True
        )
        if batch_index.shape[0] != points.shape[0]:
            raise ValueError(
                f"batch_index: expected {points.shape[0]} entries (one per point), "
                f"got {describe(batch_index)}"
            )
        if batch_size is None:
            if batch_index.numel() == 0:
                raise ValueError(
                    "batch_size: needed with an empty batch_index (no point to read the number "
                    "of clouds from), got None"
                )
            batch_size = int(batch_index.max()) + 1
            if batch_size < 1:
                raise ValueError(
                    "batch_index: expected some index >= 0 to read batch_size from (or pass "
                    f"batch_size), got all negative (max {batch_size - 1})"
                )
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size: expected an int >= 1, got {describe(batch_size)}")
    if batch_size is not None and batch_index is None:
        raise ValueError("batch_size: given without batch_index; pass both or neither")
    check_same_device(points=points, features=features, batch_index=batch_index)
    batches = batch_size if batch_index is not None else 1
    # no autograd here, so only tracing (and subclasses / modes) needs the custom op
    needs_op = dispatcher_required((points, features, batch_index))
    call = _voxelize_op if needs_op else _voxelize_impl
    out = call(points, features, batch_index, corner, sizes, grid, batches, reduce)
    return out if batch_index is not None else out[0]
