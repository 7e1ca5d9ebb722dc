"""Cross entropy over the last dimension, with label smoothing, ``ignore_index`` and z-loss.

``cross_entropy(logits, target)`` equals ``torch.nn.functional.cross_entropy`` applied to
``logits.reshape(-1, V)`` and ``target.reshape(-1)``, plus ``z_loss * logsumexp(row)**2`` for
every non-ignored row. The class dimension is the *last* one (torch puts it at dim 1 for
inputs with more than two dimensions).

When the logits require grad, how the gradient is made depends on the row length:

* rows up to ``FUSED_GRAD_MAX_COLS`` classes fit in registers, so the forward kernel reads them
  once and also writes the gradient of the reduced loss into its own buffer (the user's logits
  are never overwritten and need not be kept alive); the backward multiplies that buffer by
  ``grad_output`` in place, skipping rows whose factor is exactly 1, so ``loss.backward()``
  costs one read and one write of the logits in all;
* longer rows are split over several programs that each hold a chunk in registers and meet
  through a small workspace (``warpforge.ops._split_rows``): again one read and one write;
* rows too long even for a split (more chunks than the GPU holds programs at once): one
  program per row would read them twice (from DRAM: the rows in flight do not fit in L2), so
  the forward only reads them and saves ``lse``, and the backward streams them once more (read
  logits, write gradient) at copy speed, scaled by ``grad_output`` there.

Without grad the forward only reads the logits.
"""

from __future__ import annotations

import functools
import math

import torch

from warpforge.dispatch import dispatched_op
from warpforge.ops import _split_rows
from warpforge.ops._rows import buffer_aligned, cdiv, kernel_device, next_power_of_2
from warpforge.ops._split_rows import (
    SplitRowPlan,
    check_flag_words,
    split_launch,
    split_row_plan,
)
from warpforge.ops._wide_rows import WideLaunch, row_blocks, wide_launch
from warpforge.runtime import (
    ExecutionPath,
    checks_enabled,
    device_capabilities,
    execution_path,
    switch_on,
)
from warpforge.validation import (
    check_choice,
    check_positive,
    check_same_device,
    check_tensor,
    describe,
)

REDUCTIONS = ("mean", "sum", "none")
TARGET_DTYPES = (torch.int64, torch.int32)


def _gpu_model(device: torch.device | str) -> str:
    """The GPU model the ``*_BY_MODEL`` tables are keyed by (the split-row plans' view of the
    device, which the compile tests set)."""
    return _split_rows.device_capabilities(device).name


