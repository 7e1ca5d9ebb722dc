"""Launches of the whole-row kernels (``warpforge.ops._kernels.wide_rows``): rows of
16385-32768 columns, one row held by one program of 16-32 warps, read once (or, for a norm
forward with ``chunk`` set, walked by one program in chunks and read twice, which some norm
forwards also do at other widths: ``warpforge.ops.norm.NORM_FWD_LONG_LAUNCHES``).

Narrower rows take the tiled row kernels (several rows a program); wider ones the split or
chunked kernels (a row over several programs, or read twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warpforge.ops._rows import MAX_SINGLE_PASS_N, cdiv, launch_options, next_power_of_2
from warpforge.runtime import switch_on

if TYPE_CHECKING:
    import torch

WIDE_MAX_N = 32768
"""Widest row of the whole-row kernels: 32 fp32 values a thread at 32 warps (1024 threads)."""

MAX_UNROLLED_CHUNKS = 32
"""Most chunks a row an unrolled looped launch (``WideLaunch.unrolled``) takes: its code grows
with the count (one copy of a chunk's loads and arithmetic per chunk)."""

WIDE_ROWS = "WARPFORGE_WIDE_ROWS"
"""``0``/``false``/``no``/``off`` turns the whole-row kernels off (the split or chunked kernels
they replace); read at each call."""


@dataclass(frozen=True)
class WideLaunch:
    """One launch of a whole-row kernel."""

    num_warps: int = 32
    early_w: bool = False
    """Norms: weight and bias loaded before the row reductions (``EARLY_W``)."""
    stream: bool = False
    """x loaded evict_first and y stored .cs (``STREAM``); the one-row-a-program kernels only."""
    reload: bool = False
    """Norms: x read again for the output instead of held across the reductions (``RELOAD``)."""
    specialized: bool = False
    """Norms: compiled for the row length (``SPECIALIZED``) where the rows are packed and no
    operand reaches 2**31 elements (one compile per length); otherwise as if False."""
    one_reduction: bool = False
    """LayerNorm, whole-row launches: the row's moments from one cross-warp reduction of its
    deviations from its first value (``ONE_REDUCTION``), not the mean and then the centred
    squares."""
    min_n: int = MAX_SINGLE_PASS_N + 1
    """Narrowest row the dispatch gives this launch (narrower rows keep the other kernels)."""
    aligned: bool = False
    """Only rows whose length is a whole number of 16-byte vectors (others keep the other
    kernels)."""
    whole_chunks: bool = False
    """Looped: only rows whose length is a whole number of ``chunk``s (others keep the other
    kernels)."""
    packed_only: bool = False
    """``specialized`` launches: only rows it can compile in (packed, under 2**31 elements);
    others keep the other kernels rather than run it unspecialized."""
    chunk: int = 0
    """Forwards: walk the row in chunks of this many columns (a power of two; the looped
    norm, softmax and cross-entropy kernels, ``norm_fwd_looped_kernel`` ...: x read twice, few
    registers) instead of holding it whole (0)."""
    forwards: bool = False
    """Looped: the output pass re-reads the row in order (``FORWARDS``), not backwards."""
    unrolled: bool = False
    """Looped: the statistics pass unrolled for the row's number of chunks (``CHUNKS``, one
    compile per count), so a thread's loads of it are all in flight at once."""
    max_registers: int | None = None
    """Registers a thread may use (Triton's ``maxnreg``); None leaves the count to ptxas, which
    on sm_90 gives the looped kernels 38-52 (Triton 3.9) and so fewer loads in flight."""

    def launch_options(self) -> dict[str, int]:
        """``num_warps`` and, where set, ``maxnreg``: the keywords of a kernel launch."""
        return launch_options(self.num_warps, self.max_registers)


def wide_rows_enabled() -> bool:
    return switch_on(WIDE_ROWS)


def wide_launch(
    launches: dict,
    key: object,
    N: int,
    element_size: int,
    enabled: bool | None = None,
    max_n: int = WIDE_MAX_N,
) -> WideLaunch | None:
    """``launches[key]`` for rows of its ``min_n`` to ``max_n`` columns (of whole 16-byte
    vectors where it is ``aligned``, of whole chunks where ``whole_chunks``) with the kernels
    on, else None."""
    if not 0 < N <= max_n:
        return None
    launch = launches.get(key)  # before the environment: most calls find no launch
    if (
        launch is None
        or launch.min_n > N
        or (launch.aligned and N * element_size % 16)
        or (launch.whole_chunks and N % launch.chunk)
    ):
        return None
    if not (wide_rows_enabled() if enabled is None else enabled):
        return None
    return launch


def row_blocks(N: int, launch: WideLaunch) -> tuple[int, int]:
    """(BLOCK_N, chunks a row) of rows of N columns on ``launch``: the row's power of two once
    (a whole-row launch, rows of at most ``WIDE_MAX_N`` columns) or ``launch.chunk`` as often
    as the row needs (a looped one; unrolled, at most ``MAX_UNROLLED_CHUNKS`` times)."""
    block = launch.chunk or next_power_of_2(N)
    if not launch.chunk and block > WIDE_MAX_N:
        raise ValueError(f"x: expected rows of at most {WIDE_MAX_N} columns, got {N}")
    chunks = cdiv(N, block)
    if launch.unrolled and chunks > MAX_UNROLLED_CHUNKS:
        raise ValueError(
            f"launch: an unrolled looped launch takes at most {MAX_UNROLLED_CHUNKS} chunks a row, "
            f"got {chunks} ({N} columns in chunks of {block})"
        )
    return block, chunks


def specialized_length(launch: WideLaunch, x: torch.Tensor, *others: torch.Tensor | None) -> int:
    """The row length a ``specialized`` launch compiles in for the (M, N) rows of ``x`` and of
    ``others`` (outputs are allocated packed), or 0 (the launch runs unspecialized): the launch
    asks for it, every row is packed (row stride N) and no operand reaches 2**31 elements."""
    M, N = x.shape
    if not launch.specialized or M * N >= 2**31:
        return 0
    rows = [t for t in (x, *others) if t is not None]
    return N if M <= 1 or all(t.stride(0) == N for t in rows) else 0
