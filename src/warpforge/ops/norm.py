"""RMSNorm (optionally fused with the residual add) and LayerNorm over the last dimension.

Public functions validate their arguments, flatten leading dimensions into rows and call
``torch.library`` custom ops (``warpforge::rms_norm_fwd`` ...), which pick the execution path
from :func:`warpforge.runtime.execution_path`: the Triton kernels in
``warpforge.ops._kernels.norm`` (compiled on GPU, interpreted on CPU when asked), or a PyTorch
reference with the same semantics (statistics in fp32, output cast back to the input dtype).
Backward passes are custom ops of their own, so both directions work under
``torch.compile(fullgraph=True)`` and CUDA graphs.
"""

# No ``from __future__ import annotations``: torch.library infers the custom ops' schemas from
# these annotations, and older torch releases do not resolve string annotations.

import dataclasses
import functools
import os
from typing import Any

import torch

from warpforge.dispatch import dispatched_op
from warpforge.ops import _split_rows
from warpforge.ops._rows import (
    MAX_SINGLE_PASS_N,
    RowLaunchConfig,
    as_rows,
    cdiv,
    kernel_device,
    launch_rows,
    next_power_of_2,
    row_launch_config,
    row_launch_shape,
)
from warpforge.ops._split_rows import (
    SplitRowPlan,
    check_flag_words,
    flag_word_plan,
    split_row_plan,
)
from warpforge.ops._wide_rows import (
    WIDE_MAX_N,
    WideLaunch,
    row_blocks,
    specialized_length,
    wide_launch,
)
from warpforge.runtime import (
    ExecutionPath,
    device_capabilities,
    execution_path,
    interpreter_enabled,
    switch_on,
)
from warpforge.validation import (
    FLOAT_DTYPES,
    check_positive,
    check_same_device,
    check_shape,
    check_tensor,
    describe,
)

__all__ = ["layer_norm", "rms_norm"]


# --------------------------------------------------------------------------- launch shapes


