"""Harness problems of the robotics ops: importing this module registers them.

Each problem's dtype is fixed by the issue's shape list, so there is one problem per dtype:
``resample.fwd.bf16`` and ``resample.fwd.fp32`` share one reference and cost model;
``resample.bwd.fp32`` times the gradient to values (warpforge's backward kernel with atomics). ``align.fwd``
(three streams, the issue's), ``align8.fwd`` (eight) and the ``voxelize.*`` problems mix dtypes per input, chosen in ``make_inputs``.

Baselines run in the same process: a batched ``torch.searchsorted`` + gather + lerp written
without Python loops (and its ``torch.compile``); for alignment one such resample per stream plus
``cat``, compiled whole and compiled per stream; and ``index_put_`` / ``scatter_`` /
``scatter_reduce`` / ``index_add_`` voxelizers (and a ``torch.compile``) for voxelization.
Candidates pass ``assume_sorted=True``: the inputs are sorted by construction and the check's
device sync is not part of the op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from warpforge.harness.problem import Problem, Shape, Tolerance, compile_baseline
from warpforge.harness.registry import register_problem
from warpforge.robotics.align import align
from warpforge.robotics.resample import resample, resample_reference
from warpforge.robotics.voxelize import voxelize, voxelize_reference

# ----------------------------------------------------------------------------------------------
# resample
# ----------------------------------------------------------------------------------------------

_SPAN_S = 10.0  # every trajectory covers ten seconds


def _sorted_times(rows: int, samples: int, generator: torch.Generator) -> torch.Tensor:
    """Jittered sampling clocks: positive random steps, scaled to span ~10 s from ~0."""
    steps = torch.rand(rows, samples, generator=generator, device=generator.device) + 0.5
    times = torch.cumsum(steps, dim=1)
    return (times - times[:, :1]) * (_SPAN_S / samples)


def _queries(rows: int, queries: int, generator: torch.Generator) -> torch.Tensor:
    # a little past both ends so the clamp branches run too
    return (
        torch.rand(rows, queries, generator=generator, device=generator.device) * (_SPAN_S + 0.2)
        - 0.1
    )


def _resample_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[Any, ...]:
    b, s, t, d = shape["B"], shape["S"], shape["T"], shape["D"]
    values = torch.randn(b, s, d, generator=generator, device=generator.device).to(dtype)
    times = _sorted_times(b, s, generator)
    query = _queries(b, t, generator)
    return values.to(device), times.to(device), query.to(device)


def _resample_reference(values, times, query) -> torch.Tensor:
    return resample_reference(values, times, query)[0]


def _resample_candidate(values, times, query) -> torch.Tensor:
    return resample(values, times, query, assume_sorted=True)


def searchsorted_lerp(
    values: torch.Tensor, times: torch.Tensor, query: torch.Tensor
) -> torch.Tensor:
    """The baseline: batched searchsorted + gather + lerp with clamping, no Python loops."""
    samples, width = values.shape[1], values.shape[2]
    upper = torch.searchsorted(times, query, right=True)
    i0 = (upper - 1).clamp(0, samples - 1)
    i1 = (i0 + 1).clamp(max=samples - 1)
    t0, t1 = times.gather(1, i0), times.gather(1, i1)
    w = ((query - t0) / (t1 - t0).clamp_min(1e-30)).clamp(0.0, 1.0).unsqueeze(-1)
    v0 = values.gather(1, i0.unsqueeze(-1).expand(-1, -1, width)).float()
    v1 = values.gather(1, i1.unsqueeze(-1).expand(-1, -1, width)).float()
    return (v0 + w * (v1 - v0)).to(values.dtype)


def _compiled(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    def factory() -> Callable[..., Any]:
        return compile_baseline(fn)

    return factory


def _resample_bytes(shape: Shape, dtype: torch.dtype) -> float:
    b, s, t, d = shape["B"], shape["S"], shape["T"], shape["D"]
    size = torch.empty((), dtype=dtype).element_size()
    # the samples that can bracket a query (all of them unless T < S / 2) with their times,
    # the queries, the output once
    needed = min(s, 2 * t)
    return float(b * needed * (d * size + 4) + b * t * 4 + b * t * d * size)


def _resample_flops(shape: Shape, dtype: torch.dtype) -> float:
    return float(3 * shape["B"] * shape["T"] * shape["D"])  # sub, mul, add per element


_RESAMPLE_BASELINES = {
    "torch.searchsorted+lerp": lambda: searchsorted_lerp,
    "torch.compile": _compiled(searchsorted_lerp),
}
_RESAMPLE_CPU_SHAPES = [{"B": 3, "S": 7, "T": 11, "D": 5}, {"B": 2, "S": 40, "T": 9, "D": 33}]

RESAMPLE_BF16 = register_problem(
    Problem(
        name="resample.fwd.bf16",
        reference=_resample_reference,
        implementation=_resample_candidate,
        make_inputs=_resample_inputs,
        flops=_resample_flops,
        bytes_moved=_resample_bytes,
        shapes=[
            {"B": 32, "S": 50, "T": 256, "D": 128},
            {"B": 256, "S": 500, "T": 1000, "D": 64},
            {"B": 64, "S": 4096, "T": 4096, "D": 256},
        ],
        cpu_shapes=_RESAMPLE_CPU_SHAPES,
        dtypes=(torch.bfloat16,),
        baselines=_RESAMPLE_BASELINES,
        sweep=[{"B": 256, "S": s, "T": 2 * s, "D": 64} for s in (64, 256, 1024, 4096)],
        description="linear trajectory resampling, clamp, float32 times (B, S -> T, D)",
    )
)

RESAMPLE_FP32 = register_problem(
    Problem(
        name="resample.fwd.fp32",
        reference=_resample_reference,
        implementation=_resample_candidate,
        make_inputs=_resample_inputs,
        flops=_resample_flops,
        bytes_moved=_resample_bytes,
        shapes=[{"B": 1024, "S": 1000, "T": 2000, "D": 32}],
        cpu_shapes=_RESAMPLE_CPU_SHAPES,
        dtypes=(torch.float32,),
        baselines=_RESAMPLE_BASELINES,
        description="linear trajectory resampling, clamp, float32 times (B, S -> T, D)",
    )
)


def _resample_grad_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[Any, ...]:
    values, times, query = _resample_inputs(shape, dtype, device, generator)
    grad_out = torch.randn(
        query.shape[0],
        query.shape[1],
        values.shape[2],
        generator=generator,
        device=generator.device,
    )
    return values, times, query, grad_out.to(dtype).to(device)


def _grad_of(forward: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``(values, times, query, grad_out) -> d<out, grad_out>/d values`` through ``forward``."""

    def run(values, times, query, grad_out) -> torch.Tensor:
        with torch.enable_grad():
            leaf = values.detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(forward(leaf, times, query), leaf, grad_out)
        return grad

    return run


