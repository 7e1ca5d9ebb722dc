"""Row-wise ops (norms, softmax) see their input as a (M, N) matrix with unit column stride.

This module holds that view and the launch shape shared by every row-wise kernel: how many
rows one program handles, how wide a block is, and when a row no longer fits one block.
Each kernel's ``_launch_config`` in its op module starts from :func:`row_launch_config`, so the
tuner can replace one function per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_SINGLE_PASS_N = 16384
"""Widest row kept whole in registers (16 warps x 32 fp32 values per thread per operand)."""

CHUNK_N = 4096
"""Block width of the chunked (long-row) kernels."""

TILE_ELEMENTS = 4096
"""Elements per program for short rows: N=256 gives 16 rows per program."""


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """A (M, N) view of ``x`` over its last dimension with column stride 1; copies only when the
    layout cannot be expressed that way (e.g. a transposed last dimension)."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)  # a view whenever the leading dims flatten to one stride
    if rows.stride(1) != 1 and n > 1:
        rows = rows.contiguous()
    return rows


def cdiv(a: int, b: int) -> int:
    """Ceiling division for grid sizes."""
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class RowLaunchConfig:
    """How a row-wise kernel is launched for one (M, N, dtype)."""

    block_n: int
    """Columns per block: the whole (padded) row when ``single_pass``, else the chunk width."""
    rows_per_program: int
    single_pass: bool
    """True when a row fits one block and stays in registers (one read of memory)."""
    num_warps: int


def row_launch_config(
    M: int,
    N: int,
    dtype: torch.dtype,
    *,
    max_single_pass_n: int = MAX_SINGLE_PASS_N,
    tile_elements: int = TILE_ELEMENTS,
) -> RowLaunchConfig:
    """Default shape: whole rows up to ``max_single_pass_n``, several rows per program for
    short rows, ~16 elements (16-byte vectors for 2-byte types) per thread."""
    block = _next_power_of_2(N)
    if block <= max_single_pass_n:
        rows = max(1, min(tile_elements // block, _next_power_of_2(M)))
        single = True
    else:
        block, rows, single = CHUNK_N, 1, False
    elements = block * rows
    num_warps = max(1, min(16, elements // (32 * 16)))
    return RowLaunchConfig(block, rows, single, num_warps)
