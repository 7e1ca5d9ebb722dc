"""GPU checks of the robotics ops: bf16, CUDA against the CPU paths, torch.compile, big offsets."""

from __future__ import annotations

import re
import sys

import pytest
import robotics_plain_reference as plain
import torch
from test_resample import (
    TIME_KINDS,
    assert_matches,
    clock,
    gradcheck_resample,
    random_quaternions,
)

from launch_spy import LaunchSpy
from warpforge.robotics import align, resample, voxelize
from warpforge.robotics.resample import METHODS, resample_reference
from warpforge.robotics.voxelize import REDUCTIONS, voxelize_reference

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


def _case(method: str, seed: int, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    b, s, t = 5, 37, 300
    if method == "slerp":
        values = random_quaternions(b, s, generator=g)
    else:
        values = torch.randn(b, s, 24, generator=g)
    times = torch.sort(torch.randint(0, 30, (b, s), generator=g).float(), dim=1).values
    query = torch.randint(-16, 260, (b, t), generator=g).float() / 8
    lengths = torch.randint(1, s + 1, (b,), generator=g)
    return values.to(dtype), times, query, lengths


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("policy", ["clamp", "extrapolate", "nan"])
def test_cuda_matches_cpu_reference_path(method: str, policy: str) -> None:
    values, times, query, lengths = _case(method, seed=40)
    expected, expected_mask = resample_reference(values, times, query, lengths, method, policy)
    out, mask = resample(values.to(CUDA), times.to(CUDA), query.to(CUDA), method=method,
                         out_of_range=policy, lengths=lengths.to(CUDA), return_mask=True)  # fmt: skip
    assert torch.equal(mask.cpu(), expected_mask)
    assert torch.equal(out.cpu().isnan(), expected.isnan())
    # linear: FMA vs separate rounding; slerp: polynomial acos vs torch.acos near parallel
    tol = {"linear": 1e-6, "slerp": 1e-5}.get(method, 0.0)
    assert torch.allclose(out.cpu().nan_to_num(0), expected.nan_to_num(0), atol=tol, rtol=tol)


@pytest.mark.parametrize("method", METHODS)
def test_bfloat16_against_plain_reference(method: str) -> None:
    values, times, query, lengths = _case(method, seed=41, dtype=torch.bfloat16)
    out = resample(values.to(CUDA), times.to(CUDA), query.to(CUDA), method=method,
                   lengths=lengths.to(CUDA))  # fmt: skip
    expected, _ = plain.resample(values, times, query, method, "clamp", lengths.tolist())
    assert out.dtype == torch.bfloat16
    assert_matches(out.cpu(), expected, tol=1e-2)


def test_int64_nanoseconds_and_long_rows_on_cuda() -> None:
    g = torch.Generator().manual_seed(42)
    hour = 3600 * 10**9
    samples = 100_000
    times = hour + torch.cumsum(torch.randint(0, 2_000_000, (samples,), generator=g), 0)
    query = times[0] - 10**6 + torch.randint(0, int(times[-1] - times[0]) + 2 * 10**6, (4096,),
                                             generator=g)  # fmt: skip
    values = torch.randn(samples, 3, generator=g)
    out = resample(values.to(CUDA), times.to(CUDA), query.to(CUDA), out_of_range="nan")
    expected, _ = plain.resample(values[None], times[None], query[None], "linear", "nan")
    assert_matches(out.cpu(), expected[0], tol=2e-6)


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_100k_samples_and_100k_queries_on_cuda(method: str) -> None:
    """The issue's largest rows: S = T = 100k on two batch rows, float32 times, queries in
    and around each row."""
    g = torch.Generator().manual_seed(49)
    samples = queries = 100_000
    times = torch.cumsum(torch.rand(2, samples, generator=g) + 1e-3, dim=1)
    span = times[:, -1:] - times[:, :1]
    query = times[:, :1] - 1 + torch.rand(2, queries, generator=g) * (span + 2)
    values = torch.randn(2, samples, 3, generator=g)
    out = resample(values.to(CUDA), times.to(CUDA), query.to(CUDA), method=method)
    expected, _ = plain.resample(values, times, query, method)
    assert_matches(out.cpu(), expected, tol=1e-4)


def test_widths_up_to_1024_and_stride_zero_times() -> None:
    g = torch.Generator().manual_seed(43)
    for width in (1, 5, 64, 1000, 1024):
        values = torch.randn(3, 50, width, generator=g)
        row = torch.sort(torch.rand(50, generator=g), dim=0).values
        query = torch.rand(3, 70, generator=g)
        out = resample(values.to(CUDA), row.to(CUDA).expand(3, 50), query.to(CUDA))
        expected, _ = plain.resample(values, row.expand(3, 50), query)
        assert_matches(out.cpu(), expected)


@pytest.mark.parametrize("method", ["linear", "nearest", "previous"])
def test_float64_seconds_one_hour_in_on_cuda(method: str) -> None:
    # a 1 kHz clock one hour in: float32 times could not tell neighbouring samples apart
    g = torch.Generator().manual_seed(48)
    times = 3600.0 + torch.arange(300, dtype=torch.float64) * 1e-3
    query = 3600.0 + torch.rand(257, generator=g, dtype=torch.float64) * 0.299
    values = torch.randn(300, 2, generator=g)
    out = resample(values.to(CUDA), times.to(CUDA), query.to(CUDA), method=method)
    expected, _ = plain.resample(values[None], times[None], query[None], method)
    assert_matches(out.cpu(), expected[0], tol=2e-6)


@pytest.mark.parametrize("kind", TIME_KINDS)
def test_error_policy_names_row_and_time_on_cuda(kind: str) -> None:
    times = clock([[0, 8], [0, 16]], kind).to(CUDA)  # in eighths: rows end at 1 s and 2 s
    query = clock([[4, 8], [12, 20]], kind).to(CUDA)  # only row 1's 2.5 s lies outside
    values = torch.randn(2, 2, 3, device=CUDA)
    late = query[1, 1].item()
    with pytest.raises(ValueError, match=re.escape(f"row 1 query 1 (time {late!r})")):
        resample(values, times, query, out_of_range="error")
    in_range = torch.minimum(query, times[:, -1:])
    assert torch.equal(resample(values, times, in_range, out_of_range="error"),
                       resample(values, times, in_range, out_of_range="clamp"))  # fmt: skip


def test_unsorted_nan_times_and_bad_lengths_name_the_row_on_cuda() -> None:
    values = torch.randn(3, 4, 2, device=CUDA)
    query = torch.rand(3, 5, device=CUDA)
    times = torch.tensor([[0.0, 1, 2, 3], [0.0, 1, 2, 3], [0.0, 2, 1, 3]], device=CUDA)
    with pytest.raises(ValueError, match="row 2 decreases at sample 2"):
        resample(values, times, query)
    times[2] = torch.tensor([0.0, 1.0, float("nan"), 3.0], device=CUDA)
    with pytest.raises(ValueError, match="row 2 holds nan at sample 2; times must be finite"):
        resample(values, times, query)
    times[2] = torch.tensor([0.0, 1.0, 2.0, 3.0], device=CUDA)
    for bad in (0, 5):
        lengths = torch.tensor([4, bad, 2], device=CUDA)
        with pytest.raises(
            ValueError, match=rf"expected every length in \[1, 4\], got {bad} in row 1"
        ):
            resample(values, times, query, lengths=lengths)


def test_offsets_beyond_int32() -> None:
    # values of 2 x 2^20 x 1100 bf16 elements: 2.3e9 > 2^31, read near the far end
    samples, width = 2**20, 1100
    values = torch.empty(2, samples, width, dtype=torch.bfloat16, device=CUDA)
    values[:, -2:] = torch.tensor([1.0, 3.0], device=CUDA).view(1, 2, 1).to(torch.bfloat16)
    times = torch.arange(samples, dtype=torch.float64, device=CUDA)
    query = torch.full((2, 3), samples - 1.5, dtype=torch.float64, device=CUDA)
    out = resample(values, times, query, assume_sorted=True)
    assert bool((out == 2.0).all())


@pytest.mark.parametrize("method", METHODS)
def test_gradcheck_float64_cuda(method: str) -> None:
    gradcheck_resample(method, CUDA)


def test_torch_compile_fullgraph() -> None:
    values, times, query, _ = _case("linear", seed=44, dtype=torch.bfloat16)
    values, times, query = values.to(CUDA), times.to(CUDA), query.to(CUDA)

    def f(v, t, q):
        return resample(v, t, q, assume_sorted=True) * 2

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(values, times, query), f(values, times, query))

    streams = [(values, times), (values[..., :6].float(), times)]
    g = torch.compile(lambda q: align(streams, q, assume_sorted=True), fullgraph=True)
    assert torch.equal(g(query), align(streams, query, assume_sorted=True))

    points = torch.rand(1000, 3, device=CUDA)
    kwargs = {"voxel_size": 0.1, "grid_min": 0.0, "grid_size": 10, "reduce": "count"}
    h = torch.compile(lambda p: voxelize(p, **kwargs), fullgraph=True)
    assert torch.equal(h(points), voxelize(points, **kwargs))