def fwd_launch_heuristic(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """Forward kernels: whole rows in registers up to 16K columns, chunked beyond (the chunked
    kernel re-reads x, or h with a residual, once)."""
    return row_launch_config(M, N, dtype, device, reread_operands=1)


def bwd_launch_heuristic(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """Backward kernels: ~8 elements per thread (they keep x, dy, dweight partials live), and a
    persistent grid that fills each SM once: each program owns one row of the fp32 partial
    weight-gradient buffer, which a second small kernel reduces."""
    return row_launch_config(
        M,
        N,
        dtype,
        device,
        elements_per_thread=8,
        max_warps=32,
        tile_elements=2048,
        reread_operands=2,
        resident_warps=_BWD_RESIDENT_WARPS,
    )


_BWD_RESIDENT_WARPS = 32  # ~64 registers per thread at 8 elements per thread


@functools.lru_cache(maxsize=1024)
def _fwd_launch_config(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str, kernel: str = "rms_norm.fwd"
) -> RowLaunchConfig:
    """The forward launch: tuned (warpforge.tune) when known, else the heuristic."""
    from warpforge.ops.tunables import tuned_row_launch

    heuristic = fwd_launch_heuristic(M, N, dtype, device)
    return tuned_row_launch(kernel, M, N, dtype, device, heuristic, reread_operands=1)


@dataclasses.dataclass(frozen=True)
class BwdKnobs:
    """The backward rows kernel's launch choices beyond its tile (tuned with it)."""

    reload: bool = False
    """Read each tile a second time after the row reductions (see the kernel) instead of
    keeping x and dy live across them: fewer registers, so more programs fit an SM."""
    programs_per_sm: int = 0
    """Persistent programs per SM; 0: as many as the register model says fit."""


@functools.lru_cache(maxsize=1024)
def _bwd_launch_config(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str, kernel: str = "rms_norm.bwd"
) -> tuple[RowLaunchConfig, BwdKnobs]:
    """The backward launch and knobs: tuned (warpforge.tune) when known, else the heuristic."""
    from warpforge.ops.tunables import tuned_norm_bwd_launch

    heuristic = bwd_launch_heuristic(M, N, dtype, device)
    config, knobs = tuned_norm_bwd_launch(
        kernel, M, N, dtype, device, heuristic, resident_warps=_BWD_RESIDENT_WARPS
    )
    return config, BwdKnobs(bool(knobs["RELOAD"]), int(knobs["PROGRAMS_PER_SM"]))  # type: ignore[call-overload]


@dataclasses.dataclass(frozen=True)
class BwdRowLaunch:
    """A measured launch of the backward rows kernel (``NORM_BWD_ROW_LAUNCHES``)."""

    block_n: int
    rows: int
    """Rows a tile."""
    num_warps: int
    programs_per_sm: int
    """0: as many as :func:`_bwd_resident_programs` says fit."""
    prefetch: bool
    """The next tile loaded while this one is processed (:func:`prefetch_tiles` decides for the
    tuned launches)."""
    reload: bool = False
    max_registers: int | None = None
    """Registers a thread (``maxnreg``), so that ``programs_per_sm`` programs fit an SM."""


NORM_BWD_ROW_LAUNCHES: dict[tuple[int, str, int], BwdRowLaunch] = {
    (2, "layer_norm.bwd", 256): BwdRowLaunch(256, 8, 2, 0, prefetch=True),
    (2, "add_rms_norm.bwd", 256): BwdRowLaunch(256, 16, 4, 3, prefetch=True, reload=True),
    (2, "layer_norm.bwd", 1024): BwdRowLaunch(1024, 2, 4, 4, prefetch=True),
    (2, "rms_norm.bwd", 1024): BwdRowLaunch(1024, 4, 4, 3, prefetch=True),
    (2, "layer_norm.bwd", 4096): BwdRowLaunch(4096, 1, 16, 2, prefetch=True, max_registers=64),
    (4, "rms_norm.bwd", 4096): BwdRowLaunch(4096, 1, 8, 2, prefetch=True),
}
"""(element size, tunable, the row's power of two) -> the backward rows kernel's launch for rows
of more than half that power of two, in place of the tuned one: launches the tuner's space has
no knob for (prefetch where a thread holds more than 8 elements of a tile; a register cap).
H200, the backward alone (``benchmarks/parity_sweep.py``'s norm backward cases,
``session38-h200-2026-11-30/parity-norm-bwd-call2.json``, ``-call3.json`` and
``parity-norm-bwd-neighbours-call5.json``), us, this launch against the tuned one in the same
run (95% intervals apart in each):

    tunable           dtype  M x N          launch                                  this  tuned
    layer_norm.bwd    bf16   32768 x 256    8 rows, 2 warps, prefetch               25.7   28.2
    add_rms_norm.bwd  bf16   32768 x 256    16 rows, 4 warps, 3 an SM, prefetch,    32.5   33.7
                                            reload
    layer_norm.bwd    bf16   32768 x 1024   2 rows, 4 warps, 4 an SM, prefetch      64.1   68.8
    rms_norm.bwd      bf16   32768 x 1024   4 rows, 4 warps, 3 an SM, prefetch      61.3   63.7
    layer_norm.bwd    bf16   16384 x 4096   16 warps, 2 an SM, prefetch, 64 regs   117.7  121.3
    rms_norm.bwd      fp32   16384 x 4096   8 warps, 2 an SM, prefetch             196.9  200.6

(call 2 measured the 1024-column two at 63.8 / 68.4 and 60.8 / 63.1). LayerNorm's prefetch at
16 warps takes 75 registers without the cap (an sm_90 compile with Triton 3.6's ptxas on the
development machine), so only one program fits an SM: 216.5 us; capped at 64 it compiles without spilling. Around the other tuned launches
of the issue's rows of 256-4096 columns (both dtypes, the three norms: prefetch toggled, a
program an SM more and fewer, tiles of twice and half the rows) nothing gained more than 0.7%;
at 8192 columns no launch of call 3 beat LayerNorm's tuned one (126.0 against 126.1 us). Only
measured at those row counts; fp16 rows take the bf16 launches.

The rows kernel with the lagged split backward's LEAN arithmetic for 2-byte rows (xhat and dx
in fused multiply-adds, no offset add where it is 0, no where on xhat, rows of one block
unmasked: LayerNorm at 8192 columns 360 -> 320 instructions, add+RMSNorm at 2048 columns 288 ->
272 but 48 -> 63 registers, in sm_90 compiles of that commit's kernel) ran slower on these launches and tuned entries through the harness
on the H200 (``session42-h200-2026-12-01/normbwd-bf16-call9.json``, forward + backward, bf16):
rms_norm.bwd 16384 x 4096 171.7 -> 200.4 us, add_rms_norm.bwd 32768 x 256 51.7 -> 63.6 (below
torch.compile), 16384 x 4096 271.4 -> 313.4, layer_norm.bwd 16384 x 2048 100.1 -> 114.8; none
faster by more than 1%. Removed after commit ``28d582a``; it would need the launches tuned
again with it."""


@functools.lru_cache(maxsize=1024)
def norm_bwd_row_overrides(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str, kernel: str
) -> dict[str, Any]:
    """:func:`_norm_backward`'s launch keywords (``launch``, ``knobs``, ``prefetch``) from
    ``NORM_BWD_ROW_LAUNCHES`` for (M, N) rows of ``kernel`` (``layer_norm.bwd`` ...), or none
    (the tuned launch)."""
    entry = NORM_BWD_ROW_LAUNCHES.get((dtype.itemsize, kernel, next_power_of_2(N)))
    if entry is None or M == 0 or entry.block_n >= 2 * N:
        return {}
    return bwd_row_keywords(M, N, dtype, device, entry)


def bwd_row_keywords(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str, launch: BwdRowLaunch
) -> dict[str, Any]:
    """:func:`_norm_backward`'s launch keywords (``launch``, ``knobs``, ``prefetch``) that run
    the rows kernel on ``launch`` for (M, N) rows (the table's entries, benchmark sweeps)."""
    # resident_warps: as the tuned launches (the grid itself comes from programs_per_sm on a
    # GPU; under the interpreter a few programs, each walking several tiles)
    config = row_launch_shape(M, N, dtype, device, block_n=launch.block_n,
                              rows_per_program=launch.rows, num_warps=launch.num_warps,
                              resident_warps=_BWD_RESIDENT_WARPS)  # fmt: skip
    return {
        "launch": dataclasses.replace(config, max_registers=launch.max_registers),
        "knobs": BwdKnobs(reload=launch.reload, programs_per_sm=launch.programs_per_sm),
        "prefetch": launch.prefetch,
    }


def _kernel_name(center: bool, residual_stream: torch.Tensor | None, backward: bool = False) -> str:
    """The tunable whose config a launch reads. ``residual_stream`` is the residual (forward) or
    the gradient of ``h`` (backward): the fused residual add moves more bytes than a plain
    RMSNorm, so it is tuned on its own (``add_rms_norm``)."""
    fused = residual_stream is not None
    family = "layer_norm" if center else "add_rms_norm" if fused else "rms_norm"
    return f"{family}.{'bwd' if backward else 'fwd'}"


_PARTIAL_BLOCK_N = 512 if interpreter_enabled() else 16
"""Columns per program of the partial-sum kernel: enough programs (N / 16 per buffer) to spread
even a 256-column reduction over 32 SMs, each reading 64-byte row pieces of the partials.
Under Triton's interpreter, where a program costs milliseconds of Python whatever its width,
512 (a 65536-column row's sum: 40 s in 16-column programs, under 2 s in 512)."""
_PARTIAL_MAX_BLOCK_P = 256
"""Partial rows per load: up to 256 (two SMs' worth of persistent programs) in one round trip."""

_REGISTER_FILE = 65536
"""32-bit registers per SM (sm_80/sm_90), shared by the resident threads."""
_MAX_WARPS_PER_SM = 64


def _bwd_row_operands(center: bool, weight_grad: bool, bias_grad: bool) -> int:
    """Row-sized fp32 arrays the backward rows kernel keeps live per element: x, dy and the
    partial weight/bias gradients it accumulates in registers."""
    return 2 + int(weight_grad) + int(bias_grad and center)


def partials_in_memory(
    config: RowLaunchConfig, operands: int, element_size: int = 4, reload: bool = False
) -> bool:
    """Whether the backward rows kernel keeps its partial dweight/dbias in its own rows of the
    partial buffers rather than in registers: fp32 rows, one row per program with more than 48
    live values a thread. LayerNorm with both gradients at N=16384 (4 x 16) would spill 176
    bytes a thread otherwise (ptxas, sm_90); RMSNorm (3 x 16) fits. Measured on the H100
    (ops_bwd_sweep, 4096 x 16384): fp32 ran 1.26x faster in memory, but bf16 ran 2.4x faster
    in registers, so 16-bit rows keep them there. With ``reload`` (x and dy not held across the
    reductions) they stay in registers: LayerNorm fp32 at 4096 x 16384 ran 1.23x faster so
    (32 warps; benchmarks/norm_launch_sweep.py)."""
    if not config.single_pass or config.rows_per_program != 1 or element_size < 4 or reload:
        return False
    per_thread = cdiv(config.block_n, 32 * config.num_warps)
    return operands * per_thread > 48


def prefetch_tiles(config: RowLaunchConfig) -> bool:
    """Whether the backward rows kernel loads its next tile while processing the current one:
    when a thread holds at most 8 elements of a tile (the prefetched x and dy then cost ~11-19
    more registers on sm_90; at 16 elements they would spill).

    Triton's software pipelining of the tile loop instead (``tl.range(num_stages=2|3)``: the
    next tiles' loads as asynchronous copies into shared memory, no registers held; a STAGES
    argument of the kernel at commit ``72e856d``, ``benchmarks/pipelined_rows_sweep.py`` there)
    was timed on the H200, bf16, kernel alone, against the launches the op runs (the H100's
    tuned configs; ``session26-h200-2026-11-29/pipelined-rows-sweep-call10.txt``): at 3 stages
    RMSNorm / LayerNorm 16384 x 2048 63.3 -> 61.5 / 63.9 -> 65.9 us, 16384 x 4096 106.8 -> 112.3
    / 121.4 -> 117.5 us, 8192 x 8192 within 1%, RMSNorm 4096 x 16384 115.0 -> 131.6 us (its
    buffers leave room for one program an SM), LayerNorm there out of shared memory; 2 stages
    slower everywhere. Against the heuristic's launches (call 9, before the tuned entries were
    re-hashed) it gained 10-24%: the tuned launches already hold what it offers. Not kept."""
    per_thread = cdiv(config.block_n * config.rows_per_program, 32 * config.num_warps)
    return config.single_pass and per_thread <= 8


def _bwd_resident_programs(
    config: RowLaunchConfig, operands: int, in_memory: bool, prefetch: bool
) -> int:
    """Backward rows-kernel programs one SM holds at once, from its register use: about
    32 + 2 * (live arrays) * (elements a thread) registers a thread (ptxas on sm_90: 76 for
    RMSNorm and 108 for LayerNorm at 8 elements a thread, 87 and 127 with prefetch; one live
    array in memory mode, one more with prefetch), capped by what the warps may have. A persistent grid larger than this runs in waves with
    a ragged tail."""
    warps = config.num_warps
    per_thread = cdiv(config.block_n * config.rows_per_program, 32 * warps)
    live = (1 if in_memory else operands) + int(prefetch)
    registers = 32 + 2 * live * per_thread
    cap = _REGISTER_FILE // (32 * warps)
    registers = min(255, cap, -(-registers // 8) * 8)
    return max(1, min(_MAX_WARPS_PER_SM // warps, _REGISTER_FILE // (32 * warps * registers)))


@functools.lru_cache(maxsize=1024)
def _bwd_grid(
    config: RowLaunchConfig,
    operands: int,
    in_memory: bool,
    prefetch: bool,
    device: torch.device,
    rows: int = 0,
    programs_per_sm: int = 0,
) -> int:
    """The backward's persistent grid: ``config.num_programs``, at most what the SMs hold at
    once for the rows kernel (no waves with a ragged tail); with ``programs_per_sm`` (tuned:
    the register model overestimates some kernels, RELOAD's for one), that many per SM, at
    most one per tile of the ``rows`` rows."""
    sm_count = device_capabilities(device).sm_count
    if not config.single_pass or sm_count is None:
        return config.num_programs
    if programs_per_sm:
        return max(1, min(cdiv(rows, config.rows_per_program), sm_count * programs_per_sm))
    resident = _bwd_resident_programs(config, operands, in_memory, prefetch)
    return min(config.num_programs, sm_count * resident)


# --------------------------------------------------------------------------- shared kernels path


def _norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
    launch: RowLaunchConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, h, mean, rstd) for a (M, N) input; h is empty without residual, mean without center.
    ``launch`` overrides the launch config (the tuner's trials)."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N) if residual is not None else (0,), dtype=x.dtype, device=x.device)
    stats_dtype = torch.promote_types(x.dtype, torch.float32)  # float64 only via gradcheck
    mean = torch.empty((M,) if center else (0,), dtype=stats_dtype, device=x.device)
    rstd = torch.empty((M,), dtype=stats_dtype, device=x.device)
    if M == 0:
        return y, h, mean, rstd
    if execution_path(x.device) is ExecutionPath.TORCH_REFERENCE:
        return _reference_forward(x, weight, bias, residual, eps, offset, center, y, h, mean, rstd)

    from warpforge.ops._kernels import norm as kernels

    x = as_rows(x)
    residual = as_rows(residual) if residual is not None else None
    config = launch or _fwd_launch_config(M, N, x.dtype, x.device, _kernel_name(center, residual))
    args = (
        x,
        residual if residual is not None else x,
        weight.contiguous() if weight is not None else x,  # the kernels index it densely
        bias.contiguous() if bias is not None else x,
        y,
        h if residual is not None else y,
        mean if center else rstd,
        rstd,
        x.stride(0),
        residual.stride(0) if residual is not None else 0,
        y.stride(0),
        N,
        M,
        N,
        eps,
        offset,
    )
    flags = {
        "CENTER": center,
        "HAS_RESIDUAL": residual is not None,
        "HAS_WEIGHT": weight is not None,
        "HAS_BIAS": bias is not None,
    }
    with kernel_device(x):
        launch_rows(
            config, kernels.norm_fwd_rows_kernel, kernels.norm_fwd_chunked_kernel, args, **flags
        )
    return y, h, mean, rstd


# --------------------------------------------------------------------------- split forward

NORM_FWD_SPLIT_LAUNCHES = {
    (2, False): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": True,
                 "reread_lag": 2, "hold_weight": True},
    (2, True): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": True,
                "lag_depth": 1, "packed": True},
    (4, False): {"block": 8192, "num_warps": 16, "programs_per_sm": 1, "prefetch": True,
                 "reread_lag": 2, "hold_weight": True},
    (4, True): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": False},
}  # fmt: skip
"""(element size, residual) -> the flag-word split launch of the forward: 8192-column programs
(8 warps, 2 an SM, 128 registers a thread; float32 without a residual 16 warps, 1 an SM). Rows
of at least ``NORM_FWD_LAG_MIN_CHUNKS`` chunks (by residual) take, without a residual,
``norm_fwd_reread_kernel`` two steps behind with w held (the plan's ``reread_lag``, ``hold_weight``;
LayerNorm with ``NORM_FWD_SPLIT_CENTER_OPTIONS`` over them), with a residual 2-byte rows
``norm_fwd_lag_kernel`` one row ahead as int32 pairs (``lag_depth`` 1, ``packed``); the others
``norm_fwd_flags_kernel``, prefetching the next row's chunk except float32 with a residual (two
fp32 chunks to prefetch).

The re-reading kernel since the forty-third session. H200, kernel alone
(``session43-h200-2026-12-02/normfwd-reread-bf16-call1.json``, ``-fp32-call1.json``), 8192
rows, us at 131072 / 262144 columns: bf16 RMSNorm 1079.3 / 2115.7 (93.1% / 95.6% of copy)
against 1244.4 / 2455.9 for the lag kernel it replaced; float32 at 262144 RMSNorm 4214.8
(94.6%), LayerNorm 4435.4 (89.9%) against 4842.3 and 5376.3 for the flag-word kernel. The lag
kernel holds a row's chunk in registers across the wait, so the lag it tolerates costs a chunk
of registers a row; reading the chunk again from L2 frees them for w and a deeper lag. Without
the L2 hints (evict_last on the first read, evict_first on the second and on y) bf16 RMSNorm
took 1300.2 / 2586.6 us: the second read then missed L2.

Kernel alone on the H100 (``benchmarks/results/normfwd-sweep-2026-11-25-h100.json``), bf16
8192 x 262144 RMSNorm / add+RMSNorm / LayerNorm: the lag kernel 3048 / 5893 / 3395 us, 93.1% /
96.3% / 83.6% of copy, against 3580 / 6010 / 3873 (79.3% / 94.4% / 73.3%) for the flags kernel:
publishing row k + 1 before waiting for row k hides the wait for the 32 programs of a row. At
8 chunks (65536 columns) the wait is short and the lag kernel only ties (RMSNorm 790 us both,
LayerNorm 878 against 859 packed). Two rows loading (DEPTH 2), w and b held, four programs an
SM, 4096-column programs: no better, or slower where they spill. float32: the lag kernel spills
under the 128-register cap and is slower at every shape (rms 6325 against 5982 us), so the
flags kernel stays (fp32 8192 x 262144: 94.8% / 93.9% (no prefetch) / 87.8%).
Earlier sweep: ``benchmarks/results/normsplit-sweep-2026-11-25-h100.txt``. LayerNorm's chunk
moments from float64 sums of x and x^2 (independent reductions, instead of the mean and then
the centred squares) were 8-21% slower in bf16 and 1-6% in fp32 at 32768-262144 columns
(``session14-2026-11-25/norm-fwd-moments-call9.log``, kernel alone; the harness's bf16
layer_norm.fwd at 65536-262144: 76-66-75% of copy against 84-80-84%,
``lnfwd-bf16-moments{1,0}-call9.json``), so the two dependent reductions are not what holds
LayerNorm under RMSNorm here; removed after commit ``34d44de``. The flag-word kernel without the
offset add where the offset is 0 and with rows of whole chunks unmasked (the lag kernel's
HAS_OFFSET and EVEN, which its LEAN measured faster; float32 LayerNorm 944 -> 688 instructions
in an sm_90 compile of that commit's kernel) was slower in float32 on the H200 (``session42-h200-2026-12-01/
normfwd-flags-call7.json``, kernel alone, 8192 x 262144 RMSNorm / LayerNorm 5006.0 / 5601.3 us
against 4851.3 / 5356.9; at 131072 LayerNorm gained, 2404.0 against 2533.1, RMSNorm lost,
2246.8 against 2181.7) and mixed in bf16 at 98304 columns; removed after commit ``27b6857``."""

NORM_FWD_SPLIT_CENTER_OPTIONS = {4: {"hold_bias": True}}
"""Element size -> the options LayerNorm takes over ``NORM_FWD_SPLIT_LAUNCHES``' (no
residual): float32 rows hold b as well as w; bf16 rows hold w only (holding both spills).
H200, kernel alone, bf16 8192 rows (``session43-h200-2026-12-02/lnfwd-reread-bf16-call2.json``),
us at 131072 / 262144 columns: 1204.7 / 2393.4 holding w (83.4% / 84.0% of copy) against
1269.8 / 2524.6 holding neither and 1403.9 / 2781.9 holding both (call 1); one-pass moments
1252.5 / 2373.6. LayerNorm still trails RMSNorm there (95.0% at 262144; without a bias 88.0%).

Before the re-reading kernel, its lag-kernel options were 2-byte rows as int32 pairs and the
chunk moments in one reduction (``ONE_PASS``). H200, kernel alone (``session36-h200-2026-11-30/normfwd-onepass-call5.txt``), bf16 8192 rows,
µs at 131072 / 262144 columns: 1492.7 / 2929.9 against 1596.7 / 2996.0 for RMSNorm's launch
(unpacked, two reductions) and 1583.2 / 3138.1 packed with two reductions; unpacked with one
reduction 1783.2 / 3307.0 (it spills: a two-reduction fallback where the shift is far keeps
more live). RMSNorm keeps its unpacked launch: 1255.9 / 2467.8 against 1304.1 / 2545.7 packed
(``normfwd-wide-call4.txt``). LayerNorm still runs about a fifth longer than RMSNorm there;
its bias, read from L2 each row beside the weight, costs 2-4% of it (1504.6 / 2955.6 µs against
1440.3 / 2888.4 without a bias, ``normfwd-bias-call8.txt``); the rest is not explained."""

NORM_FWD_LAG_MIN_CHUNKS = {False: 4, True: 16}
"""Residual -> chunks a row needs before the lag kernel (with a residual; without one the
re-reading kernel since the forty-third session, which no split row of fewer than 4 chunks
reaches by default) is the default (the flag-word kernel under them). On the H100 before its LEAN arithmetic the lag kernel won at 32 chunks and tied at
8. Since LEAN (the forty-second session), H200 kernel alone
(``session42-h200-2026-12-01/normfwd-launches-call5.json``), bf16, RMSNorm / LayerNorm (pairs,
one-pass moments): 4096 x 32768 (4 chunks) 158.0 / 169.2 us against 165.5 / 183.9 for the
flag-word kernel, 8192 x 65536 (8 chunks) 613.6 / 677.7 against 642.8 / 754.2, and after the
change 8192 x 98304 (12 chunks, ``normfwd-98304-call6.json``) 938.6 / 1071.8 against 974.8 /
1170.2. Rows of up to 65536 columns take the whole-row kernels before any split, so 65537-131071
columns are where this default runs unforced. With a residual the flag-word kernel stays under
16 chunks (add+RMSNorm 279.1 / 1106.7 / 1655.6 against 282.2 / 1114.4 / 1664.9)."""

NORM_FWD_SPLIT_MIN_N = {2: 32768, 4: 32768}
"""Element size -> the narrowest row whose forward splits over programs by default (the
whole-row kernels take rows of up to 32768 columns first, and 2-byte rows of up to 65536 by
op). bf16 4096 x 32768, kernel alone (``normfwd-sweep-2026-11-25-h100.json``): RMSNorm /
add+RMSNorm / LayerNorm 202.7 / 376.7 / 214.3 us split (flags kernel) against 230.3 / 385.9 /
253.3 chunked. float32 from 65536 until the forty-third session; at 8192 x 49152 then
(``session43-h200-2026-12-02/normfwd-widths-fp32-call2.json``, kernel alone) the re-reading
kernel ran RMSNorm / LayerNorm in 788.9 / 814.3 us against 1084.8 / 1455.9 chunked, and the
flag-word kernel add+RMSNorm in 1802.2 against 2068.7."""

NORM_FWD_SPLIT = "WARPFORGE_NORM_FWD_SPLIT"
"""``0``/``false``/``no``/``off`` turns the split forward off (the chunked kernel); read at each
call."""

_KERNEL_OPTIONS = ("lag_depth", "hold_weight", "packed", "one_pass", "hold_bias")
"""Keys of a ``NORM_FWD_SPLIT_LAUNCHES`` entry that pick the kernel (:func:`split_norm_forward`'s
keywords) rather than the plan (``reread_lag`` goes to the plan, :func:`norm_fwd_split_plan`)."""


def norm_fwd_split_options(
    element_size: int, residual: bool, chunks: int, center: bool = False
) -> dict[str, Any]:
    """:func:`split_norm_forward`'s kernel keywords of the default split launch of rows of
    ``chunks`` chunks: none (the flags kernel) below ``NORM_FWD_LAG_MIN_CHUNKS[residual]``;
    LayerNorm (``center``) without a residual with ``NORM_FWD_SPLIT_CENTER_OPTIONS`` over
    them."""
    if chunks < NORM_FWD_LAG_MIN_CHUNKS[residual]:
        return {}
    launch = NORM_FWD_SPLIT_LAUNCHES.get((element_size, residual), {})
    options = {k: v for k, v in launch.items() if k in _KERNEL_OPTIONS}
    if center and not residual and ("lag_depth" in options or "reread_lag" in launch):
        options |= NORM_FWD_SPLIT_CENTER_OPTIONS.get(element_size, {})
    return options


def _split_forward_enabled() -> bool:
    return switch_on(NORM_FWD_SPLIT)


@functools.lru_cache(maxsize=1024)
def norm_fwd_split_plan(
    M: int, N: int, element_size: int, device: torch.device | str, residual: bool = False
) -> SplitRowPlan | None:
    """The split forward of rows of N columns, or None (the one-program-per-row kernels): rows
    narrower than ``NORM_FWD_SPLIT_MIN_N``, more chunks than the words' poll reads, or more
    programs a row than the GPU holds at once. Its ``reread_lag`` (the re-reading kernel) only
    from ``NORM_FWD_LAG_MIN_CHUNKS`` chunks, as :func:`norm_fwd_split_options` picks kernels."""
    launch = NORM_FWD_SPLIT_LAUNCHES.get((element_size, residual))
    if launch is None or NORM_FWD_SPLIT_MIN_N.get(element_size, 1 << 62) > N:
        return None
    launch = {k: v for k, v in launch.items() if k not in _KERNEL_OPTIONS}
    if cdiv(N, launch["block"]) < NORM_FWD_LAG_MIN_CHUNKS[residual]:
        launch.pop("reread_lag", None)
    return flag_word_plan(M, N, device, **launch)


def _pairs_fit(x: torch.Tensor, *others: torch.Tensor | None) -> bool:
    """Whether the lag kernel can move these rows as int32 pairs (its PACKED): 2-byte elements
    of one dtype, an even row length, even row strides, 4-byte aligned starts."""
    if x.element_size() != 2 or x.shape[-1] % 2:
        return False
    for t in (x, *others):
        if t is None or t.numel() == 0:
            continue
        if t.dtype != x.dtype or t.data_ptr() % 4 or (t.dim() == 2 and t.stride(0) % 2):
            return False
    return True


def _forward_outputs(
    x: torch.Tensor, residual: torch.Tensor | None, center: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Empty (y, h, mean, rstd) of a (M, N) norm forward: h only with a residual, mean only
    when centred (else empty), the statistics in float32 or wider."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N) if residual is not None else (0,), dtype=x.dtype, device=x.device)
    stats_dtype = torch.promote_types(x.dtype, torch.float32)
    mean = torch.empty((M,) if center else (0,), dtype=stats_dtype, device=x.device)
    rstd = torch.empty((M,), dtype=stats_dtype, device=x.device)
    return y, h, mean, rstd


def _forward_pointers(x, residual, weight, bias, y, h, mean, rstd, center) -> tuple:
    """The forward kernels' eight tensor operands, an operand the call lacks standing in for
    itself (its HAS_ flag is off), and the three row strides (x, residual, y)."""
    pointers = (
        x,
        residual if residual is not None else x,
        weight.contiguous() if weight is not None else x,  # the kernels index it densely
        bias.contiguous() if bias is not None else x,
        y,
        h if residual is not None else y,
        mean if center else rstd,
        rstd,
    )
    strides = (x.stride(0), residual.stride(0) if residual is not None else 0, y.stride(0))
    return pointers, strides


def split_norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
    plan: SplitRowPlan,
    *,
    lag_depth: int = 0,
    hold_weight: bool = False,
    packed: bool = False,
    one_pass: bool = False,
    lean: bool | None = None,
    hold_bias: bool = False,
    l2_hints: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_norm_forward`'s (y, h, mean, rstd) from the split kernel of a (M, N) input on
    the kernels' path; tests and sweeps pass their own plan. ``lag_depth`` 0:
    ``norm_fwd_flags_kernel`` (``plan.prefetch``); 1 or 2: ``norm_fwd_lag_kernel`` with that
    many rows loading a program (its DEPTH), ``hold_weight`` its HOLD_W, ``packed`` its
    PACKED where :func:`_pairs_fit` (else unpacked) and ``one_pass`` its ONE_PASS (not where
    ``packed`` was asked for and the rows do not fit pairs: unpacked, it measured slower,
    ``NORM_FWD_SPLIT_CENTER_OPTIONS``), and ``lean`` (default: 2-byte inputs) its LEAN
    arithmetic, the offset add only where the offset is not 0 and, for rows of whole chunks,
    its unmasked EVEN loads and stores (``lean=False``: none of them, for comparisons).
    A plan with a ``reread_lag`` (no residual, no ``lag_depth``): ``norm_fwd_reread_kernel``,
    which reads each chunk again for y that many steps after publishing it (``plan.prefetch`` its PREFETCH,
    ``hold_weight`` / ``hold_bias`` its HOLD_W / HOLD_B, ``one_pass`` its ONE_PASS, ``lean`` as
    above, ``l2_hints`` its eviction hints)."""
    from warpforge.ops._kernels.norm_split import (
        norm_fwd_flags_kernel,
        norm_fwd_lag_kernel,
        norm_fwd_reread_kernel,
    )

    if lag_depth not in (0, 1, 2):
        raise ValueError(f"lag_depth: expected 0, 1 or 2, got {lag_depth!r}")
    if plan.reread_lag and (residual is not None or lag_depth):
        raise ValueError(
            "plan: expected a reread_lag of 0 with a residual or a lag_depth (the re-reading "
            f"kernel takes neither), got reread_lag={plan.reread_lag!r}"
        )

    check_flag_words(plan)
    M, N = x.shape
    y, h, mean, rstd = _forward_outputs(x, residual, center)
    if M == 0:
        return y, h, mean, rstd
    x = as_rows(x)
    residual = as_rows(residual) if residual is not None else None
    pointers, strides = _forward_pointers(x, residual, weight, bias, y, h, mean, rstd, center)
    words = plan.unpublished_words(M, 1, x.device)
    lean = x.element_size() == 2 if lean is None else lean
    with kernel_device(x):
        for stage in plan.stages():
            if plan.reread_lag:
                even = lean and N % plan.block == 0
                norm_fwd_reread_kernel[(plan.programs,)](
                    x, pointers[2], pointers[3], y, pointers[6], rstd, words,
                    x.stride(0), y.stride(0), M, N, eps, offset,
                    CENTER=center, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
                    BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=stage,
                    LAG=plan.reread_lag, PREFETCH=plan.prefetch, HOLD_W=hold_weight,
                    HOLD_B=hold_bias, ONE_PASS=one_pass, LEAN=lean,
                    HAS_OFFSET=offset != 0.0 or not lean, EVEN=even,
                    KEEP="evict_last" if l2_hints else "",
                    DROP="evict_first" if l2_hints else "",
                    **plan.launch_options(),
                )  # fmt: skip
                continue
            if lag_depth:
                kernel = norm_fwd_lag_kernel
                pairs = packed and _pairs_fit(x, weight, bias, residual, y, h)
                options = {
                    "DEPTH": lag_depth,
                    "HOLD_W": hold_weight,
                    "PACKED": pairs,
                    "ONE_PASS": one_pass and (pairs or not packed),
                    "LEAN": lean,
                    "HAS_OFFSET": offset != 0.0 or not lean,
                    "EVEN": lean and N % plan.block == 0,
                }
            else:
                kernel = norm_fwd_flags_kernel
                options = {"PREFETCH": plan.prefetch}
            kernel[(plan.programs,)](
                *pointers,
                words,
                *strides,
                N,
                M,
                N,
                eps,
                offset,
                CENTER=center,
                HAS_RESIDUAL=residual is not None,
                HAS_WEIGHT=weight is not None,
                HAS_BIAS=bias is not None,
                BLOCK_N=plan.block,
                CHUNKS_POW2=plan.chunks_pow2,
                STAGE=stage,
                **options,
                **plan.launch_options(),
            )
    return y, h, mean, rstd


# --------------------------------------------------------------------------- whole-row forward

NORM_FWD_WIDE_LAUNCHES: dict[tuple[int, str], WideLaunch] = {
    (2, "rms_norm.fwd"): WideLaunch(32, early_w=True, reload=True, aligned=True),
    (2, "add_rms_norm.fwd"): WideLaunch(16, early_w=True, reload=True, aligned=True),
    (2, "layer_norm.fwd"): WideLaunch(
        16, chunk=4096, forwards=True, unrolled=True, max_registers=64
    ),
    (4, "rms_norm.fwd"): WideLaunch(32, reload=True),
    (4, "add_rms_norm.fwd"): WideLaunch(16),
    (4, "layer_norm.fwd"): WideLaunch(32),
}
"""(element size, tunable) -> the whole-row launch (``norm_fwd_wide_kernel``, one row a program)
of rows of 16385-32768 columns; keys not listed, and rows a launch does not take, keep the split
or chunked kernel. Kernel alone on the H100 (``benchmarks/wide_rows_sweep.py``), 4096 x 32768
(``benchmarks/results/widefwd-sweep1-2026-11-25-h100.txt``), RMSNorm / add+RMSNorm / LayerNorm:
bf16 184.6 / 362.0 / 195.4 us (98.6% / 100.5% / 93.1% of copy) against 203.0 / 375.8 / 215.0
for the split kernel (Liger 185.9 / 363.2 / 246.5); float32 363.7 / 723.8 / 384.1 against
452.2 / 771.0 / 493.0. The fastest launch of each was taken (16 or 32 warps tie within 0.5%
except bf16 RMSNorm, where 16 warps need the weight loaded early: 202.4 us late). Loading the
weight early spills LayerNorm (bf16 265.0 us) and float32 (add+RMSNorm 881.1). The persistent
software-pipelined kernel (x and w staged through shared memory; measured, then removed) and the
streaming cache hints were slower everywhere (bf16 RMSNorm 197.4-207.1 / 190.4 us).
Narrower rows (``widefwd-widths-2026-11-25-h100.txt``): faster at 20000, 24576 and 28672 columns
(bf16 and float32), except bf16 LayerNorm at a length of no whole 16-byte vectors (24577: 646.1
against 491.8 us), which then kept the split kernel. float32 LayerNorm takes 32 warps since the H200
(``session18-h200-2026-11-28/wide-rows-call3.txt``, 4096 x 32768): 289.1 us (89.5% of copy)
against 315.8 at 16 warps, where the H100 had them within 1.1% (388.3 against 384.1).
RMSNorm reads x again for y (``reload``) since the nineteenth session (H200, 4096 x 32768,
``session19-h200-2026-11-29/parity-sweep-call5.json``): bf16 130.0 us at 32 warps, weight
early, against 146.5 for the launch before it and 132.3 for torch.compile; float32 255.5
against 265.1 (torch.compile 255.2). bf16 add+RMSNorm too since the twentieth, with the weight
early (``session20-h200-2026-11-29/parity-sweep-addrms.json``): 258.0 us against 261.7 at 16
warps plain (Liger 261.5, torch.compile 269.7); float32 keeps its launch (523.2, the fastest
variant 521.4). bf16 LayerNorm walks its row in 4096-column chunks on 16 warps since the
twenty-seventh session (``norm_fwd_looped_kernel``; H200, 4096 x 32768,
``session27-h200-2026-11-29/parity-looped-call8.json``): 171.4 us against 176.2 for the
whole-row kernel and 176.3 for torch.compile. The looped kernel lost everywhere else it was
timed (calls 5, 6 and 8 there): bf16 LayerNorm 4096 x 16384 82.6 us at best against 74.9 for
the op and 71.7 for torch.compile (Nsight Compute, ``ncu-layer_norm-fwd-4096x16384-bf16-call7``:
40 registers and 67% occupancy against torch.compile's 31 and 88%, and 12% more DRAM reads),
bf16 RMSNorm 4096 x 16384 70.8 against 67.4, float32 LayerNorm 4096 x 32768 358.9 against
287.0, bf16 RMSNorm 4096 x 32768 158.2 against 130.5. Its statistics pass unrolled for the
row's chunk count and its output pass walking forwards since the twenty-eighth
(``session28-h200-2026-11-29/parity-looped-call1.json``): 154.7 us at 4096 x 32768 against
170.9 for the rolled launch (torch.compile 176.2); it lost at every other looped case there,
and at bf16 LayerNorm 4096 x 16384 at six more launches too (``parity-ln16k-call5.txt``, 1024-
to 16384-column chunks on 4-32 warps): 79.7 us at best (4096-column chunks, 8 warps, forwards)
against 76.1 for the op and 72.2 for torch.compile. Capped at 32 or 40 registers a thread
(torch.compile's kernel there holds 31), on 4-16 warps in 1024-4096-column chunks, it was not
ahead either (``session32-h200-2026-11-30/short-ln-caps-call5.txt``; 84.3 us at best, 2048-column
chunks on 8 warps at 40, against the op's 80.1, in a run whose timings drifted between shapes:
every launch at 8192 x 8192 took 116-216 us, where the harness times the op at 71).
At the narrower wide rows (``widths-call2.txt``, bf16 4096 x N, us): LayerNorm 98.4 / 111.0 /
135.1 at 20000 / 24576 / 28672 columns against 144.3 / 153.4 / 186.2 on the split path and
149.2 / 156.3 / 165.1 for the whole-row kernel, and at 24577 columns (no whole 16-byte vectors)
385.3 against 482.5 and 776.7, so it takes those rows too; bf16 RMSNorm and add+RMSNorm lose
there (318.4 against 251.6, 624.6 against 505.8) and leave them to the split kernel
(``aligned``). bf16 LayerNorm's looped launch caps its registers at 64 a thread since the
thirty-first session (H200, 4096 rows, ``session31-h200-2026-11-30/register-widths-call4.txt``,
us, capped against uncapped): 111.4 / 112.0 at 24576 columns, 339.0 / 385.6 at 24577, 130.7 /
135.1 at 28672, 150.2 / 154.7 at 32768; at 20000 it loses 3% (101.9 / 99.0). Caps of 96 and 128
were much slower, 48 no faster (``registers-call2.txt``). At other row counts, 24576 columns
(``session32-h200-2026-11-30/register-rows-call1.txt``, us, capped against uncapped), the cap
loses: bf16 41.4 against 37.6 at 1056 rows, 417.3 against 412.0 at 16384; float16 35.6 against
35.4 and 404.5 against 397.5. It stays for the widths and rows where it wins (28672-32768
columns and rows of no whole 16-byte vectors by 3-12% at 4096 rows, including the issue's
4096 x 32768)."""

_ROW = functools.partial(WideLaunch, min_n=1, aligned=True)  # the key's power of two bounds N
NORM_FWD_ROW_LAUNCHES: dict[tuple[int, str, int], WideLaunch] = {
    (2, "rms_norm.fwd", 2048): _ROW(4),
    (2, "rms_norm.fwd", 4096): _ROW(8, early_w=True, reload=True),
    (2, "rms_norm.fwd", 8192): _ROW(16, reload=True),
    (2, "rms_norm.fwd", 16384): _ROW(
        16, chunk=4096, forwards=True, unrolled=True, max_registers=64, specialized=True
    ),
    (2, "layer_norm.fwd", 4096): _ROW(4, reload=True),
    (2, "layer_norm.fwd", 16384): _ROW(
        16, chunk=2048, forwards=True, specialized=True, whole_chunks=True, packed_only=True
    ),
    (4, "rms_norm.fwd", 2048): _ROW(8, chunk=2048, forwards=True, unrolled=True, whole_chunks=True),
    (4, "rms_norm.fwd", 4096): _ROW(8, reload=True),
    (4, "rms_norm.fwd", 8192): _ROW(16, early_w=True, reload=True),
    (4, "rms_norm.fwd", 16384): _ROW(32, early_w=True, reload=True),
    (4, "layer_norm.fwd", 2048): _ROW(4, early_w=True, reload=True),
    (4, "layer_norm.fwd", 4096): _ROW(8, early_w=True, reload=True),
    (4, "layer_norm.fwd", 8192): _ROW(16, reload=True),
    (4, "layer_norm.fwd", 16384): _ROW(32, reload=True, one_reduction=True),
    (2, "add_rms_norm.fwd", 2048): _ROW(4),
    (2, "add_rms_norm.fwd", 16384): _ROW(16, early_w=True),
    (4, "add_rms_norm.fwd", 2048): _ROW(2, early_w=True),
    (4, "add_rms_norm.fwd", 4096): _ROW(4, early_w=True, reload=True),
    (4, "add_rms_norm.fwd", 8192): _ROW(16, early_w=True),
    (4, "add_rms_norm.fwd", 16384): _ROW(16, early_w=True, reload=True),
}
"""(element size, tunable, the row's power of two) -> the whole-row launch (one row a program)
of rows of 1025-16384 columns, of whole 16-byte vectors; keys not listed keep the tiled row
kernel (its tuned launch). H200, kernel alone (``benchmarks/parity_sweep.py``,
``session19-h200-2026-11-29/parity-sweep-call5.json`` and ``parity-sweep-call6.json``), the
fastest launch at the issue's sweep rows against the tiled kernel's and torch.compile's, us:

    tunable         dtype  M x N          whole-row   tiled   torch.compile
    rms_norm.fwd    bf16   16384 x 2048        35.1    35.9            41.2
    rms_norm.fwd    bf16   16384 x 4096        66.9    70.2            74.7
    rms_norm.fwd    bf16    8192 x 8192        66.7    67.8            66.5
    rms_norm.fwd    bf16   4096 x 16384        67.7    70.6            69.9
    layer_norm.fwd  bf16   16384 x 4096        68.1    71.1            96.2
    rms_norm.fwd    fp32   16384 x 4096       129.8   131.7           127.4
    rms_norm.fwd    fp32    8192 x 8192       128.7   132.4           129.3
    rms_norm.fwd    fp32   4096 x 16384       129.1   133.1           129.9
    layer_norm.fwd  fp32   16384 x 2048        67.5    68.0            69.1
    layer_norm.fwd  fp32   16384 x 4096       127.4   138.8           129.1
    layer_norm.fwd  fp32    8192 x 8192       130.7   136.8           130.9
    layer_norm.fwd  fp32   4096 x 16384       147.1   156.3           145.8

Not listed, the tiled kernel was as fast or faster: float32 RMSNorm at 2048 columns (67.1 both),
bf16 LayerNorm at 2048, 8192 and 16384 (36.4, 69.7, 74.6 against 36.5, 70.1, 76.3). Reading x
again (``reload``) frees the registers that held it across the reductions; the weight loaded
early (``early_w``) hides its latency under x's. add+RMSNorm (session 20,
``session20-h200-2026-11-29/parity-sweep-addrms.json``), whole-row against the tiled kernel,
Liger and torch.compile, us:

    dtype  M x N          whole-row   tiled   Liger   torch.compile
    bf16   16384 x 2048        66.3    67.4    66.7            69.4
    bf16   4096 x 16384       130.8   131.8   131.5           136.1
    fp32   16384 x 2048       130.8   131.6   132.5           136.7
    fp32   16384 x 4096       261.3   265.6   263.0           271.2
    fp32    8192 x 8192       260.1   262.0   260.2           272.6
    fp32   4096 x 16384       257.4   265.6   260.4           271.6

bf16 add+RMSNorm at 4096 and 8192 columns keeps the tiled kernel (131.7 and 131.5 against the
whole-row kernel's 131.6 and 131.4: within noise).

float32 LayerNorm of 8193-16384 columns went back to the tiled kernel once it had a launch tuned
on the H200 (two 16384-column rows a program on 32 warps, shipped): 140.2 us at 4096 x 16384 in
that search (session23-h200-2026-11-29/tune-normfwd-fp32-trials.json), against the whole-row
kernel's 147.1 above and 156.9 for the H100's tiled launch in the same search. Since the
thirty-seventh session they take the whole-row kernel again, on 32 warps with x read again and
the moments from one reduction (``one_reduction``; x is then not held across a reduction):
H200, kernel alone (``session37-h200-2026-11-30/parity-one-reduction-call4.json``), us, against
the tiled kernel and torch.compile:

    M x N            one reduction   tiled   torch.compile
    4096 x 16384             133.3   140.1           146.4
    2048 x 16384              71.9    76.5            87.5
    16384 x 16384            509.1   591.5           555.1
    4096 x 12288             105.0   108.1           108.2
    4096 x 10240              93.0    95.7            87.3

with two reductions the same launch took 164.1 / 86.1 / 629.0 / 142.2 / 132.5 us. At 8192 columns
it lost (150.9 against 131.3 at 8192 x 8192) and the table's 16-warp launch stays; past 16384
columns the wide launch below stays too (tied at 4096 x 32768, 289.7 against 289.1; 2% ahead at
24576, 216.6 against 221.2). bf16 LayerNorm gained nothing from one reduction at 2048-65536
columns (``parity-one-reduction-call1.json``, ``parity-stats-reload-call3.json``).

bf16 / fp16 LayerNorm rows of 10240, 12288, 14336 and 16384 columns (8193-16384, whole
2048-column chunks), packed, take the looped kernel compiled for their length (``specialized``:
N and the row strides compiled in, 32-bit offsets, as torch.compile's kernel,
``session37-h200-2026-11-30/inductor-layer_norm.fwd-call6.txt``) in torch.compile's launch
shape, 2048-column chunks on 16 warps walked in a loop, since the thirty-seventh session. H200,
kernel alone, 4096 x 16384 (``parity-specialized-call7.json``): 71.8 us against 75.5 for the
tiled kernel, 89.5 for the same launch unspecialized and 71.8 for torch.compile; whole-row 16
warps with x read again 74.3 specialized, 76.5 not. Specializing moved nothing by more than 1%
at bf16 LayerNorm 8192 x 8192 and 16384 x 4096, bf16 RMSNorm 4096 x 16384 and 8192 x 8192; 1.6%
at LayerNorm 4096 x 32768 (the wide launch, 147.7 against 150.1 us, not taken); float32
LayerNorm 4096 x 16384 lost (148.5 against 133.1). Other widths and rows (``parity-specialized-
widths-call8.json``, bf16, us, against the tiled kernel and torch.compile): 4096 x 12288 53.6 /
66.6 / 56.8, 4096 x 14336 62.9 / 70.8 / 65.4, 2048 x 16384 40.3 / 40.4 (the launch already) /
44.5, 16384 x 16384 259.9 / 260.3 (the launch) / 259.3; (``parity-specialized-narrow-
call9.json``) 4096 x 10240 45.8 / 63.6 / 49.9, 4096 x 8704 43.7 / 59.9 / 53.9, 4096 x 9216 45.0
/ 61.1 / 55.2, but 4096 x 11264 69.2 / 65.0 / 92.9: of the widths that end in a part chunk one
lost, so only whole chunks take it (``whole_chunks``; 16376 and the like keep the tiled kernel).
Rows of a wider buffer keep the tiled kernel too (``packed_only``: the launch unspecialized is
18% slower than it at 4096 x 16384). Through the harness (``lnfwd-bf16-call8.json``):
layer_norm.fwd bf16 4096 x 16384 76.4 -> 71.2 us, 0.94x -> 1.01x torch.compile.

bf16 / fp16 RMSNorm rows of 8193-16384 columns take the looped kernel compiled for their length
in 4096-column chunks on 16 warps, unrolled, at 64 registers, since the thirty-seventh session,
in place of the whole-row launch (16 warps, weight early). Kernel alone, 4096 rows, us, against
that launch (``parity-specialized-call7.json``, ``parity-specialized-narrow-call9.json``): 67.3
against 67.7 at 16384 columns, 52.0 against 55.8 at 12288 (torch.compile 53.9), 44.6 against
51.0 at 10240 (torch.compile 44.3); unspecialized, as rows of a wider buffer run it, 68.5, 52.2
and 45.4.

float32 RMSNorm rows of exactly 2048 columns take the looped kernel as one unrolled 2048-column
chunk on 8 warps, output pass in order, since the thirty-eighth session. Kernel alone, 16384 x
2048 (``session38-h200-2026-11-30/parity-narrow-specialized-call10.json``): 66.6 us against 67.6
for the tiled kernel, 67.0 for the best whole-row launch (4 warps, x read again, compiled for the
row length), 66.1 for torch.compile; compiled for the row length it ran 66.7. Other narrow rows
of that call kept their launches: float32 RMSNorm 4096 columns' looped launch compiled for the
row length tied torch.compile (127.5 against 127.3, the table's whole-row launch 129.8) but was
not taken, as it would leave rows of 2049-4095 columns and of wider buffers to the tiled kernel;
float32 LayerNorm 2048's whole-row launch compiled for the row length ran 66.7 against 67.2; at
1024 columns (float32 and bf16, both norms) no one-row-a-program launch beat the tiled kernel."""


NORM_FWD_LONG_MAX_N = 65536
"""Widest row ``NORM_FWD_LONG_LAUNCHES`` takes."""
NORM_FWD_LONG_LAUNCHES: dict[tuple[int, str], WideLaunch] = {
    (2, "layer_norm.fwd"): WideLaunch(
        32, min_n=32769, aligned=True, chunk=8192, unrolled=True, max_registers=64
    ),
    (2, "rms_norm.fwd"): WideLaunch(
        32, min_n=32769, aligned=True, chunk=8192, forwards=True, unrolled=True, max_registers=64
    ),
}
"""(element size, tunable) -> the looped launch (``norm_fwd_looped_kernel``: one row a
program, walked in chunks) of rows of 32769-65536 columns; keys not listed keep the split
kernel. H200, kernel alone (``session28-h200-2026-11-29/parity-long-call6.txt``), bf16
8192 x 65536, 8192-column chunks on 32 warps, unrolled: LayerNorm 632.4 us against 753.2 for
the split kernel and 867.7 for torch.compile; RMSNorm (its output pass forwards) 558.3 against
645.1 and 737.7. At 8192 x 131072 the split kernel stayed the fastest (LayerNorm 1578.5 us
against 1640.4 for the best looped launch): a program's row, 256 KiB, no longer waits in L2
for its second read. Narrower rows (``session29-h200-2026-11-30/long-widths-call1.txt``, bf16,
8192 rows, us, the table's launch against the split kernel): LayerNorm 474.2 / 544.4 at 49152
columns, 532.4 / 646.3 at 57344; RMSNorm 402.0 / 482.7 and 493.8 / 568.6. At 40961 columns
(rows of no whole 16-byte vectors) it lost (LayerNorm 1314.3 / 1105.0, RMSNorm 826.6 / 823.2),
so the launches are ``aligned``. add+RMSNorm at the same looped launch lost at every aligned
width (875.3 / 819.6 at 49152, 1233.5 / 1093.7 at 65536) and keeps the split kernel. Both
launches cap their registers at 64 a thread since the thirty-first session (``maxnreg``; the
most a 32-warp program may hold, yet ptxas left alone picks fewer): H200, bf16, 8192 rows
(``session31-h200-2026-11-30/register-widths-call4.txt``), us, capped against uncapped,
LayerNorm / RMSNorm: 460.6 / 392.6 against 479.1 / 402.7 at 49152 columns, 532.4 / 459.3
against 535.8 / 494.0 at 57344, 608.7 / 530.1 against 636.6 / 558.5 at 65536. At other row
counts and in float16, 49152 columns (``session32-h200-2026-11-30/register-rows-call1.txt``):
bf16 72.2 / 60.2 against 75.5 / 60.9 at 1056 rows, 905.8 / 772.6 against 940.1 / 795.5 at
16384; float16 71.5 / 60.1 against 72.3 / 61.3 and 895.9 / 767.0 against 908.5 / 793.8.
Past 65536 columns the capped looped launches stay behind the split kernel
(``session32-h200-2026-11-30/longest-caps-call4.txt``, bf16, 8192 rows, LayerNorm / RMSNorm,
us, the fastest looped launch against the split kernel): 1653.5 / 1456.9 against 1607.9 /
1269.2 at 131072 columns (8192-column chunks, 32 warps, capped), 3455.6 / 3099.3 against
3019.9 / 2493.2 at 262144."""


def norm_fwd_wide_launch(
    N: int, element_size: int, kernel: str, enabled: bool | None = None
) -> WideLaunch | None:
    """The whole-row launch of rows of N columns for ``kernel`` (``rms_norm.fwd`` ...), or None:
    ``NORM_FWD_LONG_LAUNCHES`` for rows of more than ``WIDE_MAX_N`` columns,
    ``NORM_FWD_WIDE_LAUNCHES`` for rows of more than ``MAX_SINGLE_PASS_N``,
    ``NORM_FWD_ROW_LAUNCHES`` for narrower ones."""
    if N > WIDE_MAX_N:
        key: tuple = (element_size, kernel)
        return wide_launch(
            NORM_FWD_LONG_LAUNCHES, key, N, element_size, enabled, NORM_FWD_LONG_MAX_N
        )
    if N > MAX_SINGLE_PASS_N:
        key = (element_size, kernel)
        return wide_launch(NORM_FWD_WIDE_LAUNCHES, key, N, element_size, enabled)
    key = (element_size, kernel, next_power_of_2(N))
    return wide_launch(NORM_FWD_ROW_LAUNCHES, key, N, element_size, enabled)


def wide_norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
    launch: WideLaunch,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_norm_forward`'s (y, h, mean, rstd) from the one-row-a-program kernels: the
    whole row held (rows of at most ``WIDE_MAX_N`` columns) or, with ``launch.chunk``, walked in
    chunks (any length); tests and sweeps pass their own launch."""
    from warpforge.ops._kernels import wide_rows as kernels

    M, N = x.shape
    block, chunks = row_blocks(N, launch)
    y, h, mean, rstd = _forward_outputs(x, residual, center)
    if M == 0:
        return y, h, mean, rstd
    x = as_rows(x)
    residual = as_rows(residual) if residual is not None else None
    pointers, strides = _forward_pointers(x, residual, weight, bias, y, h, mean, rstd, center)
    args = (*pointers, *strides, N, M, N, eps, offset)
    # compiled for N: rows packed (every stride N) and offsets within 32 bits
    specialized = specialized_length(launch, x, residual)
    flags = {
        "CENTER": center,
        "HAS_RESIDUAL": residual is not None,
        "HAS_WEIGHT": weight is not None,
        "HAS_BIAS": bias is not None,
        "BLOCK_N": block,
    }
    with kernel_device(x):
        if launch.chunk:
            kernels.norm_fwd_looped_kernel[(M,)](
                *args,
                **flags,
                EVEN=N % block == 0,
                FORWARDS=launch.forwards,
                CHUNKS=chunks if launch.unrolled else 0,
                SPECIALIZED=specialized,
                **launch.launch_options(),
            )
            return y, h, mean, rstd
        kernels.norm_fwd_wide_kernel[(M,)](
            *args,
            **flags,
            EARLY_W=launch.early_w,
            STREAM=launch.stream,
            RELOAD=launch.reload,
            ONE_REDUCTION=launch.one_reduction,
            SPECIALIZED=specialized,
            **launch.launch_options(),
        )
    return y, h, mean, rstd


@dataclasses.dataclass(frozen=True)
class TileLaunch:
    """A launch of ``norm_fwd_tile_kernel``: ``rows`` rows a program on ``num_warps`` warps
    (both powers of 2), the weight and bias loaded beside x (``early_w``) or after the row
    reductions."""

    rows: int
    num_warps: int
    early_w: bool = False

    def __post_init__(self) -> None:
        for name in ("rows", "num_warps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name}: expected a power of 2, got {value!r}")


NORM_FWD_TILE_LAUNCHES: dict[tuple[int, str, int], TileLaunch] = {
    (2, "rms_norm.fwd", 256): TileLaunch(8, 4, early_w=True),
    (2, "layer_norm.fwd", 256): TileLaunch(8, 4, early_w=True),
    (2, "add_rms_norm.fwd", 256): TileLaunch(8, 2, early_w=True),
    (4, "rms_norm.fwd", 256): TileLaunch(4, 2),
    (4, "layer_norm.fwd", 256): TileLaunch(8, 2),
    (2, "rms_norm.fwd", 1024): TileLaunch(2, 2),
    (2, "layer_norm.fwd", 1024): TileLaunch(2, 4, early_w=True),
    (2, "add_rms_norm.fwd", 1024): TileLaunch(2, 2),
    (4, "rms_norm.fwd", 1024): TileLaunch(1, 1),
    (2, "rms_norm.fwd", 2048): TileLaunch(1, 4),
    (2, "layer_norm.fwd", 2048): TileLaunch(1, 4),
}
"""(element size, tunable, N) -> the launch of ``norm_fwd_tile_kernel`` (rows of exactly N
columns, compiled for N) that replaces the op's other kernels where :func:`tile_fits`; keys
not listed keep them. H200, kernel alone (``benchmarks/parity_sweep.py``'s tile cases, µs,
``session39-h200-2026-12-01/parity-tile-call2.json`` weight loaded late, ``-call3.json`` early
and late), each entry the fastest launch ahead of the op as shipped in both runs where they
agree, else call 3's; the op as shipped (the tiled row kernel on its tuned launch, at 2048
columns bf16 the whole-row kernel) / the entry / torch.compile in call 3:

    tunable           dtype  M x N          op     entry   torch.compile
    rms_norm.fwd      bf16   32768 x 256    12.77  12.06   12.03
    layer_norm.fwd    bf16   32768 x 256    13.38  12.96   12.93
    add_rms_norm.fwd  bf16   32768 x 256    20.16  20.06   20.03
    rms_norm.fwd      fp32   32768 x 256    20.10  19.84   19.62
    layer_norm.fwd    fp32   32768 x 256    20.54  20.42   20.11
    rms_norm.fwd      bf16   32768 x 1024   36.80  36.48   36.51
    layer_norm.fwd    bf16   32768 x 1024   37.25  36.62   37.15
    add_rms_norm.fwd  bf16   32768 x 1024   67.97  67.62   67.18
    rms_norm.fwd      fp32   32768 x 1024   67.97  67.54   66.94
    rms_norm.fwd      bf16   16384 x 2048   36.03  35.42   41.38
    layer_norm.fwd    bf16   16384 x 2048   37.04  36.18   52.96

Loading the weight beside x (``early_w``) is what closes most of the 256-column gap (bf16
RMSNorm at 8 rows on 4 warps: 12.06 early against 12.80 late); fewer instructions alone did not
(call 2: Inductor's own launch, 4 rows on 1 warp, 12.86 against torch.compile's 12.16). The
other rows of these widths (float32 LayerNorm at 1024 and 2048, float32 add+RMSNorm, float32
RMSNorm at 2048) kept their kernels: no launch was ahead of the op in both runs."""


def tile_fits(x: torch.Tensor, residual: torch.Tensor | None, rows: int) -> bool:
    """Whether ``norm_fwd_tile_kernel`` can take the (M, N) rows of ``x`` (and ``residual``)
    ``rows`` a program: N a power of 2, every row packed (row stride N; outputs are allocated
    packed) and every offset, the last program's masked rows included, within 32 bits."""
    M, N = x.shape
    if N & (N - 1) or cdiv(M, rows) * rows * N >= 2**31:
        return False
    operands = [t for t in (x, residual) if t is not None]
    if any(t.stride(1) != 1 and N > 1 for t in operands):
        return False
    return M <= 1 or all(t.stride(0) == N for t in operands)


def tile_norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
    launch: TileLaunch,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_norm_forward`'s (y, h, mean, rstd) from ``norm_fwd_tile_kernel`` on ``launch``
    (tests and sweeps pass their own); the rows must fit it (:func:`tile_fits`)."""
    if not tile_fits(x, residual, launch.rows):
        raise ValueError(
            f"x: expected packed rows of a power-of-2 length within 2**31 elements for the tile "
            f"kernel, got shape {tuple(x.shape)} with strides {tuple(x.stride())}"
        )
    return _tile_forward(x, weight, bias, residual, eps, offset, center, launch)


def _tile_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
    launch: TileLaunch,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`tile_norm_forward` on rows already found to fit (the op's dispatch checks)."""
    from warpforge.ops._kernels import norm as kernels

    M, N = x.shape
    y, h, mean, rstd = _forward_outputs(x, residual, center)
    if M == 0:
        return y, h, mean, rstd
    pointers, _ = _forward_pointers(x, residual, weight, bias, y, h, mean, rstd, center)
    with kernel_device(x):
        kernels.norm_fwd_tile_kernel[(cdiv(M, launch.rows),)](
            *pointers,
            M,
            eps,
            offset,
            CENTER=center,
            HAS_RESIDUAL=residual is not None,
            HAS_WEIGHT=weight is not None,
            HAS_BIAS=bias is not None,
            N=N,
            ROWS=launch.rows,
            EVEN_ROWS=M % launch.rows == 0,
            EARLY_W=launch.early_w,
            num_warps=launch.num_warps,
        )
    return y, h, mean, rstd


def _forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
    center: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The custom ops' forward: the tile kernel where ``NORM_FWD_TILE_LAUNCHES`` lists the
    row's length and :func:`tile_fits`, the whole-row kernel where ``norm_fwd_wide_launch`` gives a
    launch (rows of 32769-65536 columns in ``NORM_FWD_LONG_LAUNCHES``, of 16385-32768 in
    ``NORM_FWD_WIDE_LAUNCHES``, of 1025-16384 in ``NORM_FWD_ROW_LAUNCHES``;
    ``WARPFORGE_WIDE_ROWS`` not off), the split
    kernel for rows of at least ``NORM_FWD_SPLIT_MIN_N`` columns when a plan fits (and
    ``WARPFORGE_NORM_FWD_SPLIT`` is not off), else :func:`_norm_forward`."""
    M, N = x.shape
    if M > 0 and execution_path(x.device) is not ExecutionPath.TORCH_REFERENCE:
        kernel = _kernel_name(center, residual)
        tile = NORM_FWD_TILE_LAUNCHES.get((x.element_size(), kernel, N))
        if tile is not None and tile_fits(x, residual, tile.rows):
            return _tile_forward(x, weight, bias, residual, eps, offset, center, tile)
        wide = norm_fwd_wide_launch(N, x.element_size(), kernel)
        if wide is not None and (not wide.packed_only or specialized_length(wide, x, residual)):
            return wide_norm_forward(x, weight, bias, residual, eps, offset, center, wide)
    if (
        M > 0
        and N > MAX_SINGLE_PASS_N
        and _split_forward_enabled()
        and execution_path(x.device) is not ExecutionPath.TORCH_REFERENCE
    ):
        plan = norm_fwd_split_plan(M, N, x.element_size(), x.device, residual is not None)
        if plan is not None:
            options = norm_fwd_split_options(
                x.element_size(), residual is not None, plan.chunks, center
            )
            return split_norm_forward(
                x, weight, bias, residual, eps, offset, center, plan, **options
            )
    return _norm_forward(x, weight, bias, residual, eps, offset, center)


def _norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    center: bool,
    weight_grad: bool,
    bias_grad: bool,
    launch: RowLaunchConfig | None = None,
    in_memory: bool | None = None,
    prefetch: bool | None = None,
    knobs: BwdKnobs | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) for a (M, N) input; dweight/dbias are empty when not asked for.
    ``launch`` and ``knobs`` override the tuned launch (the tuner's trials, benchmark sweeps;
    ``launch`` alone runs with the default knobs), ``in_memory`` and ``prefetch`` the choices
    of :func:`partials_in_memory` and :func:`prefetch_tiles` (benchmark sweeps)."""
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    wdtype = weight.dtype if weight is not None else x.dtype
    dw = torch.empty((N,) if weight_grad else (0,), dtype=wdtype, device=x.device)
    db = torch.empty((N,) if bias_grad else (0,), dtype=wdtype, device=x.device)
    if M == 0:
        dw.zero_()
        db.zero_()
        return dx, dw, db
    if execution_path(x.device) is ExecutionPath.TORCH_REFERENCE:
        return _reference_backward(dy, x, weight, mean, rstd, dh, offset, center, dx, dw, db)

    from warpforge.ops._kernels import norm as kernels

    x, dy = as_rows(x), as_rows(dy)
    dh = as_rows(dh) if dh is not None else None
    if launch is None:
        launch, tuned = _bwd_launch_config(
            M, N, x.dtype, x.device, _kernel_name(center, dh, backward=True)
        )
        knobs = tuned if knobs is None else knobs
    config, knobs = launch, knobs or BwdKnobs()
    operands = _bwd_row_operands(center, weight_grad, bias_grad)
    if in_memory is None:
        in_memory = partials_in_memory(config, operands, x.element_size(), knobs.reload)
    prefetch = prefetch_tiles(config) if prefetch is None else prefetch
    programs = _bwd_grid(config, operands, in_memory, prefetch, x.device, M, knobs.programs_per_sm)
    # the chunked kernel and the in-memory mode accumulate into the partials
    alloc = torch.zeros if in_memory or not config.single_pass else torch.empty
    dw_partial = alloc((programs, N) if weight_grad else (1,), dtype=torch.float32, device=x.device)
    db_partial = alloc((programs, N) if bias_grad else (1,), dtype=torch.float32, device=x.device)
    args = (
        dy,
        x,
        weight.contiguous() if weight is not None else x,
        mean if center else rstd,
        rstd,
        dh if dh is not None else dy,
        dx,
        dw_partial,
        db_partial,
        dy.stride(0),
        x.stride(0),
        dh.stride(0) if dh is not None else 0,
        dx.stride(0),
        M,
        N,
        offset,
    )
    flags = {
        "CENTER": center,
        "HAS_WEIGHT": weight is not None,
        "WEIGHT_GRAD": weight_grad,
        "BIAS_GRAD": bias_grad,
        "HAS_DH": dh is not None,
    }
    if config.single_pass:
        flags.update(PARTIALS_IN_MEMORY=in_memory, PREFETCH=prefetch, RELOAD=knobs.reload)
    config = dataclasses.replace(config, num_programs=programs)
    with kernel_device(x):
        launch_rows(
            config, kernels.norm_bwd_rows_kernel, kernels.norm_bwd_chunked_kernel, args, **flags
        )
        if weight_grad or bias_grad:
            # dweight on grid axis 1 = 0, dbias on 1; with one of them, it takes slot 0
            first = (dw_partial, dw) if weight_grad else (db_partial, db)
            grid = (cdiv(N, _PARTIAL_BLOCK_N), int(weight_grad) + int(bias_grad))
            block_p = min(_PARTIAL_MAX_BLOCK_P, next_power_of_2(programs))
            kernels.partial_sum_kernel[grid](
                *first, db_partial, db, programs, N, BLOCK_P=block_p, BLOCK_N=_PARTIAL_BLOCK_N
            )
    return dx, dw, db


# --------------------------------------------------------------------------- LayerNorm split rows

LAYER_NORM_BWD_SPLIT_MIN_N = 16384
"""Rows at least this wide take the split-row LayerNorm backward (when the GPU holds a row's
programs at once, see :func:`layer_norm_bwd_split_plan`): there a whole row's two partial
rows (dweight, dbias) no longer fit in registers beside it."""


def layer_norm_bwd_split_launch(element_size: int) -> dict[str, int | bool]:
    """The :func:`~warpforge.ops._split_rows.split_row_plan` options of the split-row LayerNorm
    backward: 2048-column chunks of 4 warps (16 elements a thread: x, dy and the chunk's two
    partial rows fit under the 128-register cap without spilling), four programs an SM, and
    for 2-byte rows the next row's chunk loaded during the wait. Chosen from
    ``benchmarks/ln_bwd_split_sweep.py`` on the H100 at 4096 x 16384, the kernel alone
    (``benchmarks/results/lnbwd-sweep*-2026-11-24-h100.json``): float32 316 us against 384 us
    for the whole-row kernel, bfloat16 208 against 214 us. bfloat16 stays far from the copy
    ceiling whatever the launch (no chunk width, warps or programs an SM timed ran under 207 us;
    the same at 4096 columns, where the whole-row kernel takes 152 us):
    a row's programs wait for each other once per row, and the registers the dweight/dbias
    partials take cap the elements a program holds per wait, so halving the bytes an element
    costs does not halve the time. Publishing the next row's sums before waiting (x and dy of
    two rows in registers) and pausing between polls (``nanosleep``) measured no better and
    were removed.

    Rows of at most :data:`LAYER_NORM_BWD_LAG_MAX_CHUNKS` chunks of
    :func:`layer_norm_bwd_lag_launch` now take ``layer_norm_bwd_lag_kernel`` instead; this
    launch serves the wider ones."""
    return {"block": 2048, "num_warps": 4, "programs_per_sm": 4, "prefetch": element_size < 4}


LAYER_NORM_BWD_LAG_MAX_CHUNKS = 32
"""Chunks a row of ``layer_norm_bwd_lag_kernel`` (and ``layer_norm_bwd_held_kernel``, which
polls the same words) has at most: up to 32 flag words a row sit in one warp's lanes. At 64 the H100's Triton 3.6 failed to compile the kernel (an MLIR assertion
in ``make_ttgir``; ``benchmarks/results/lnbwd-lag-gpu-tests3-2026-11-24-h100.txt``), so wider
rows keep ``layer_norm_bwd_split_kernel``."""


def layer_norm_bwd_lag_launch(element_size: int) -> dict[str, int | bool]:
    """The :func:`~warpforge.ops._split_rows.split_row_plan` options of the lagged split-row
    LayerNorm backward (``layer_norm_bwd_lag_kernel``, which never waits on a row its other
    programs are still reading): 2-byte rows in 512-column chunks of 2 warps, sixteen an SM
    (64 registers, no spill on sm_90), one row at a time; 4-byte rows in 1024-column chunks of
    4 warps, four an SM (126 registers), two rows at a time (:func:`layer_norm_bwd_lag`).
    Kernel alone at 4096 x 16384 on the H100 (``benchmarks/ln_bwd_split_sweep.py``,
    ``benchmarks/results/lnbwd-lag-sweep*-2026-11-24-h100.json``): bfloat16 192-193 us
    against 208-210 us for the split kernel, float32 295-298 us against 314 us. No launch
    timed brought bfloat16 under 191 us (70% of copy): a program's loads in flight are capped
    by the registers its x, dy, re-read and two partial rows take, here as in the split
    kernel."""
    if element_size < 4:
        return {"block": 512, "num_warps": 2, "programs_per_sm": 16, "prefetch": False}
    return {"block": 1024, "num_warps": 4, "programs_per_sm": 4, "prefetch": False}


def layer_norm_bwd_lag(element_size: int) -> tuple[int, int]:
    """(lag, rows a group) of :func:`layer_norm_bwd_lag_launch`: dx written one group late
    from an L2 re-read; groups of two rows for 4-byte rows."""
    return (1, 1) if element_size < 4 else (1, 2)


def layer_norm_bwd_held_launch(element_size: int) -> dict[str, int | bool] | None:
    """The :func:`~warpforge.ops._split_rows.split_row_plan` options of
    ``layer_norm_bwd_held_kernel`` where it is the default, or None (4-byte rows keep
    :func:`layer_norm_bwd_lag_launch`): 2-byte rows in 512-column chunks of 2 warps, twelve an
    SM (under the 80-register cap, no spill on sm_90), the next row loaded a whole iteration ahead
    (``prefetch``), dx from a re-read (an L1 hit in practice) rather than held registers
    (:data:`LAYER_NORM_BWD_HOLD`).

    The lagged kernel's bf16 launch is bound by issuing instructions (ncu on the H100,
    ``benchmarks/results/ln16k-ncu1-2026-11-25-h100.txt``: SM throughput 71% against DRAM 60%,
    0.74 warps issued a scheduler-cycle; ~56 loop instructions an element a thread on sm_90);
    this launch issues ~48 and keeps its loads in flight the whole iteration. Kernel alone at
    4096 x 16384 on the H100 (``benchmarks/ln_bwd_split_sweep.py --held``,
    ``benchmarks/results/ln16k-sweep2-2026-11-25-h100.json``): 174.8 us against 193.0 us for
    the lagged launch; the harness row (forward + backward) 289.9 -> 271.6 us. Holding xhat
    and w * dy for phase B (two FMAs an element, ~39 instructions) needs more registers than
    twelve programs an SM allow: at ten an SM 180.5 us, at twelve (spilling) 203.1 us. In
    float32 the held launches timed tie or lose to the lagged one (294.2 / 298.8 against
    294.2 us), so 4-byte rows keep it. 2-byte rows that have int32 word views take
    :func:`layer_norm_bwd_pairs_launch` instead (faster); this launch serves the others."""
    if element_size < 4:
        return {"block": 512, "num_warps": 2, "programs_per_sm": 12, "prefetch": True}
    return None


LAYER_NORM_BWD_HOLD = False
"""``hold`` of the default held launch (:func:`layer_norm_bwd_held_launch`)."""


@functools.lru_cache(maxsize=1024)
def _default_split(
    M: int, N: int, element_size: int, device: torch.device | str
) -> tuple[SplitRowPlan | None, int | None, int, bool | None]:
    """(plan, lag, rows a group, hold) of the default split-row launch: the held kernel
    (lag 1, ``hold`` not None) where :func:`layer_norm_bwd_held_launch` has a launch, else the
    lagged kernel (hold None), where a row has at most ``LAYER_NORM_BWD_LAG_MAX_CHUNKS`` of
    its chunks, else the split kernel (lag None); plan None where rows do not split (see
    :func:`layer_norm_bwd_split_plan`)."""
    if N < LAYER_NORM_BWD_SPLIT_MIN_N:
        return None, None, 1, None
    held = layer_norm_bwd_held_launch(element_size)
    if held is not None:
        plan = split_row_plan(M, N, device, **held)
        if plan is not None and plan.chunks <= LAYER_NORM_BWD_LAG_MAX_CHUNKS:
            return plan, 1, 1, LAYER_NORM_BWD_HOLD
    plan = split_row_plan(M, N, device, **layer_norm_bwd_lag_launch(element_size))
    if plan is not None and plan.chunks <= LAYER_NORM_BWD_LAG_MAX_CHUNKS:
        return (plan, *layer_norm_bwd_lag(element_size), None)
    plan = split_row_plan(M, N, device, **layer_norm_bwd_split_launch(element_size))
    return plan, None, 1, None


def layer_norm_bwd_split_plan(
    M: int, N: int, element_size: int, device: torch.device | str
) -> SplitRowPlan | None:
    """The split-row launch of the LayerNorm backward of (M, N) rows, or None (narrower rows,
    a row needing more programs than the GPU holds at once, ``WARPFORGE_SPLIT_ROWS=0``): the
    caller then uses the whole-row or chunked kernels of :func:`_norm_backward`."""
    return _default_split(M, N, element_size, device)[0]


def _split_backward_buffers(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    weight_grad: bool,
    bias_grad: bool,
    slots: int,
    *,
    zero_partials: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, dweight and dbias (empty when not asked for) of the split LayerNorm backwards, and
    their [slots, N] float32 dweight/dbias partial rows (one element when not asked for)."""
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    wdtype = weight.dtype if weight is not None else x.dtype
    dw = torch.empty((N,) if weight_grad else (0,), dtype=wdtype, device=x.device)
    db = torch.empty((N,) if bias_grad else (0,), dtype=wdtype, device=x.device)
    alloc = torch.zeros if zero_partials else torch.empty
    dw_partial = alloc((slots, N) if weight_grad else (1,), dtype=torch.float32, device=x.device)
    db_partial = alloc((slots, N) if bias_grad else (1,), dtype=torch.float32, device=x.device)
    return dx, dw, db, dw_partial, db_partial


def _sum_split_partials(
    dw_partial: torch.Tensor,
    dw: torch.Tensor,
    db_partial: torch.Tensor,
    db: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
) -> None:
    """dweight/dbias of the split LayerNorm backwards: the sum over slots of their [slots, N]
    float32 partial rows, one launch for both. (``_norm_backward`` keeps its own copy of this
    launch: the shipped tuned configs hash its source.)"""
    if not (weight_grad or bias_grad):
        return
    from warpforge.ops._kernels import norm as kernels

    slots, n_cols = (dw_partial if weight_grad else db_partial).shape
    first = (dw_partial, dw) if weight_grad else (db_partial, db)
    grid = (cdiv(n_cols, _PARTIAL_BLOCK_N), int(weight_grad) + int(bias_grad))
    block_p = min(_PARTIAL_MAX_BLOCK_P, next_power_of_2(slots))
    kernels.partial_sum_kernel[grid](
        *first, db_partial, db, slots, n_cols, BLOCK_P=block_p, BLOCK_N=_PARTIAL_BLOCK_N
    )


def _layer_norm_split_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of a (M, N) LayerNorm from ``layer_norm_bwd_split_kernel`` and the
    partial-sum kernel (dweight/dbias empty when not asked for)."""
    from warpforge.ops._kernels import norm as kernels

    M, N = x.shape
    x, dy = as_rows(x), as_rows(dy)
    # every slot owns at least one row (the plan never has more slots than rows), so each of its
    # chunks writes its columns of the slot's partial rows: no zero fill needed
    dx, dw, db, dw_partial, db_partial = _split_backward_buffers(
        x, weight, weight_grad, bias_grad, plan.programs // plan.chunks, zero_partials=False
    )
    sums = plan.workspace(M, 2, x.device)
    arrivals = plan.arrivals(M, x.device)
    with kernel_device(x):
        for stage in plan.stages():
            kernels.layer_norm_bwd_split_kernel[(plan.programs,)](
                dy, x, weight.contiguous() if weight is not None else x, mean, rstd, dx,
                dw_partial, db_partial, sums, arrivals, dy.stride(0), x.stride(0), dx.stride(0),
                M, N, HAS_WEIGHT=weight is not None, WEIGHT_GRAD=weight_grad,
                BIAS_GRAD=bias_grad, BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2,
                STAGE=stage, PREFETCH=plan.prefetch, **plan.launch_options(),
            )  # fmt: skip
        _sum_split_partials(dw_partial, dw, db_partial, db, weight_grad, bias_grad)
    return dx, dw, db


def _flag_word_split_backward(
    kernel: Any,
    plan: SplitRowPlan,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    weight_grad: bool,
    bias_grad: bool,
    rows: int,
    operands: tuple[torch.Tensor, ...],
    *,
    accumulate: bool = False,
    **constants: Any,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The launch the flag-word backward kernels share (LayerNorm's lagged, held, pairs; the
    long-row ``norm_bwd_flags_kernel``): the buffers, the chunks' unpublished sum words, the
    plan's stages and the partial sums.
    ``operands``: (dy, x, weight, mean, rstd) as ``kernel`` reads them; ``constants``: its own
    compile-time arguments; ``accumulate``: the kernel adds into its partial rows (zeroed)."""
    M, N = x.shape
    slots = plan.programs // plan.chunks
    # a slot that owns a group writes its partial columns; one without (more slots than
    # groups of rows) adds zeros
    dx, dw, db, dw_partial, db_partial = _split_backward_buffers(
        x, weight, weight_grad, bias_grad, slots,
        zero_partials=accumulate or slots > cdiv(M, rows),
    )  # fmt: skip
    sums = plan.unpublished_words(M, 1, x.device)  # each chunk's two sums as one int64 word
    dy_operand, x_operand = operands[0], operands[1]
    with kernel_device(x):
        for stage in plan.stages():
            kernel[(plan.programs,)](
                *operands, dx, dw_partial, db_partial, sums, dy_operand.stride(0),
                x_operand.stride(0), dx.stride(0), M, N, HAS_WEIGHT=weight is not None,
                WEIGHT_GRAD=weight_grad, BIAS_GRAD=bias_grad, BLOCK_N=plan.block,
                CHUNKS_POW2=plan.chunks_pow2, STAGE=stage, **constants, **plan.launch_options(),
            )  # fmt: skip
        _sum_split_partials(dw_partial, dw, db_partial, db, weight_grad, bias_grad)
    return dx, dw, db


def _layer_norm_lag_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
    lag: int,
    rows: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of a (M, N) LayerNorm from ``layer_norm_bwd_lag_kernel`` (the
    split launch ``plan`` over groups of ``rows`` rows, dx written ``lag`` groups late from an
    L2 re-read) and the partial-sum kernel (dweight/dbias empty when not asked for)."""
    from warpforge.ops._kernels import norm as kernels

    x, dy = as_rows(x), as_rows(dy)
    w = weight.contiguous() if weight is not None else x
    return _flag_word_split_backward(
        kernels.layer_norm_bwd_lag_kernel, plan, x, weight, weight_grad, bias_grad, rows,
        (dy, x, w, mean, rstd), ROWS=rows, LAG=lag,
    )  # fmt: skip


def _layer_norm_held_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
    rows: int,
    hold: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of a (M, N) LayerNorm from ``layer_norm_bwd_held_kernel`` (the
    lagged split over groups of ``rows`` rows, lag 1, with the next group loaded a whole
    iteration ahead when ``plan.prefetch``, and dx written from registers held since the first
    read when ``hold``, else from an L2 re-read) and the partial-sum kernel."""
    from warpforge.ops._kernels import norm as kernels

    x, dy = as_rows(x), as_rows(dy)
    w = weight.contiguous() if weight is not None else x
    return _flag_word_split_backward(
        kernels.layer_norm_bwd_held_kernel, plan, x, weight, weight_grad, bias_grad, rows,
        (dy, x, w, mean, rstd), ROWS=rows, HOLD=hold, PREFETCH=plan.prefetch,
        EVEN_N=x.shape[1] % plan.block == 0,
    )  # fmt: skip


LAYER_NORM_BWD_PAIRS_MAX_CHUNKS = 64
"""Chunks a row of ``layer_norm_bwd_pairs_kernel`` has at most (its flag words sit in one
warp's lanes, two a lane at 64; the sm_90 compile of Triton 3.6 takes it)."""


def layer_norm_bwd_pairs_launch(element_size: int) -> dict[str, int | bool] | None:
    """The :func:`~warpforge.ops._split_rows.split_row_plan` options of
    ``layer_norm_bwd_pairs_kernel`` where it is the default (2-byte rows with int32 word views,
    :func:`_word_rows`; else the held kernel's :func:`layer_norm_bwd_held_launch`), or None:
    256-column chunks of one warp (64 a row at 16384 columns: no cross-warp reduction, no
    barrier), 28 an SM (72 registers, no spill on sm_90 with Triton 3.6), with the options of
    :data:`LAYER_NORM_BWD_PAIRS`.

    Kernel alone at 4096 x 16384 bf16 on the H100 (``benchmarks/ln_bwd_split_sweep.py
    --pairs``, ``benchmarks/results/ln16k2-sweep*-2026-11-25-h100.json``): 157.5 us against
    175.3 us for the held kernel's launch (~249 against 385 loop instructions a row chunk a
    thread); 32 an SM (64 registers, 8 bytes spilled) 160.4-161.4 us, 24 an SM 164.1 us, 12
    programs of 512 columns and 2 warps 167.2-169.7 us. Holding x and dy for phase B instead of
    re-reading them (``hold_rows``) was slower at every occupancy that fits its registers
    (179.6-189.4 us). Harness (forward + backward, ``ln16k2-B-2026-11-25-h100.json``):
    271.6 -> 254.8 us, 88% of copy."""
    if element_size == 2:
        return {"block": 256, "num_warps": 1, "programs_per_sm": 28, "prefetch": True}
    return None


LAYER_NORM_BWD_PAIRS: dict[str, bool | int] = {
    "hold_weight": True,
    "evict_first": False,
    "hold_rows": False,
    "unroll": 3,
}
"""Options of the default ``layer_norm_bwd_pairs_kernel`` launch
(:func:`_layer_norm_pairs_backward`): weight unpacked once, x and dy re-read for phase B (an
L1 or L2 hit), three pipeline steps an iteration (~7% fewer instructions; at 32 an SM no
measurable difference: kernel alone 161.4 against 160.4 us for one step, harness row 259.9
against 260.2 us, ``ln16k2-A-`` / ``ln16k2-E-2026-11-25-h100.json``; the measured launch at 28
an SM has three). Not defaults (kernel alone, ``ln16k3-sweep1-2026-11-25-h100.json``, default
156.6-158.7 us in the same run): ``lag`` 2 177.8 us, ``l2_ahead`` 1 158.8-159.7, 2 219.2,
both 188.9-200.0. ``full_words`` (the words' poll in one 16-byte load a lane, on by default in
:func:`_layer_norm_pairs_backward`) follows ncu (``ln16k3-ncu1-2026-11-25-h100.txt``: 70% of
stall samples in the poll, L2 84% busy, the poll's two 8-byte loads a lane 55% of L2 sectors);
not yet timed on the GPU."""


LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL: dict[str, tuple[int, dict[str, int | bool]]] = {
    "NVIDIA H200": (32768, {"block": 1024, "num_warps": 4, "programs_per_sm": 7, "prefetch": True}),
}
"""GPU model -> (widest row, launch) of ``layer_norm_bwd_pairs_kernel`` for 2-byte rows wider
than :func:`layer_norm_bwd_pairs_launch`'s 64 chunks take: 1024-column chunks of 4 warps, seven
an SM (the same 8 columns a thread and 28 warps an SM, a quarter of the programs a row). H200,
kernel alone (``benchmarks/ln_bwd_split_sweep.py --pairs --wide``,
``benchmarks/results/session40-h200-2026-12-01/lnbwd-pairs-wide-call6.txt``), bf16 4096 x 32768:
279.5 µs (68.2% of copy) against 312.3 µs for the flag-word kernel these rows took
(:data:`NORM_BWD_NARROW_BY_MODEL`; since the forty-second session it takes 32768 columns there
itself, to the lagged kernel's LEAN arithmetic, so the launch serves narrower rows);
2048-column chunks of 8 warps 336.4, 512-column chunks of 2 warps 326.0. At 4096 x 16384 the 256-column launch
stays (125.2 against 199.2 µs for this one). Rows of 16385-32767 columns (the split kernel's
until now) take it unmeasured; other models keep their kernels."""


@functools.lru_cache(maxsize=1024)
def _default_pairs_plan(
    M: int, N: int, element_size: int, device: torch.device | str
) -> SplitRowPlan | None:
    """The default ``layer_norm_bwd_pairs_kernel`` launch of (M, N) rows (wider rows than its
    64 chunks hold: :data:`LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL`'s, where the GPU has one), or
    None (rows that do not split, see :func:`_default_split`; no launch for this element
    size)."""
    launch = layer_norm_bwd_pairs_launch(element_size)
    if N < LAYER_NORM_BWD_SPLIT_MIN_N or launch is None:
        return None
    plan = split_row_plan(M, N, device, **launch)
    if plan is not None and plan.chunks > LAYER_NORM_BWD_PAIRS_MAX_CHUNKS:
        model = _split_rows.device_capabilities(device).name
        widest, wide = LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL.get(model, (0, {}))
        if widest >= N:
            plan = split_row_plan(M, N, device, **wide)
    if plan is None or plan.chunks > LAYER_NORM_BWD_PAIRS_MAX_CHUNKS:
        return None
    return plan


def _word_rows(t: torch.Tensor) -> torch.Tensor | None:
    """An int32 view of 2-byte rows (two columns a word, strides in words), or None where the
    layout has none (an odd width, row stride or offset)."""
    if t.element_size() != 2 or t.shape[-1] % 2:
        return None
    try:
        return t.view(torch.int32)
    except RuntimeError:
        return None


def _layer_norm_pairs_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
    hold_weight: bool = True,
    evict_first: bool = False,
    hold_rows: bool = False,
    unroll: int = 3,
    lag: int = 1,
    l2_ahead: int = 0,
    full_words: bool = True,
    keep_rows: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(dx, dweight, dbias) of a (M, N) bfloat16 / float16 LayerNorm from
    ``layer_norm_bwd_pairs_kernel`` (the held kernel's re-read launch with prefetch, one row a
    group, on int32 words of two columns) and the partial-sum kernel; None where x, dy and the
    weight are not all of one 2-byte dtype with word views (the caller then takes the held
    kernel). ``hold_weight``: the weight unpacked once; ``hold_rows``: dx from x and dy words
    held in registers since the first read, else re-read (``evict_first``: asking L2 to let
    their lines go); ``unroll`` (1 or 3): pipeline steps an iteration of the kernel's loop;
    ``lag`` (1, or 2 without ``hold_rows``): dx of a row written that many steps after its sums
    are published; ``l2_ahead`` (>= 0): each step asks L2 for the row that many rows past the
    one it loads into registers (0: none; GPU only, ignored under the interpreter, which runs
    no inline PTX); ``full_words``: where a row's chunks fill its words (a power of 2), poll
    them with 16-byte loads (the kernel's FULL_WORDS; False: the former 8-byte loads);
    ``keep_rows``: the first read of x and dy marked evict-last for the re-read."""
    from warpforge.ops._kernels import norm as kernels

    if lag not in (1, 2) or (lag == 2 and hold_rows):
        raise ValueError(f"lag: expected 1, or 2 without hold_rows, got {lag!r} "
                         f"(hold_rows {hold_rows!r})")  # fmt: skip
    if l2_ahead < 0:
        raise ValueError(f"l2_ahead: expected an int >= 0, got {l2_ahead!r}")
    if execution_path(x.device) is not ExecutionPath.TRITON_GPU:
        l2_ahead = 0
    M, N = x.shape
    x, dy = as_rows(x), as_rows(dy)
    if x.dtype not in (torch.bfloat16, torch.float16) or dy.dtype != x.dtype:
        return None
    if weight is not None and weight.dtype != x.dtype:
        return None
    x_words, dy_words = _word_rows(x), _word_rows(dy)
    w_words = _word_rows(weight.contiguous()) if weight is not None else x_words
    if w_words is None and weight is not None:  # an odd offset: a copy has none
        w_words = _word_rows(weight.clone())
    if x_words is None or dy_words is None or w_words is None:
        return None
    # int32 row offsets unless some operand reaches 2**31 elements (words) from its base
    reach = max((M - 1) * x_words.stride(0), (M - 1) * dy_words.stride(0), M * N,
                M * plan.chunks_pow2)  # fmt: skip
    return _flag_word_split_backward(
        kernels.layer_norm_bwd_pairs_kernel, plan, x, weight, weight_grad, bias_grad, 1,
        (dy_words, x_words, w_words, mean, rstd), BF16=x.dtype == torch.bfloat16,
        HOLD_W=hold_weight, HOLD_X=hold_rows, UNROLL=unroll, EVEN_N=N % plan.block == 0,
        WIDE=reach + N >= 2**31, EVICT_FIRST=evict_first, LAG=lag, L2_AHEAD=l2_ahead,
        FULL_WORDS=full_words and plan.chunks == plan.chunks_pow2, KEEP_ROWS=keep_rows,
    )  # fmt: skip


# --------------------------------------------------------------------------- split backward

NORM_BWD_SPLIT_LAUNCHES: dict[int, dict[str, int | bool]] = {
    2: {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": True},
    4: {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": True},
}
"""Element size -> the flag-word split launch of the long-row backward
(``norm_bwd_flags_kernel``, :func:`split_norm_backward`): 4096-column programs of 4 warps
(32 columns a thread: x, dy, the next row's x and dy, the dweight and dbias partials; 222-248
registers, at most 32 bytes spilled on sm_90), 2 an SM, the next row's chunk loaded while the
row's other programs publish. At 262144 columns a row has 64 chunks, the most the words' poll
reads.

Kernel alone on the H100, bf16 (``benchmarks/norm_split_bwd.py``,
``benchmarks/results/normbwd-sweep1-2026-11-25-h100.txt``), 8192 x 262144 RMSNorm /
add+RMSNorm / LayerNorm: 6053 / 7113 / 6316 us (70 / 80 / 68% of copy) against 13265 / 14506 /
7226 us without the split (RMSNorm's chunked kernel, LayerNorm's counter-based split kernel);
8192 x 65536: 1305 / 1520 / 1400 against 3085 / 3396 / 1625 us. 8 warps a program (16 columns
a thread, 128 registers) ran 10-27% slower, 8192 columns of 16 warps one an SM 5-40% slower,
no prefetch 13-60% slower (same file). A second sweep (``normbwd-sweep2-2026-11-25-h100.txt``):
8192 columns of 8 warps, one an SM, within -6% (RMSNorm, add+RMSNorm at 262144 columns) to +3%
everywhere in bf16; 2048 columns of 2 or 4 warps, four an SM (65536 columns only) within 3%;
float32 at this launch 93 / 94 / 89% of copy at 262144 columns and 99 / 93 / 91% at 65536
(9161 / 12124 / 9606 and 2165 / 3071 / 2354 us; 2048 columns of 2 warps, four an SM, 2914 and
2222 us for add+RMSNorm and LayerNorm at 65536).

Harness, bf16, forward + backward (``benchmarks/results/normbwd-after-2026-11-25-h100.json``
against ``normbwd-262144-before-2026-11-25-h100.json``): 8192 x 262144 RMSNorm 16840 -> 9780
us (42 -> 73% of copy), LayerNorm 11161 -> 10225 us (64 -> 70%), add+RMSNorm 13162 us (87%;
its row was rejected before, see the harness's ``row_sums``); 8192 x 65536 85 / 79 / 95%.

On the H200 the launch is not what holds bf16 under 90% of copy (kernel alone,
``session26-h200-2026-11-29/normbwd-split-sweep-call8.txt``): at 8192 x 65536 RMSNorm /
add+RMSNorm / LayerNorm 1129.7 / 1261.7 / 1225.6 us (68 / 82 / 63% of copy) at this launch,
2048 columns of 2 warps four an SM within 0.6%, 2048/4 warps x4, 1024/1 warp x8 and 8192/8
warps x1 1-7% slower; at 262144 8192/8 warps x1 -1 to +4%. add+RMSNorm, which reads one more
stream, runs nearest copy: the time goes to each row's meeting (publish, poll, then dx), not
to bytes (Nsight Compute on LayerNorm at 65536, ``ncu-layer_norm-bwd-8192x65536-bf16-call4.txt``:
244 registers, 8 warps an SM, 48% of DRAM bandwidth, long-scoreboard stalls first)."""

NORM_BWD_FLUSH_ROWS = {4: 64}
"""Element size -> rows a program of ``norm_bwd_flags_kernel`` sums dweight / dbias over in
registers before adding them into its slot's partial row (the kernel's FLUSH). At 8192 x 262144
a float32 row has 64 chunks, so 4 slots of 2048 rows each: their running float32 sums put the
weight gradient 4-8x PyTorch's error away from float64 (3.0e-4 to 6.0e-4 against 6.6e-5 to
8.1e-5 at 131072-262144 columns), past the harness's tolerance
(``benchmarks/results/session12-2026-11-25/normbwd-fp32-call8.json``); blocks of 64 rows cut
that error by about sqrt(64); all pass since, at 92-101% of copy (``normbwd-fp32-call9.json``).
The cost where both runs passed, 8192 x 65536 (512 rows a slot): RMSNorm 3667.2 -> 3686.0 us,
LayerNorm 3833.2 -> 3894.8 us. The per-element atomics need an address register each: under
the 248-register cap ptxas (Triton 3.9) spills 296-472 bytes a thread with the flush against
0-16 without (``benchmarks/split_launch_spills.py``-style offline compile); a vectorised
load-add-store flush might spill less (not measured). bf16 rows keep one store a program
(within their tolerance)."""

NORM_BWD_SPLIT_MIN_N = 65536
"""The narrowest row whose backward splits over programs by default (LayerNorm's own split
kernels serve 16384-65535 columns; RMSNorm there keeps the chunked kernel)."""

NORM_BWD_SPLIT = "WARPFORGE_NORM_BWD_SPLIT"
"""``0``/``false``/``no``/``off`` turns the long-row split backward off (the kernels it
replaces: RMSNorm's chunked kernel, LayerNorm's counter-based split kernel); read at each
call."""


def _split_backward_enabled() -> bool:
    return switch_on(NORM_BWD_SPLIT)


@functools.lru_cache(maxsize=1024)
def norm_bwd_split_plan(
    M: int, N: int, element_size: int, device: torch.device | str
) -> SplitRowPlan | None:
    """The split backward of rows of N columns, or None (the caller's other kernels): rows
    narrower than ``NORM_BWD_SPLIT_MIN_N``, more chunks than the words' poll reads, or more
    programs a row than the GPU holds at once."""
    launch = NORM_BWD_SPLIT_LAUNCHES.get(element_size)
    if launch is None or N < NORM_BWD_SPLIT_MIN_N:
        return None
    return flag_word_plan(M, N, device, **launch)


def _flags_backward(
    kernel,
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    center: bool,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
    **options: Any,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) from one of the flag-word split backward kernels (``kernel``, with
    its own ``options``) and the partial-sum kernel, after checking the plan's limits."""
    M = x.shape[0]
    check_flag_words(plan)
    if plan.programs // plan.chunks > M:
        raise ValueError(f"plan: expected at most {M} slots (rows), got {plan}")
    x, dy = as_rows(x), as_rows(dy)
    dh = as_rows(dh) if dh is not None else None
    operands = (
        dy,
        x,
        weight.contiguous() if weight is not None else x,
        mean if center else rstd,
        rstd,
        dh if dh is not None else dy,
        dh.stride(0) if dh is not None else 0,
        offset,
    )
    return _flag_word_split_backward(
        kernel, plan, x, weight, weight_grad, bias_grad, 1, operands,
        CENTER=center, HAS_DH=dh is not None, **options,
    )  # fmt: skip


def split_norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    center: bool,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_norm_backward`'s (dx, dweight, dbias) of a (M, N) input with M > 0 from
    ``norm_bwd_flags_kernel`` and the partial-sum kernel, on the kernels' path; tests and sweeps
    pass their own plan (at most 64 chunks a row, at most M slots)."""
    from warpforge.ops._kernels.norm_split_bwd import norm_bwd_flags_kernel

    flush = NORM_BWD_FLUSH_ROWS.get(x.element_size(), 0)
    if flush and cdiv(x.shape[0], plan.programs // plan.chunks) <= flush:
        flush = 0  # no slot owns more rows than one flush holds
    return _flags_backward(
        norm_bwd_flags_kernel, dy, x, weight, mean, rstd, dh, offset, center, weight_grad,
        bias_grad, plan, PREFETCH=plan.prefetch, FLUSH=flush, accumulate=flush > 0,
    )  # fmt: skip


def lag_norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    center: bool,
    weight_grad: bool,
    bias_grad: bool,
    plan: SplitRowPlan,
    *,
    lean: bool | None = None,
    l2_hints: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`split_norm_backward` through ``norm_bwd_lag_flags_kernel`` (dx of a row written
    one iteration after its sums are published, from a re-read of its x and dy; the next row
    loaded an iteration ahead, ``plan.prefetch`` is ignored): the same operands, words and plan
    limits.

    ``lean`` (default: 2-byte inputs) takes the kernel's LEAN arithmetic, xhat and dx in fused
    multiply-adds from x itself rather than from ``x - mean`` (float32 keeps the subtraction:
    rows far from zero against their spread would lose digits a float32 result shows);
    ``lean=False`` also keeps the offset add, the masks and the where of the kernel's first
    version, for comparisons. Rows of whole chunks load and store unmasked. ``l2_hints`` marks
    the first read of x and dy evict_last and their re-read and dx evict_first (the kernel's
    KEEP / DROP; off by default until timed: the split forward's re-reading kernel needed them,
    ``NORM_FWD_SPLIT_LAUNCHES``)."""
    from warpforge.ops._kernels.norm_lag_bwd import norm_bwd_lag_flags_kernel

    if lean is None:
        lean = x.element_size() == 2
    return _flags_backward(
        norm_bwd_lag_flags_kernel, dy, x, weight, mean, rstd, dh, offset, center, weight_grad,
        bias_grad, plan, LEAN=lean, HAS_OFFSET=offset != 0.0 or not lean,
        EVEN=lean and x.shape[1] % plan.block == 0, KEEP="evict_last" if l2_hints else "",
        DROP="evict_first" if l2_hints else "",
    )  # fmt: skip


NORM_BWD_NARROW_MIN_N = 16385
"""The narrowest row whose backward may take :data:`NORM_BWD_NARROW` (rows of up to 16384
columns fit the whole-row kernel of :func:`_norm_backward`)."""

NarrowChoice = tuple[str, dict[str, int | bool], int, int]

_FLAGS_2048 = {"block": 2048, "num_warps": 4, "programs_per_sm": 4, "prefetch": True}
_FLAGS_4096 = {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": True}
_LAG_2048 = {"block": 2048, "num_warps": 4, "programs_per_sm": 4, "prefetch": False}
_FLAGS_8192 = {"block": 8192, "num_warps": 8, "programs_per_sm": 1, "prefetch": True}

NORM_BWD_NARROW: dict[tuple[str, int], tuple[NarrowChoice, ...]] = {
    ("rms_norm", 2): (("flags", _FLAGS_2048, 16385, 32767), ("lag", _LAG_2048, 32768, 131072)),
    ("add_rms_norm", 2): (
        ("flags", _FLAGS_2048, 16385, 32767),
        ("flags", _FLAGS_4096, 32768, 65535),
        ("flags", _FLAGS_8192, 131073, 262144),
    ),
    ("layer_norm", 2): (("flags", _FLAGS_4096, 32768, 65535),),
    ("rms_norm", 4): (("flags", _FLAGS_2048, 16385, 32767), ("flags", _FLAGS_4096, 32768, 65535)),
    ("add_rms_norm", 4): (
        ("flags", _FLAGS_2048, 16385, 32767),
        ("flags", _FLAGS_4096, 32768, 65535),
    ),
    ("layer_norm", 4): (("flags", _FLAGS_2048, 16385, 65536),),
}
"""(op family, element size) -> the (kernel, split launch, narrowest, widest row) choices of
the backward of rows of ``NORM_BWD_NARROW_MIN_N`` columns and up, the first whose widths hold
N: kernel ``"flags"`` (:func:`split_norm_backward`) or ``"lag"`` (:func:`lag_norm_backward`).
Rows outside them, families and sizes not listed keep their other kernels (RMSNorm's chunked
kernel, LayerNorm's pairs / held kernels; from ``NORM_BWD_SPLIT_MIN_N``, the flags kernel at
:data:`NORM_BWD_SPLIT_LAUNCHES`).

Kernel alone on the H100, bf16 (``benchmarks/norm_bwd_narrow_sweep.py``,
``benchmarks/results/widebwd-2026-11-25/run1-widebwd-sweep.txt``), RMSNorm / add+RMSNorm /
LayerNorm: 4096 x 32768 default 667 / 801 / 400 us, flags at 4096 columns (4 warps, 2 an SM)
329 / 382 / 347 us, the lag kernel at 2048 columns (4 warps, 4 an SM) 308 / 427 / 417 us;
4096 x 16411 default 584 / 636 / 318 us, flags at 2048 columns (4 warps, 4 an SM) 258 / 330 /
314 us, lag 377 / 469 / 725 us; 8192 x 65536 default (flags at 4096 columns) 1302 / 1522 /
1410 us, lag 1212 / 1591 / 1536 us. LayerNorm under 32768 columns keeps its pairs kernel (a
tie at 16411).

Wider bf16 rows, kernel alone (``benchmarks/results/session14-2026-11-25/
norm-bwd-wide-bf16-sweep.txt``): RMSNorm 8192 x 131072 default (flags at 4096 columns) 2670 us,
the lag kernel at 2048 columns 2440 us; add+RMSNorm 8192 x 262144 default 7253 us, flags at
8192 columns (8 warps, 1 an SM) 6834 us (a tie at 131072: 3096 against 3111 us). Launches of
8 and 16 warps at 4096-8192 columns were 1-30% slower everywhere else.

float32, kernel alone on the H100 (``benchmarks/results/session14-2026-11-25/
norm-bwd-narrow-fp32-sweep.txt``), RMSNorm / add+RMSNorm / LayerNorm: 4096 x 32768 default
1069 / 1275 / 573 us, flags at 4096 columns 552 / 728 / 596 us, at 2048 columns 555 / 730 /
565 us; 4096 x 16411 default 574 / 728 / 487 us, flags at 2048 columns 336 / 454 / 411 us, at
4096 columns 365 / 497 / 494 us; 8192 x 65536 default 2194 / 2883 / 2381 us, flags at 2048
columns 2240 / 2896 / 2282 us. The lag kernel is 1.6-3.5x slower than flags in every float32
row (not investigated)."""

_LAG_1024 = {"block": 1024, "num_warps": 2, "programs_per_sm": 8, "prefetch": False}
_LAG_4096 = {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": False}
_LAG_8192_16 = {"block": 8192, "num_warps": 16, "programs_per_sm": 1, "prefetch": False}

NORM_BWD_NARROW_BY_MODEL: dict[str, dict[tuple[str, int], tuple[NarrowChoice, ...]]] = {
    "NVIDIA H200": {
        ("rms_norm", 2): (
            ("flags", _FLAGS_2048, 16385, 32767),
            ("lag", _LAG_1024, 32768, 65535),
            ("lag", _LAG_2048, 65536, 131072),
            ("lag", _LAG_8192_16, 131073, 262144),
        ),
        ("add_rms_norm", 2): (
            ("flags", _FLAGS_2048, 16385, 32767),
            ("lag", _LAG_1024, 32768, 65535),
            ("lag", _LAG_2048, 65536, 131072),
            ("lag", _LAG_8192_16, 131073, 262144),
        ),
        ("layer_norm", 2): (
            ("lag", _LAG_1024, 32768, 65535),
            ("lag", _LAG_2048, 65536, 131071),
            ("lag", _LAG_4096, 131072, 262144),
        ),
        ("rms_norm", 4): (*NORM_BWD_NARROW[("rms_norm", 4)], ("flags", _FLAGS_8192, 65537, 131072)),
        ("add_rms_norm", 4): (
            *NORM_BWD_NARROW[("add_rms_norm", 4)],
            ("flags", _FLAGS_8192, 65537, 131072),
        ),
        ("layer_norm", 4): (
            *NORM_BWD_NARROW[("layer_norm", 4)],
            ("flags", _FLAGS_8192, 65537, 131072),
        ),
    },
}
"""GPU model (``torch.cuda.get_device_name``) -> (op family, element size) entries that replace
:data:`NORM_BWD_NARROW`'s on that model; other models and entries keep the table above.

The H200 (4.2-4.3 TB/s copy against the H100's 3.0) holds the H100's launches under 90% of copy
in the bf16 backward of long rows. Kernel alone on the H200, bf16
(``benchmarks/results/session16-h200-2026-11-28/normbwd-wide-bf16-sweep.txt``), the H100's
choice against the lagged kernel: add+RMSNorm 8192 x 65536 1261 -> 1127 us (lag at 2048
columns, 4 an SM; 80.5 -> 90.0% of copy), 8192 x 131072 2645 -> 2291 us (75.8 -> 87.5%);
at 8192 x 262144 the lag kernel at 4096 columns of 4 warps, 2 an SM: RMSNorm 5378 -> 4317 us
(55.7 -> 69.4%), add+RMSNorm 5919 -> 5362 (67.4 -> 74.4%), LayerNorm 5701 -> 4551 (52.5 ->
65.8%); LayerNorm 8192 x 131072 2535 -> 2343 us (it loses at 65536: 1396 against 1227 us).
At 4096 x 32768 the H100's choices stay the fastest measured. The lagged kernel at 2048
columns cannot take 262144 columns (128 chunks, over the words' poll). Through the harness on the
H200 (``normbwd-bf16-call2.json`` before, ``normbwd-bf16-call5.json`` after, same directory):
add+RMSNorm 65536 / 131072 / 262144 columns 2373.6 / 4855.7 / 10477.3 -> 2222.2 / 4481.3 /
9826.7 us (85 / 84 / 77 -> 91 / 91 / 83% of copy); RMSNorm 262144 7894.3 -> 6853.6 us (64 ->
74%); LayerNorm 131072 / 262144 4219.7 / 8762.1 -> 4029.0 / 7607.6 us (60 / 58 -> 63 / 67%).

Past 131072 columns RMSNorm and add+RMSNorm take the lagged kernel in 8192-column programs of
16 warps, one an SM (the same 16 columns a thread as 2048 columns on 4 warps; half the programs
a row of the 4096-column launch). Kernel alone (``session40-h200-2026-12-01/
normbwd-wide-call8.txt``), 8192 x 262144, against the 4096-column launch: RMSNorm 3804.2
against 4355.6 us (79.2 against 69.1% of copy), add+RMSNorm 4549.6 against 5416.5 (88.2 against
74.1%); LayerNorm there was slower (5659.8 against 4585.0) and keeps it, and at 131072 columns
no wider launch beat the table's.

float32 rows of 65537-131072 columns take the flag-word kernel in 8192-column programs of 8
warps, one an SM (``_FLAGS_8192``), rather than the split default (4096 columns, 4 warps, two an
SM; :data:`NORM_BWD_SPLIT_LAUNCHES`). Kernel alone (``session41-h200-2026-12-01/
normbwd-fp32-wide-call10.txt``), 8192 x 131072, RMSNorm / add+RMSNorm / LayerNorm: 3368.5 /
4075.4 / 3598.9 us against 3463.3 / 4341.4 / 3744.2 (88.9 / 98.0 / 83.2% of copy against 86.5 /
92.0 / 80.0); measured at 131072 columns only. At 262144 it lost for RMSNorm and LayerNorm
(7993.5 against 7651.3, 8233.6 against 8065.0) and won 3.7% for add+RMSNorm (9231.1 against
9581.5), about twice the 1.8% between two runs of one launch there, so 262144 keeps the default;
the other launches timed (8192 columns of 16 warps, 2048 of 4 warps four an SM, 4096 of 8 warps
two an SM) ran 4-36% longer than the default at both widths.

2-byte LayerNorm rows of 65536-131071 columns take the lagged kernel in 2048-column programs of
4 warps, four an SM, since its LEAN arithmetic (the forty-second session): kernel alone
(``session42-h200-2026-12-01/normbwd-lean-call2.txt``), bf16 8192 x 65536, 1014.8 us against
1227.1 for the flag-word kernel the row took (79.7 against 65.9% of copy) and 1041.0 for the
lagged kernel at 4096 columns; measured at 65536 columns only (at 131072 the 4096-column launch
stays ahead, 1964.5 against 2092.0).

2-byte rows of 32768-65535 columns take the lagged kernel in 1024-column programs of 2 warps,
eight an SM (the same 16 columns a thread), in all three families. Kernel alone
(``session42-h200-2026-12-01/normbwd-32768-call5.txt``), bf16 4096 x 32768, RMSNorm /
add+RMSNorm / LayerNorm: 231.5 / 277.7 / 251.0 us against 237.7 (the lagged kernel at 2048
columns) / 316.4 (the flag-word kernel at 4096 columns) / 276.2 (LayerNorm's pairs kernel, its
wide launch) for the launches the rows took; measured at 32768 columns only."""

NORM_BWD_NARROW_ENV = "WARPFORGE_NORM_BWD_NARROW"
"""Replaces :data:`NORM_BWD_NARROW` (benchmark sweeps), read when a shape is first planned:
``family:size=kernel/block/warps/programs an SM/prefetch/narrowest/widest`` items separated by
``;``, a family's in order (``none``: an empty table)."""


def _narrow_table(model: str = "") -> dict[tuple[str, int], tuple[NarrowChoice, ...]]:
    """The backward's narrow-row choices on GPU ``model``: the environment's table when set,
    else :data:`NORM_BWD_NARROW` with the model's entries of :data:`NORM_BWD_NARROW_BY_MODEL`."""
    spec = os.environ.get(NORM_BWD_NARROW_ENV, "").strip()
    if not spec:
        return {**NORM_BWD_NARROW, **NORM_BWD_NARROW_BY_MODEL.get(model, {})}
    table: dict[tuple[str, int], tuple[NarrowChoice, ...]] = {}
    for item in filter(None, (i.strip() for i in spec.split(";"))):
        if item == "none":
            continue
        try:
            key, value = item.split("=")
            family, size = key.split(":")
            kernel, *numbers = value.split("/")
            block, warps, per_sm, prefetch, narrowest, widest = (int(v) for v in numbers)
        except ValueError:
            raise ValueError(
                f"{NORM_BWD_NARROW_ENV}: expected family:size=kernel/block/warps/"
                f"programs_per_sm/prefetch/narrowest/widest items, got {item!r}"
            ) from None
        if kernel not in ("flags", "lag"):
            raise ValueError(f"{NORM_BWD_NARROW_ENV}: unknown kernel {kernel!r} in {item!r}")
        launch = {"block": block, "num_warps": warps, "programs_per_sm": per_sm,
                  "prefetch": bool(prefetch)}  # fmt: skip
        choice = (kernel, launch, narrowest, widest)
        table[(family, int(size))] = (*table.get((family, int(size)), ()), choice)
    return table


def _family(center: bool, dh: torch.Tensor | None) -> str:
    return "layer_norm" if center else "add_rms_norm" if dh is not None else "rms_norm"


@functools.lru_cache(maxsize=1024)
def norm_bwd_narrow_plan(
    family: str, M: int, N: int, element_size: int, device: torch.device | str
) -> tuple[str, SplitRowPlan] | None:
    """(kernel, plan) of :data:`NORM_BWD_NARROW` for rows of N columns, or None (not listed,
    outside its widths, more chunks than the words' poll reads, or more programs a row than
    the GPU holds at once)."""
    model = _split_rows.device_capabilities(device).name
    choices = [
        (kernel, launch)
        for kernel, launch, narrowest, widest in _narrow_table(model).get(
            (family, element_size), ()
        )
        if max(narrowest, NORM_BWD_NARROW_MIN_N) <= N <= widest
    ]
    if not choices:
        return None
    kernel, launch = choices[0]
    plan = flag_word_plan(M, N, device, **launch)
    return None if plan is None else (kernel, plan)


def _long_row_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    center: bool,
    weight_grad: bool,
    bias_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """:func:`split_norm_backward` where its default plan applies (kernels' path, rows of at
    least ``NORM_BWD_SPLIT_MIN_N`` columns, ``WARPFORGE_NORM_BWD_SPLIT`` not off), for
    narrower rows the kernel and launch of :data:`NORM_BWD_NARROW` where one is listed, else
    None."""
    M, N = x.shape
    if (
        M == 0
        or N < NORM_BWD_NARROW_MIN_N
        or not _split_backward_enabled()
        or execution_path(x.device) is ExecutionPath.TORCH_REFERENCE
    ):
        return None
    narrow = norm_bwd_narrow_plan(_family(center, dh), M, N, x.element_size(), x.device)
    if narrow is not None:
        kernel, plan = narrow
        run = lag_norm_backward if kernel == "lag" else split_norm_backward
        return run(dy, x, weight, mean, rstd, dh, offset, center, weight_grad, bias_grad, plan)
    if N < NORM_BWD_SPLIT_MIN_N:
        return None
    plan = norm_bwd_split_plan(M, N, x.element_size(), x.device)
    if plan is None:
        return None
    return split_norm_backward(dy, x, weight, mean, rstd, dh, offset, center, weight_grad,
                               bias_grad, plan)  # fmt: skip


def rms_norm_backward(
    dy: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    weight_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of a (M, N) RMSNorm (``dh``: the gradient of the fused residual sum, added
    to dx): long rows split over programs (:func:`split_norm_backward`), others through
    :func:`_norm_backward`."""
    got = _long_row_backward(dy, h, weight, None, rstd, dh, offset, False, weight_grad, False)
    if got is None:
        M, N = h.shape
        launch = norm_bwd_row_overrides(M, N, h.dtype, h.device, _kernel_name(False, dh, True))
        got = _norm_backward(dy, h, weight, None, rstd, dh, offset, False, weight_grad,
                             bias_grad=False, **launch)  # fmt: skip
    return got[0], got[1]


def layer_norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
    split: SplitRowPlan | None = None,
    lag: int | None = None,
    lag_rows: int = 1,
    hold: bool | None = None,
    pairs: dict[str, bool] | bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias) of a (M, N) LayerNorm: rows of at least ``NORM_BWD_SPLIT_MIN_N``
    columns through :func:`split_norm_backward` (unless a plan is forced or
    ``WARPFORGE_NORM_BWD_SPLIT`` is off), other wide rows split over programs
    (:func:`layer_norm_bwd_split_plan`), others through :func:`_norm_backward`. ``split``
    forces a split launch (tests, benchmark sweeps): with ``lag`` (>= 0) through
    ``layer_norm_bwd_lag_kernel`` over groups of ``lag_rows`` rows (a power of 2), or, with
    ``hold`` (True / False: dx from held registers / from an L2 re-read; needs lag 1),
    ``layer_norm_bwd_held_kernel`` (``split.prefetch``: the next group loaded an iteration
    ahead); else ``layer_norm_bwd_split_kernel``. ``pairs`` (a forced plan of at most
    :data:`LAYER_NORM_BWD_PAIRS_MAX_CHUNKS` chunks, lag 1, ``hold`` False, one row a group):
    ``layer_norm_bwd_pairs_kernel`` with the options of :data:`LAYER_NORM_BWD_PAIRS` (True) or
    those given (a dict, see :func:`_layer_norm_pairs_backward`) where x, dy and the weight
    allow it, else the held kernel (the default launch where the plan has more chunks than
    that takes). Without a forced plan the default launch is the pairs kernel's
    (:func:`layer_norm_bwd_pairs_launch`) where it applies, unless ``pairs`` is False."""
    M, N = x.shape
    if split is not None and split.programs // split.chunks > M:
        # a slot without rows would leave its partial rows unwritten (they are not zeroed)
        raise ValueError(f"split: expected a plan of at most {M} slots (rows), got {split}")
    if lag is not None and (split is None or lag < 0):
        raise ValueError(f"lag: expected an int >= 0 with a split plan, got {lag!r}")
    limit = LAYER_NORM_BWD_PAIRS_MAX_CHUNKS if pairs else LAYER_NORM_BWD_LAG_MAX_CHUNKS
    if lag is not None and split.chunks > limit:
        raise ValueError(f"lag: expected a plan of at most {limit} chunks a row, got {split}")
    if lag_rows < 1 or lag_rows & (lag_rows - 1):
        raise ValueError(f"lag_rows: expected a power of 2, got {lag_rows!r}")
    if hold is not None and lag != 1:
        raise ValueError(f"hold: expected lag 1 with a split plan, got lag {lag!r}")
    if pairs and (split is None or hold is not False or lag_rows != 1):
        raise ValueError(f"pairs: expected hold False and one row a group with a split plan, "
                         f"got hold {hold!r}, lag_rows {lag_rows!r}")  # fmt: skip
    if split is None:
        got = _long_row_backward(dy, x, weight, mean, rstd, None, 0.0, True, weight_grad,
                                 bias_grad)  # fmt: skip
        if got is not None:
            return got
    if M and execution_path(x.device) is not ExecutionPath.TORCH_REFERENCE:
        if split is None and pairs is not False:
            plan = _default_pairs_plan(M, N, x.element_size(), x.device)
            if plan is not None:
                got = _layer_norm_pairs_backward(dy, x, weight, mean, rstd, weight_grad,
                                                 bias_grad, plan, **LAYER_NORM_BWD_PAIRS)  # fmt: skip
                if got is not None:
                    return got
        if split is not None and pairs:
            options = LAYER_NORM_BWD_PAIRS if pairs is True else pairs
            got = _layer_norm_pairs_backward(dy, x, weight, mean, rstd, weight_grad, bias_grad,
                                             split, **options)  # fmt: skip
            if got is not None:
                return got
            if split.chunks > LAYER_NORM_BWD_LAG_MAX_CHUNKS:  # no held kernel for that plan
                split = None
        if split is None:
            split, lag, lag_rows, hold = _default_split(M, N, x.element_size(), x.device)
        if split is not None and hold is not None:
            return _layer_norm_held_backward(dy, x, weight, mean, rstd, weight_grad, bias_grad,
                                             split, lag_rows, hold)  # fmt: skip
        if split is not None and lag is not None:
            return _layer_norm_lag_backward(dy, x, weight, mean, rstd, weight_grad, bias_grad,
                                            split, lag, lag_rows)  # fmt: skip
        if split is not None:
            return _layer_norm_split_backward(dy, x, weight, mean, rstd, weight_grad, bias_grad,
                                              split)  # fmt: skip
    launch = norm_bwd_row_overrides(M, N, x.dtype, x.device, "layer_norm.bwd")
    return _norm_backward(dy, x, weight, mean, rstd, None, 0.0, True, weight_grad, bias_grad,
                          **launch)  # fmt: skip


# --------------------------------------------------------------------------- PyTorch reference


def _compute(t: torch.Tensor) -> torch.Tensor:
    """fp32 for the supported dtypes; float64 stays float64 so gradcheck can test the wiring."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _reference_forward(x, weight, bias, residual, eps, offset, center, y, h, mean, rstd):
    if residual is not None:
        h.copy_(x + residual)
        x = h
    xf = _compute(x)
    if center:
        mean.copy_(xf.mean(dim=-1))
        xf = xf - mean[:, None]
    rstd.copy_(torch.rsqrt(xf.square().mean(dim=-1) + eps))
    out = xf * rstd[:, None]
    if weight is not None:
        out = out * (offset + _compute(weight))
    if bias is not None:
        out = out + _compute(bias)
    y.copy_(out)
    return y, h, mean, rstd


def _reference_backward(dy, x, weight, mean, rstd, dh, offset, center, dx, dw, db):
    xf, dyf = _compute(x), _compute(dy)
    xhat = ((xf - mean[:, None]) if center else xf) * rstd[:, None]
    wdy = dyf * (offset + _compute(weight)) if weight is not None else dyf
    grad = wdy - xhat * (xhat * wdy).mean(dim=-1, keepdim=True)
    if center:
        grad = grad - wdy.mean(dim=-1, keepdim=True)
    grad = grad * rstd[:, None]
    if dh is not None:
        grad = grad + _compute(dh)
    dx.copy_(grad)
    if dw.numel():
        dw.copy_((dyf * xhat).sum(dim=0))
    if db.numel():
        db.copy_(dyf.sum(dim=0))
    return dx, dw, db


# --------------------------------------------------------------------------- custom ops


@dispatched_op("warpforge::rms_norm_fwd", mutates_args=())
def _rms_norm_fwd(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float,
    offset: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, h, _, rstd = _forward(x, weight, None, residual, eps, offset, center=False)
    return y, h, rstd


@_rms_norm_fwd.register_fake
def _(x, weight, residual, eps, offset):
    M, N = x.shape
    h_shape = (M, N) if residual is not None else (0,)
    return (
        x.new_empty((M, N)),
        x.new_empty(h_shape),
        x.new_empty((M,), dtype=torch.promote_types(x.dtype, torch.float32)),
    )


@dispatched_op("warpforge::rms_norm_bwd", mutates_args=())
def _rms_norm_bwd(
    dy: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor | None,
    rstd: torch.Tensor,
    dh: torch.Tensor | None,
    offset: float,
    weight_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return rms_norm_backward(dy, h, weight, rstd, dh, offset, weight_grad)


@_rms_norm_bwd.register_fake
def _(dy, h, weight, rstd, dh, offset, weight_grad):
    M, N = h.shape
    wdtype = weight.dtype if weight is not None else h.dtype
    return h.new_empty((M, N)), h.new_empty((N,) if weight_grad else (0,), dtype=wdtype)


def _rms_norm_setup_context(ctx, inputs, output) -> None:
    x, weight, residual, _eps, offset = inputs
    _y, h, rstd = output
    ctx.has_residual = residual is not None
    ctx.offset = offset
    ctx.save_for_backward(h if residual is not None else x, weight, rstd)
    # rstd takes no gradient (nor h without a residual): materialized, its zeros would be a
    # fill launch every backward, as in LayerNorm's (_layer_norm_setup_context)
    ctx.set_materialize_grads(False)


def _rms_norm_backward(ctx, dy, dh, _drstd):
    saved, weight, rstd = ctx.saved_tensors
    if dy is None:  # only h (or rstd) reached the loss (grads are not materialized)
        dy = torch.zeros_like(saved)
    weight_grad = weight is not None and ctx.needs_input_grad[1]
    dx, dw = _rms_norm_bwd(
        dy, saved, weight, rstd, dh if ctx.has_residual else None, ctx.offset, weight_grad
    )
    return dx, dw if weight_grad else None, dx if ctx.has_residual else None, None, None


_rms_norm_fwd.register_autograd(_rms_norm_backward, setup_context=_rms_norm_setup_context)


@dispatched_op("warpforge::layer_norm_fwd", mutates_args=())
def _layer_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, _, mean, rstd = _forward(x, weight, bias, None, eps, 0.0, center=True)
    return y, mean, rstd


@_layer_norm_fwd.register_fake
def _(x, weight, bias, eps):
    M, N = x.shape
    stats = x.new_empty((M,), dtype=torch.promote_types(x.dtype, torch.float32))
    return x.new_empty((M, N)), stats, stats.clone()


@dispatched_op("warpforge::layer_norm_bwd", mutates_args=())
def _layer_norm_bwd(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight_grad: bool,
    bias_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return layer_norm_backward(dy, x, weight, mean, rstd, weight_grad, bias_grad)


@_layer_norm_bwd.register_fake
def _(dy, x, weight, mean, rstd, weight_grad, bias_grad):
    M, N = x.shape
    wdtype = weight.dtype if weight is not None else x.dtype
    return (
        x.new_empty((M, N)),
        x.new_empty((N,) if weight_grad else (0,), dtype=wdtype),
        x.new_empty((N,) if bias_grad else (0,), dtype=wdtype),
    )


def _layer_norm_setup_context(ctx, inputs, output) -> None:
    x, weight, bias, _eps = inputs
    _y, mean, rstd = output
    ctx.has_bias = bias is not None
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.save_for_backward(x, weight, mean, rstd)
    # mean and rstd take no gradient: materialized, their zero gradients would cost two fill
    # launches every backward (measured ~1 us each plus a launch gap on the H100,
    # benchmarks/results/ln16k3-profile1-2026-11-25-h100.json)
    ctx.set_materialize_grads(False)


def _layer_norm_backward(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    if dy is None:  # only mean or rstd reached the loss (grads are not materialized)
        dy = torch.zeros_like(x)
    weight_grad = weight is not None and ctx.needs_input_grad[1]
    bias_grad = ctx.has_bias and ctx.needs_input_grad[2]
    dx, dw, db = _layer_norm_bwd(dy, x, weight, mean, rstd, weight_grad, bias_grad)
    return dx, dw if weight_grad else None, db.to(ctx.bias_dtype) if bias_grad else None, None


_layer_norm_fwd.register_autograd(_layer_norm_backward, setup_context=_layer_norm_setup_context)


# --------------------------------------------------------------------------- public API


def _flat_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as (rows, last dimension); a 2-D tensor as it is."""
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


def _check_input(x: object) -> torch.Tensor:
    x = check_tensor("x", x, dtypes=FLOAT_DTYPES, min_ndim=1, allow_empty=True)
    if x.shape[-1] == 0:
        raise ValueError(
            f"x: expected a last (normalised) dimension of size >= 1, got {describe(x)}"
        )
    return x


def _check_vector(name: str, v: object, x: torch.Tensor) -> torch.Tensor:
    v = check_tensor(name, v, dtypes=FLOAT_DTYPES, ndim=1)
    check_shape(name, v, (x.shape[-1],), what="the size of the last dimension of x")
    return v


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    residual: torch.Tensor | None = None,
    offset: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Root-mean-square normalisation over the last dimension of ``x``.

    ``y = h * rsqrt(mean(h**2, -1) + eps) * (offset + weight)`` where ``h = x`` or, with
    ``residual``, ``h = x + residual`` (rounded to the input dtype, as eagerly added), and the
    call returns ``(y, h)``: the pre-norm residual stream in one pass over memory. ``offset=1``
    gives Gemma's ``(1 + weight)`` scaling. Statistics are fp32; ``y`` has ``x``'s dtype.
    """
    x = _check_input(x)
    if weight is not None:
        weight = _check_vector("weight", weight, x)
    if residual is not None:
        residual = check_tensor("residual", residual, dtypes=(x.dtype,), allow_empty=True)
        check_shape("residual", residual, tuple(x.shape), what="the shape of x")
    eps = check_positive("eps", eps, finite=True)
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise TypeError(f"offset: expected a number, got {describe(offset)}")
    if offset != 0 and weight is None:
        raise ValueError(f"offset: expected 0.0 when weight is None, got {offset!r}")
    check_same_device(x=x, weight=weight, residual=residual)

    # The backward hands x and residual one gradient tensor, as autograd does for x + residual:
    # no copy. Where both are leaves, autograd's gradient accumulation copies it for the
    # second .grad itself (tested), so the two .grad tensors never share storage.
    y, h, _ = _rms_norm_fwd(
        _flat_rows(x),
        weight,
        _flat_rows(residual) if residual is not None else None,
        eps,
        float(offset),
    )
    if x.dim() != 2:  # back to the caller's shape (2-D skips a no-op view)
        y, h = y.view(x.shape), (h.view(x.shape) if residual is not None else h)
    return y if residual is None else (y, h)


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Layer normalisation over the last dimension: ``(x - mean) * rsqrt(var + eps) * weight +
    bias`` with the biased variance, statistics in fp32, output in ``x``'s dtype."""
    x = _check_input(x)
    if weight is not None:
        weight = _check_vector("weight", weight, x)
    if bias is not None:
        bias = _check_vector("bias", bias, x)
    eps = check_positive("eps", eps, finite=True)
    check_same_device(x=x, weight=weight, bias=bias)
    y, _, _ = _layer_norm_fwd(_flat_rows(x), weight, bias, eps)
    return y if x.dim() == 2 else y.view(x.shape)