def launch_heuristic(n_cols: int, element_size: int) -> tuple[int, int]:
    """(BLOCK, num_warps) for one row of ``n_cols`` logits: 8 KB chunks with 8 elements a
    thread (one or two 16-byte vectors). More a thread and ptxas sinks the load of the next
    chunk past the arithmetic of this one (see ``_row_logsumexp``); 16-warp 8 KB chunks ran the
    loss-only forward at 97-103% of copy on the H100 in bf16 and fp32
    (``benchmarks/results/ce-softmax-sweep-2026-11-22-h100.txt``)."""
    block = max(16, min(next_power_of_2(n_cols), 8192 // element_size))
    return block, max(1, min(16, block // 256))


_launch_config = functools.lru_cache(maxsize=256)(launch_heuristic)

WHOLE_ROW_MAX_BLOCK = 32768
"""Widest row the forward-with-gradient kernel keeps in registers: at 32 warps it needs 54
registers a thread on sm_90 (ptxas), inside the 64 that 1024 threads may have, without spills."""

FUSED_GRAD_MAX_COLS = WHOLE_ROW_MAX_BLOCK
"""Rows of up to this many classes get their gradient in the forward (one read, one write);
longer rows save lse for the streaming backward (see the module docstring)."""


def fused_grad_launch_heuristic(n_cols: int, element_size: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of the forward-with-gradient kernels: the whole (padded) row as one
    block with ~32 elements a thread when it fits in registers; else 8192-element chunks at 32
    warps (53-58 registers, no spills on sm_90), since the chunked kernel's persistent grid
    holds one row per SM and each chunk in flight is all that SM reads at a time."""
    block = max(16, next_power_of_2(n_cols))
    if block <= WHOLE_ROW_MAX_BLOCK:
        return block, max(1, min(32, block // 1024))
    return 8192, 32


def bwd_launch_heuristic(n_cols: int, element_size: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of the streaming backward: 4096-element slices (16 KB fp32, 8 KB in
    16-bit types) with 16 elements a thread (~56 registers on sm_90, so 4 programs an SM)."""
    block = max(16, min(next_power_of_2(n_cols), 4096))
    return block, max(1, min(8, block // 512))


_fused_grad_launch_config = functools.lru_cache(maxsize=256)(fused_grad_launch_heuristic)
_bwd_launch_config = functools.lru_cache(maxsize=256)(bwd_launch_heuristic)

BWD_ROW_LAUNCHES_BY_MODEL: dict[str, dict[int, tuple[int, int, bool]]] = {
    "NVIDIA H200": {2: (1024, 2, False)},
}
"""GPU model -> element size -> (BLOCK, num_warps, evict_first) of the streaming backward's row
kernel (``cross_entropy_bwd_kernel``) for rows of at least BLOCK classes, in place of
``bwd_launch_heuristic``'s 4096-column 8-warp slices with the logits loaded ``evict_first``: the
same 16 elements a thread in programs a quarter the size, loaded without the hint. H200, kernel
alone, bf16 (``benchmarks/parity_sweep.py``, ``session41-h200-2026-12-01/``), µs: the launch
against the heuristic's (``parity-ce-bwd-bf16-call1.json``) 4096 x 50257 (rows off 16-byte
boundaries) 251.2 against 272.4, 16384 x 32000 512.6 against 526.4, 8192 x 128256 1013.3
against 1048.3, 4096 x 262144 1033.1 against 1105.5; then without the hint against with it
(``parity-ce-bwd-bf16-call2.json``) 241.0 against 248.3, 496.0 against 505.6, 984.0 against
1005.1, 1004.8 against 1022.8, and 2048 x 151936 294.9 against 300.4. The other launches of that
call (256-2048 columns on 1-4 warps) were slower at 50257 classes (250.2-490.2 µs with the hint)
and none more than 0.4% ahead of it elsewhere (2048 columns on 4 warps at 32000: 494.4 against
496.0 without the hint). The flat kernel (``FLAT_BWD_LAUNCHES``) lost to the row kernel at all
five shapes in bf16 (its best launch in call 2: 304.0 µs at 50257 classes, 555.2 at 32000), and so
did the row kernel counting the slices of rows off 16-byte boundaries from aligned addresses
(commit ``768d9d5f``, removed): 748.6 against 243.3 µs at 4096 x 50257
(``parity-ce-aligned-call6.json``), and the forty-second session's version of it that also
loaded the slices inside a row unmasked (vectorised; removed): 288.0 against 240.4 µs at
1024 columns on 2 warps, 282.5 against 247.3 at 2048 on 4, and in float32 a tie (401.6 against
401.5 for the op) (``session42-h200-2026-12-01/parity-ce-aligned-call1.json``).
Other GPUs and element sizes keep the heuristic (not measured)."""


def _bwd_row_launch(n_cols: int, element_size: int, device: torch.device) -> tuple[int, int, bool]:
    """(BLOCK, num_warps, evict_first) of the streaming backward's row kernel on ``device``."""
    by_size = BWD_ROW_LAUNCHES_BY_MODEL.get(_gpu_model(device), {})
    launch = by_size.get(element_size)
    if launch is not None and n_cols >= launch[0]:
        return launch
    return (*_bwd_launch_config(n_cols, element_size), True)


_L2_SHARE = 0.5
"""Share of L2 that the rows in flight of the chunked forward-with-gradient kernel may fill
(the gradient it writes passes through L2 too)."""

_INTERPRETER_PROGRAMS = 4


def _chunked_grad_programs(n_rows: int, n_cols: int, element_size: int, device) -> int:
    """Persistent grid of the chunked forward-with-gradient kernel: 1-4 rows in flight per SM,
    as many as fit in ``_L2_SHARE`` of L2, so the gradient pass re-reads its row from L2."""
    caps = device_capabilities(device)
    if caps.sm_count is None:
        return max(1, min(n_rows, _INTERPRETER_PROGRAMS))
    l2 = caps.l2_bytes or 50 * 2**20
    per_sm = int(_L2_SHARE * l2 // (caps.sm_count * n_cols * element_size))
    return max(1, min(n_rows, caps.sm_count * max(1, min(4, per_sm))))


SPLIT_GRAD_MIN_ELEMENT_SIZE = 2
"""Narrowest logits dtype (bytes) whose long rows take the split forward with gradient: every
float dtype the op takes. (bfloat16 once kept the save-lse forward + streaming backward, when
the split kernel computed two exponentials per element and held 32768 columns a program: it
ran no faster there, 60-62% of copy on the H100.)"""


SPLIT_EARLY_TARGET = True
"""The split forward with gradient loads each row's target index one row ahead and every
program its target logit (the kernel's EARLY), instead of chunk 0 alone loading both on the
path to the row's meeting."""

FLAG_WORDS_MAX_ELEMENT_SIZE = 2
"""Widest logits dtype (bytes) whose split forward with gradient meets through flag words
(``cross_entropy_fwd_grad_flags_kernel``: no release fence, no counter, the poll is the
partials' load); float32 rows keep the counter launch of ``split_launch`` (not measured with
the flag words)."""

FLAG_WORDS_LAUNCHES = (({"block": 8192, "num_warps": 4, "programs_per_sm": 4}, 64),)
"""(launch, most chunks a row, rounded up to a power of 2) of the flag-word split plans, the
first that fits taken: four 8192-column programs an SM with 4 warps each (128 registers: 64
columns a thread and the next row's chunk prefetched; on sm_90 no spills under Triton 3.9 and
8-24 bytes of local memory under Triton 3.6, against 40-48 under the 8-warp cap) for every row
of up to 64 chunks. On the H100, kernel alone (``benchmarks/results/ce262k-sweep2-`` and
``split4w-ce-sweep-2026-11-25-h100.txt``): bf16 4096 x 262144 1482.6 us (96.4% of copy) against
1678.6 for 8192/8 x4 (48 bytes spilled under its 64-register cap, reloaded every row), 1616.6
for 8192/8 x3, 1727.9 for 4096/4 x8 (64 chunks); fp16 there 1475.5 against 1673.4 (8192/8 x4).
Rows of up to 32 chunks of 4096 once took eight 4096-column programs of 4 warps an SM (64
registers, 32 bytes spilled): bf16 8192 x 128256 1498.9 us against 1461.6 now, 16384 x 65536
1604.5 against 1500.9; through the harness (``longrows-split4w-{A,B}-2026-11-25-h100.json``)
8192 x 128256 1514.6 -> 1473.2 us (92% -> 95% of copy)."""


@functools.lru_cache(maxsize=1024)
def _fwd_grad_split_plan(
    n_rows: int, n_cols: int, element_size: int, device: torch.device
) -> SplitRowPlan | None:
    """Rows wider than the whole-row kernel's block: split over programs, or None when the
    dtype is too narrow to gain (``SPLIT_GRAD_MIN_ELEMENT_SIZE``) or a row needs more programs
    than the GPU holds at once."""
    if next_power_of_2(n_cols) <= WHOLE_ROW_MAX_BLOCK or element_size < SPLIT_GRAD_MIN_ELEMENT_SIZE:
        return None
    if element_size <= FLAG_WORDS_MAX_ELEMENT_SIZE:
        plan = _flag_word_plan(n_rows, n_cols, element_size, device)
    else:
        launches = FLOAT32_FLAG_WORDS_BY_MODEL.get(_gpu_model(device), ())
        plan = _first_flag_word_plan(n_rows, n_cols, device, launches)
    if plan is not None:
        return plan
    return split_row_plan(n_rows, n_cols, device, **split_launch(element_size))


FLOAT32_FLAG_WORDS_BY_MODEL: dict[str, tuple[tuple[dict[str, object], int], ...]] = {
    "NVIDIA H200": (
        ({"block": 16384, "num_warps": 8, "programs_per_sm": 2, "prefetch": False}, 64),
    ),
}
"""GPU model -> ``FLAG_WORDS_LAUNCHES``-style launches of the float32 split forward with
gradient (rows whose starts are 16-byte aligned; others take ``ALIGNED_FLOAT32_LAUNCHES``), in
place of ``split_launch``'s arrival-counter launch (8192-column 8-warp programs, four an SM,
chosen on the H100): two 16384-column 8-warp programs an SM meeting through flag words. H200,
kernel alone (``benchmarks/ce_split_meeting_sweep.py``, ``session41-h200-2026-12-01/
ce_split_meeting_sweep-call8.txt``), µs against the counter launch: 4096 x 262144 2233.0
against 2390.7, 2048 x 151936 650.6 against 683.0, 8192 x 128256 2129.6 against 2235.2 (the
best of seven flag-word launches at each or within 0.2% of it). Other GPUs keep the counter
launch."""


ALIGNED_FLOAT32_LAUNCHES = (
    ({"block": 8192, "num_warps": 4, "programs_per_sm": 4, "prefetch": False}, 64),
)
"""``FLAG_WORDS_LAUNCHES`` of float32 rows that start off 16-byte boundaries (ALIGN 4), which
meet through flag words too (aligned float32 rows keep the counter launch of ``split_launch``,
not measured against flag words): four 8192-column programs an SM with 4 warps each (106
registers on sm_90 under Triton 3.9, no spills; with the prefetch 176 bytes spilled). On the
H100, kernel alone at 4096 x 50257 (``benchmarks/results/session12-2026-11-25/
ce_split_sweep.txt``): 590.8 us (92.8% of copy) against 622.4 for ``split_launch``'s 8 warps,
616.8 for 4096/4 x8 and 1004.5 for 8192/8 x4 with the prefetch."""


@functools.lru_cache(maxsize=1024)
def _flag_word_plan(
    n_rows: int, n_cols: int, element_size: int, device: torch.device
) -> SplitRowPlan | None:
    """The first flag-word split plan of ``FLAG_WORDS_LAUNCHES`` (2-byte rows) or
    ``ALIGNED_FLOAT32_LAUNCHES`` (4-byte) that fits, else None."""
    launches = FLAG_WORDS_LAUNCHES if element_size <= 2 else ALIGNED_FLOAT32_LAUNCHES
    return _first_flag_word_plan(n_rows, n_cols, device, launches)


def _first_flag_word_plan(
    n_rows: int, n_cols: int, device: torch.device, launches
) -> SplitRowPlan | None:
    """The flag-word split plan of the first of ``launches`` ((launch, most chunks a row) pairs)
    that fits these rows, else None."""
    for launch, max_chunks in launches:
        plan = split_row_plan(n_rows, n_cols, device, **{"prefetch": True, **launch},
                              flag_words=True)  # fmt: skip
        if plan is not None and plan.chunks_pow2 <= max_chunks:
            return plan
    return None


FWD_GRAD_LOOPED_LAUNCHES: dict[int, WideLaunch] = {
    2: WideLaunch(16, aligned=True, chunk=4096, forwards=True, unrolled=True, max_registers=64)
}
"""Element size -> the launch of ``cross_entropy_fwd_grad_looped_kernel`` (one row a program in
``chunk``-column chunks, at most 64 registers a thread: two 16-warp programs an SM, each with
a row's unrolled chunk loads in flight) for the forward with gradient of rows of
``min_n``-32768 classes;
others keep the whole-row, split or chunked kernels. Kernel alone on the H200, bf16, mean over
rows (``session29-h200-2026-11-30/ce-looped-call7.txt``), us: 16384 x 32000 624.1 against the
whole-row kernel's 661.2 (2048-column chunks on 8 warps 618.0, then 639.2 walking backwards);
8192 x 32768 320.9 against 338.7. At 4096 x 50257 (rows of no whole 16-byte vectors) the
aligned split kernel stays far ahead (258.2 against 372.5), so the launch is ``aligned``.
Chunks of 1024-2048 columns on 2-8 warps walking forwards were slower (724-792 us at
16384 x 32000, ``session30-h200-2026-11-30/ce-small-call9.txt``). The registers capped at 64
(``ce-registers-call11.txt``): 595.5 against 613.6 us at 16384 x 32000, 306.7 against 317.4 at
8192 x 32768; at 96 or 128 (one program an SM) 739-811 us; left to ptxas (40 a thread under
Triton 3.9) the launch of the line above. The harness on the capped launch
(``session31-h200-2026-11-30/ce-fwdbwd-bf16-call1.json``, cross_entropy.fwd_bwd bf16 16384 x
32000): 610.7 us against 630.0 uncapped (``session30-h200-2026-11-30/ce-bf16-call1.json``)."""


def fwd_grad_looped_launch(n_cols: int, element_size: int) -> WideLaunch | None:
    """``FWD_GRAD_LOOPED_LAUNCHES``' launch of rows of ``n_cols`` classes, or None."""
    return wide_launch(FWD_GRAD_LOOPED_LAUNCHES, element_size, n_cols, element_size)


SPLIT_OVER_LOOPED_BY_MODEL: dict[str, frozenset[int]] = {"NVIDIA H200": frozenset({2})}
"""GPU model -> element sizes whose rows of ``FWD_GRAD_LOOPED_LAUNCHES``' reach take the
flag-word split forward with gradient (``_flag_word_plan``: 8192-column 4-warp programs, four an
SM) instead of one program a row, where the row fills its programs' columns to at least
``SPLIT_OVER_LOOPED_MIN_FILL``. H200, kernel alone, bf16, µs, the split plan against the looped
launch (``benchmarks/ce_split_meeting_sweep.py``, ``session41-h200-2026-12-01/
ce_split_meeting_sweep-call4.txt``; fill in brackets): 16384 x 32000 572.3 against 594.4
(0.98), 8192 x 32768 294.7 against 305.7 (1.00), 16384 x 24576 436.3 against 464.0 (1.00),
16384 x 20000 400.4 against 403.1 (0.81), 16384 x 16392 1092.2 against 591.9 (0.67: a third
program a row holding 8 columns); the same five, interleaved with the op as the harness calls it
(``benchmarks/parity_sweep.py``, ``parity-ce-aligned-call6.json``): 584.1 against 632.3 (op
588.5), 304.9 against 339.9 (309.8), 448.6 against 474.7 (451.5), 414.5 against 413.1 (416.7),
1152.1 against 603.3 (607.7). Other GPUs keep the looped launch."""

SPLIT_OVER_LOOPED_MIN_FILL = 0.9
"""Least share of its programs' columns a row must fill to take ``SPLIT_OVER_LOOPED_BY_MODEL``'s
split plan (see there)."""


@functools.lru_cache(maxsize=1024)
def _split_over_looped(
    n_rows: int, n_cols: int, element_size: int, device: torch.device
) -> SplitRowPlan | None:
    """The split plan that replaces ``FWD_GRAD_LOOPED_LAUNCHES``' launch of these rows on this
    GPU (``SPLIT_OVER_LOOPED_BY_MODEL``, ``SPLIT_OVER_LOOPED_MIN_FILL``), or None."""
    if element_size not in SPLIT_OVER_LOOPED_BY_MODEL.get(_gpu_model(device), ()):
        return None
    if fwd_grad_looped_launch(n_cols, element_size) is None:
        return None
    plan = _flag_word_plan(n_rows, n_cols, element_size, device)
    if plan is None or n_cols < SPLIT_OVER_LOOPED_MIN_FILL * plan.chunks * plan.block:
        return None
    return plan


def fwd_grad_plan(
    n_rows: int, n_cols: int, element_size: int, device: torch.device
) -> SplitRowPlan | None:
    """The split plan the op's forward with gradient runs these rows on, or None (one program
    a row)."""
    return _fwd_grad_split_plan(n_rows, n_cols, element_size, device) or _split_over_looped(
        n_rows, n_cols, element_size, device
    )


FWD_LOOPED_LAUNCHES: dict[int, WideLaunch] = {
    2: WideLaunch(8, aligned=True, chunk=2048, unrolled=True)
}
"""Element size -> the launch of the loss-only forward (``cross_entropy_fwd_kernel``, one row
a program in ``chunk``-column chunks, the chunk loop unrolled) for rows of ``min_n``-32768
classes of whole 16-byte vectors (``wide_launch``'s widest: on wider rows no launch tried beat
the rolled one by more than 1%, see below); others keep ``launch_heuristic``'s rolled launch
(or a tuned one). Kernel alone on the H200, bf16, mean over rows
(``session30-h200-2026-11-30/ce-fwd-launches-call4.txt``), us: 16384 x 32000 252.3 against
301.2 (1024-column chunks on 4 warps unrolled 254.5, rolled 270.2; 2048 on 4 warps rolled
264.1); 8192 x 32768 137.4 against 159.9. Wider rows, the best rolled launch against the
current one: 8192 x 128256 2048/4 499.2 against 493.5, 2048 x 151936 4096/8 173.2 against
162.2, 4096 x 262144 2048/4 510.6 against 492.6 (8192-column chunks on 16 warps unrolled
488.5). Register caps (``session31-h200-2026-11-30/ce-fwd-caps-call5.txt`` and
``ce-fwd-registers-call3.txt``) won nowhere: this launch capped at 64 a thread tied (253.0
against 252.1 us at 16384 x 32000), at 96-128 lost (295-302); the rolled 4096-column launch of
the wider rows capped at 48-64 lost 3-8% at 128256-262144 classes, and at 32 (so that 2048
rows of 151936 classes run in one wave) 184-654 against 162 us."""


def fwd_looped_launch(n_cols: int, element_size: int) -> WideLaunch | None:
    """``FWD_LOOPED_LAUNCHES``' launch of rows of ``n_cols`` classes, or None."""
    return wide_launch(FWD_LOOPED_LAUNCHES, element_size, n_cols, element_size)


def gradient_in_forward(n_rows: int, n_cols: int, element_size: int, device: torch.device) -> bool:
    """True when a forward with grad should write the gradient itself (see the docstring)."""
    return (
        next_power_of_2(n_cols) <= FUSED_GRAD_MAX_COLS
        or _fwd_grad_split_plan(n_rows, n_cols, element_size, device) is not None
    )


def _fused_gradient(logits: torch.Tensor) -> bool:
    """``gradient_in_forward`` for these 2-D logits, except rows past the whole-row block that
    start off 16-byte boundaries (vocab 50257): the split kernels load and store them element
    by element, so the aligned loss-only forward saves lse and the backward streams the logits
    instead. H100 harness, 4096 x 50257 (``session11-ce-2026-11-25``): bf16 forward+backward
    926 us (0.84x torch.compile; ``logs.tgz``, its report lost to the piece's time limit) ->
    636.9 us (1.22x, ``run2-ce-bf16.json``, with the flat backward since put back to the row
    kernel, 28% faster alone); fp32 939.9 -> 891.7 us (1.47x -> 1.55x)."""
    n_rows, n_cols = logits.shape
    if not gradient_in_forward(n_rows, n_cols, logits.element_size(), logits.device):
        return False
    return (
        next_power_of_2(n_cols) <= FUSED_GRAD_MAX_COLS
        or not _unaligned_rows(logits)
        or _aligned_split_align(logits) > 1
    )


ALIGNED_SPLIT = "WARPFORGE_CE_ALIGNED_SPLIT"
"""Set to 0 to keep rows that start off 16-byte boundaries off the split forward with gradient
(the aligned loss-only forward and the streaming backward take them, as before the aligned
split; for comparisons)."""


def _aligned_split_align(logits: torch.Tensor, grad_out: torch.Tensor | None = None) -> int:
    """ALIGN of the flag-word split forward with gradient (16 / element size) for rows that
    start off 16-byte boundaries, whose chunks it then counts from each row's aligned address;
    1 (chunks from the row's start, one element a load) for other rows, a gradient buffer
    laid out otherwise than the logits or in an unaligned buffer, and with
    ``WARPFORGE_CE_ALIGNED_SPLIT=0``."""
    if not (
        logits.shape[1] >= 32  # whole vectors between the two partial ones
        and _unaligned_rows(logits)
        and switch_on(ALIGNED_SPLIT)
    ):
        return 1
    if grad_out is not None and (
        grad_out.stride() != logits.stride() or not buffer_aligned(grad_out)
    ):
        return 1
    return 16 // logits.element_size()


@functools.lru_cache(maxsize=1024)
def _fwd_launch_config(
    n_rows: int, n_cols: int, dtype: torch.dtype, device: torch.device
) -> tuple[int, int]:
    """(BLOCK, num_warps) of the loss-only forward kernel: tuned (``cross_entropy.fwd`` in
    warpforge.tune) when known, else the heuristic."""
    from warpforge.ops.tunables import tuned_config
    from warpforge.tune.tunable import dtype_name

    block, warps = launch_heuristic(n_cols, dtype.itemsize)
    features = {"M": n_rows, "V": n_cols, "dtype": dtype_name(dtype)}
    chosen = tuned_config(
        "cross_entropy.fwd", features, {"BLOCK": block, "num_warps": warps}, device
    )
    return int(chosen["BLOCK"]), int(chosen["num_warps"])  # type: ignore[call-overload]


# ----------------------------------------------------------------------------------------------
# Row kernels (Triton or the PyTorch reference), shared with fused_linear_cross_entropy.
# ----------------------------------------------------------------------------------------------


def _row_stride(t: torch.Tensor) -> int:
    """Stride between the per-row values of a [rows] tensor (0 when one value is broadcast)."""
    return t.stride(0) if t.dim() == 1 and t.shape[0] > 1 else 0


def _target_check_options(logits: torch.Tensor) -> dict[str, object]:
    """Compile the device-side target check in (debug build) only under WARPFORGE_CHECKS=1."""
    check = logits.is_cuda and checks_enabled()
    return {"CHECK_TARGETS": check, "debug": True} if check else {"CHECK_TARGETS": False}


def row_losses(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    *,
    grad_out: torch.Tensor | None = None,
    grad_loss: torch.Tensor | None = None,
    launch: tuple[int, int] | None = None,
    split: SplitRowPlan | None = None,
    looped: WideLaunch | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss and logsumexp (float32) of 2-D ``logits`` whose last stride is 1.

    With ``grad_out`` (a [rows, V] buffer, which may be ``logits`` itself) the same launch also
    writes ``grad_loss[row] * d(loss_row)/d(logits)`` there; ``grad_loss`` is float32 with one
    value per row or a single broadcast value. ``launch`` = (BLOCK, num_warps) overrides the
    launch config (the tuner's trials; with ``grad_out``, a BLOCK narrower than the row picks
    the one-program-per-row chunked kernel); ``split`` forces the split-row kernel with that
    plan (tests, benchmarks); ``looped`` (a launch with a ``chunk``) forces one program a row
    in chunks of that many columns, unrolled where the launch is: with ``grad_out``
    ``cross_entropy_fwd_grad_looped_kernel``, without it ``cross_entropy_fwd_kernel`` (rows of
    ``FWD_GRAD_LOOPED_LAUNCHES``' and ``FWD_LOOPED_LAUNCHES``' sizes and widths take them by
    default).
    """
    n_rows, n_cols = logits.shape
    if looped is not None and not looped.chunk:
        raise ValueError(f"looped: expected a launch with a chunk, got {looped!r}")
    if looped is not None and (launch is not None or split is not None):
        raise ValueError("looped: give one of launch, split and looped, not several")
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    lse = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    if n_rows == 0:
        return loss, lse
    if execution_path(logits.device) is ExecutionPath.TORCH_REFERENCE:
        loss, lse = _reference_row_losses(logits, target, ignore_index, label_smoothing, z_loss)
        if grad_out is not None:
            grad_out.copy_(
                _reference_row_grads(
                    logits, target, lse, grad_loss, ignore_index, label_smoothing, z_loss
                )
            )
        return loss, lse
    from warpforge.ops._kernels import cross_entropy as kernels

    if split is None and launch is None and looped is None:
        if grad_out is None:
            looped = fwd_looped_launch(n_cols, logits.element_size())
        else:
            split = _split_over_looped(n_rows, n_cols, logits.element_size(), logits.device)
            if split is None:
                looped = fwd_grad_looped_launch(n_cols, logits.element_size())
    common = (n_cols, ignore_index, float(label_smoothing), float(z_loss))
    options = {"HAS_SMOOTHING": label_smoothing > 0.0, **_target_check_options(logits)}
    if looped is not None:
        block, chunks = row_blocks(n_cols, looped)
        options.update(BLOCK=block, CHUNKS=chunks if looped.unrolled else 0,
                       **looped.launch_options())  # fmt: skip
        with kernel_device(logits):
            if grad_out is None:
                kernels.cross_entropy_fwd_kernel[(n_rows,)](
                    logits, target, loss, lse, logits.stride(0), *common, **options
                )
            else:
                kernels.cross_entropy_fwd_grad_looped_kernel[(n_rows,)](
                    logits, target, loss, lse, grad_out, grad_loss, _row_stride(grad_loss),
                    logits.stride(0), grad_out.stride(0), *common, FORWARDS=looped.forwards,
                    **options,
                )  # fmt: skip
        return loss, lse
    if launch is not None:
        block, num_warps = launch
    elif grad_out is None:
        block, num_warps = _fwd_launch_config(n_rows, n_cols, logits.dtype, logits.device)
    else:
        block, num_warps = _fused_grad_launch_config(n_cols, logits.element_size())
    options.update(BLOCK=block, num_warps=num_warps)
    if grad_out is not None and split is None and launch is None:
        split = _fwd_grad_split_plan(n_rows, n_cols, logits.element_size(), logits.device)
    if grad_out is not None and split is not None:
        _split_row_losses(logits, target, loss, lse, grad_out, grad_loss, common, split, options)
        return loss, lse
    with kernel_device(logits):
        if grad_out is None:
            kernels.cross_entropy_fwd_kernel[(n_rows,)](
                logits, target, loss, lse, logits.stride(0), *common, **options
            )
        elif block >= n_cols:  # the whole row in registers
            kernels.cross_entropy_fwd_grad_row_kernel[(n_rows,)](
                logits, target, loss, lse, grad_out, grad_loss, _row_stride(grad_loss),
                logits.stride(0), grad_out.stride(0), *common, **options,
            )  # fmt: skip
        else:
            programs = _chunked_grad_programs(n_rows, n_cols, logits.element_size(), logits.device)
            kernels.cross_entropy_fwd_grad_kernel[(programs,)](
                logits, target, loss, lse, grad_out, grad_loss, _row_stride(grad_loss),
                logits.stride(0), grad_out.stride(0), n_rows, *common, **options,
            )  # fmt: skip
    return loss, lse


ALIGNED_CHUNKS = "WARPFORGE_CE_ALIGNED_CHUNKS"
"""Set to 0 to read rows that start off 16-byte boundaries with the plain loss-only kernel
(for comparisons; ``cross_entropy_fwd_aligned_kernel`` is the default there)."""


def _unaligned_rows(logits: torch.Tensor) -> bool:
    """True when the loss-only forward should read ``logits`` from aligned chunk starts: rows
    that start off 16-byte boundaries (a row stride that is no multiple of 16 bytes) in a
    16-byte aligned buffer, on the Triton path."""
    return (
        logits.shape[0] > 1
        and (logits.stride(0) * logits.element_size()) % 16 != 0
        and buffer_aligned(logits)
        and execution_path(logits.device) is not ExecutionPath.TORCH_REFERENCE
        and switch_on(ALIGNED_CHUNKS)
    )


SHORT_ROWS_LAUNCH = (16, 4)
"""(rows a program, num_warps) of the loss-only forward for rows of up to
``SHORT_ROWS_MAX_COLS`` classes (``cross_entropy_fwd_rows_kernel``)."""

SHORT_ROWS_MAX_COLS = 256
"""Widest row the loss-only forward takes several of a program as one tile: measured at 256
classes (bf16 32768 x 256 through the harness 31.4 -> 21.9 us, ``session11-ce-2026-11-25``'s
run2 log; float32 32.3 -> 29.2 us, ``run2-ce-fp32.json``); wider rows keep the tuned per-row
kernel (``cross_entropy.fwd`` in warpforge.tune) until measured."""


ALIGNED_FWD_MAX_N = 65536
"""Widest row ``ALIGNED_FWD_LAUNCHES`` takes."""
ALIGNED_FWD_LAUNCHES: dict[int, WideLaunch] = {2: WideLaunch(4, chunk=1024)}
"""Element size -> the launch (``chunk`` the BLOCK) of ``cross_entropy_fwd_aligned_kernel``
(the loss-only forward of rows that start off 16-byte boundaries) for rows of ``min_n`` to
``ALIGNED_FWD_MAX_N`` classes; other rows keep ``_fwd_launch_config``'s launch (4096/16 in
bf16). Kernel alone on the H200, bf16, vocab 50257, mean over rows
(``session30-h200-2026-11-30/ce-fwd-unaligned-call6.txt``), us: 4096 rows 116.9 against
131.4 (2048/4 118.5, 1024/2 121.8, 4096/8 133.3); 8192 rows 212.9 against 245.9 (1024/2
211.2). Measured at 50257 classes only; the range around it follows the looped launches'."""


def _aligned_fwd_launch(
    n_rows: int, n_cols: int, dtype: torch.dtype, device: torch.device
) -> tuple[int, int]:
    """(BLOCK, num_warps) of ``cross_entropy_fwd_aligned_kernel``: ``ALIGNED_FWD_LAUNCHES``
    where it applies (whatever ``WARPFORGE_WIDE_ROWS`` says), else ``_fwd_launch_config``'s."""
    size = dtype.itemsize
    launch = wide_launch(ALIGNED_FWD_LAUNCHES, size, n_cols, size, True, ALIGNED_FWD_MAX_N)
    if launch is not None:
        return launch.chunk, launch.num_warps
    return _fwd_launch_config(n_rows, n_cols, dtype, device)


def _short_rows(logits: torch.Tensor) -> bool:
    return (
        0 < logits.shape[1] <= SHORT_ROWS_MAX_COLS
        and execution_path(logits.device) is not ExecutionPath.TORCH_REFERENCE
    )


def loss_only_rows(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    *,
    launch: tuple[int, int] | None = None,
    short: tuple[int, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss and logsumexp, as ``row_losses`` without a gradient: rows of up to
    ``SHORT_ROWS_MAX_COLS`` classes several a program (``short`` = (rows a program, num_warps)
    overrides ``SHORT_ROWS_LAUNCH``), longer rows that start off 16-byte boundaries read from
    aligned chunk starts (``_unaligned_rows``; on ``ALIGNED_FWD_LAUNCHES`` where it applies;
    ``launch`` overrides (BLOCK, num_warps) as in ``row_losses``), the others through
    ``row_losses``."""
    from warpforge.ops._kernels import cross_entropy as kernels

    n_rows, n_cols = logits.shape
    if launch is None and (short is not None or _short_rows(logits)):
        rows, num_warps = short or SHORT_ROWS_LAUNCH
        loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
        lse = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
        if n_rows == 0:
            return loss, lse
        with kernel_device(logits):
            kernels.cross_entropy_fwd_rows_kernel[(cdiv(n_rows, rows),)](
                logits, target, loss, lse, n_rows, logits.stride(0), n_cols, ignore_index,
                float(label_smoothing), float(z_loss), ROWS=rows,
                BLOCK=max(16, next_power_of_2(n_cols)), HAS_SMOOTHING=label_smoothing > 0.0,
                num_warps=num_warps, **_target_check_options(logits),
            )  # fmt: skip
        return loss, lse
    if not _unaligned_rows(logits):
        return row_losses(logits, target, ignore_index, label_smoothing, z_loss, launch=launch)
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    lse = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    block, num_warps = launch or _aligned_fwd_launch(n_rows, n_cols, logits.dtype, logits.device)
    with kernel_device(logits):
        kernels.cross_entropy_fwd_aligned_kernel[(n_rows,)](
            logits, target, loss, lse, logits.stride(0), n_cols, ignore_index,
            float(label_smoothing), float(z_loss), BLOCK=block,
            ALIGN=16 // logits.element_size(), HAS_SMOOTHING=label_smoothing > 0.0,
            num_warps=num_warps, **_target_check_options(logits),
        )  # fmt: skip
    return loss, lse


def _split_row_losses(logits, target, loss, lse, grad_out, grad_loss, common, plan, options):
    """The forward with gradient of rows split over ``plan.chunks`` programs each."""
    from warpforge.ops._kernels.cross_entropy import (
        cross_entropy_fwd_grad_flags_kernel,
        cross_entropy_fwd_grad_split_kernel,
    )

    n_rows, n_cols = logits.shape
    size = logits.element_size()
    align = _aligned_split_align(logits, grad_out)
    own = align > 1 and plan is _fwd_grad_split_plan(n_rows, n_cols, size, logits.device)
    fits = plan.flag_words and cdiv(n_cols + align - 1, plan.block) == plan.chunks
    if align > 1 and (not fits or (own and size == 4)):
        # The plan lacks the chunk a row's lead can need, or meets through counters, or is
        # float32's own (its unaligned rows were measured on ALIGNED_FLOAT32_LAUNCHES). Only
        # the op's own plan (the cached object) gives way to the aligned one: a plan the caller
        # passed (tests, benchmarks) runs as given, from each row's start.
        aligned_plan = None
        if own:
            aligned_plan = _flag_word_plan(n_rows, n_cols + align - 1, size, logits.device)
        if aligned_plan is not None:
            plan = aligned_plan
        else:
            align = 1
    options = dict(options, BLOCK=plan.block, **plan.launch_options())
    if plan.flag_words:
        check_flag_words(plan, "split")
        words = plan.unpublished_words(n_rows, 2, logits.device)  # two words a chunk
        with kernel_device(logits):
            for stage in plan.stages():
                cross_entropy_fwd_grad_flags_kernel[(plan.programs,)](
                    logits, target, loss, lse, grad_out, grad_loss, words,
                    _row_stride(grad_loss), logits.stride(0), grad_out.stride(0), n_rows,
                    *common, CHUNKS_POW2=plan.chunks_pow2, STAGE=stage, PREFETCH=plan.prefetch,
                    ALIGN=align, **options,
                )  # fmt: skip
        return
    partials = plan.workspace(n_rows, 4, logits.device)
    arrivals = plan.arrivals(n_rows, logits.device)
    with kernel_device(logits):
        for stage in plan.stages():
            cross_entropy_fwd_grad_split_kernel[(plan.programs,)](
                logits, target, loss, lse, grad_out, grad_loss, partials, arrivals,
                _row_stride(grad_loss), logits.stride(0), grad_out.stride(0), n_rows, *common,
                CHUNKS_POW2=plan.chunks_pow2, STAGE=stage, PREFETCH=plan.prefetch,
                EARLY=SPLIT_EARLY_TARGET, RELEASE_ONLY=plan.release_only, **options,
            )  # fmt: skip


def scale_row_grads(grad: torch.Tensor, grad_loss: torch.Tensor) -> None:
    """``grad[row] *= grad_loss[row]`` in place (one broadcast value allowed); rows whose factor
    is exactly 1 are not touched, decided on the device."""
    n_rows, n_cols = grad.shape
    if n_rows == 0:
        return
    if execution_path(grad.device) is ExecutionPath.TORCH_REFERENCE:
        grad.mul_(grad_loss.float().reshape(-1, 1))
        return
    # the kernel reads any float dtype as float32: no conversion launch for a 16-bit grad_loss
    from warpforge.ops._kernels.cross_entropy import cross_entropy_scale_rows_kernel

    block, num_warps = _launch_config(n_cols, grad.element_size())
    with kernel_device(grad):
        cross_entropy_scale_rows_kernel[(_scale_programs(n_rows, num_warps, grad.device),)](
            grad, grad_loss, _row_stride(grad_loss), grad.stride(0), n_rows, n_cols,
            BLOCK=block, num_warps=num_warps,
        )  # fmt: skip


def _scale_programs(n_rows: int, num_warps: int, device: torch.device) -> int:
    """Persistent grid of the scaling kernel: 2048 threads an SM (at most 32 programs)."""
    sm_count = device_capabilities(device).sm_count
    if sm_count is None:
        return max(1, min(n_rows, _INTERPRETER_PROGRAMS))
    return max(1, min(n_rows, sm_count * max(1, min(32, 64 // num_warps))))


def row_grads(
    grad_logits: torch.Tensor,
    logits: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    grad_loss: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    *,
    launch: tuple[int, int] | None = None,
    evict_first: bool | None = None,
) -> torch.Tensor:
    """Write d(loss . grad_loss)/d(logits) into ``grad_logits`` (may be ``logits`` itself).

    ``grad_loss`` is float32 with one value per row, or one value broadcast (stride 0).
    ``launch`` = (BLOCK, num_warps) overrides the launch config and ``evict_first`` whether the
    logits are loaded with the eviction hint (benchmark sweeps; by default the launch's own
    choice, ``BWD_ROW_LAUNCHES_BY_MODEL``, and with a given ``launch`` the hint).
    """
    n_rows, n_cols = logits.shape
    if n_rows == 0:
        return grad_logits
    if execution_path(logits.device) is ExecutionPath.TORCH_REFERENCE:
        grad = _reference_row_grads(
            logits, target, lse, grad_loss, ignore_index, label_smoothing, z_loss
        )
        return grad_logits.copy_(grad)
    from warpforge.ops._kernels.cross_entropy import cross_entropy_bwd_kernel

    if launch is None:
        block, num_warps, hint = _bwd_row_launch(n_cols, logits.element_size(), logits.device)
    else:
        (block, num_warps), hint = launch, True
    hint = hint if evict_first is None else evict_first
    with kernel_device(logits):
        cross_entropy_bwd_kernel[(n_rows * cdiv(n_cols, block),)](
            grad_logits,
            logits,
            target,
            lse,
            grad_loss,
            _row_stride(grad_loss),
            logits.stride(0),
            grad_logits.stride(0),
            n_cols,
            ignore_index,
            float(label_smoothing),
            float(z_loss),
            BLOCK=block,
            EVICT_FIRST=hint,
            num_warps=num_warps,
        )
    return grad_logits


FLAT_BWD_LAUNCHES = {4: (1024, 4)}
"""Element size -> (BLOCK, num_warps) of the flat saved-lse backward
(``cross_entropy_bwd_flat_kernel``), taken for every contiguous row of at least one block.
H200, kernel alone (``benchmarks/parity_sweep.py``,
``session18-h200-2026-11-28/parity-sweep-call5.json``), float32: 16384 x 32000 1006.1 us
against 1047.2 for the launch before it (the flat stream at 8192 / 16 warps, for rows the row
kernel's 4096-column slices pad) and 1014.6-1057.0 for the row kernel's launches; 8192 x
128256 2016.4 against 2106.4 for the row kernel's 4096 / 8 warps (then the default); 4096 x
50257 (rows off 16-byte boundaries) 405.5 against 424.4 at 2048 / 4 warps (then their
default) and 410.7 for torch.compile. On the H100 (``parity-sweep-2026-11-25-h100.json``) this
launch at 16384 x 32000 ran 1408.8 us against 1396.4 at 8192 / 16 warps (0.9% slower); the
H100 never timed it at the other shapes. 2-byte logits keep the row kernel (1.64-2.85x
torch.compile on the H200, ``session17-h200-2026-11-28/ce-bf16-call2.json``). The logits are
loaded without an eviction hint since the nineteenth session
(``session19-h200-2026-11-29/parity-sweep-call1.json``): 16384 x 32000 987.7 us against 1011.3
with ``evict_first`` (torch.compile 993.2), 8192 x 128256 1977.3 against 2021.6 (1981.5)."""


def _flat_bwd_launch(logits: torch.Tensor) -> tuple[int, int] | None:
    """The flat backward's launch for these logits, or None (the row kernel): GPU kernels only,
    contiguous logits of an element size ``FLAT_BWD_LAUNCHES`` holds, rows of one block or
    more."""
    if logits.dim() != 2 or not logits.is_contiguous():
        return None
    if execution_path(logits.device) is ExecutionPath.TORCH_REFERENCE:
        return None
    launch = FLAT_BWD_LAUNCHES.get(logits.element_size())
    if launch is None or logits.shape[1] < launch[0]:
        return None
    return launch


def flat_row_grads(
    grad_logits: torch.Tensor,
    logits: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    grad_loss: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    launch: tuple[int, int],
    *,
    evict_first: bool = False,
) -> torch.Tensor:
    """:func:`row_grads` through ``cross_entropy_bwd_flat_kernel``: contiguous logits and
    gradient taken as one stream of ``BLOCK``-element blocks (``launch`` = (BLOCK, num_warps),
    ``BLOCK <= n_cols``), wherever rows begin; ``evict_first=True`` loads the logits with the
    eviction hint (benchmark sweeps; slower on the H200, ``FLAT_BWD_LAUNCHES``)."""
    from warpforge.ops._kernels.cross_entropy import cross_entropy_bwd_flat_kernel

    n_rows, n_cols = logits.shape
    block, num_warps = launch
    if not (logits.is_contiguous() and grad_logits.is_contiguous()) or block > n_cols:
        raise ValueError(
            f"launch: the flat backward needs contiguous operands and BLOCK <= n_cols ({n_cols}),"
            f" got BLOCK={block}, contiguous logits {logits.is_contiguous()}, gradient "
            f"{grad_logits.is_contiguous()}"
        )
    n = n_rows * n_cols
    if n == 0:
        return grad_logits
    with kernel_device(logits):
        cross_entropy_bwd_flat_kernel[(cdiv(n, block),)](
            grad_logits, logits, target, lse, grad_loss, _row_stride(grad_loss), n_rows, n_cols,
            n, ignore_index, float(label_smoothing), float(z_loss),
            BLOCK=block, WIDE=n + block + n_cols >= 2**31, EVICT_FIRST=evict_first,
            num_warps=num_warps,
        )  # fmt: skip
    return grad_logits


def _target_masks(target: torch.Tensor, n_cols: int, ignore_index: int):
    ignored = target == ignore_index
    in_range = (target >= 0) & (target < n_cols)
    safe = torch.where(in_range, target, torch.zeros_like(target)).long()
    return ignored, in_range, safe


def _reference_row_losses(logits, target, ignore_index, label_smoothing, z_loss):
    x = logits.float()
    n_cols = x.shape[1]
    lse = torch.logsumexp(x, dim=1)
    ignored, in_range, safe = _target_masks(target, n_cols, ignore_index)
    target_logit = x.gather(1, safe[:, None])[:, 0]
    loss = lse - (1.0 - label_smoothing) * target_logit + z_loss * lse * lse
    if label_smoothing > 0.0:  # skipped otherwise: 0 * sum would be NaN for masked -inf logits
        loss = loss - (label_smoothing / n_cols) * x.sum(dim=1)
    loss = torch.where(in_range, loss, torch.full_like(loss, math.nan))
    loss = torch.where(ignored, torch.zeros_like(loss), loss)
    return loss, lse


def _reference_row_grads(logits, target, lse, grad_loss, ignore_index, label_smoothing, z_loss):
    x = logits.float()
    n_cols = x.shape[1]
    ignored, in_range, safe = _target_masks(target, n_cols, ignore_index)
    g = grad_loss.float().reshape(-1).expand(x.shape[0])
    scale = torch.where(in_range, g, torch.full_like(g, math.nan))
    scale = torch.where(ignored, torch.zeros_like(scale), scale)
    probs = torch.exp(x - lse[:, None])
    grad = (
        probs * (scale * (1.0 + 2.0 * z_loss * lse))[:, None]
        - (scale * label_smoothing / n_cols)[:, None]
    )
    hit = torch.zeros_like(grad).scatter_(
        1, safe[:, None], (scale * (1.0 - label_smoothing))[:, None]
    )
    return (grad - hit).to(logits.dtype)


# ----------------------------------------------------------------------------------------------
# torch.library ops
# ----------------------------------------------------------------------------------------------


@dispatched_op("warpforge::cross_entropy_fwd", mutates_args=())
def _cross_entropy_fwd(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    check_target_values(target, logits.shape[1], ignore_index)
    return loss_only_rows(logits, target, ignore_index, label_smoothing, z_loss)


@_cross_entropy_fwd.register_fake
def _(logits, target, ignore_index, label_smoothing, z_loss):
    n_rows = logits.shape[0]
    return (
        logits.new_empty(n_rows, dtype=torch.float32),
        logits.new_empty(n_rows, dtype=torch.float32),
    )


@dispatched_op("warpforge::cross_entropy_bwd", mutates_args=())
def _cross_entropy_bwd(
    grad_loss: torch.Tensor,
    logits: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
) -> torch.Tensor:
    grad_logits = torch.empty(logits.shape, device=logits.device, dtype=logits.dtype)
    flat = _flat_bwd_launch(logits)
    if flat is not None:
        return flat_row_grads(
            grad_logits, logits, target, lse, grad_loss.float(), ignore_index, label_smoothing,
            z_loss, flat,
        )  # fmt: skip
    return row_grads(
        grad_logits, logits, target, lse, grad_loss.float(), ignore_index, label_smoothing, z_loss
    )


@_cross_entropy_bwd.register_fake
def _(grad_loss, logits, target, lse, ignore_index, label_smoothing, z_loss):
    return torch.empty(logits.shape, device=logits.device, dtype=logits.dtype)


def _setup_context(ctx, inputs, output):
    logits, target, ignore_index, label_smoothing, z_loss = inputs
    ctx.save_for_backward(logits, target, output[1])
    ctx.options = (ignore_index, label_smoothing, z_loss)


def _backward(ctx, grad_loss, grad_lse):
    logits, target, lse = ctx.saved_tensors
    grad_logits = _cross_entropy_bwd(grad_loss, logits, target, lse, *ctx.options)
    return grad_logits, None, None, None, None


_cross_entropy_fwd.register_autograd(_backward, setup_context=_setup_context)


SMALL_REDUCTION_MAX_ROWS = 65536
"""Rows up to which the forward-with-gradient op reduces its per-row values (the mean's count,
the loss) in one single-program launch each (``_reduction_launch``); torch's reductions take
several launches of a few microseconds each, ~5% of a 16384 x 32000 bf16 loss and gradient."""


def _reduction_launch(n_rows: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of the single-program reductions over ``n_rows`` values: up to 16384
    a step, 16 a thread, so that 16384 rows are one step with every load in flight (5 µs each
    at 8192 a step, 16 warps: ``ce16-sweep2-op-profile-2026-11-24-h100.txt``)."""
    block = max(16, min(next_power_of_2(n_rows), 16384))
    return block, max(1, min(32, block // 512))


def _small_reductions(target: torch.Tensor) -> bool:
    return (
        target.shape[0] <= SMALL_REDUCTION_MAX_ROWS
        and execution_path(target.device) is not ExecutionPath.TORCH_REFERENCE
    )


def _reduction_scale(target: torch.Tensor, ignore_index: int, reduction: str) -> torch.Tensor:
    """d(reduced loss)/d(row loss) as a 1-element float32 device tensor (no host sync)."""
    if reduction != "mean":
        return torch.ones(1, device=target.device, dtype=torch.float32)
    if not _small_reductions(target) or target.shape[0] == 0:
        return (1.0 / (target != ignore_index).sum().to(torch.float32)).reshape(1)
    from warpforge.ops._kernels.cross_entropy import cross_entropy_mean_scale_kernel

    scale = torch.empty(1, device=target.device, dtype=torch.float32)
    block, num_warps = _reduction_launch(target.shape[0])
    with kernel_device(target):
        cross_entropy_mean_scale_kernel[(1,)](
            target, scale, target.shape[0], ignore_index, BLOCK=block, num_warps=num_warps
        )
    return scale


def _reduced_loss(
    loss_rows: torch.Tensor,
    target: torch.Tensor,
    scale: torch.Tensor | None,
    ignore_index: int,
    reduction: str,
    dtype: torch.dtype,
) -> torch.Tensor:
    """The reduced loss in ``dtype`` (float32 per-row losses for "none"); a mean multiplies by
    the ``scale`` the gradient used (1 / count), or without one (None) counts the targets that
    are not ``ignore_index`` in the same launch."""
    if reduction == "none":
        return loss_rows
    if not _small_reductions(target) or loss_rows.shape[0] == 0:
        return reduce_rows(loss_rows, target, ignore_index, reduction).to(dtype)
    from warpforge.ops._kernels.cross_entropy import cross_entropy_reduce_kernel

    out = torch.empty((), device=loss_rows.device, dtype=dtype)
    block, num_warps = _reduction_launch(loss_rows.shape[0])
    mean = reduction == "mean"
    with kernel_device(loss_rows):
        cross_entropy_reduce_kernel[(1,)](
            loss_rows, loss_rows if scale is None else scale, target, out, loss_rows.shape[0],
            ignore_index, BLOCK=block, HAS_SCALE=mean and scale is not None,
            COUNT=mean and scale is None, num_warps=num_warps,
        )  # fmt: skip
    return out


@dispatched_op("warpforge::cross_entropy_fwd_reduced", mutates_args=())
def _cross_entropy_fwd_reduced(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    reduction: str,
) -> torch.Tensor:
    """The loss-only forward reduced to a scalar ("mean", "sum") in the logits' dtype: the row
    kernel and one single-program reduction that also counts a mean's rows."""
    check_target_values(target, logits.shape[1], ignore_index)
    loss_rows, _ = loss_only_rows(logits, target, ignore_index, label_smoothing, z_loss)
    return _reduced_loss(loss_rows, target, None, ignore_index, reduction, logits.dtype)


@_cross_entropy_fwd_reduced.register_fake
def _(logits, target, ignore_index, label_smoothing, z_loss, reduction):
    return logits.new_empty(())


@dispatched_op("warpforge::cross_entropy_fwd_grad", mutates_args=())
def _cross_entropy_fwd_grad(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    z_loss: float,
    reduction: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(reduced loss, gradient of that loss w.r.t. the logits) in one pass. The reduced loss
    ("mean", "sum") comes in the logits' dtype (no cast launch after it, nor one of its
    gradient before the backward); per-row losses ("none") in float32."""
    check_target_values(target, logits.shape[1], ignore_index)
    grad = torch.empty(logits.shape, device=logits.device, dtype=logits.dtype)
    scale = _reduction_scale(target, ignore_index, reduction)
    loss_rows, _ = row_losses(
        logits, target, ignore_index, label_smoothing, z_loss, grad_out=grad, grad_loss=scale
    )
    return _reduced_loss(loss_rows, target, scale, ignore_index, reduction, logits.dtype), grad


@_cross_entropy_fwd_grad.register_fake
def _(logits, target, ignore_index, label_smoothing, z_loss, reduction):
    loss_shape = (logits.shape[0],) if reduction == "none" else ()
    return (
        logits.new_empty(loss_shape, dtype=torch.float32 if reduction == "none" else logits.dtype),
        torch.empty(logits.shape, device=logits.device, dtype=logits.dtype),
    )


@dispatched_op("warpforge::cross_entropy_scale_grad_", mutates_args=("grad",))
def _cross_entropy_scale_grad_(grad: torch.Tensor, grad_loss: torch.Tensor) -> None:
    scale_row_grads(grad, grad_loss)


@_cross_entropy_scale_grad_.register_fake
def _(grad, grad_loss):
    return None


def _setup_fwd_grad_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])
    # The gradient output never receives a gradient; without this autograd would hand the
    # backward a zero-filled [rows, V] tensor for it (a full extra write of the logits' size).
    ctx.set_materialize_grads(False)
    ctx.grad_used = False


def _fwd_grad_backward(ctx, grad_loss, _grad_of_grad):
    if grad_loss is None:  # nothing flowed into the loss (grads are not materialized)
        return None, None, None, None, None, None
    if ctx.grad_used:
        raise RuntimeError(
            "warpforge.ops.cross_entropy: backward ran twice through one forward (retain_graph); "
            "its gradient buffer is scaled in place, so call cross_entropy again instead"
        )
    ctx.grad_used = True
    (grad,) = ctx.saved_tensors
    _cross_entropy_scale_grad_(grad, grad_loss)
    return grad, None, None, None, None, None


_cross_entropy_fwd_grad.register_autograd(_fwd_grad_backward, setup_context=_setup_fwd_grad_context)


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def validate_loss_options(
    ignore_index: object, reduction: object, label_smoothing: object
) -> tuple[int, str, float]:
    """Checks shared by cross_entropy and fused_linear_cross_entropy."""
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index: expected an int, got {describe(ignore_index)}")
    check_choice("reduction", reduction, REDUCTIONS)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"label_smoothing: expected a number, got {describe(label_smoothing)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing: expected a number in [0, 1], got {label_smoothing!r}")
    return ignore_index, reduction, float(label_smoothing)


def validate_target(target: object, expected_shape: tuple[int, ...], *, what: str) -> torch.Tensor:
    """``target`` holds int64/int32 class indices of ``expected_shape`` (its values are checked
    by :func:`check_target_values` in the forward ops' bodies)."""
    target = check_tensor("target", target, dtypes=TARGET_DTYPES, allow_empty=True)
    if tuple(target.shape) != tuple(expected_shape):
        raise ValueError(
            f"target: expected shape {tuple(expected_shape)} ({what}), got {describe(target)}"
        )
    return target


def check_target_values(target: torch.Tensor, n_classes: int, ignore_index: int) -> None:
    """CPU targets outside [0, ``n_classes``) other than ``ignore_index`` raise (cheap, no device
    sync); CUDA targets are checked by a device assertion when ``WARPFORGE_CHECKS=1``. The
    forward ops call it in their bodies, which also run eagerly inside a compiled graph (a check
    in the public function would be traced away there)."""
    if target.device.type == "cpu" and target.numel():
        bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
        if bool(bad.any()):
            position = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"target: expected class indices in [0, {n_classes}) or ignore_index="
                f"{ignore_index}, got {int(target[position])} at position {position}"
            )


def reduce_rows(
    loss_rows: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str
) -> torch.Tensor:
    """Apply ``reduction`` to float32 per-row losses (mean: over non-ignored rows)."""
    if reduction == "none":
        return loss_rows
    total = loss_rows.sum()
    if reduction == "sum":
        return total
    return total / (target != ignore_index).sum()


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
) -> torch.Tensor:
    """Cross entropy of ``logits[..., V]`` against class indices ``target[...]``.

    Same semantics as ``torch.nn.functional.cross_entropy`` (class dimension last): rows whose
    target is ``ignore_index`` contribute 0; ``"mean"`` divides by the number of non-ignored
    rows (NaN when all are ignored, like torch); ``label_smoothing`` mixes the one-hot target
    with the uniform distribution. ``z_loss`` adds ``z_loss * logsumexp(row)**2`` per
    non-ignored row. Computed in float32; the result has the dtype of ``logits`` (shape
    ``target.shape`` for ``reduction="none"``, else a scalar).
    """
    logits = check_tensor(
        "logits",
        logits,
        dtypes=(torch.float32, torch.float16, torch.bfloat16),
        min_ndim=1,
        allow_empty=True,
    )
    ignore_index, reduction, label_smoothing = validate_loss_options(
        ignore_index, reduction, label_smoothing
    )
    z_loss = check_positive("z_loss", z_loss, allow_zero=True, finite=True)
    n_classes = logits.shape[-1]
    if n_classes == 0:
        raise ValueError(
            f"logits: expected at least one class in the last dimension, got {describe(logits)}"
        )
    lead = tuple(logits.shape[:-1])
    target = validate_target(target, lead, what="logits.shape[:-1]")
    check_same_device(logits=logits, target=target)

    logits2d = logits.reshape(-1, n_classes)
    if logits2d.stride(-1) != 1:
        logits2d = logits2d.contiguous()
    target1d = target.reshape(-1)
    if not target1d.is_contiguous():
        target1d = target1d.contiguous()
    if torch.is_grad_enabled() and logits.requires_grad and _fused_gradient(logits2d):
        loss, _ = _cross_entropy_fwd_grad(
            logits2d, target1d, ignore_index, label_smoothing, float(z_loss), reduction
        )
    elif reduction != "none" and not (torch.is_grad_enabled() and logits.requires_grad):
        loss = _cross_entropy_fwd_reduced(
            logits2d, target1d, ignore_index, label_smoothing, float(z_loss), reduction
        )
    else:
        loss_rows, _ = _cross_entropy_fwd(
            logits2d, target1d, ignore_index, label_smoothing, float(z_loss)
        )
        loss = reduce_rows(loss_rows, target1d, ignore_index, reduction)
    if reduction == "none":
        loss = loss.reshape(lead)
    return loss.to(logits.dtype)