def test_torch_compile_backward() -> None:
    values, times, query, _ = _case("linear", seed=45)
    values = values.to(CUDA).requires_grad_(True)
    times, query = times.to(CUDA), query.to(CUDA)
    compiled = torch.compile(lambda v: resample(v, times, query, assume_sorted=True).square().sum(),
                             fullgraph=True)  # fmt: skip
    (grad,) = torch.autograd.grad(compiled(values), values)
    (expected,) = torch.autograd.grad(
        resample(values, times, query, assume_sorted=True).square().sum(), values
    )
    assert torch.allclose(grad, expected, atol=1e-5)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_voxelize_cuda_matches_cpu(reduce: str) -> None:
    g = torch.Generator().manual_seed(46)
    points = torch.rand(20000, 3, generator=g) * 2.2 - 0.1
    features = torch.randn(20000, 4, generator=g) - 2.0  # mostly negative: max must cope
    batch_index = torch.randint(0, 2, (20000,), generator=g)
    feats = features if reduce in ("sum", "mean", "max") else None
    grid = ([0.0, 0.0, 0.0], [0.1, 0.2, 0.25], [20, 10, 8])
    out = voxelize(points.to(CUDA), feats.to(CUDA) if feats is not None else None,
                   voxel_size=grid[1], grid_min=grid[0], grid_size=grid[2], reduce=reduce,
                   batch_index=batch_index.to(CUDA), batch_size=2)  # fmt: skip
    expected = voxelize_reference(points, feats, batch_index, *grid, 2, reduce)
    if reduce in ("occupancy", "count", "max"):
        assert torch.equal(out.cpu(), expected)
        again = voxelize(points.to(CUDA), feats.to(CUDA) if feats is not None else None,
                         voxel_size=grid[1], grid_min=grid[0], grid_size=grid[2], reduce=reduce,
                         batch_index=batch_index.to(CUDA), batch_size=2)  # fmt: skip
        assert torch.equal(out, again)
    else:
        assert torch.allclose(out.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_align_bf16_on_cuda() -> None:
    g = torch.Generator().manual_seed(47)
    specs = [(30, 512, torch.bfloat16), (100, 32, torch.float32), (1000, 6, torch.float32)]
    streams = []
    for samples, width, dtype in specs:
        values = torch.randn(4, samples, width, generator=g).to(dtype)
        times = torch.sort(torch.rand(4, samples, generator=g), dim=1).values
        streams.append((values, times))
    query = torch.rand(4, 50, generator=g)
    out = align([(v.to(CUDA), t.to(CUDA)) for v, t in streams], query.to(CUDA))
    expected = torch.cat([plain.resample(v, t, query)[0] for v, t in streams], dim=-1)
    assert_matches(out.cpu(), expected, tol=1e-5)


# (samples over 10 s, width, value dtype, method): every dtype and method, 1 to 3000 samples;
# the last four repeat an earlier stream's dtype, method and width at another rate
SIXTEEN_STREAMS = [
    (30, 512, torch.bfloat16, "linear"), (100, 32, torch.float32, "linear"),
    (3000, 6, torch.float32, "linear"), (2, 5, torch.float64, "previous"),
    (50, 4, torch.float32, "slerp"), (17, 7, torch.float16, "nearest"),
    (200, 10, torch.bfloat16, "previous"), (40, 64, torch.float16, "linear"),
    (1, 3, torch.float32, "linear"), (60, 4, torch.float64, "slerp"),
    (300, 1, torch.float32, "nearest"), (25, 129, torch.bfloat16, "linear"),
    (45, 512, torch.bfloat16, "linear"), (2000, 6, torch.float32, "linear"),
    (900, 5, torch.float32, "linear"), (7, 64, torch.float16, "linear"),
]  # fmt: skip


def _sixteen_streams(generator: torch.Generator) -> tuple[list, torch.Tensor, list[str]]:
    """Streams of int64 nanosecond times one hour in, and 12 Hz queries from 0.5 s before the
    first sample to 0.5 s after the last."""
    hour, rows = 3600 * 10**9, 3
    streams = []
    for samples, width, dtype, method in SIXTEEN_STREAMS:
        if method == "slerp":
            values = random_quaternions(rows, samples, generator=generator)
        else:
            values = torch.randn(rows, samples, width, generator=generator)
        offsets = torch.randint(0, 10 * 10**9, (rows, samples), generator=generator)
        streams.append((values.to(dtype), hour + torch.sort(offsets, dim=1).values))
    query = hour - 5 * 10**8 + torch.arange(132, dtype=torch.int64) * 83_333_333
    return streams, query.expand(rows, -1).contiguous(), [m for *_, m in SIXTEEN_STREAMS]


# float64: slerp's acos approximation is good to 2e-8 (the kernels' _acos_unit_interval)
TOLERANCE = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5, torch.float64: 1e-7}