def _resample_grad_bytes(shape: Shape, dtype: torch.dtype) -> float:
    """What the timed function must move: autograd runs the forward first (its bytes as for the
    forward problems), then the backward reads grad_out, times and queries and writes
    grad_values once."""
    b, s, t, d = shape["B"], shape["S"], shape["T"], shape["D"]
    size = torch.empty((), dtype=dtype).element_size()
    backward = b * t * d * size + b * s * d * size + b * s * 4 + b * t * 4
    return _resample_bytes(shape, dtype) + float(backward)


RESAMPLE_BWD_FP32 = register_problem(
    Problem(
        name="resample.bwd.fp32",
        reference=_grad_of(_resample_reference),
        implementation=_grad_of(_resample_candidate),
        make_inputs=_resample_grad_inputs,
        flops=_resample_flops,
        bytes_moved=_resample_grad_bytes,
        shapes=[{"B": 1024, "S": 1000, "T": 2000, "D": 32}],
        cpu_shapes=_RESAMPLE_CPU_SHAPES,
        dtypes=(torch.float32,),
        baselines={
            "torch.searchsorted+lerp": lambda: _grad_of(searchsorted_lerp),
            "torch.compile": _compiled(_grad_of(searchsorted_lerp)),
        },
        # float32 atomics add in varying order: a source row hit by k queries sums k O(1) terms,
        # whose rounding may differ by ~k * k * 6e-8 between runs (k reaches ~20 here)
        tolerance=Tolerance(repeat_atol=1e-4),
        description="gradient of linear resampling to values (B, S -> T, D)",
    )
)

# ----------------------------------------------------------------------------------------------
# align: streams of their own rates, widths and dtypes onto a 50 Hz clock, float32 concatenation
# ----------------------------------------------------------------------------------------------

_ALIGN_RATE_HZ = 50

# (rate in Hz, the shape key of its width, "camera" for bf16 features or "float32")
AlignStreams = tuple[tuple[int, str, str], ...]

