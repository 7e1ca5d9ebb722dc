"""Launch plans for rows too long for one program: each row split over several programs.

A row of N elements is cut into ``chunks = cdiv(N, block)`` pieces, one program each, and every
program keeps its piece in registers from the read of the input to the write of the output, so
memory sees one read and one write (a single program per row would have to read a long row
twice, and at 262144 columns the rows in flight of a full grid do not fit in L2 for the second
read). The programs of a row exchange partial statistics through a small global workspace.

On the GPU they meet in one launch: each one bumps an atomic arrival counter of its row and
spins until the counter reaches ``chunks``. That only terminates when all programs of the row
are resident together, so the grid is persistent and never larger than what the SMs hold at
once: ``sm_count * programs_per_sm`` programs (whole groups of ``chunks``), looping over rows.
Any kernel that launches at all fits one program on every SM. More programs per SM are planned
only within bounds that every CUDA GPU since Volta meets (1024 threads and 64K registers an
SM): at most ``MAX_RESIDENT_WARPS`` warps an SM in all, and the launch caps the registers a
thread may use (``maxnreg``) so that ``programs_per_sm`` programs fit the register file; their
shared memory (a few KB for the reductions) fits any SM. Under the interpreter programs run one after another and a wait could
never end, so the same kernel runs as two launches (partials, then output from a second read).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from warpforge.ops._rows import cdiv, launch_options, next_power_of_2
from warpforge.runtime import device_capabilities, switch_on

SPLIT_BLOCK = 32768
"""Columns a program holds: 32 a thread at 32 warps (58-64 registers on sm_90)."""

SPLIT_WARPS = 32

MAX_RESIDENT_WARPS = 32
"""Warps of a split launch per SM when it plans several programs an SM: 1024 threads, which
every CUDA GPU since Volta holds at once (sm_75 holds no more)."""

REGISTERS_PER_SM = 65536
"""The register file of one SM on every CUDA GPU since Kepler."""


def split_launch(element_size: int) -> dict[str, int | bool]:
    """The :func:`split_row_plan` options (block, num_warps, programs_per_sm, prefetch,
    release_only) of the split kernels for elements of this size.

    Four 8192-column programs an SM (8 warps each) rather than one 32768-column program: one
    program's loads overlap another's reductions and waits. That matters most for 2-byte rows,
    which move half the bytes of float32 rows per wait for the same arithmetic. Chosen from a
    kernel sweep (``benchmarks/long_rows_sweep.py``); the harness on the H100 then measured bf16
    cross-entropy forward+backward at 75-80% of copy (62-69% before) and softmax at 262144
    columns at 82% (67%), float32 at 90-96% and 94%
    (``benchmarks/results/longrows-2026-11-22-session5-*-h100.json``). 2-byte rows load the
    next row's chunk during the wait (``prefetch``) and arrive with a release-only atomic
    (neutral alone: ``ce16-sweep1-2026-11-24-h100.txt``). Once the cross-entropy kernel loads
    its targets early, four 8192-column programs beat eight 4096-column ones (4 warps) at every
    shape of ``ce16-sweep2-2026-11-24-h100.txt``: softmax / log-softmax 8192 x 262144 3132 /
    3139 µs against 3196 / 3223, cross entropy with gradient 8192 x 128256 1630 against 1651,
    4096 x 262144 1661 against 1687. Under the 64-register cap that launch spills 40-48 bytes
    a thread (sm_90, ptxas); the L2 prefetch of the chunk two rows ahead was slower everywhere
    (same file)."""
    if element_size == 2:
        return {
            "block": 8192,
            "num_warps": 8,
            "programs_per_sm": 4,
            "prefetch": True,
            "release_only": True,
        }
    return {"block": 8192, "num_warps": 8, "programs_per_sm": 4, "prefetch": False}


FLAG_WORDS_MAX_CHUNKS = 64
"""Chunks a row of a flag-word launch may have: ``row_words`` and ``look_at_words`` poll at most
two vectors of 32 words."""


def check_flag_words(plan: SplitRowPlan, argument: str = "plan") -> None:
    """Raise ValueError (naming ``argument``) when a flag-word launch's rows have more chunks
    than its poll reads."""
    if plan.chunks_pow2 > FLAG_WORDS_MAX_CHUNKS:
        raise ValueError(
            f"{argument}: expected a flag-word plan of at most {FLAG_WORDS_MAX_CHUNKS} chunks "
            f"a row, got {plan.chunks}"
        )


_INTERPRETER_SLOTS = 3
"""Rows in flight under the interpreter: fewer than most test shapes, so slots loop over rows."""

UNPUBLISHED_WORD = -1
"""A flag word before its program writes it (all bits set; the kernels' ``UNPUBLISHED``)."""

SWITCH = "WARPFORGE_SPLIT_ROWS"
"""``0``/``false``/``no``/``off`` turns the synchronized split launch off (the callers then use
their one-program-per-row kernels); read when a shape is first planned."""

MPS_SHARE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
"""Under an MPS server this caps the share of the SMs a process's kernels may occupy at once."""


def usable_sm_count(sm_count: int) -> int:
    """SMs a kernel of this process can hold at once: every one, or under MPS the share
    ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` grants, rounded down; 0 (no synchronized launch) when
    that variable is not a percentage, since a guess too high could leave a row's programs
    waiting for one that never starts."""
    share = os.environ.get(MPS_SHARE)
    if share is None or not share.strip():
        return sm_count
    try:
        percent = float(share)
    except ValueError:
        return 0
    if not 0.0 < percent <= 100.0:
        return 0
    return int(sm_count * percent / 100.0)


def _synchronized_enabled() -> bool:
    return switch_on(SWITCH)


@dataclass(frozen=True)
class SplitRowPlan:
    """How a split-row kernel is launched for one (M, N)."""

    block: int
    """Columns per program (a power of 2)."""
    chunks: int
    """Programs per row: ``cdiv(N, block)``."""
    chunks_pow2: int
    """``chunks`` rounded up to a power of 2: the row stride of the partials workspace."""
    num_warps: int
    programs: int
    """Grid size: whole rows of ``chunks`` programs, persistent over the rows."""
    synchronized: bool
    """One launch whose programs wait for each other (GPU); else two launches (STAGE 1, 2)."""
    prefetch: bool = False
    """Each program loads its next row's chunk before waiting for the other programs of this
    row (the kernels' PREFETCH)."""
    release_only: bool = False
    """The programs arrive with a release (not acq_rel) atomic, so the prefetch issued after
    the arrival need not wait for the atomic to return (the kernels' RELEASE_ONLY)."""
    flag_words: bool = False
    """The programs meet through flag words rather than an arrival counter (the cross-entropy
    kernel ``cross_entropy_fwd_grad_flags_kernel``; the callers that have one)."""
    max_registers: int | None = None
    """Registers a thread may use (Triton's ``maxnreg``) so that the planned programs per SM
    fit the register file; None with one program an SM."""
    reread_lag: int = 0
    """Kernels that have a re-reading form (flag words only): read each chunk again from L2
    for the output this many rows after publishing its statistics, instead of holding it in
    registers across the wait (0: hold it)."""

    def launch_options(self) -> dict[str, int]:
        """``num_warps`` and, with several programs an SM, ``maxnreg`` for the kernel launch."""
        return launch_options(self.num_warps, self.max_registers)

    def workspace(self, rows: int, values: int, device: torch.device) -> torch.Tensor:
        """fp32 partials: ``values`` statistics of each chunk of each row."""
        return torch.empty(rows * values * self.chunks_pow2, dtype=torch.float32, device=device)

    def unpublished_words(self, rows: int, words: int, device: torch.device) -> torch.Tensor:
        """The int64 flag-word workspace of a launch whose programs meet through flag words:
        ``words`` words for each chunk of each row, all bits set (the kernels' ``UNPUBLISHED``,
        ``warpforge.ops._kernels.split_rows``) until a program publishes into one."""
        return torch.full(
            (rows * words * self.chunks_pow2,), UNPUBLISHED_WORD, dtype=torch.int64, device=device
        )

    def arrivals(self, rows: int, device: torch.device) -> torch.Tensor:
        """The zeroed per-row arrival counters of a synchronized launch (one int32 each)."""
        return torch.zeros(rows if self.synchronized else 1, dtype=torch.int32, device=device)

    def stages(self) -> tuple[int, ...]:
        """The kernel's STAGE of each launch."""
        return (0,) if self.synchronized else (1, 2)


def split_row_plan(
    M: int,
    N: int,
    device: torch.device | str,
    *,
    block: int = SPLIT_BLOCK,
    num_warps: int = SPLIT_WARPS,
    programs_per_sm: int = 1,
    prefetch: bool = False,
    release_only: bool = False,
    flag_words: bool = False,
    reread_lag: int = 0,
) -> SplitRowPlan | None:
    """The split launch of (M, N) rows, or None when a row needs more programs than the GPU
    holds at once (under MPS: than this process's share of it) or ``WARPFORGE_SPLIT_ROWS=0``
    (the caller then uses its one-program-per-row chunked kernel). ``programs_per_sm`` above 1
    needs ``programs_per_sm * num_warps <= MAX_RESIDENT_WARPS`` (see the module docstring)."""
    if block < 16 or block & (block - 1):
        raise ValueError(f"block: expected a power of 2 >= 16, got {block!r}")
    if programs_per_sm < 1:
        raise ValueError(f"programs_per_sm: expected an int >= 1, got {programs_per_sm!r}")
    if not isinstance(reread_lag, int) or reread_lag < 0 or (reread_lag and not flag_words):
        raise ValueError(
            f"reread_lag: expected an int >= 0, and 0 without flag_words, got {reread_lag!r}"
        )
    max_registers = None
    if programs_per_sm > 1:
        if programs_per_sm * num_warps > MAX_RESIDENT_WARPS:
            raise ValueError(
                f"programs_per_sm: expected programs_per_sm * num_warps <= {MAX_RESIDENT_WARPS} "
                f"(warps every GPU holds on one SM), got {programs_per_sm} * {num_warps}"
            )
        # whole 8-register steps (the allocation unit), within the 255 a thread can address
        max_registers = min(255, REGISTERS_PER_SM // (programs_per_sm * num_warps * 32)) // 8 * 8
    chunks = cdiv(N, block)
    sm_count = device_capabilities(device).sm_count
    if sm_count is None:
        slots = min(M, _INTERPRETER_SLOTS)
        synchronized = False
    else:
        if not _synchronized_enabled():
            return None
        slots = min(M, usable_sm_count(sm_count) * programs_per_sm // chunks)
        synchronized = True
    if slots < 1:
        return None
    return SplitRowPlan(
        block=block,
        chunks=chunks,
        chunks_pow2=next_power_of_2(chunks),
        num_warps=num_warps,
        programs=slots * chunks,
        synchronized=synchronized,
        prefetch=prefetch,
        release_only=release_only,
        flag_words=flag_words,
        max_registers=max_registers,
        reread_lag=reread_lag,
    )


def flag_word_plan(
    M: int, N: int, device: torch.device | str, **launch: int | bool
) -> SplitRowPlan | None:
    """:func:`split_row_plan` of ``launch`` for programs that meet through flag words, or None
    also where a row has more chunks than their poll reads (``FLAG_WORDS_MAX_CHUNKS``)."""
    plan = split_row_plan(M, N, device, **launch, flag_words=True)
    if plan is None or plan.chunks_pow2 > FLAG_WORDS_MAX_CHUNKS:
        return None
    return plan