@pytest.mark.parametrize("own_tiles_up_to", [16, 0], ids=["a tile per stream", "per kind"])
def test_sixteen_streams_in_one_launch_on_cuda(
    own_tiles_up_to: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warpforge.robotics._kernels import resample as kernels

    # the module by its name: the package's `resample` is the function
    monkeypatch.setattr(sys.modules["warpforge.robotics.resample"], "OWN_TILE_MAX_STREAMS",
                        own_tiles_up_to)  # fmt: skip
    spy = LaunchSpy(kernels.resample_streams_kernel)
    monkeypatch.setattr(kernels, "resample_streams_kernel", spy)
    streams, query, methods = _sixteen_streams(torch.Generator().manual_seed(48))
    cuda_streams = [(v.to(CUDA), t.to(CUDA)) for v, t in streams]
    outs = align(cuda_streams, query.to(CUDA), methods=methods, out_of_range="nan", concat=False)
    together = align(cuda_streams, query.to(CUDA), methods=methods, out_of_range="nan")
    assert len(spy.grids) == 2  # one launch a call, for all sixteen streams
    expected = [plain.resample(v, t, query, m, "nan")[0]
                for (v, t), m in zip(streams, methods, strict=True)]  # fmt: skip
    for out, want, (v, _) in zip(outs, expected, streams, strict=True):
        assert out.dtype == v.dtype
        assert_matches(out.cpu(), want, tol=TOLERANCE[v.dtype])
    assert_matches(together.cpu(), torch.cat(expected, dim=-1), tol=1e-5)


def test_more_rows_than_the_grid_axis_holds_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """70000 batch rows, one a group by default (three streams): more groups than CUDA's 65535 on
    the grid's second axis, so the launch merges rows into groups; every row is right."""
    from warpforge.robotics._kernels import resample as kernels

    spy = LaunchSpy(kernels.resample_streams_kernel)
    monkeypatch.setattr(kernels, "resample_streams_kernel", spy)
    g = torch.Generator().manual_seed(49)
    rows = 70_000
    streams = []
    for samples, width in ((3, 4), (5, 2), (2, 3)):
        times = torch.sort(torch.rand(rows, samples, generator=g) * 4, dim=1).values
        streams.append((torch.randn(rows, samples, width, generator=g), times))
    query = torch.rand(rows, 6, generator=g) * 5 - 0.5
    cuda_streams = [(v.to(CUDA), t.to(CUDA)) for v, t in streams]
    out = align(cuda_streams, query.to(CUDA))
    assert len(spy.grids) == 1 and spy.grids[0][1] <= 65535
    # every row against the single-stream kernel, rows at the groups' edges against the plain
    # reference (one query at a time in Python: too slow for all 70000)
    single = torch.cat([resample(v, t, query.to(CUDA)).float() for v, t in cuda_streams], dim=-1)
    assert torch.equal(out, single)
    picked = [0, 1, 65534, 65535, 65536, rows - 1]
    expected = torch.cat(
        [plain.resample(v[picked], t[picked], query[picked])[0] for v, t in streams], dim=-1
    )
    assert_matches(out[picked].cpu(), expected, tol=1e-5)


def test_sixteen_streams_replay_in_a_cuda_graph() -> None:
    streams, query, methods = _sixteen_streams(torch.Generator().manual_seed(49))
    cuda_streams = [(v.to(CUDA), t.to(CUDA)) for v, t in streams]
    static_query = query.to(CUDA)

    def run() -> torch.Tensor:
        return align(cuda_streams, static_query, methods=methods, assume_sorted=True)

    run()  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    static_query.add_(40_000_000)  # new queries, same buffer
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, run())
    assert not bool(captured.isnan().any())


