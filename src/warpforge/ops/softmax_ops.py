"""Softmax and log-softmax along any dimension (``warpforge.ops.softmax`` and ``log_softmax``;
the module is not named ``softmax`` so that importing it cannot shadow the function).

The reduced dimension is moved last and leading dimensions flatten into rows (a copy only when
the layout needs one); ``torch.library`` custom ops ``warpforge::softmax_fwd`` and
``warpforge::softmax_bwd`` then run the Triton kernels in ``warpforge.ops._kernels.softmax`` or,
on the reference path, PyTorch in fp32 with the result cast back to the input dtype.
"""

# No ``from __future__ import annotations``: torch.library infers the custom ops' schemas from
# these annotations, and older torch releases do not resolve string annotations.

import functools

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
)
from warpforge.ops._split_rows import (
    SplitRowPlan,
    check_flag_words,
    flag_word_plan,
    split_launch,
    split_row_plan,
)
from warpforge.ops._wide_rows import WideLaunch, row_blocks, wide_launch
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import FLOAT_DTYPES, check_tensor, normalize_dim

__all__ = ["log_softmax", "softmax"]


def fwd_launch_heuristic(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """Forward: whole rows in registers up to 16K columns; beyond, one online pass for the row
    max and sum, then the output pass re-reads x (from L2 when the grid allows)."""
    return row_launch_config(M, N, dtype, device, reread_operands=1)


@functools.lru_cache(maxsize=1024)
def _fwd_launch_config(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """The forward launch: tuned (``softmax.fwd`` in warpforge.tune) when known, else the
    heuristic."""
    from warpforge.ops.tunables import tuned_row_launch

    heuristic = fwd_launch_heuristic(M, N, dtype, device)
    return tuned_row_launch("softmax.fwd", M, N, dtype, device, heuristic, reread_operands=1)


FWD_LAG_LAUNCHES = {
    (4, False): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "reread_lag": 2},
    (4, True): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "reread_lag": 2},
    (2, True): {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": True,
                "reread_lag": 2},
}  # fmt: skip
"""(element size, log) -> the flag-word launch of the split forward for rows of at least
``FWD_LAG_MIN_CHUNKS`` whole chunks (and at most FLAG_WORDS_MAX_CHUNKS): since the forty-third
session the re-reading kernel two rows behind (``softmax_fwd_reread_kernel``, ``reread_lag``;
2-byte log-softmax loading the next row's chunk a step early); other rows keep the
arrival-counter kernel of ``split_launch``. H200, kernel alone
(``session43-h200-2026-12-02/smfwd-reread-call5.json``), 8192 rows, us at 65536 / 131072 /
262144 columns: bf16 log-softmax 591.6 / 1225.8 / 2404.1 against 652.1 / 1268.2 / 2508.0 for
the counter kernel (at 65536 the looped kernel of ``FWD_LONG_LAUNCHES`` takes the row first,
579.9 us in the thirty-first session); float32 softmax 2156.0 / 4298.9 and log-softmax 2127.5 / 4236.4 at 131072
/ 262144 against 2194.6 / 4328.7 and 2149.3 / 4300.0 for the lag kernel (below). bf16 softmax
keeps the counter kernel (re-reading: 1295.5 / 2552.4 against 1262.0 / 2492.5): it computes
each exponential again at the write, where the counter kernel keeps them.

The lag kernel (``softmax_fwd_lag_kernel``, a row ahead, the chunk held in registers) before
it, float32 only: kernel alone on the H200
(``benchmarks/results/session17-h200-2026-11-28/softmax-fwd-split-sweep-call3.txt`` and
``-fp32-call4.txt``), softmax / log-softmax, lagged against the counter kernel: 8192 x 262144
4352 / 4323 us (93% of copy) against 4829 / 4814 (84%); 8192 x 131072 2200 / 2162 against 2249
/ 2265; 16384 x 65536 2173 / 2171 (93%) against 2252 / 2255 (90%). In 2-byte rows every lagged
launch was slower (bf16 65536-262144 columns: 64-75% of copy against 78-81%), and slower still
with the chunks held as int32 pairs (half the registers; ``-packed-call5.txt``, 52-76%; removed
after commit ``fed23e7``)."""

FWD_LAG_MIN_CHUNKS = 8
"""Chunks a row needs before the flag-word forward is the default: measured better at 8, 16 and
32 (float32 65536-262144 columns; bf16 log-softmax 65536-262144); narrower split rows (5-7
chunks) not measured."""


