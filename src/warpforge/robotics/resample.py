"""Batched trajectory resampling: ``resample(values, times, query_times)``.

Semantics for one row with source times ``t[0..n-1]`` (non-decreasing, duplicates allowed) and a
query ``q``: ``i = searchsorted(t, q, right=True) - 1``. ``q < t[0]`` or ``q > t[n-1]`` is out of
range (``out_of_range`` decides); ``q == t[n-1]`` is in range and returns ``v[n-1]`` exactly.
``linear`` returns ``v[i] + (q - t[i]) / (t[i+1] - t[i]) * (v[i+1] - v[i])`` (a zero-width
interval returns ``v[i]``), ``previous`` returns ``v[i]``, ``nearest`` the closer of ``v[i]`` and
``v[i+1]`` (ties to ``v[i]``), ``slerp`` interpolates unit quaternions (xyzw) on the shortest
path. A NaN query yields NaN and a False mask entry under every policy.

The public function validates, then runs the ``warpforge_robotics::resample`` custom op: the
Triton kernel on CUDA or under the interpreter, :func:`resample_reference` (identical semantics)
otherwise. The backward is its own custom op: for linear, previous and nearest a Triton kernel
with float32 atomics, or under ``torch.use_deterministic_algorithms(True)`` a sort and two
atomic-free kernels (:func:`run_backward_kernel`); the vector-Jacobian product of
:func:`resample_reference` for slerp and on the reference path.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from warpforge.dispatch import eager_call_allowed
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import check_choice, check_same_device, check_tensor, describe

METHODS: tuple[str, ...] = ("linear", "previous", "nearest", "slerp")
OUT_OF_RANGE: tuple[str, ...] = ("clamp", "extrapolate", "nan", "error")
VALUE_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
)
TIME_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float64, torch.int64)
LENGTH_DTYPES: tuple[torch.dtype, ...] = (torch.int32, torch.int64)

NEARLY_PARALLEL = 0.9995
"""|cos(angle)| above which slerp falls back to normalised lerp (the kernel's NEARLY_PARALLEL)."""


# ----------------------------------------------------------------------------------------------
# argument normalisation
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResampleArgs:
    """Validated arguments in batched form: values [B, S, D], times [B, S], query [B, T]."""

    values: torch.Tensor
    times: torch.Tensor
    query: torch.Tensor
    lengths: torch.Tensor | None
    batched: bool


def common_time_dtype(times_name: str, times: torch.Tensor, query: torch.Tensor) -> torch.dtype:
    """The dtype both source and query times are searched in; float32 widens to float64."""
    if times.dtype == query.dtype:
        return times.dtype
    if times.dtype.is_floating_point and query.dtype.is_floating_point:
        return torch.float64
    raise TypeError(
        f"query_times: expected the dtype of {times_name} ({str(times.dtype)[6:]}), or both "
        f"floating point, got {describe(query)}; int64 nanosecond times need int64 queries"
    )


def batch_times(
    name: str, times: torch.Tensor, batch: int, samples: int, *, batched: bool
) -> torch.Tensor:
    """``times`` as [B, S]; a [S] or [1, S] tensor becomes a stride-0 view (no copy)."""
    if times.dim() == 1 and times.shape[0] == samples:
        return times.unsqueeze(0).expand(batch, samples)
    if batched and times.dim() == 2 and times.shape[1] == samples:
        if times.shape[0] == batch:
            return times
        if times.shape[0] == 1:
            return times.expand(batch, samples)
    expected = f"[{batch}, {samples}] or [{samples}]" if batched else f"[{samples}]"
    raise ValueError(
        f"{name}: expected shape {expected} (one time per sample of values), got {describe(times)}"
    )


def _batch_query(query: torch.Tensor, batch: int, *, batched: bool) -> torch.Tensor:
    if query.dim() == 1:
        return query.unsqueeze(0).expand(batch, query.shape[0])
    if batched and query.dim() == 2 and query.shape[0] in (batch, 1):
        return query.expand(batch, query.shape[1])
    expected = f"[{batch}, T] or [T]" if batched else "[T]"
    raise ValueError(f"query_times: expected shape {expected}, got {describe(query)}")


def _normalize(
    values: object, times: object, query_times: object, lengths: object, method: str
) -> ResampleArgs:
    values = check_tensor("values", values, dtypes=VALUE_DTYPES, ndim=(2, 3))
    times = check_tensor("times", times, dtypes=TIME_DTYPES, ndim=(1, 2))
    query = check_tensor("query_times", query_times, dtypes=TIME_DTYPES, ndim=(1, 2))
    if lengths is not None:
        lengths = check_tensor("lengths", lengths, dtypes=LENGTH_DTYPES, ndim=1)
    check_same_device(values=values, times=times, query_times=query, lengths=lengths)
    batched = values.dim() == 3
    if not batched:
        values = values.unsqueeze(0)
    batch, samples, width = values.shape
    if method == "slerp" and width != 4:
        raise ValueError(
            f"values: method='slerp' expects unit quaternions (xyzw) in the last dimension "
            f"(size 4), got {describe(values)}"
        )
    times = batch_times("times", times, batch, samples, batched=batched)
    query = _batch_query(query, batch, batched=batched)
    dtype = common_time_dtype("times", times, query)
    if times.dtype != dtype:
        times = times.to(dtype)
    if query.dtype != dtype:
        query = query.to(dtype)
    if lengths is not None and lengths.shape[0] != batch:
        raise ValueError(
            f"lengths: expected shape [{batch}] (one length per batch row of values), "
            f"got {describe(lengths)}"
        )
    if values.stride(-1) != 1:
        values = values.contiguous()  # 16-byte loads along D need unit stride there
    return ResampleArgs(values, times, query, lengths, batched)


@dataclass(frozen=True)
class _TimeAnomalies:
    """Device-side findings of one times tensor: nothing here has been read back yet."""

    name: str
    rows: torch.Tensor
    lengths: torch.Tensor | None
    decreasing: torch.Tensor | None
    nan: torch.Tensor | None
    bad_rows: torch.Tensor

    @classmethod
    def find(cls, name: str, times: torch.Tensor, lengths: torch.Tensor | None) -> _TimeAnomalies:
        samples = times.shape[1]
        rows = times[:1] if times.stride(0) == 0 and lengths is None else times
        if lengths is not None:
            valid = torch.arange(samples, device=times.device) < lengths.unsqueeze(1)
        else:
            valid = torch.ones((1, samples), dtype=torch.bool, device=times.device)
        decreasing = (rows[:, 1:] < rows[:, :-1]) & valid[:, 1:] if samples > 1 else None
        nan = ~torch.isfinite(rows) & valid if rows.dtype.is_floating_point else None
        bad_rows = torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
        if decreasing is not None:
            bad_rows |= decreasing.any(dim=1)
        if nan is not None:
            bad_rows |= nan.any(dim=1)
        if lengths is not None:
            bad_rows |= (lengths < 1) | (lengths > samples)
        return cls(name, rows, lengths, decreasing, nan, bad_rows)

    def raise_first(self) -> None:
        """Raise for the first bad row (reads back; only on the error path)."""
        if not bool(self.bad_rows.any()):
            return
        samples = self.rows.shape[1]
        row = int(self.bad_rows.nonzero()[0, 0])
        if self.lengths is not None and not 1 <= int(self.lengths[row]) <= samples:
            raise ValueError(
                f"lengths: expected every length in [1, {samples}], "
                f"got {int(self.lengths[row])} in row {row}"
            )
        if self.nan is not None and bool(self.nan[row].any()):
            col = int(self.nan[row].nonzero()[0, 0])
            raise ValueError(
                f"{self.name}: row {row} holds {self.rows[row, col].item()!r} at sample {col}; "
                "times must be finite numbers"
            )
        col = int(self.decreasing[row].nonzero()[0, 0]) + 1
        before, after = self.rows[row, col - 1].item(), self.rows[row, col].item()
        raise ValueError(
            f"{self.name}: expected non-decreasing times in every row, but row {row} decreases "
            f"at sample {col} ({before!r} -> {after!r}); sort it, or pass assume_sorted=True "
            "only when it is sorted"
        )


def check_sorted_times(
    checks: Sequence[tuple[str, torch.Tensor, torch.Tensor | None]],
) -> None:
    """For each ``(name, times [B, S], lengths or None)``: raise ValueError naming the first row
    whose valid times decrease or hold NaN, or whose length is outside ``[1, S]``. A few
    reductions per tensor and one device-to-host sync for all of them together."""
    found = [_TimeAnomalies.find(name, times, lengths) for name, times, lengths in checks]
    flags = torch.stack([f.bad_rows.any() for f in found])
    if not bool(flags.any()):  # the one sync of the common case
        return
    for f in found:
        f.raise_first()


def raise_out_of_range(mask: torch.Tensor, query: torch.Tensor, what: str = "") -> None:
    """For ``out_of_range='error'``: raise naming the first out-of-range row and query time.
    A NaN query is not out of range (its mask entry is False too): it yields NaN under every
    policy, this one included."""
    outside = ~mask
    if query.is_floating_point():
        outside &= ~torch.isnan(query)
    if not bool(outside.any()):  # one device-to-host sync
        return
    row, col = (int(i) for i in outside.nonzero()[0])
    raise ValueError(
        f"query_times: {what}row {row} query {col} (time {query[row, col].item()!r}) lies outside "
        "the source times [t[0], t[n-1]] and out_of_range='error'"
    )


# ----------------------------------------------------------------------------------------------
# the PyTorch reference path (same semantics as the kernel; also the autograd formula)
# ----------------------------------------------------------------------------------------------


def _slerp(va: torch.Tensor, vb: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    dot = (va * vb).sum(-1, keepdim=True)
    vb = torch.where(dot < 0, -vb, vb)
    cos_angle = dot.abs().clamp(max=1.0)
    parallel = cos_angle > NEARLY_PARALLEL
    # a safe angle on the lerp branch keeps acos' infinite slope out of the gradient
    angle = torch.acos(torch.where(parallel, torch.full_like(cos_angle, 0.5), cos_angle))
    inv_sin = 1.0 / torch.sin(angle)
    ca = torch.where(parallel, 1.0 - w, torch.sin((1.0 - w) * angle) * inv_sin)
    cb = torch.where(parallel, w, torch.sin(w * angle) * inv_sin)
    result = ca * va + cb * vb
    return result / result.norm(dim=-1, keepdim=True)


def resample_reference(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None = None,
    method: str = "linear",
    out_of_range: str = "clamp",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched ``searchsorted`` + gather + lerp in PyTorch: ``(out [B, T, D], in-range mask)``.

    ``values`` [B, S, D], ``times`` [B, S] and ``query`` [B, T] (same dtype). Computes in float32
    (float64 for float64 values); weights in float64 for float64/int64 times. Differentiable.
    """
    batch, samples, width = values.shape
    compute = torch.float64 if values.dtype == torch.float64 else torch.float32
    times = times.expand(batch, samples).contiguous()
    query = query.expand(batch, query.shape[-1]).contiguous()
    if lengths is None:
        n = torch.full((batch, 1), samples, dtype=torch.int64, device=values.device)
        searched = times
    else:
        n = lengths.to(torch.int64).clamp(1, samples).unsqueeze(1)
        pad = torch.arange(samples, device=times.device) >= n
        top = torch.finfo(times.dtype).max if times.dtype.is_floating_point else 2**63 - 1
        searched = times.masked_fill(pad, top)  # padding sorts after every valid time
    count = torch.minimum(torch.searchsorted(searched, query.detach(), right=True), n)
    last = n - 1
    t_first = times[:, :1]
    t_last = times.gather(1, last)
    below, above = query < t_first, query > t_last
    is_nan = torch.isnan(query) if query.dtype.is_floating_point else torch.zeros_like(below)
    in_range = ~below & ~above & ~is_nan

    i0 = torch.minimum((count - 1).clamp(min=0), last)
    i1 = torch.minimum(i0 + 1, last)
    if method == "previous":
        i1 = i0
    elif method == "nearest":
        ta0, tb0 = times.gather(1, i0), times.gather(1, i1)
        i0 = i1 = torch.where((query - ta0) <= (tb0 - query), i0, i1)
    zero = torch.zeros_like(i0)
    extrapolate = out_of_range == "extrapolate" and method == "linear"
    if extrapolate:
        ia = torch.where(below, zero, torch.where(above, (last - 1).clamp(min=0), i0))
        ib = torch.where(below, torch.minimum(last, zero + 1), torch.where(above, last, i1))
    else:
        ia = torch.where(below, zero, torch.where(above, last, i0))
        ib = torch.where(below, zero, torch.where(above, last, i1))
    ta, tb = times.gather(1, ia), times.gather(1, ib)
    if extrapolate:
        ia = torch.where(above & (tb == ta), ib, ia)

    if method in ("linear", "slerp"):
        weight_dtype = torch.float32 if times.dtype == torch.float32 else torch.float64
        width_t = (tb - ta).to(weight_dtype)
        positive = width_t > 0
        safe = torch.where(positive, width_t, torch.ones_like(width_t))
        w = torch.where(positive, (query - ta).to(weight_dtype) / safe, torch.zeros_like(safe))
        w = w.to(compute)
    else:
        w = torch.zeros(query.shape, dtype=compute, device=values.device)

    def rows(index: torch.Tensor) -> torch.Tensor:
        return values.gather(1, index.unsqueeze(-1).expand(batch, index.shape[1], width))

    va, vb = rows(ia).to(compute), rows(ib).to(compute)
    w3 = w.unsqueeze(-1)
    if method == "slerp":
        result = _slerp(va, vb, w3)
    else:
        result = torch.where(w3 == 0, va, va + w3 * (vb - va))
    nan = torch.full_like(result, float("nan"))
    if out_of_range == "nan":
        result = torch.where(in_range.unsqueeze(-1), result, nan)
    result = torch.where(is_nan.unsqueeze(-1), nan, result)
    return result.to(values.dtype), in_range


# ----------------------------------------------------------------------------------------------
# the Triton launch (shared with align)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamLaunch:
    """One stream of a launch: values [B, S, D], times [B, S] and where its output goes."""

    values: torch.Tensor
    times: torch.Tensor
    out: torch.Tensor
    """[B, T, >= out_col + D] with unit stride along the last dimension."""
    out_col: int
    method: str
    mask: torch.Tensor | None
    """[B, T] uint8, written when the launch writes masks."""


GUIDED_PROBES = 4
"""Times each round of the guided search reads around its guess (0 selects the binary search)."""


def _check_launch_fields(config: LaunchConfig | StagedConfig, tile_names: tuple[str, ...]) -> None:
    """The checks :class:`LaunchConfig` and :class:`StagedConfig` share: the named tile sizes
    (and num_warps among them) powers of two, at most 16 warps, ``probes`` 0 or 2 to 8."""
    for name in tile_names:
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1 or value & (value - 1):
            raise ValueError(f"{name}: expected a power of two >= 1, got {value!r}")
    num_warps = config.num_warps
    if num_warps > 16:
        raise ValueError(f"num_warps: expected at most 16, got {num_warps}")
    probes = config.probes
    if not isinstance(probes, int) or not (probes == 0 or 2 <= probes <= 8):
        raise ValueError(
            f"probes: expected 0 (binary search) or 2 to 8 (guided search), got {probes!r}"
        )


@dataclass(frozen=True)
class LaunchConfig:
    """Tuning knobs of one stream's launch of the resample kernels.

    ``block_t`` queries by ``block_d`` value columns per program, ``num_warps`` per program, and
    the interval search: ``probes == 0`` is a fixed-step binary search (``bit_length(S)`` dependent
    loads per query), ``probes >= 2`` the guided search that interpolates a guess and reads that
    many consecutive times around it per round (one round on a uniform clock). Every choice gives
    the same results; only the speed differs.

    ``prefetch`` (single-stream launches on the GPU, when a row's queries can touch most of it,
    2 T >= S, and its values and times are packed): each program first asks L2 for its share of
    its row (``prefetch.global.L2``), so the search rounds and value gathers after the queries'
    load find the row in L2. Off by default except for float32 rows of at most 32 columns in a
    single-stream forward (:func:`single_stream_config`): on the H100 it gained 6% at (1024,
    1000 -> 2000, 32) fp32 and nothing or a little less on the other issue shapes (benchmarks/
    results/robotics-robo-sweep-prefetch-2026-11-24-h100.json), 3% at that shape on the H200.
    """

    block_t: int
    block_d: int
    num_warps: int
    probes: int = GUIDED_PROBES
    prefetch: bool = False

    def __post_init__(self) -> None:
        _check_launch_fields(self, ("block_t", "block_d", "num_warps"))

    def check_method(self, method: str) -> None:
        """Slerp normalises a whole quaternion per program: its column block must be 4."""
        if method == "slerp" and self.block_d != 4:
            raise ValueError(
                f"config: method='slerp' needs block_d == 4 (one quaternion), got {self.block_d}"
            )


@functools.lru_cache(maxsize=1024)
def default_config(queries: int, width: int, element_size: int, method: str) -> LaunchConfig:
    """The launch configuration of one stream when the caller gives none.

    A column block spans the whole row up to 256 elements (16-byte vectors for every dtype); the
    query block fills a tile of about 2048 elements (1024 for rows of at most 32 columns), 32
    elements a thread, but no more queries than exist. Smaller programs than the earlier 4096 /
    2048-element tiles won on both GPUs at the issue's large shapes (robotics_sweep, the same
    search each time): (1024, 1000 -> 2000, 32) fp32 with 32 x 32 tiles on 1 warp against 64 x
    32 on 2, H200 123.0 against 130.0 µs (session21-h200-2026-11-29/robotics-sweep-call2.json),
    H100 143.1 against 145.2 µs with the row prefetch in both (robotics-robo-sweep-prefetch-
    2026-11-24-h100.json); (64, 4096 -> 4096, 256) bf16 with 8 x 256 on 2 warps against 16 x
    256 on 4, H200 79.2 against 81.2 µs, H100 96.6 against 100.9 µs with the prefetch.
    """
    if method == "slerp":
        block_d = 4
    else:
        block_d = min(triton_next_power_of_2(width), 256 if element_size <= 2 else 128)
    tile = 1024 if block_d <= 32 else 2048
    block_t = max(1, min(tile // block_d, 256, triton_next_power_of_2(queries)))
    return LaunchConfig(block_t, block_d, _num_warps(block_t * block_d))


@functools.lru_cache(maxsize=1024)
def single_stream_config(queries: int, width: int, element_size: int, method: str) -> LaunchConfig:
    """:func:`default_config` for a one-stream forward launch, with two exceptions.

    16-bit rows of 256 columns or more (8 x 256 tiles, 64 elements a thread) run on 1 warp with
    the two-probe guided search. At (64, 4096 -> 4096, 256) bf16 on the H200 that took 75.0 µs
    against 78.7 µs for 2 warps with the same search and 80.4 µs for the default
    (session23-h200-2026-11-29/robotics-sweep-call2.json; the two-probe search led the
    four-probe one in every sweep of that shape, session21 calls 2 and 7 too).

    float32 rows of at most 32 columns prefetch their row into L2 (``LaunchConfig.prefetch``;
    it applies only where the launcher finds the rows packed and 2 T >= S). At (1024, 1000 ->
    2000, 32) fp32 the default's 32 x 32 tile on 1 warp took 119.5 against 123.7 µs with it and
    120.0 against 123.0 µs in another sweep on the H200 (session21-h200-2026-11-29/
    robotics-sweep-call7.json and robotics-sweep-call2.json), and 6% less on the H100
    (robotics-robo-sweep-prefetch-2026-11-24-h100.json); none of the issue's other shapes gained.
    Through the harness on the H200: 124.4 -> 119.8 µs (session23 robotics-fwd-call6.json ->
    session24 robotics-fwd-call2.json).

    Multi-stream launches keep :func:`default_config`: the align case ran its camera stream's
    8 x 256 tile on 1 warp at 172.1 against 163.0 µs (session21-h200-2026-11-29/
    robotics-sweep-call7.json), and the backward's tiles were not measured so."""
    config = default_config(queries, width, element_size, method)
    if element_size <= 2 and config.block_d == 256 and config.block_t == 8:
        return replace(config, num_warps=1, probes=2)
    if element_size == 4 and width <= 32:
        return replace(config, prefetch=True)
    return config


def triton_next_power_of_2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@functools.cache
def _kernels():
    """The kernel module, imported on the first launch (``import warpforge`` stays Triton-free)."""
    from warpforge.robotics._kernels import resample as kernels

    return kernels


def _num_items(batch: int, queries: int, width: int, block_t: int, block_d: int) -> int:
    """Work items (programs) of one stream: rows x query blocks x column blocks."""
    return batch * -(-queries // block_t) * -(-width // block_d)


@functools.lru_cache(maxsize=1024)
def _single_plan(
    batch: int,
    queries: int,
    samples: int,
    width: int,
    element_size: int,
    method: str,
    out_of_range: str,
    time_dtype: torch.dtype,
    compute_f64: bool,
    has_lengths: bool,
    write_mask: bool,
    config: LaunchConfig | None,
    prefetch_lines: tuple[int, int] = (0, 0),
) -> tuple[tuple[int], int, dict[str, object]]:
    """Grid, search steps and constexprs of one single-stream launch, cached: the small shapes
    are bound by host work per call."""
    if config is None:
        config = single_stream_config(queries, width, element_size, method)
    config.check_method(method)
    block_t, block_d = config.block_t, config.block_d
    kernels = _kernels()
    kwargs = {
        "METHOD": kernels.METHOD_CODES[method],
        "POLICY": kernels.POLICY_CODES[out_of_range],
        "TIME_KIND": kernels.TIME_CODES[str(time_dtype).removeprefix("torch.")],
        "COMPUTE_F64": compute_f64,
        "HAS_LENGTHS": has_lengths,
        "WRITE_MASK": write_mask,
        "PROBES": config.probes,
        "BLOCK_T": block_t,
        "BLOCK_D": block_d,
        "num_warps": config.num_warps,
    }
    prefetch = config.prefetch and 2 * queries >= samples
    kwargs["PREFETCH_V"], kwargs["PREFETCH_T"] = prefetch_lines if prefetch else (0, 0)
    grid = (_num_items(batch, queries, width, block_t, block_d),)
    return grid, samples.bit_length(), kwargs


def _num_warps(tile: int) -> int:
    """32 elements a thread: 1 warp up to 1024 elements, 2 up to 2048, 4 above."""
    return 1 if tile <= 1024 else 2 if tile <= 2048 else 4


STAGED_METHODS = ("linear", "previous", "nearest")
_WORD_DTYPES = {32: torch.int32, 64: torch.int64}
STAGED_MAX_TILE_BYTES = 64 * 1024
"""Largest slice of values one staged program holds (registers, and shared memory per gather)."""


@dataclass(frozen=True)
class StagedConfig:
    """Launch knobs of the staged forward (:func:`launch_staged`).

    Each program stages a row's times and ``block_w`` words (``word_bits`` wide, packing two to
    four 16-bit values or one or two float32) of each of its samples on chip, then serves
    ``block_q`` queries from them: the search reads the staged times and each query's two value
    rows come from shared memory, so the row's values are read once per program, coalesced,
    instead of twice per query. ``probes`` as in :class:`LaunchConfig`; ``staged_search``: the
    search reads the row's times staged in shared memory too (every global read of the program
    issued at once), else it probes them in global memory as the gather kernel does."""

    block_q: int
    block_w: int
    num_warps: int
    word_bits: int = 64
    probes: int = GUIDED_PROBES
    staged_search: bool = True

    def __post_init__(self) -> None:
        _check_launch_fields(self, ("block_q", "block_w", "num_warps"))
        if self.word_bits not in _WORD_DTYPES:
            raise ValueError(f"word_bits: expected 32 or 64, got {self.word_bits!r}")


STAGED_DEFAULT_MAX_SAMPLES = 64
"""Rows of at most this many samples run the staged forward by default (16-bit values)."""


def default_staged_config(
    batch: int, queries: int, samples: int, width: int, dtype: torch.dtype, method: str
) -> StagedConfig | None:
    """The staged forward's configuration where it is the default, else None (the gather
    kernel of :func:`default_config` runs).

    Short rows of 16-bit values: a program reads its queries, the row's times and a 64-byte
    column slice of its values in one round trip to memory, then searches and gathers on chip,
    where the gather kernel waits on a chain of dependent loads. Measured on the H100 at
    (32, 50 -> 256, 128) bf16 (benchmarks/results/robotics-robo3-*-2026-11-25-h100.json):
    5.57 us against 5.92 us and 5.73 us against 6.21 us for the gather kernel, interleaved in
    two sweeps; 5.8 us in the harness. Longer rows keep the gather kernel: staged, they were
    slower (at best 31.8 us against 26.1 us at (256, 500 -> 1000, 64) bf16, 248 us against
    154 us at (1024, 1000 -> 2000, 32) fp32)."""
    del batch, queries, width
    if (
        samples > STAGED_DEFAULT_MAX_SAMPLES
        or dtype not in (torch.bfloat16, torch.float16)
        or method not in STAGED_METHODS
    ):
        return None
    return StagedConfig(block_q=64, block_w=8, num_warps=4, word_bits=64, probes=0)


def _as_words(tensor: torch.Tensor, word_dtype: torch.dtype) -> torch.Tensor | None:
    """``tensor`` [B, X, D] (unit stride along D) viewed as packed words, or None when its
    width, strides or offset do not split into whole words."""
    try:
        return tensor.view(word_dtype)
    except RuntimeError:
        return None


@functools.lru_cache(maxsize=1024)
def _staged_plan(
    batch: int,
    queries: int,
    samples: int,
    words: int,
    method: str,
    out_of_range: str,
    time_dtype: torch.dtype,
    value_dtype: torch.dtype,
    has_lengths: bool,
    write_mask: bool,
    config: StagedConfig,
) -> tuple[tuple[int], int, dict[str, object]] | None:
    """Grid, search steps and constexprs of one staged launch, or None where the staged slice
    would exceed :data:`STAGED_MAX_TILE_BYTES`."""
    kernels = _kernels()
    s_pad = triton_next_power_of_2(samples)
    block_w = min(config.block_w, triton_next_power_of_2(words))
    block_q = min(config.block_q, triton_next_power_of_2(queries))
    if s_pad * block_w * config.word_bits // 8 > STAGED_MAX_TILE_BYTES:
        return None
    elem_bits = 8 * torch.empty((), dtype=value_dtype).element_size()
    kwargs = {
        "METHOD": kernels.METHOD_CODES[method],
        "POLICY": kernels.POLICY_CODES[out_of_range],
        "TIME_KIND": kernels.TIME_CODES[str(time_dtype).removeprefix("torch.")],
        "HAS_LENGTHS": has_lengths,
        "WRITE_MASK": write_mask,
        "PROBES": config.probes,
        "STAGED_SEARCH": config.staged_search,
        "ELEM_KIND": kernels.ELEM_CODES[str(value_dtype).removeprefix("torch.")],
        "WORD_BITS": config.word_bits,
        "ELEMS": config.word_bits // elem_bits,
        "S_PAD": s_pad,
        "BLOCK_Q": block_q,
        "BLOCK_W": block_w,
        "num_warps": config.num_warps,
    }
    grid = (batch * -(-queries // block_q) * -(-words // block_w),)
    return grid, samples.bit_length(), kwargs


def launch_staged(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    out: torch.Tensor,
    mask: torch.Tensor | None,
    method: str,
    out_of_range: str,
    config: StagedConfig,
) -> bool:
    """:func:`launch_single` through the staged kernel; False (nothing launched) where it does
    not apply: slerp, float64 values, an output dtype other than the values', rows that do not
    split into whole words, or a slice of values too large to stage."""
    if (
        method not in STAGED_METHODS
        or values.dtype not in (torch.bfloat16, torch.float16, torch.float32)
        or out.dtype != values.dtype
        or values.element_size() * 8 > config.word_bits
    ):
        return False
    word_dtype = _WORD_DTYPES[config.word_bits]
    v_words = _as_words(values, word_dtype)
    o_words = _as_words(out, word_dtype)
    if v_words is None or o_words is None:
        return False
    batch, samples, words = v_words.shape
    queries = query.shape[1]
    plan = _staged_plan(
        batch, queries, samples, words, method, out_of_range, query.dtype, values.dtype,
        lengths is not None, mask is not None, config,
    )  # fmt: skip
    if plan is None:
        return False
    grid, steps, kwargs = plan
    _kernels().resample_staged_kernel[grid](
        query, query.stride(0), query.stride(1), queries,
        lengths if lengths is not None else query,
        v_words, v_words.stride(0), v_words.stride(1), words,
        times, times.stride(0), times.stride(1), samples,
        o_words, o_words.stride(0), o_words.stride(1),
        mask if mask is not None else query, steps,
        **kwargs,
    )  # fmt: skip
    return True


def launch_single(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    out: torch.Tensor,
    mask: torch.Tensor | None,
    method: str,
    out_of_range: str,
    config: LaunchConfig | None = None,
) -> None:
    """Resample one stream: values [B, S, D], times [B, S], query [B, T] into out [B, T, D].

    ``config`` overrides :func:`single_stream_config` (benchmarks/robotics_sweep.py compares
    choices)."""
    batch, samples, width = values.shape
    queries = query.shape[1]
    if config is None:
        staged = default_staged_config(batch, queries, samples, width, values.dtype, method)
        if staged is not None and launch_staged(
            values, times, query, lengths, out, mask, method, out_of_range, staged
        ):
            return
        config = single_stream_config(queries, width, values.element_size(), method)
    # a prefetch asks for whole rows: only rows packed in memory, and only on the GPU (the
    # interpreter runs no inline PTX); elements per 128-byte line of values and of times
    # (checked only when asked for: most launches keep their host work per call)
    prefetch_lines = (0, 0)
    if config.prefetch and values.is_cuda and values.stride(1) == width and times.stride(1) == 1:
        prefetch_lines = (128 // values.element_size(), 128 // times.element_size())
    grid, steps, kwargs = _single_plan(
        batch, queries, samples, width, values.element_size(), method, out_of_range,
        query.dtype, values.dtype == torch.float64, lengths is not None, mask is not None, config,
        prefetch_lines,
    )  # fmt: skip
    _kernels().resample_kernel[grid](
        query, query.stride(0), query.stride(1), queries, batch,
        lengths if lengths is not None else query,
        values, values.stride(0), values.stride(1),
        times, times.stride(0), times.stride(1), samples,
        out, out.stride(0), out.stride(1), width,
        mask if mask is not None else query, steps,
        **kwargs,
    )  # fmt: skip


def launch_streams(
    streams: list[StreamLaunch],
    query: torch.Tensor,
    out_of_range: str,
    configs: Sequence[LaunchConfig] | None = None,
    *,
    share_kinds: bool | None = None,
    group_rows: int | None = None,
) -> None:
    """Resample every stream of ``streams`` onto ``query`` [B, T] in one kernel launch.

    ``configs`` (one per stream) override :func:`default_config`; the launch runs the largest
    ``num_warps`` among them and the first one's search (``probes``). ``share_kinds``: whether
    streams of one kind share a tile of the kernel; by default only in launches of more than
    :data:`OWN_TILE_MAX_STREAMS` streams (benchmarks/align_stream_count.py compares both).
    ``group_rows``: batch rows per group of the grid, which runs group after group and, within a
    group, stream after stream; by default 1 in launches of up to
    :data:`ROW_AFTER_ROW_MAX_STREAMS` streams, every row above; raised where needed so the
    groups fit the grid's second axis (:data:`MAX_GROUPS`; the order changes, the values do
    not)."""
    if not streams:
        raise ValueError("streams: expected at least one stream to launch, got none")
    kernels = _kernels()
    batch, queries = query.shape
    if configs is not None and len(configs) != len(streams):
        raise ValueError(
            f"configs: expected one LaunchConfig per stream ({len(streams)}), got {len(configs)}"
        )
    if len(streams) == 1:
        s = streams[0]
        out = s.out[:, :, s.out_col :]  # a view: the single-stream kernel has no column offset
        config = (
            default_config(queries, s.values.shape[2], s.values.element_size(), s.method)
            if configs is None
            else configs[0]
        )
        launch_single(s.values, s.times, query, None, out, s.mask, s.method, out_of_range, config)
        return
    if share_kinds is None:
        share_kinds = len(streams) > OWN_TILE_MAX_STREAMS
    if group_rows is None:
        group_rows = 1 if len(streams) <= ROW_AFTER_ROW_MAX_STREAMS else batch
    elif isinstance(group_rows, bool) or not isinstance(group_rows, int) or group_rows < 1:
        raise ValueError(f"group_rows: expected an int >= 1, got {group_rows!r}")
    plan = _streams_plan(
        tuple(_stream_layout(s) for s in streams), batch, queries, query.dtype, out_of_range,
        None if configs is None else tuple(configs), share_kinds,
        max(min(group_rows, batch), -(-batch // MAX_GROUPS)),
    )  # fmt: skip
    # the tensors in the plan's stream order; every other argument comes from the plan
    ordered = [streams[index] for index in plan.order]
    kernels.resample_streams_kernel[plan.grid](
        query, query.stride(0), query.stride(1), queries, batch,
        values=tuple(s.values for s in ordered),
        times=tuple(s.times for s in ordered),
        outs=tuple(s.out for s in ordered),
        masks=tuple(s.mask if s.mask is not None else query for s in ordered),
        **plan.arguments,
    )  # fmt: skip


def _stream_layout(s: StreamLaunch) -> tuple[object, ...]:
    """What a launch plan needs of a stream: everything but its tensors' addresses."""
    v, t, o = s.values, s.times, s.out
    return (v.dtype, *v.shape, v.stride(0), v.stride(1), t.stride(0), t.stride(1), o.dtype,
            o.stride(0), o.stride(1), s.out_col, s.method, s.mask is not None)  # fmt: skip


@dataclass(frozen=True)
class _StreamsPlan:
    order: tuple[int, ...]
    """The streams' indices in launch order (the streams of one kind together)."""
    grid: tuple[int, int]
    """(work items of a group of rows, groups)"""
    arguments: dict[str, object]
    """Every keyword argument of the launch but the tensor tuples."""


@functools.lru_cache(maxsize=256)
def _streams_plan(
    layouts: tuple[tuple[object, ...], ...],
    batch: int,
    queries: int,
    time_dtype: torch.dtype,
    out_of_range: str,
    configs: tuple[LaunchConfig, ...] | None,
    share_kinds: bool,
    group_rows: int,
) -> _StreamsPlan:
    """The launch of :func:`launch_streams` for streams of these layouts (cached: a training
    loop aligns streams of the same layouts every step, and planning cost more host time than
    Triton's own launch, benchmarks/align_host_profile.py)."""
    kernels = _kernels()
    if configs is None:
        configs = tuple(
            default_config(queries, layout[3], layout[0].itemsize, layout[12]) for layout in layouts
        )
    # streams of one kind (value and output dtype, method, tile) may share a tile of the kernel:
    # the launch lists them together, kind after kind in the order each kind first appears
    kinds: dict[tuple[object, ...], list[int]] = {}
    vectors = []
    for index, (layout, config) in enumerate(zip(layouts, configs, strict=True)):
        v_dtype, _, _, width, _, _, _, _, o_dtype, o_sb, o_st, col, method, _ = layout
        config.check_method(method)
        vectors.append(_output_vector(o_dtype.itemsize, o_sb, o_st, col, width))
        key = (v_dtype, o_dtype, method, config.block_t, config.block_d, vectors[-1])
        kinds.setdefault(key if share_kinds else (*key, index), []).append(index)
    # one tuple per operand, an entry per stream
    columns: dict[str, list[object]] = {name: [] for name in (*_STREAM_INTS, *_STREAM_CONSTANTS)}
    order: list[int] = []
    first_item = 0
    for (_, _, method, block_t, block_d, vec, *_), members in kinds.items():
        for position, index in enumerate(members):
            _, _, samples, width, v_sb, v_ss, t_sb, t_ss, _, o_sb, o_st, col, _, _ = layouts[index]
            if len(members) == 1:
                role = kernels.ALONE
            elif position == 0:
                role = kernels.FIRST_OF_KIND
            else:
                role = kernels.LAST_OF_KIND if position == len(members) - 1 else kernels.INSIDE_KIND
            entry = (
                v_sb, v_ss, t_sb, t_ss, samples, o_sb // vec, o_st // vec, col // vec,
                width // vec, first_item, samples.bit_length(),
                role.value, kernels.METHOD_CODES[method], block_t, block_d, vec,
            )  # fmt: skip
            for name, value in zip((*_STREAM_INTS, *_STREAM_CONSTANTS), entry, strict=True):
                columns[name].append(value)
            order.append(index)
            first_item += _num_items(group_rows, queries, width, block_t, block_d)
    arguments: dict[str, object] = {name: tuple(column) for name, column in columns.items()}
    arguments |= {
        "group_rows": group_rows,
        "POLICY": kernels.POLICY_CODES[out_of_range],
        "TIME_KIND": kernels.TIME_CODES[str(time_dtype).removeprefix("torch.")],
        "COMPUTE_F64": any(layout[0] == torch.float64 for layout in layouts),
        "WRITE_MASK": layouts[0][-1],
        "PROBES": configs[0].probes,
        "num_warps": max(config.num_warps for config in configs),
    }
    return _StreamsPlan(tuple(order), (first_item, -(-batch // group_rows)), arguments)


MAX_GROUPS = 65535
"""Most groups of rows a streams launch runs: CUDA's limit on a grid's second axis, which
counts the groups (its first counts the work items of a group)."""


ROW_AFTER_ROW_MAX_STREAMS = 8
"""Launches of at most this many streams run the streams kernel's grid row after row (every
stream's programs of a batch row together), larger ones stream after stream; in between,
``launch_streams(group_rows=...)``. Measured on the H200 (benchmarks/align_stream_count.py,
session35-h200-2026-11-30/): row after row took 11-13% less time than stream after stream on
align.fwd's three streams and 3-8% less on align8.fwd's eight (B = 256), 3% less on three and
four synthetic streams (B = 64), but 7-12% more on eight synthetic streams and 11-19% more on
sixteen; with the output stored in vectors (call 6) 11% and 7% less on the align problems, 11%
and 10% more on eight and sixteen synthetic streams. Groups of 4 rows beat both orders on
align8.fwd by 1-4% but not on the synthetic streams."""

OWN_TILE_MAX_STREAMS = 16
"""Launches of at most this many streams compile a tile of the streams kernel per stream; larger
ones a tile per kind of stream (value and output dtype, method, tile shape), whose programs
pick their stream at run time. The pick cost 19-49% more time a call on the H200 where kinds
repeat (eight streams of the align8.fwd problem 641.1 against 540.6 µs, sixteen of seven kinds
418.1 against 279.9), while compile time grows with the tiles: 8 and 16 streams compiled in
5.1 s and 16.1 s with a tile each, 16, 32 and 64 in 6.1, 9.6 and 10.7 s with a tile per kind
(benchmarks/results/session34-h200-2026-11-30/align-stream-count-call7.json)."""

_STREAM_INTS = (
    "v_strides_b", "v_strides_s", "t_strides_b", "t_strides_s", "samples", "out_strides_b",
    "out_strides_t", "out_cols", "widths", "first_items", "search_steps",
)  # fmt: skip
"""The per-stream integer tuple arguments of ``resample_streams_kernel`` (its tensor tuples are
``values``, ``times``, ``outs`` and ``masks``), in the order :func:`_streams_plan` lists a
stream's entries; then its per-stream constexpr tuples:"""
_STREAM_CONSTANTS = ("ROLES", "METHODS", "BLOCK_TS", "BLOCK_DS", "OUT_VECS")


def _output_vector(element_size: int, *sizes: int) -> int:
    """The most elements, up to 16 bytes' worth, that divide every one of ``sizes`` (a stream's
    output strides, column and width): the streams kernel stores its tile in vectors of that
    many (a float32 output of 550 columns, say, has rows of 2200 bytes, 8-byte aligned at best)."""
    vec = max(1, 16 // element_size)
    while vec > 1 and any(n % vec for n in sizes):
        vec //= 2
    return vec


# ----------------------------------------------------------------------------------------------
# the custom op
# ----------------------------------------------------------------------------------------------


def _run(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    write_mask: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward on the path the runtime picks; the mask only when asked for."""
    if execution_path(values.device) is ExecutionPath.TORCH_REFERENCE:
        out, mask = resample_reference(values, times, query, lengths, method, out_of_range)
        return out, mask if write_mask else None
    batch, queries = query.shape
    out = values.new_empty(batch, queries, values.shape[2])
    mask = query.new_empty(batch, queries, dtype=torch.uint8) if write_mask else None
    launch_single(values, times, query, lengths, out, mask, method, out_of_range)
    return out, mask.view(torch.bool) if mask is not None else None


@torch.library.custom_op("warpforge_robotics::resample", mutates_args=())
def _resample_op(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    write_mask: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    out, mask = _run(values, times, query, lengths, method, out_of_range, write_mask)
    return out, mask if mask is not None else query.new_empty(0, dtype=torch.bool)


@_resample_op.register_fake
def _(values, times, query, lengths, method, out_of_range, write_mask):
    batch, queries = query.shape
    out = values.new_empty(batch, queries, values.shape[2])
    mask = query.new_empty((batch, queries) if write_mask else (0,), dtype=torch.bool)
    return out, mask


def _setup_context(ctx, inputs, output) -> None:
    values, times, query, lengths, method, out_of_range, _ = inputs
    ctx.save_for_backward(values, times, query, lengths)
    ctx.method, ctx.out_of_range = method, out_of_range


def _reference_vjp(
    grad_out: torch.Tensor,
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    query_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients to values and query as the vector-Jacobian product of the reference path."""
    with torch.enable_grad():
        v = values.detach().requires_grad_(True)
        q = query.detach().requires_grad_(query_grad)
        out, _ = resample_reference(v, times, q, lengths, method, out_of_range)
        wrt = [v, q] if query_grad else [v]
        grads = torch.autograd.grad(out, wrt, grad_out, allow_unused=True)
    grad_query = query.new_empty(0)
    if query_grad:
        grad_query = grads[1] if grads[1] is not None else torch.zeros_like(query)
        grad_query = torch.nan_to_num(grad_query, nan=0.0)  # NaN queries have no slope
    return grads[0], grad_query


def launch_backward(
    grad_out: torch.Tensor,
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    query_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The backward kernels for linear, previous and nearest (:func:`run_backward_kernel`): the
    atomic scatter, or under ``torch.use_deterministic_algorithms(True)`` the deterministic sort
    and gather (slower where queries are unsorted: measured in docs/robotics.md)."""
    return run_backward_kernel(
        grad_out, values, times, query, lengths, method, out_of_range, query_grad,
        deterministic=torch.are_deterministic_algorithms_enabled(),
    )  # fmt: skip


@dataclass(frozen=True)
class GatherTile:
    """Tile of the backward's gather pass: ``block_s`` source samples by ``block_d`` columns per
    program, ``num_warps`` per program."""

    block_s: int
    block_d: int
    num_warps: int

    def __post_init__(self) -> None:
        for name in ("block_s", "block_d", "num_warps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name}: expected a power of two >= 1, got {value!r}")


def default_gather_tile(width: int) -> GatherTile:
    """Whole rows up to 128 columns, about 2048 accumulators per program, 2 warps. Measured on
    the H100 (robotics_sweep, (1024, 1000 -> 2000, 32)): 64 x 32 on 2 warps 439 us, on 4 warps
    509 us; 128 x 32 on 4 warps 449 us, 16 x 32 on 2 warps 456 us."""
    block_d = min(triton_next_power_of_2(width), 128)
    return GatherTile(max(1, min(2048 // block_d, 64)), block_d, 2)


def _query_runs(
    times: torch.Tensor, sorted_query: torch.Tensor, lengths: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first, end)`` int32 [B, S]: sample j's gradient needs only the sorted queries at
    positions ``[first[j], end[j])``.

    A query touches sample j (as ia or ib) only if ``t[j-1] <= q <= t[j+1]``, with no lower
    bound for j <= 1 (extrapolation below t[0] blends samples 0 and 1) and no upper bound for
    j >= n-2 (above t[n-1]: samples n-2 and n-1): every case of the semantics table stays inside
    these bounds, so searching them in the sorted queries gives a run that holds every query of
    the sample (the gather then tests ia == j and ib == j exactly). Padding samples get none."""
    batch, samples = times.shape
    if times.dtype.is_floating_point:
        lowest, highest = float("-inf"), float("inf")
    else:
        lowest, highest = torch.iinfo(times.dtype).min, torch.iinfo(times.dtype).max
    index = torch.arange(samples, device=times.device)
    if lengths is None:
        last = torch.full((batch, 1), samples - 1, device=times.device)
    else:
        last = (lengths.to(torch.int64).clamp(1, samples) - 1).unsqueeze(1)
    edge = min(2, samples)
    lower = torch.cat([times.new_full((batch, edge), lowest), times[:, 1 : samples - 1]], dim=1)
    upper = torch.cat([times[:, 1:], times.new_full((batch, 1), highest)], dim=1)
    upper = torch.where(index >= last - 1, highest, upper)
    sequence = sorted_query.contiguous()
    first = torch.searchsorted(sequence, lower.contiguous(), out_int32=True)
    end = torch.searchsorted(sequence, upper.contiguous(), right=True, out_int32=True)
    return first, torch.where(index > last, first, end)


def run_backward_kernel(
    grad_out: torch.Tensor,
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    query_grad: bool,
    config: LaunchConfig | None = None,
    gather: GatherTile | None = None,
    *,
    deterministic: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`launch_backward` with optional tiles (outside the custom op, whose schema cannot
    carry them); benchmarks/robotics_sweep.py times both paths.

    The atomic path (``deterministic=False``): one kernel per (row, query block, column block)
    finds each query's interval (``config``: tile and search) and adds ``(1 - w) * g`` and
    ``w * g`` into a zeroed float32 (float64) buffer by atomics, so the last bits of a sample
    shared by several queries may vary between runs.

    The deterministic path: sort each row's queries (stable), find every query's two samples
    and weights in sorted order (and its gradient, summed over D in one program; ``config``),
    then let every source sample sum its own contiguous run of queries in ascending order
    (``gather``: the tile of that pass). Same bits on every run."""
    batch, samples, width = values.shape
    queries = query.shape[1]
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()  # e.g. the stride-0 gradient of a sum()
    if config is None:
        config = default_config(queries, width, values.element_size(), method)
    config.check_method(method)
    if not deterministic:
        return _run_atomic_backward(
            grad_out, values, times, query, lengths, method, out_of_range, query_grad, config
        )
    accumulate = torch.float64 if values.dtype == torch.float64 else torch.float32
    kernels = _kernels()
    # one clock shared by every row (a stride-0 view): sort it once
    shared = query.stride(0) == 0 and batch > 1
    sorted_query, order = torch.sort(query[:1] if shared else query, dim=1, stable=True)
    if shared:
        sorted_query, order = sorted_query.expand(batch, -1), order.expand(batch, -1)
    ia = torch.empty((batch, queries), dtype=torch.int32, device=values.device)
    ib = torch.empty_like(ia)
    wa = torch.empty((batch, queries), dtype=accumulate, device=values.device)
    wb = torch.empty_like(wa)
    grad_query = torch.empty(
        query.shape if query_grad else (1,), dtype=accumulate, device=values.device
    )
    time_kind = kernels.TIME_CODES[str(query.dtype).removeprefix("torch.")]
    slope_block_d = min(triton_next_power_of_2(width), 64)
    kernels.resample_brackets_kernel[(batch * -(-queries // config.block_t),)](
        sorted_query, sorted_query.stride(0), sorted_query.stride(1), queries, batch,
        lengths if lengths is not None else query,
        values, values.stride(0), values.stride(1),
        times, times.stride(0), times.stride(1), samples,
        grad_out, grad_out.stride(0), grad_out.stride(1), width,
        order, order.stride(0), order.stride(1), ia, ib, wa, wb, grad_query,
        samples.bit_length(),
        METHOD=kernels.METHOD_CODES[method],
        POLICY=kernels.POLICY_CODES[out_of_range],
        TIME_KIND=time_kind,
        COMPUTE_F64=values.dtype == torch.float64,
        HAS_LENGTHS=lengths is not None,
        QUERY_GRAD=query_grad,
        PROBES=config.probes,
        BLOCK_T=config.block_t,
        BLOCK_D=slope_block_d,
        num_warps=config.num_warps,
    )  # fmt: skip
    first, end = _query_runs(times, sorted_query, lengths)
    if gather is None:
        gather = default_gather_tile(width)
    grad_values = torch.empty(values.shape, dtype=accumulate, device=values.device)
    programs = batch * -(-samples // gather.block_s) * -(-width // gather.block_d)
    kernels.resample_gather_grad_kernel[(programs,)](
        first, end, samples, queries, ia, ib, wa, wb,
        order, order.stride(0), order.stride(1),
        grad_out, grad_out.stride(0), grad_out.stride(1), width,
        grad_values, grad_values.stride(0), grad_values.stride(1),
        COMPUTE_F64=values.dtype == torch.float64,
        BLOCK_S=gather.block_s,
        BLOCK_D=gather.block_d,
        num_warps=gather.num_warps,
    )  # fmt: skip
    grad_query = grad_query.to(query.dtype) if query_grad else query.new_empty(0)
    return grad_values.to(values.dtype), grad_query


def _run_atomic_backward(
    grad_out: torch.Tensor,
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    lengths: torch.Tensor | None,
    method: str,
    out_of_range: str,
    query_grad: bool,
    config: LaunchConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, samples, width = values.shape
    queries = query.shape[1]
    accumulate = torch.float64 if values.dtype == torch.float64 else torch.float32
    grad_values = torch.zeros(values.shape, dtype=accumulate, device=values.device)
    grad_query = torch.zeros(
        query.shape if query_grad else (1,), dtype=accumulate, device=values.device
    )
    block_t, block_d = config.block_t, config.block_d
    kernels = _kernels()
    kernels.resample_backward_kernel[(_num_items(batch, queries, width, block_t, block_d),)](
        query, query.stride(0), query.stride(1), queries, batch,
        lengths if lengths is not None else query,
        values, values.stride(0), values.stride(1),
        times, times.stride(0), times.stride(1), samples,
        grad_out, grad_out.stride(0), grad_out.stride(1), width,
        grad_values, grad_values.stride(0), grad_values.stride(1), grad_query,
        samples.bit_length(),
        METHOD=kernels.METHOD_CODES[method],
        POLICY=kernels.POLICY_CODES[out_of_range],
        TIME_KIND=kernels.TIME_CODES[str(query.dtype).removeprefix("torch.")],
        COMPUTE_F64=values.dtype == torch.float64,
        HAS_LENGTHS=lengths is not None,
        QUERY_GRAD=query_grad,
        PROBES=config.probes,
        BLOCK_T=block_t,
        BLOCK_D=block_d,
        num_warps=config.num_warps,
    )  # fmt: skip
    grad_query = grad_query.to(query.dtype) if query_grad else query.new_empty(0)
    return grad_values.to(values.dtype), grad_query


# the backward as a custom op of its own, so torch.compile traces around the kernel launch;
# autograd does not record below the dispatcher, so the reference vjp stays outside it
_resample_backward_op = torch.library.custom_op(
    "warpforge_robotics::resample_backward", mutates_args=()
)(launch_backward)


@_resample_backward_op.register_fake
def _(grad_out, values, times, query, lengths, method, out_of_range, query_grad):
    return values.new_empty(values.shape), query.new_empty(query.shape if query_grad else (0,))


def _backward(ctx, grad_out, grad_mask):
    values, times, query, lengths = ctx.saved_tensors
    need_values, _, need_query = ctx.needs_input_grad[:3]
    # previous and nearest are piecewise constant in q: their slope is 0 wherever it exists
    slope = bool(need_query) and ctx.method in ("linear", "slerp")
    args = (grad_out, values, times, query, lengths, ctx.method, ctx.out_of_range, slope)
    if ctx.method == "slerp" or execution_path(values.device) is ExecutionPath.TORCH_REFERENCE:
        grad_values, grad_query = _reference_vjp(*args)
    else:
        grad_values, grad_query = _resample_backward_op(*args)
    if need_query and not slope:
        grad_query = torch.zeros_like(query)
    return (
        grad_values if need_values else None,
        None,
        grad_query if need_query else None,
        None,
        None,
        None,
        None,
    )


_resample_op.register_autograd(_backward, setup_context=_setup_context)


def resample(
    values: torch.Tensor,
    times: torch.Tensor,
    query_times: torch.Tensor,
    *,
    method: str = "linear",
    out_of_range: str = "clamp",
    lengths: torch.Tensor | None = None,
    return_mask: bool = False,
    assume_sorted: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Resample ``values`` sampled at ``times`` onto ``query_times``.

    Args:
        values: [B, S, D] or [S, D]; float32, float16, bfloat16 (or float64).
        times: [B, S] or [S] (broadcast / stride-0 views welcome); float32, float64 or int64 ns.
        query_times: [B, T] or [T]; the dtype of ``times`` (floats may mix; they widen).
        method: ``"linear"``, ``"previous"``, ``"nearest"`` or ``"slerp"`` (D == 4, xyzw).
        out_of_range: ``"clamp"``, ``"extrapolate"`` (linear only; others clamp), ``"nan"`` or
            ``"error"`` (ValueError naming the row and query; one device sync).
        lengths: [B] int; only the first ``lengths[b]`` samples of row b are valid.
        return_mask: also return the bool [B, T] mask of in-range queries.
        assume_sorted: skip the check that valid times are non-decreasing and not NaN (and that
            lengths lie in [1, S]); the check costs a few reductions and one device sync.

    Returns:
        [B, T, D] (or [T, D]) in the dtype of ``values``; with ``return_mask``, also the mask.
    """
    check_choice("method", method, METHODS)
    check_choice("out_of_range", out_of_range, OUT_OF_RANGE)
    args = _normalize(values, times, query_times, lengths, method)
    if not assume_sorted:
        check_sorted_times([("times", args.times, args.lengths)])
    write_mask = return_mask or out_of_range == "error"
    call = _run if eager_call_allowed((args.values, args.query)) else _resample_op
    out, mask = call(
        args.values, args.times, args.query, args.lengths, method, out_of_range, write_mask
    )
    if out_of_range == "error":
        raise_out_of_range(mask, args.query)
    if not args.batched:
        out, mask = out[0], mask[0] if write_mask else mask
    return (out, mask) if return_mask else out