@pytest.mark.parametrize("kind", ["random-walk", "exponential", "int64-jitter"])
def test_every_search_and_tile_gives_identical_bits_on_cuda(kind: str) -> None:
    # the search only chooses the interval, which is exact: binary and guided searches and every
    # tile must agree bit for bit on clocks that help and that defeat the guess
    from warpforge.robotics.resample import LaunchConfig, launch_single

    g = torch.Generator().manual_seed(44)
    rows, samples, queries, width = 6, 5000, 3000, 40
    if kind == "random-walk":
        times = torch.cumsum(torch.rand(rows, samples, generator=g) + 0.5, dim=1)
        query = torch.rand(rows, queries, generator=g) * (float(times.max()) + 4) - 2
    elif kind == "exponential":
        times = torch.exp(torch.arange(samples, dtype=torch.float64) * 0.01).expand(rows, -1)
        query = torch.exp(torch.rand(rows, queries, generator=g, dtype=torch.float64) * 51 - 1)
    else:
        hour = 3600 * 10**9
        grid = torch.arange(samples, dtype=torch.int64) * 1_000_000
        times = hour + grid + torch.randint(0, 900_000, (rows, samples), generator=g)
        query = hour + torch.randint(
            -(10**6), samples * 10**6 + 10**6, (rows, queries), generator=g
        )
    values = torch.randn(rows, samples, width, generator=g).to(torch.bfloat16)
    values, times, query = values.to(CUDA), times.contiguous().to(CUDA), query.to(CUDA)
    outs = []
    for config in [LaunchConfig(64, 64, 4, 0), LaunchConfig(64, 64, 4, 2), LaunchConfig(16, 64, 4, 4),
                   LaunchConfig(256, 32, 8, 4), LaunchConfig(1, 64, 1, 3),
                   LaunchConfig(16, 64, 4, 4, prefetch=True),
                   LaunchConfig(64, 32, 2, 0, prefetch=True)]:  # fmt: skip
        out = torch.full((rows, queries, width), float("nan"), dtype=values.dtype, device=CUDA)
        launch_single(values, times, query, None, out, None, "linear", "extrapolate", config)
        outs.append(out)
    for out in outs[1:]:
        assert torch.equal(out, outs[0])
    expected, _ = resample_reference(values, times, query, None, "linear", "extrapolate")
    assert torch.allclose(outs[0].float(), expected.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("sort_queries", [False, True])
def test_deterministic_backward_repeats_bit_for_bit_on_cuda(sort_queries: bool) -> None:
    # many queries per sample (T = 8 S), so the atomic scatter adds each sample's terms in a
    # varying order; under torch.use_deterministic_algorithms the gather backward must give the
    # same bits on every run, and both backwards the float64 reference's gradients
    g = torch.Generator().manual_seed(45)
    rows, samples, queries, width = 64, 500, 4000, 48
    times = torch.cumsum(torch.rand(rows, samples, generator=g) + 0.5, dim=1)
    span = float(times[:, -1].min())
    query = torch.rand(rows, queries, generator=g) * (span + 4) - 2
    if sort_queries:
        query = query.sort(dim=1).values
    values = torch.randn(rows, samples, width, generator=g)
    weights = torch.randn(rows, queries, width, generator=g)
    v64 = values.double().requires_grad_(True)
    q64 = query.double().requires_grad_(True)
    out64, _ = resample_reference(v64, times.double(), q64, None, "linear", "extrapolate")
    expected = torch.autograd.grad((out64 * weights.double()).sum(), [v64, q64])

    def gradients() -> tuple[torch.Tensor, torch.Tensor]:
        v = values.to(CUDA).requires_grad_(True)
        q = query.to(CUDA).requires_grad_(True)
        out = resample(v, times.to(CUDA), q, out_of_range="extrapolate")
        return torch.autograd.grad((out * weights.to(CUDA)).sum(), [v, q])

    atomic = gradients()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        runs = [gradients() for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(deterministic)
    for grad_v, grad_q in runs[1:]:
        assert torch.equal(grad_v, runs[0][0]) and torch.equal(grad_q, runs[0][1])
    for grad_v, grad_q in (runs[0], atomic):
        assert torch.allclose(grad_v.cpu().double(), expected[0], atol=1e-4, rtol=1e-4)
        assert torch.allclose(grad_q.cpu().double(), expected[1], atol=1e-3, rtol=1e-3)
