"""Row-wise ops (norms, softmax) see their input as a (M, N) matrix with unit column stride.

This module holds that view and the launch shape shared by every row-wise kernel. Each kernel's
``_launch_config`` in its op module calls :func:`row_launch_config` with its own budget, so the
tuner can replace one function per kernel.

Why the defaults (H100, measured register counts from ``ptxas -v`` on sm_90):

* A row up to 16K columns stays in registers (one read, one write). The backward kernels keep
  about 8-9 registers per element, so they target 8 elements per thread (up to 32 warps);
  forward kernels keep fewer and target 16 (16-byte vectors for 2-byte types).
* Short rows are batched several per program (N=256: 16 rows forward), so a program moves
  enough bytes to hide latency.
* Longer rows are processed in chunks by a persistent grid whose size keeps the rows in flight
  inside L2: the output pass walks each row backwards, so the re-read comes from L2, not HBM.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from warpforge.runtime import device_capabilities

MAX_SINGLE_PASS_N = 16384
"""Widest row kept whole in registers."""

CHUNK_N = 8192
"""Block width of the chunked (long-row) kernels."""

_INTERPRETER_PROGRAMS = 4
"""Persistent grid size under the Triton interpreter (each program runs serially)."""

_L2_FRACTION = 0.75
"""Share of L2 the rows in flight may occupy (the rest serves other traffic)."""


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """A (M, N) view of ``x`` over its last dimension with column stride 1; copies only when the
    layout cannot be expressed that way (e.g. a transposed last dimension)."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)  # a view whenever the leading dims flatten to one stride
    if rows.stride(1) != 1 and n > 1:
        rows = rows.contiguous()
    return rows


def kernel_device(t: torch.Tensor) -> contextlib.AbstractContextManager:
    """Make ``t``'s GPU current: Triton launches on the current device, not the tensor's.
    Nothing to do (and no device switch to pay for) when it already is."""
    if not t.is_cuda or t.device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(t.device)


def buffer_aligned(t: torch.Tensor) -> bool:
    """True when ``t`` starts on a 16-byte boundary. While torch.compile traces, tensors have
    no address (Dynamo traces neither ``data_ptr`` nor ``storage_offset``): taken as aligned,
    as allocations are; the choice only picks between two exact paths."""
    if torch.compiler.is_compiling():
        return True
    return t.data_ptr() % 16 == 0


def launch_options(num_warps: int, max_registers: int | None) -> dict[str, int]:
    """The keywords of a kernel launch: ``num_warps`` and, where capped, ``maxnreg``."""
    options = {"num_warps": num_warps}
    if max_registers is not None:
        options["maxnreg"] = max_registers
    return options


def cdiv(a: int, b: int) -> int:
    """Ceiling division for grid sizes."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n (1 for n <= 1)."""
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class RowLaunchConfig:
    """How a row-wise kernel is launched for one (M, N, dtype)."""

    block_n: int
    """Columns per block: the whole (padded) row when ``single_pass``, else the chunk width."""
    rows_per_program: int
    """Rows per block (single pass only; chunked kernels take one row at a time)."""
    single_pass: bool
    """True when a row fits one block and stays in registers (one read of memory)."""
    num_warps: int
    num_programs: int
    """Grid size. Persistent kernels loop over row tiles ``pid, pid + num_programs, ...``."""
    max_registers: int | None = None
    """Registers a thread may use (Triton's ``maxnreg``), so that as many programs as planned
    fit an SM; None leaves the count to ptxas."""


def row_launch_config(
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    elements_per_thread: int = 16,
    max_warps: int = 16,
    tile_elements: int = 4096,
    reread_operands: int = 1,
    resident_warps: int | None = None,
) -> RowLaunchConfig:
    """The hand-picked launch shape of a row-wise kernel (the tuner's default).

    ``reread_operands`` is how many (M, N) operands the chunked kernel reads twice (their rows
    in flight are kept within L2). ``resident_warps`` (warps per SM that the kernel's register
    use allows) makes a single-pass kernel persistent, one program per resident slot, as the
    norm backward needs for its per-program partial sums.
    """
    block = next_power_of_2(N)
    if block <= MAX_SINGLE_PASS_N:
        rows = max(1, min(tile_elements // block, next_power_of_2(M)))
        warps = max(1, min(max_warps, block * rows // (32 * elements_per_thread)))
    else:
        block, rows = CHUNK_N, 1
        warps = max(1, min(max_warps, CHUNK_N // (32 * elements_per_thread)))
    return row_launch_shape(
        M,
        N,
        dtype,
        device,
        block_n=block,
        rows_per_program=rows,
        num_warps=warps,
        reread_operands=reread_operands,
        resident_warps=resident_warps,
    )


def row_launch_shape(
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    block_n: int,
    rows_per_program: int,
    num_warps: int,
    reread_operands: int = 1,
    resident_warps: int | None = None,
) -> RowLaunchConfig:
    """The launch for a chosen (block_n, rows_per_program, num_warps), tuned or hand-picked:
    single pass when the block covers the row, and the grid size that goes with it."""
    sm_count = device_capabilities(device).sm_count
    if block_n >= N:
        tiles = cdiv(M, rows_per_program)
        if resident_warps is None:
            programs = tiles
        elif sm_count is None:
            programs = min(tiles, _INTERPRETER_PROGRAMS)
        else:
            programs = min(tiles, sm_count * max(1, resident_warps // num_warps))
        return RowLaunchConfig(block_n, rows_per_program, True, num_warps, max(1, programs))
    if sm_count is None:
        programs = min(M, _INTERPRETER_PROGRAMS)
    else:
        row_bytes = reread_operands * N * dtype.itemsize
        l2 = device_capabilities(device).l2_bytes or 50 * 2**20
        per_sm = int(_L2_FRACTION * l2 // (sm_count * row_bytes))
        programs = min(M, sm_count * max(1, min(4, per_sm)))
    return RowLaunchConfig(block_n, 1, False, num_warps, max(1, programs))


def launch_rows(
    config: RowLaunchConfig,
    rows_kernel: Any,
    chunked_kernel: Any,
    args: tuple[Any, ...],
    **constexprs: Any,
) -> None:
    """Launch a row-wise kernel family as ``config`` says: ``rows_kernel`` (whole rows,
    ``ROWS`` per program) when a row fits one block, else ``chunked_kernel``; both take
    ``BLOCK_N``, ``num_warps`` and ``maxnreg`` (``max_registers``) from the config. Call inside
    :func:`kernel_device`."""
    grid = (config.num_programs,)
    options = launch_options(config.num_warps, config.max_registers)
    if config.single_pass:
        rows_kernel[grid](
            *args, ROWS=config.rows_per_program, BLOCK_N=config.block_n, **options, **constexprs
        )
    else:
        chunked_kernel[grid](*args, BLOCK_N=config.block_n, **options, **constexprs)