@functools.lru_cache(maxsize=1024)
def _fwd_split_plan(
    M: int, N: int, element_size: int, device: torch.device | str, log: bool = False
) -> SplitRowPlan | None:
    """Rows wider than one program's registers: split over programs (one read, one write; see
    warpforge.ops._split_rows), or None when a row needs more programs than the GPU holds. A
    plan with ``flag_words`` takes the re-reading or lagged kernel (``FWD_LAG_LAUNCHES``;
    ``log``: log-softmax's, which the op picks itself, since ``softmax_forward`` asks for
    softmax's)."""
    if N <= MAX_SINGLE_PASS_N:
        return None
    lag = FWD_LAG_LAUNCHES.get((element_size, log))
    if lag is not None and FWD_LAG_MIN_CHUNKS * lag["block"] <= N:
        plan = flag_word_plan(M, N, device, **lag)
        if plan is not None:
            return plan
    return split_row_plan(M, N, device, **split_launch(element_size))


def bwd_launch_heuristic(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """Backward: two operands per row (dy, y); the chunked kernel re-reads both."""
    return row_launch_config(M, N, dtype, device, reread_operands=2)


@functools.lru_cache(maxsize=1024)
def _bwd_launch_config(
    M: int, N: int, dtype: torch.dtype, device: torch.device | str
) -> RowLaunchConfig:
    """The backward's row launch: tuned (``softmax.bwd`` in warpforge.tune) when known, else
    the heuristic."""
    from warpforge.ops.tunables import tuned_row_launch

    heuristic = bwd_launch_heuristic(M, N, dtype, device)
    return tuned_row_launch("softmax.bwd", M, N, dtype, device, heuristic, reread_operands=2)


BWD_SPLIT_LAUNCHES = {
    2: {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": True},
    4: {"block": 8192, "num_warps": 8, "programs_per_sm": 2, "prefetch": False},
}
"""Element size -> the flag-word split launch of the backward (``softmax_bwd_flags_kernel``)
for rows wider than the whole-row kernel's: a program holds its chunk of y and dy (32 columns a
thread of each, fp32) and, for 2-byte rows, prefetches its next row's. On sm_90 (ptxas of
Triton 3.9, ``benchmarks/split_launch_spills.py``) these spill nothing under their 128-register
cap, where four 8192-column 4-warp programs an SM (64 columns a thread of two operands) spill
536-744 bytes and float32 prefetching spills 88-112. On the H100, kernel alone
(``benchmarks/results/smbwd-sweep-2026-11-25-h100.txt``), 8192 x 262144 softmax / log-softmax:
bf16 4691 / 4700 us (91% of copy) against 7055 / 6367 for the chunked kernel; fp32 8925 / 8800
(96-98%) against 13685 / 12538; at 131072 columns 99-100% of copy (bf16 and fp32) against
65-73%. The 4-warp 8192-column launch ran at 22-38% of copy (its spills reloaded every row);
4096/4 x4 with prefetch ties at 262144 bf16 and is slower elsewhere."""

BWD_SPLIT_WIDE_LAUNCHES_BY_MODEL = {
    "NVIDIA H200": {
        2: (65536, {"block": 16384, "num_warps": 16, "programs_per_sm": 1, "prefetch": True}),
        4: (262144, {"block": 16384, "num_warps": 16, "programs_per_sm": 1, "prefetch": False}),
    },
}
"""GPU model -> element size -> (narrowest row, launch) where a row's backward takes fewer,
wider programs than ``BWD_SPLIT_LAUNCHES``': one 16-warp program an SM holding 16384 columns
(the same 32 columns a thread, 128 registers, no spill), so a row of 262144 columns meets 16
programs rather than 32. H200, kernel alone (``benchmarks/softmax_bwd_split_sweep.py``; ``session40-h200-
2026-12-01/softmax_bwd_split_sweep-call2.txt`` and ``-call3.txt``), 8192 rows, softmax /
log-softmax µs against the 8192-column launch: bf16 262144 columns 3407.8 / 3475.9 (89.0 / 87.3%
of copy) against 3997.7 / 4027.6 (75.9 / 75.3%), 131072 1588.6 / 1617.2 against 1615.6 /
1643.5, 65536 764.5 / 773.5 against 782.4 / 797.2; float32 262144 (without the prefetch, which
costs float32 8-13% here) 6888.8 / 6358.8 against 7084.9 / 6871.6. Slower where it is not
used: bf16 4096 x 32768 199.4 / 201.4 against 194.1 / 195.2, float32 131072 3231.6 / 3168.7
against 3159.4 / 3130.0. Other GPUs (the H100: not measured with it) keep
``BWD_SPLIT_LAUNCHES``."""

BWD_SPLIT_MIN_N = {2: MAX_SINGLE_PASS_N + 1, 4: MAX_SINGLE_PASS_N + 1}
"""Element size -> the narrowest row the backward splits over programs (narrower: the
whole-row kernel). Measured faster at 131072 and 262144 columns; rows of 16385-65536 columns
take it too, not measured there yet."""


@functools.lru_cache(maxsize=1024)
def _bwd_split_plan(
    M: int, N: int, element_size: int, device: torch.device | str
) -> SplitRowPlan | None:
    """The split backward of rows of N columns (``BWD_SPLIT_WIDE_LAUNCHES_BY_MODEL``' launch
    for the GPU's rows at least as wide as it names, where it holds a row's programs at once),
    or None (the
    one-program-per-row kernels): rows narrower than ``BWD_SPLIT_MIN_N``, more chunks than the
    words' poll reads, or more programs a row than the GPU holds at once."""
    launch = BWD_SPLIT_LAUNCHES.get(element_size)
    if launch is None or BWD_SPLIT_MIN_N.get(element_size, 1 << 62) > N:
        return None
    wides = BWD_SPLIT_WIDE_LAUNCHES_BY_MODEL.get(_split_rows.device_capabilities(device).name, {})
    wide_n, wide = wides.get(element_size, (1 << 62, {}))
    if wide_n <= N:
        plan = flag_word_plan(M, N, device, **wide)
        if plan is not None:
            return plan
    return flag_word_plan(M, N, device, **launch)


def split_softmax_backward(
    dy: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, log: bool, plan: SplitRowPlan
) -> None:
    """dx of (M, N) rows (last stride 1) split over ``plan.chunks`` programs each, meeting
    through flag words (``softmax_bwd_flags_kernel``); tests and sweeps pass their own plan."""
    from warpforge.ops._kernels.softmax import softmax_bwd_flags_kernel

    check_flag_words(plan)
    M, N = y.shape
    words = plan.unpublished_words(M, 1, y.device)
    with kernel_device(y):
        for stage in plan.stages():
            softmax_bwd_flags_kernel[(plan.programs,)](
                dy, y, dx, words, dy.stride(0), y.stride(0), dx.stride(0), M, N, LOG=log,
                BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=stage,
                PREFETCH=plan.prefetch, **plan.launch_options(),
            )  # fmt: skip


def softmax_forward(
    x: torch.Tensor,
    log: bool,
    launch: RowLaunchConfig | None = None,
    split: SplitRowPlan | None = None,
) -> torch.Tensor:
    """(log-)softmax of the rows of a (M, N) tensor; ``launch`` (the tuner's trials) or
    ``split`` (tests, benchmarks of the split kernel) overrides the launch."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    if execution_path(x.device) is ExecutionPath.TORCH_REFERENCE:
        xf = x.to(torch.promote_types(x.dtype, torch.float32))  # float64 kept for gradcheck
        return y.copy_(torch.log_softmax(xf, dim=-1) if log else torch.softmax(xf, dim=-1))

    from warpforge.ops._kernels import softmax as kernels

    x = as_rows(x)
    config = launch or _fwd_launch_config(M, N, x.dtype, x.device)
    if split is None and launch is None and not config.single_pass:
        split = _fwd_split_plan(M, N, x.element_size(), x.device)
    if split is not None:
        _split_softmax_forward(x, y, log, split)
        return y
    args = (x, y, x.stride(0), y.stride(0), M, N)
    with kernel_device(x):
        launch_rows(
            config,
            kernels.softmax_fwd_rows_kernel,
            kernels.softmax_fwd_chunked_kernel,
            args,
            LOG=log,
        )
    return y


def _split_softmax_forward(x: torch.Tensor, y: torch.Tensor, log: bool, plan: SplitRowPlan) -> None:
    """The split forward of (M, N) rows: with ``plan.flag_words`` the re-reading kernel
    (``softmax_fwd_reread_kernel``, ``plan.reread_lag`` > 0; ``plan.prefetch`` its PREFETCH) or
    the lagged flag-word kernel (``softmax_fwd_lag_kernel``), else the arrival-counter kernel
    (``softmax_fwd_split_kernel``)."""
    from warpforge.ops._kernels.softmax import (
        softmax_fwd_lag_kernel,
        softmax_fwd_reread_kernel,
        softmax_fwd_split_kernel,
    )

    M, N = x.shape
    if plan.flag_words:
        check_flag_words(plan)
        words = plan.unpublished_words(M, 1, x.device)
        with kernel_device(x):
            for stage in plan.stages():
                if plan.reread_lag:
                    softmax_fwd_reread_kernel[(plan.programs,)](
                        x, y, words, x.stride(0), y.stride(0), M, N, LOG=log,
                        BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=stage,
                        LAG=plan.reread_lag, PREFETCH=plan.prefetch, KEEP="evict_last",
                        DROP="evict_first", **plan.launch_options(),
                    )  # fmt: skip
                    continue
                softmax_fwd_lag_kernel[(plan.programs,)](
                    x, y, words, x.stride(0), y.stride(0), M, N, LOG=log, BLOCK_N=plan.block,
                    CHUNKS_POW2=plan.chunks_pow2, STAGE=stage, **plan.launch_options(),
                )  # fmt: skip
        return
    partials = plan.workspace(M, 2, x.device)
    arrivals = plan.arrivals(M, x.device)
    with kernel_device(x):
        for stage in plan.stages():
            softmax_fwd_split_kernel[(plan.programs,)](
                x, y, partials, arrivals, x.stride(0), y.stride(0), M, N,
                LOG=log, BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=stage,
                PREFETCH=plan.prefetch, RELEASE_ONLY=plan.release_only, **plan.launch_options(),
            )  # fmt: skip


FWD_WIDE_LAUNCHES: dict[int, WideLaunch] = {
    2: WideLaunch(16, chunk=4096, forwards=True, unrolled=True, max_registers=64),
    4: WideLaunch(32),
}
"""Element size -> the one-row-a-program launch of the forward of rows of ``min_n``-32768
columns; others keep the split kernel. 2-byte rows walk their row in 4096-column chunks on 16
warps (``softmax_fwd_looped_kernel``, statistics pass unrolled, output pass in order), 4-byte
rows hold it whole (``softmax_fwd_wide_kernel``). Kernel alone on the H200
(``session29-h200-2026-11-30/softmax-widths-call3.txt``), bf16, 4096 rows, softmax /
log-softmax, us:

    columns   looped          whole-row       split
    20000     100.3 /  92.8   147.1 / 144.6   119.1 / 119.4
    24576     114.5 / 107.7   154.7 / 151.7   132.4 / 133.1
    24577     174.9 / 161.4   203.0 / 201.8   371.3 / 594.7   (no whole 16-byte vectors)
    28672     133.8 / 123.6   162.3 / 160.5   159.8 / 159.6
    32768     152.4 / 142.3   171.9 / 170.1   173.0 / 173.3

(log-softmax at 32768: 91.6% of copy). Since the thirty-first session the 2-byte launch caps
its registers at 64 a thread (``maxnreg``; ptxas left alone gives it fewer, and fewer loads in
flight): H200, bf16, 4096 rows, softmax / log-softmax
(``session31-h200-2026-11-30/register-widths-call4.txt``), us, capped against uncapped:

    columns   capped          uncapped
    20000      95.6 /  89.3   100.5 /  95.8
    24576     112.1 / 108.1   115.9 / 109.4
    24577     172.2 / 159.8   174.8 / 162.6
    28672     130.8 / 120.2   134.7 / 125.3
    32768     143.2 / 132.9   153.8 / 144.4

(at 32768 columns a cap of 48 was no faster, 96 and 128 far slower, ``registers-call2.txt``).
At other row counts and in float16 (``session32-h200-2026-11-30/register-rows-call1.txt``, 24576
columns, capped against uncapped, softmax / log-softmax, us): bf16 1056 rows 36.4 / 34.1
against 36.1 / 34.7, 16384 rows 417.1 / 404.2 against 434.0 / 410.5; fp16 1056 rows 32.5 /
31.1 against 35.8 / 34.4, 16384 rows 378.6 / 378.2 against 425.0 / 406.6 (132 rows, a few
microseconds of work, timed host-bound there and are not read).
float32 4096 x 32768 (``softmax-looped-call2.txt``): the whole-row kernel 262.3 / 263.8 us,
the best looped launch 297.2 / 294.5, the split kernel 295.8 / 296.3. On the H100
(``widefwd-sweep1-2026-11-25-h100.txt``) the whole-row kernel had reached 94% of copy in bf16
at 4096 x 32768; on the H200's faster memory it reached 76%."""

FWD_LONG_MAX_N = 65536
"""Widest row ``FWD_LONG_LAUNCHES`` takes."""
FWD_LONG_LAUNCHES: dict[int, WideLaunch] = {
    2: WideLaunch(16, min_n=32769, chunk=4096, forwards=True, unrolled=True, max_registers=64)
}
"""Element size -> the looped launch (``softmax_fwd_looped_kernel``) of the forward of rows of
32769-65536 columns; others keep the split kernel. H200, bf16 8192 x 65536, softmax /
log-softmax (``softmax-widths-call3.txt``): 625.1 / 600.7 us against the split kernel's 647.9 /
652.3 (4096-column chunks on 16 warps: 700.1 / 687.9). Narrower rows, 8192 of them
(``softmax-long-call4.txt``), the launch against the split kernel: 448.7 / 417.3 against 504.5 /
505.2 at 49152 columns, 533.4 / 502.4 against 589.4 / 589.0 at 57344, and 669.6 / 639.6 against
1160.9 / 1867.1 at 40961 (rows of no whole 16-byte vectors). At 8192 x 131072 the split kernel
stays the faster (1266.5 against 1459.4 us, ``softmax-looped-call2.txt``), and in float32 at
65536 (1085.9 against 1223.8). Since the thirty-first session 2-byte rows take 4096-column
chunks on 16 warps with 64 registers a thread (``maxnreg``): H200, bf16, 8192 rows, softmax /
log-softmax (``session31-h200-2026-11-30/softmax-long-caps-call9.txt``) 414.4 / 398.7 us at
49152 columns, 500.8 / 478.9 at 57344 and 593.4 / 579.9 at 65536, against 446.3 / 417.6,
530.7 / 502.9 and 625.0 / 599.5 for the 8192-column, 32-warp launch before it, and at 40961
columns 586.9 / 550.7 against 669.8 / 638.8 (``softmax-long-caps-call10.txt``; that launch
capped at 64 gained only for log-softmax at 65536, ``register-widths-call4.txt``; uncapped,
4096-column chunks on 16 warps had lost at 65536, above). Capped against uncapped at other
row counts and in float16, 49152 columns (``session32-h200-2026-11-30/register-rows-call1.txt``,
softmax / log-softmax, us): bf16 1056 rows 64.9 / 60.3 against 74.3 / 72.3, 16384 rows 824.4 /
790.4 against 1006.8 / 988.2; fp16 1056 rows 62.5 / 58.8 against 73.9 / 71.4, 16384 rows 803.4
/ 773.5 against 1003.8 / 984.4. Past 65536 columns the cap does not bring the looped kernel
level with the split one (``session32-h200-2026-11-30/longest-caps-call4.txt``, bf16, 8192
rows, softmax / log-softmax, us): at 131072 columns 8192-column chunks on 32 warps capped at
64 take 1304.6 / 1260.2 against the split kernel's 1277.5 / 1278.8 (uncapped 1452.6 / 1426.3),
at 262144 3029.3 / 2937.1 against 2518.0 / 2537.5."""

BWD_WIDE_LAUNCHES: dict[int, WideLaunch] = {2: WideLaunch(16, min_n=24576)}
"""Element size -> the whole-row launch (``softmax_bwd_wide_kernel``: y and dy held, 64 columns
a thread of each at 16 warps) of the softmax backward of rows of ``min_n``-32768 columns
(log-softmax: ``LOG_BWD_WIDE_LAUNCHES``); others keep the split kernel. Kernel alone on the
H100, bf16 4096 x 32768 softmax / log-softmax (``widefwd-sweep1-2026-11-25-h100.txt``): 273.6 /
271.0 us against 275.4 / 275.7 split (Liger softmax 270.6); 32 warps 280.3 / 270.7. At 24576
and 28672 columns it ties or wins (205.7 / 209.0 against 209.5 / 209.5), at 20000 log-softmax
loses (186.1 against 173.6 us; ``widefwd-widths-2026-11-25-h100.txt``). float32 is slower at
every launch (4096 x 32768: 568.7 / 556.9 us at 16 warps against 554.9 / 552.2). On the H200
(``session31-h200-2026-11-30/softmax-bwd-widths-call7.txt``, bf16, 4096 rows) softmax keeps
it: 148.3 / 170.3 / 193.8 us at 24576 / 28672 / 32768 columns against 150.2 / 183.5 / 198.4
for the split kernel (32 warps: 159.9 / 180.4 / 201.8); register caps of 48-128 a thread were
slower or level (``whole-row-caps-call6.txt``). Holding y and dy in bf16 (widened at each use)
or reading them again for dx, as Liger-Kernel's and the norm forwards' ``reload`` kernels do,
gained nothing at 8192-32768 columns (``session32-h200-2026-11-30/softmax-bwd-hold-call3.txt``,
kernel options removed after commit ``77d3440``): softmax at 4096 x 16384 / 24576 / 32768 102.8
/ 147.7 / 193.9 us at best against Liger's 99.0 / 145.9 / 192.4, whose kernel also multiplies
and sums in bf16 (its dx up to 1.2e-4 from the op's, computed in float32). At 4096-16384
columns, below ``min_n``, the best whole-row launch of 8, 16 or 32 warps came within 1.2% of
the tuned row kernels, forward and backward, and the others were slower
(``short-softmax-call2.txt``)."""

LOG_BWD_WIDE_LAUNCHES: dict[int, WideLaunch] = {2: WideLaunch(32, min_n=28672)}
"""Element size -> the whole-row launch of the log-softmax backward of rows that
``BWD_WIDE_LAUNCHES`` lists and of at least ``min_n`` columns; its other rows there take the
split kernel (:func:`log_softmax_wide_backward`). On the H200
(``session31-h200-2026-11-30/softmax-bwd-widths-call7.txt``, bf16, 4096 rows) the 16-warp
launch softmax takes lost to the split kernel at every width (177.0 / 200.3 / 220.8 us at
24576 / 28672 / 32768 columns against 152.1 / 186.5 / 200.8), and 32 warps won from 28672
columns (179.2 / 194.4 us; 164.5 at 24576). Harness, log_softmax.bwd bf16 4096 x 32768
(``smbwd-bf16-call8.json``): 325.7 us, 97% of copy."""


def softmax_fwd_wide_launch(
    N: int, element_size: int, enabled: bool | None = None
) -> WideLaunch | None:
    """The one-row-a-program launch of the forward of rows of N columns, or None:
    ``FWD_WIDE_LAUNCHES`` for rows of at most 32768 columns, ``FWD_LONG_LAUNCHES`` for longer."""
    size = element_size
    return wide_launch(FWD_WIDE_LAUNCHES, size, N, size, enabled) or wide_launch(
        FWD_LONG_LAUNCHES, size, N, size, enabled, FWD_LONG_MAX_N
    )


def wide_softmax_forward(x: torch.Tensor, log: bool, launch: WideLaunch) -> torch.Tensor:
    """(log-)softmax of the rows of a (M, N) tensor from the one-row-a-program kernels on the
    kernels' path: the whole row held (``softmax_fwd_wide_kernel``, N <= 32768) or, with
    ``launch.chunk``, walked in chunks (``softmax_fwd_looped_kernel``, any N); tests and sweeps
    pass their own launch."""
    from warpforge.ops._kernels import wide_rows as kernels

    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block, chunks = row_blocks(N, launch)
    if M == 0 or N == 0:
        return y
    x = as_rows(x)
    with kernel_device(x):
        if launch.chunk:
            kernels.softmax_fwd_looped_kernel[(M,)](
                x, y, x.stride(0), y.stride(0), M, N, LOG=log, BLOCK_N=block,
                EVEN=N % block == 0, FORWARDS=launch.forwards,
                CHUNKS=chunks if launch.unrolled else 0, **launch.launch_options(),
            )  # fmt: skip
        else:
            kernels.softmax_fwd_wide_kernel[(M,)](
                x, y, x.stride(0), y.stride(0), M, N, LOG=log, BLOCK_N=block,
                STREAM=launch.stream, **launch.launch_options(),
            )  # fmt: skip
    return y


def wide_softmax_backward(
    dy: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, log: bool, launch: WideLaunch
) -> torch.Tensor:
    """dx of (M, N) rows (N <= 32768, last stride 1) from ``softmax_bwd_wide_kernel``."""
    from warpforge.ops._kernels import wide_rows as kernels

    M, N = y.shape
    block, _ = row_blocks(N, launch)
    if M == 0 or N == 0:
        return dx
    with kernel_device(y):
        kernels.softmax_bwd_wide_kernel[(M,)](
            dy, y, dx, dy.stride(0), y.stride(0), dx.stride(0), M, N, LOG=log, BLOCK_N=block,
            STREAM=launch.stream, **launch.launch_options(),
        )  # fmt: skip
    return dx


@dispatched_op("warpforge::softmax_fwd", mutates_args=())
def _softmax_fwd(x: torch.Tensor, log: bool) -> torch.Tensor:
    M, N = x.shape
    if M > 0 and execution_path(x.device) is not ExecutionPath.TORCH_REFERENCE:
        wide = softmax_fwd_wide_launch(N, x.element_size())
        if wide is not None:
            return wide_softmax_forward(x, log, wide)
        # log-softmax's own split plan (FWD_LAG_LAUNCHES is keyed by log), chosen here rather
        # than in softmax_forward, whose source keys the tuned row launches
        if log and not _fwd_launch_config(M, N, x.dtype, x.device).single_pass:
            split = _fwd_split_plan(M, N, x.element_size(), x.device, True)
            if split is not None:
                return softmax_forward(x, log, split=split)
    return softmax_forward(x, log)


@_softmax_fwd.register_fake
def _(x, log):
    return x.new_empty(x.shape)


BWD_TILE_LAUNCHES = {(4, 256, False): (4, 4), (4, 256, True): (2, 2), (2, 256, False): (16, 8)}
"""(element size, block, log) -> (rows a program, num_warps) of ``softmax_bwd_tile_kernel``,
the whole-row backward with int32 offsets and no predicates; rows not listed keep the row
kernel (``softmax_bwd_rows_kernel``, int64, predicated), not yet timed against it. H100, 32768
x 256 (``benchmarks/results/parity-sweep-2026-11-25-h100.json``), forward + backward as the
harness times it: fp32 softmax 62.66 us (row kernel 63.04, torch.compile 62.34), fp32
log-softmax 62.24 (62.62, 61.79), bf16 softmax 30.53 (31.63, 31.06). Kernel alone, bf16: 21.73
us against 22.50 (the int64 predicated addressing costs 3.5% there). torch.compile's own
backward (Inductor's persistent reduction) takes 4 rows on one warp, int32, unpredicated; that
launch was not in the timed grid."""


def softmax_backward_tile(
    dy: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, log: bool, rows: int, num_warps: int
) -> torch.Tensor:
    """dx of (M, N) rows that fit one block (last stride 1) from ``softmax_bwd_tile_kernel``:
    ``rows`` whole rows a program, int32 offsets where every operand allows, unpredicated
    accesses where the tiles cover the matrix."""
    from warpforge.ops._kernels.softmax import softmax_bwd_tile_kernel

    M, N = y.shape
    block = next_power_of_2(N)
    if block > MAX_SINGLE_PASS_N:
        raise ValueError(f"y: expected rows of at most {MAX_SINGLE_PASS_N} columns, got {N}")
    tiles = cdiv(M, rows)
    # the furthest element offset a tile forms (its padded rows included)
    reach = (tiles * rows - 1) * max(dy.stride(0), y.stride(0), dx.stride(0), N) + block
    with kernel_device(y):
        softmax_bwd_tile_kernel[(tiles,)](
            dy, y, dx, dy.stride(0), y.stride(0), dx.stride(0), M, N, LOG=log, ROWS=rows,
            BLOCK_N=block, WIDE=reach >= 2**31, EVEN=M % rows == 0 and block == N,
            num_warps=num_warps,
        )  # fmt: skip
    return dx


def softmax_backward(
    dy: torch.Tensor, y: torch.Tensor, log: bool, launch: RowLaunchConfig | None = None
) -> torch.Tensor:
    """dx of the (M, N) rows of (log-)softmax output ``y`` and its gradient ``dy``.
    ``launch`` (the tuner's trials) runs the row or chunked kernel with that launch; without
    it, rows that ``BWD_WIDE_LAUNCHES``, the split plan or ``BWD_TILE_LAUNCHES`` name take
    those kernels and the rest the row kernels on the tuned launch."""
    M, N = y.shape
    dx = torch.empty((M, N), dtype=y.dtype, device=y.device)
    if M == 0 or N == 0:
        return dx
    if execution_path(y.device) is ExecutionPath.TORCH_REFERENCE:
        compute = torch.promote_types(y.dtype, torch.float32)
        dyf, yf = dy.to(compute), y.to(compute)
        if log:
            return dx.copy_(dyf - yf.exp() * dyf.sum(dim=-1, keepdim=True))
        return dx.copy_(yf * (dyf - (dyf * yf).sum(dim=-1, keepdim=True)))

    from warpforge.ops._kernels import softmax as kernels

    dy, y = as_rows(dy), as_rows(y)
    config = launch
    if config is None:
        wide = wide_launch(BWD_WIDE_LAUNCHES, y.element_size(), N, y.element_size())
        if wide is not None:
            return wide_softmax_backward(dy, y, dx, log, wide)
        config = _bwd_launch_config(M, N, y.dtype, y.device)
        if not config.single_pass:
            split = _bwd_split_plan(M, N, y.element_size(), y.device)
            if split is not None:
                split_softmax_backward(dy, y, dx, log, split)
                return dx
        tile = BWD_TILE_LAUNCHES.get((y.element_size(), config.block_n, log))
        if config.single_pass and tile is not None:
            return softmax_backward_tile(dy, y, dx, log, *tile)
    args = (dy, y, dx, dy.stride(0), y.stride(0), dx.stride(0), M, N)
    with kernel_device(y):
        launch_rows(
            config,
            kernels.softmax_bwd_rows_kernel,
            kernels.softmax_bwd_chunked_kernel,
            args,
            LOG=log,
        )
    return dx


def log_softmax_wide_backward(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """dx of log-softmax rows that ``BWD_WIDE_LAUNCHES``' launch would take in
    :func:`softmax_backward`, on log-softmax's own route: ``LOG_BWD_WIDE_LAUNCHES``' launch
    where it applies, else the split kernel; None for other rows (or no split plan), which
    :func:`softmax_backward` then takes. Kept out of :func:`softmax_backward`, whose source is
    part of the ``softmax.bwd`` tunable's hash: changing it would retire the shipped tuned
    launches of every row."""
    M, N = y.shape
    size = y.element_size()
    if (
        wide_launch(BWD_WIDE_LAUNCHES, size, N, size) is None  # first: most rows find none
        or M == 0
        or execution_path(y.device) is ExecutionPath.TORCH_REFERENCE
    ):
        return None
    dy, y = as_rows(dy), as_rows(y)
    launch = wide_launch(LOG_BWD_WIDE_LAUNCHES, size, N, size)
    plan = None if launch is not None else _bwd_split_plan(M, N, size, y.device)
    if launch is None and plan is None:
        return None
    dx = torch.empty((M, N), dtype=y.dtype, device=y.device)
    if launch is not None:
        return wide_softmax_backward(dy, y, dx, True, launch)
    split_softmax_backward(dy, y, dx, True, plan)
    return dx


@dispatched_op("warpforge::softmax_bwd", mutates_args=())
def _softmax_bwd(dy: torch.Tensor, y: torch.Tensor, log: bool) -> torch.Tensor:
    dx = log_softmax_wide_backward(dy, y) if log else None
    return softmax_backward(dy, y, log) if dx is None else dx


@_softmax_bwd.register_fake
def _(dy, y, log):
    return y.new_empty(y.shape)


def _softmax_setup_context(ctx, inputs, output) -> None:
    ctx.log = inputs[1]
    ctx.save_for_backward(output)


def _softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _softmax_bwd(dy, y, ctx.log), None


_softmax_fwd.register_autograd(_softmax_backward, setup_context=_softmax_setup_context)


def _row_softmax(x: object, dim: object, log: bool) -> torch.Tensor:
    x = check_tensor("x", x, dtypes=FLOAT_DTYPES, allow_empty=True)
    dim = normalize_dim("dim", dim, max(x.dim(), 1))
    if x.dim() == 0:
        return _row_softmax(x.reshape(1), 0, log).reshape(())
    if x.numel() == 0:
        return x.clone()  # nothing to normalise; clone keeps the autograd graph connected
    moved = x.movedim(dim, -1) if dim != x.dim() - 1 else x
    y = _softmax_fwd(moved.reshape(-1, moved.shape[-1]), log).view(moved.shape)
    return y.movedim(-1, dim) if dim != x.dim() - 1 else y


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim``; fp32 statistics, ``x``'s dtype out."""
    return _row_softmax(x, dim, log=False)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``dim``; fp32 statistics, ``x``'s dtype out."""
    return _row_softmax(x, dim, log=True)