_THREE_STREAMS: AlignStreams = (
    (30, "D_camera", "camera"),  # camera features
    (100, "D_joint", "float32"),  # joint states
    (1000, "D_force", "float32"),  # force/torque
)
# a bimanual robot: two wrist cameras and a head camera, both arms' joints, a force/torque
# sensor per wrist, an IMU and the grippers' states
_EIGHT_STREAMS: AlignStreams = (
    (30, "D_camera", "camera"),
    (30, "D_camera", "camera"),
    (15, "D_head", "camera"),
    (100, "D_joint", "float32"),
    (1000, "D_force", "float32"),
    (1000, "D_force", "float32"),
    (200, "D_imu", "float32"),
    (20, "D_gripper", "float32"),
)


def _align_inputs_of(
    streams: AlignStreams,
) -> Callable[[Shape, torch.dtype, torch.device, torch.Generator], tuple[Any, ...]]:
    def make_inputs(
        shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[Any, ...]:
        # bf16 camera features on the GPU; float16 under the CPU interpreter, which mishandles
        # bf16
        camera = torch.bfloat16 if device.type == "cuda" else torch.float16
        b, seconds = shape["B"], shape["seconds"]
        inputs: list[torch.Tensor] = []
        for rate, width_key, kind in streams:
            samples = rate * seconds
            values = torch.randn(
                b, samples, shape[width_key], generator=generator, device=generator.device
            ).to(camera if kind == "camera" else torch.float32)
            times = _sorted_times(b, samples, generator) * (seconds / _SPAN_S)
            inputs += [values.to(device), times.to(device)]
        query = torch.linspace(
            0, seconds, _ALIGN_RATE_HZ * seconds, device=generator.device
        ).expand(b, -1)
        query = (
            query + torch.rand(b, 1, generator=generator, device=generator.device) * 0.01
        )  # per-episode phase
        return (*inputs, query.to(device))

    return make_inputs


def _pairs(args: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(args[k], args[k + 1]) for k in range(0, len(args) - 1, 2)]


def _align_reference(*args: torch.Tensor) -> torch.Tensor:
    query = args[-1]
    outs = [resample_reference(v, t, query)[0].to(torch.promote_types(v.dtype, torch.float32))
            for v, t in _pairs(args)]  # fmt: skip
    return torch.cat(outs, dim=-1)


def _align_candidate(*args: torch.Tensor) -> torch.Tensor:
    return align(_pairs(args), args[-1], assume_sorted=True)


def resamples_cat(*args: torch.Tensor) -> torch.Tensor:
    """The baseline: one batched searchsorted + lerp per stream, then a float32 concatenation."""
    query = args[-1]
    return torch.cat([searchsorted_lerp(v, t, query).float() for v, t in _pairs(args)], dim=-1)


def _compiled_per_stream() -> Callable[..., torch.Tensor]:
    """The baseline ``torch.compile`` per stream: one compiled resample (specialised to each
    stream's shapes and dtypes in turn) per stream, then a float32 ``cat``. Separate from
    compiling :func:`resamples_cat` whole, which Inductor may fuse worse at many streams."""
    compiled = compile_baseline(searchsorted_lerp)

    def run(*args: torch.Tensor) -> torch.Tensor:
        query = args[-1]
        return torch.cat([compiled(v, t, query).float() for v, t in _pairs(args)], dim=-1)

    return run


def _align_bytes_of(streams: AlignStreams) -> Callable[[Shape, torch.dtype], float]:
    def bytes_moved(shape: Shape, dtype: torch.dtype) -> float:
        b, seconds = shape["B"], shape["seconds"]
        queries = _ALIGN_RATE_HZ * seconds
        width = sum(shape[width_key] for _, width_key, _ in streams)
        total = b * queries * 4 + b * queries * width * 4  # queries, float32 output
        for rate, width_key, kind in streams:
            size = 2 if kind == "camera" else 4
            # at most two bracketing samples per query (a fast stream is read sparsely)
            total += b * min(rate * seconds, 2 * queries) * (shape[width_key] * size + 4)
        return float(total)

    return bytes_moved


def _align_flops_of(streams: AlignStreams) -> Callable[[Shape, torch.dtype], float]:
    def flops(shape: Shape, dtype: torch.dtype) -> float:
        width = sum(shape[width_key] for _, width_key, _ in streams)
        return float(3 * shape["B"] * _ALIGN_RATE_HZ * shape["seconds"] * width)

    return flops


def _align_problem(
    name: str, streams: AlignStreams, shape: Shape, cpu_shape: Shape, description: str
) -> Problem:
    count = len(streams)
    return register_problem(
        Problem(
            name=name,
            reference=_align_reference,
            implementation=_align_candidate,
            make_inputs=_align_inputs_of(streams),
            flops=_align_flops_of(streams),
            bytes_moved=_align_bytes_of(streams),
            shapes=[shape],
            cpu_shapes=[cpu_shape],
            dtypes=(torch.float32,),
            baselines={
                f"torch.searchsorted+lerp x{count} + cat": lambda: resamples_cat,
                "torch.compile": _compiled(resamples_cat),
                "torch.compile per stream + cat": _compiled_per_stream,
            },
            description=description,
        )
    )


ALIGN = _align_problem(
    "align.fwd",
    _THREE_STREAMS,
    {"B": 256, "seconds": 10, "D_camera": 512, "D_joint": 32, "D_force": 6},
    {"B": 2, "seconds": 1, "D_camera": 8, "D_joint": 3, "D_force": 2},
    "3 streams (30 Hz x 512 bf16, 100 Hz x 32, 1 kHz x 6) onto 50 Hz, float32 cat",
)
ALIGN_EIGHT = _align_problem(
    "align8.fwd",
    _EIGHT_STREAMS,
    {"B": 256, "seconds": 10, "D_camera": 512, "D_head": 768, "D_joint": 32, "D_force": 6,
     "D_imu": 10, "D_gripper": 2},
    {"B": 2, "seconds": 1, "D_camera": 8, "D_head": 4, "D_joint": 3, "D_force": 2, "D_imu": 3,
     "D_gripper": 1},
    "8 streams (2 x 30 Hz x 512 and 15 Hz x 768 bf16; 100 Hz x 32, 2 x 1 kHz x 6, 200 Hz x 10, "
    "20 Hz x 2 float32) onto 50 Hz, float32 cat",
)  # fmt: skip

# ----------------------------------------------------------------------------------------------
# voxelize: a cube of 256^3 voxels of 0.1 m; points uniform in a slightly larger cube
# ----------------------------------------------------------------------------------------------

_VOXEL = 0.1


def _grid(shape: Shape) -> tuple[list[float], list[float], list[int]]:
    g = shape["G"]
    return [-g * _VOXEL / 2] * 3, [_VOXEL] * 3, [g] * 3


def _voxel_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[Any, ...]:
    """``(points, grid_side)`` or ``(points, features, grid_side)``: the side is an int."""
    half = shape["G"] * _VOXEL / 2 * 1.05  # 5% past each face: some points are dropped
    points = (
        torch.rand(shape["N"], 3, generator=generator, device=generator.device) * 2 - 1
    ) * half
    if "C" not in shape:
        return points.to(device), shape["G"]
    features = torch.randn(shape["N"], shape["C"], generator=generator, device=generator.device).to(
        dtype
    )
    return points.to(device), features.to(device), shape["G"]


def _flat_voxel(points: torch.Tensor, side: int) -> torch.Tensor:
    """Flat voxel index per point, out-of-grid points sent to one spare slot (no sync)."""
    grid_min, size, _ = _grid({"G": side})
    cells = torch.floor((points.double() - grid_min[0]) / size[0])
    inside = ((cells >= 0) & (cells < side)).all(dim=1)
    cells = cells.clamp(0, side - 1).long()
    flat = (cells[:, 0] * side + cells[:, 1]) * side + cells[:, 2]
    return torch.where(inside, flat, torch.full_like(flat, side**3))


def occupancy_index_put(points: torch.Tensor, side: int) -> torch.Tensor:
    occ = torch.zeros(side**3 + 1, dtype=torch.bool, device=points.device)
    true = torch.ones((), dtype=torch.bool, device=points.device)
    occ.index_put_((_flat_voxel(points, side),), true)
    return occ[:-1].view(side, side, side)


def occupancy_scatter(points: torch.Tensor, side: int) -> torch.Tensor:
    occ = torch.zeros(side**3 + 1, dtype=torch.uint8, device=points.device)
    flat = _flat_voxel(points, side)
    occ.scatter_(0, flat, torch.ones_like(flat, dtype=torch.uint8))
    return occ[:-1].view(side, side, side).bool()


def mean_scatter_reduce(points: torch.Tensor, features: torch.Tensor, side: int) -> torch.Tensor:
    channels = features.shape[1]
    out = torch.zeros(side**3 + 1, channels, dtype=torch.float32, device=points.device)
    index = _flat_voxel(points, side).unsqueeze(1).expand(-1, channels)
    out.scatter_reduce_(0, index, features.float(), reduce="mean", include_self=False)
    return out[:-1].view(side, side, side, channels)


def mean_index_add(points: torch.Tensor, features: torch.Tensor, side: int) -> torch.Tensor:
    channels = features.shape[1]
    flat = _flat_voxel(points, side)
    total = torch.zeros(side**3 + 1, channels, dtype=torch.float32, device=points.device)
    count = torch.zeros(side**3 + 1, dtype=torch.float32, device=points.device)
    total.index_add_(0, flat, features.float())
    count.index_add_(0, flat, torch.ones_like(flat, dtype=torch.float32))
    return (total / count.clamp_min(1).unsqueeze(1))[:-1].view(side, side, side, channels)


def _voxel_candidate(reduce: str) -> Callable[..., torch.Tensor]:
    def run(points: torch.Tensor, *rest: Any) -> torch.Tensor:
        *features, side = rest
        grid_min, size, dims = _grid({"G": side})
        return voxelize(points, *features, voxel_size=size, grid_min=grid_min, grid_size=dims,
                        reduce=reduce)  # fmt: skip

    return run


def _voxel_reference(reduce: str) -> Callable[..., torch.Tensor]:
    def run(points: torch.Tensor, *rest: Any) -> torch.Tensor:
        *features, side = rest
        grid_min, size, dims = _grid({"G": side})
        feats = features[0] if features else None
        return voxelize_reference(points, feats, None, grid_min, size, dims, 1, reduce)[0]

    return run


def _voxel_bytes(shape: Shape, dtype: torch.dtype) -> float:
    n, g, c = shape["N"], shape["G"], shape.get("C", 0)
    size = torch.empty((), dtype=dtype).element_size()
    grid_bytes = g**3 * (c * 4 if c else 1)  # float32 [G, G, G, C] or bool [G, G, G]
    return float(n * 12 + n * c * size + grid_bytes)


def _voxel_flops(shape: Shape, dtype: torch.dtype) -> float:
    return float(shape["N"] * (9 + shape.get("C", 0)))


VOXELIZE_OCCUPANCY = register_problem(
    Problem(
        name="voxelize.occupancy",
        reference=_voxel_reference("occupancy"),
        implementation=_voxel_candidate("occupancy"),
        make_inputs=_voxel_inputs,
        flops=_voxel_flops,
        bytes_moved=_voxel_bytes,
        shapes=[{"N": 1_000_000, "G": 256}, {"N": 10_000_000, "G": 256}],
        cpu_shapes=[{"N": 2000, "G": 16}],
        dtypes=(torch.float32,),
        baselines={
            "torch.index_put_": lambda: occupancy_index_put,
            "torch.scatter_": lambda: occupancy_scatter,
            "torch.compile": _compiled(occupancy_index_put),
        },
        float64_reference=False,
        description="occupancy of points in a 256^3 grid of 0.1 m voxels, [X, Y, Z] bool",
    )
)

VOXELIZE_MEAN = register_problem(
    Problem(
        name="voxelize.mean",
        reference=_voxel_reference("mean"),
        implementation=_voxel_candidate("mean"),
        make_inputs=_voxel_inputs,
        flops=_voxel_flops,
        bytes_moved=_voxel_bytes,
        shapes=[{"N": 1_000_000, "G": 256, "C": 4}, {"N": 10_000_000, "G": 256, "C": 4}],
        cpu_shapes=[{"N": 2000, "G": 16, "C": 4}],
        dtypes=(torch.float32,),
        baselines={
            "torch.scatter_reduce": lambda: mean_scatter_reduce,
            "torch.index_add_": lambda: mean_index_add,
            "torch.compile": _compiled(mean_index_add),
        },
        # float32 atomics add in varying order: a source row hit by k queries sums k O(1) terms,
        # whose rounding may differ by ~k * k * 6e-8 between runs (k reaches ~20 here)
        tolerance=Tolerance(repeat_atol=1e-4),
        description="mean of 4 float32 features per voxel, 256^3 grid, [X, Y, Z, C] float32",
    )
)
