"""Triton kernel for point-cloud voxelization: one pass over the points, scatter by atomics.

Each program takes ``BLOCK_N`` points, computes ``[ix, iy, iz] = floor((p - grid_min) /
voxel_size)`` in float64 (IEEE division, so the CPU reference finds the very same voxel), drops
points outside the grid (NaN included) and scatters into a ``[B, X, Y, Z(, C)]`` grid whose first
spatial axis is X. Occupancy stores a constant 1 and count adds integers, so both are
deterministic; mean runs a count pass, then adds ``f / count`` per point; max uses ``atomic_max`` (order independent, correct for negative floats); sum
adds float32 atomically (order may vary in the last bits between runs).
"""

from __future__ import annotations

import triton
import triton.language as tl

# feature accumulation codes (constexpr)
# (globals read inside @triton.jit must be tl.constexpr objects)
NO_FEATURES, SUM, MAX = (tl.constexpr(code) for code in range(3))


@triton.jit
def _axis_index(coord, grid_min, voxel_size, size):
    cell = tl.floor((coord.to(tl.float64) - grid_min) / voxel_size)
    inside = (cell >= 0) & (cell < size)  # False for NaN
    return tl.where(inside, cell, 0).to(tl.int64), inside


@triton.jit
def voxelize_kernel(
    points_ptr,
    points_stride_n,
    points_stride_k,
    features_ptr,
    features_stride_n,
    batch_ptr,
    features_out_ptr,
    count_ptr,
    occupancy_ptr,
    N,
    C,
    num_batches,
    grid_ptr,
    X,
    Y,
    Z,
    ACCUMULATE: tl.constexpr,
    WRITE_COUNT: tl.constexpr,
    DIVIDE_BY_COUNT: tl.constexpr,
    HAS_BATCH: tl.constexpr,
    WRITE_OCCUPANCY: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    in_n = offs < N
    base = points_ptr + offs * points_stride_n
    # grid_min and voxel_size as float64 (a float argument would arrive as float32)
    min_x = tl.load(grid_ptr)
    min_y = tl.load(grid_ptr + 1)
    min_z = tl.load(grid_ptr + 2)
    size_x = tl.load(grid_ptr + 3)
    size_y = tl.load(grid_ptr + 4)
    size_z = tl.load(grid_ptr + 5)
    ix, in_x = _axis_index(tl.load(base, mask=in_n, other=0), min_x, size_x, X)
    iy, in_y = _axis_index(tl.load(base + points_stride_k, mask=in_n, other=0), min_y, size_y, Y)
    iz, in_z = _axis_index(
        tl.load(base + 2 * points_stride_k, mask=in_n, other=0), min_z, size_z, Z
    )
    keep = in_n & in_x & in_y & in_z
    if HAS_BATCH:
        b = tl.load(batch_ptr + offs, mask=in_n, other=0).to(tl.int64)
        keep = keep & (b >= 0) & (b < num_batches)
        b = tl.where(keep, b, 0)
    else:
        b = tl.zeros([BLOCK_N], dtype=tl.int64)
    voxel = ((b * X + ix) * Y + iy) * Z + iz

    if WRITE_OCCUPANCY:
        ones = tl.full([BLOCK_N], 1, dtype=tl.uint8)
        tl.store(occupancy_ptr + voxel, ones, mask=keep)
    if WRITE_COUNT:
        ones32 = tl.full([BLOCK_N], 1, dtype=tl.int32)
        tl.atomic_add(count_ptr + voxel, ones32, mask=keep)
    if ACCUMULATE != NO_FEATURES:
        offs_c = tl.arange(0, BLOCK_C)
        in_c = offs_c < C
        tile = keep[:, None] & in_c[None, :]
        feats = tl.load(
            features_ptr + offs[:, None] * features_stride_n + offs_c[None, :], mask=tile, other=0
        ).to(tl.float32)
        if DIVIDE_BY_COUNT:
            # mean as a sum of f / n over a finished count: no pass over the whole grid after
            n = tl.load(count_ptr + voxel, mask=keep, other=1).to(tl.float32)
            feats = feats / n[:, None]
        targets = features_out_ptr + voxel[:, None] * C + offs_c[None, :]
        if ACCUMULATE == SUM:
            tl.atomic_add(targets, feats, mask=tile)
        else:
            tl.atomic_max(targets, feats, mask=tile)
