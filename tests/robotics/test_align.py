"""align: N streams onto one clock in one launch, each with resample's semantics."""

from __future__ import annotations

import sys

import pytest
import robotics_plain_reference as plain
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launch_spy import LaunchSpy
from warpforge.robotics import align, resample


def make_streams(spec, batch: int, generator: torch.Generator) -> list:
    streams = []
    for samples, width, dtype, span in spec:
        values = torch.randn(batch, samples, width, generator=generator).to(dtype)
        times = torch.sort(torch.rand(batch, samples, generator=generator) * span, dim=1).values
        streams.append((values, times))
    return streams


SPEC = [(5, 9, torch.float16, 10), (8, 3, torch.float32, 8), (20, 1, torch.float32, 12)]


def test_concat_matches_plain_reference(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(20)
    streams = make_streams(SPEC, 3, g)
    query = torch.rand(3, 13, generator=g) * 14 - 1
    out = align(streams, query)
    assert out.dtype == torch.float32 and out.shape == (3, 13, 13)
    expected = torch.cat([plain.resample(v, t, query)[0] for v, t in streams], dim=-1)
    diff = (out.double() - expected).abs().max().item()
    assert diff < 1e-5  # float32 output keeps the float16 stream unrounded


def test_list_output_in_own_dtypes_and_per_stream_methods(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(21)
    spec = [*SPEC, (6, 4, torch.float32, 9), (7, 2, torch.float16, 9)]  # 5 streams, one launch
    streams = make_streams(spec, 2, g)
    quat = streams[3][0]
    streams[3] = (quat / quat.norm(dim=-1, keepdim=True), streams[3][1])
    methods = ["linear", "previous", "nearest", "slerp", "linear"]
    query = torch.rand(2, 11, generator=g) * 12 - 1
    outs = align(streams, query, methods=methods, out_of_range="nan", concat=False)
    assert [o.dtype for o in outs] == [v.dtype for v, _ in streams]
    for out, (v, t), method in zip(outs, streams, methods, strict=True):
        expected = resample(v, t, query, method=method, out_of_range="nan")
        assert torch.equal(out.isnan(), expected.isnan())
        assert torch.equal(out.nan_to_num(0), expected.nan_to_num(0))


def test_unbatched_int64_nanoseconds(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(22)
    hour = 3600 * 10**9
    fast_t = hour + torch.arange(500, dtype=torch.int64) * 1_000_000
    slow_t = hour + torch.arange(16, dtype=torch.int64) * 33_333_333
    fast_v, slow_v = torch.randn(500, 6, generator=g), torch.randn(16, 5, generator=g)
    query = hour + torch.arange(25, dtype=torch.int64) * 20_000_000
    out = align([(fast_v, fast_t), (slow_v, slow_t)], query)
    assert out.shape == (25, 11)
    expected = torch.cat(
        [plain.resample(v[None], t[None], query[None])[0][0] for v, t in
         [(fast_v, fast_t), (slow_v, slow_t)]], dim=-1,
    )  # fmt: skip
    assert (out.double() - expected).abs().max().item() < 2e-6


def test_stride_zero_times(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(23)
    values = torch.randn(4, 6, 3, generator=g)
    row = torch.sort(torch.rand(6, generator=g), dim=0).values
    query = torch.rand(4, 5, generator=g)
    expected = align([(values, row.expand(4, 6).contiguous())], query)
    assert torch.equal(align([(values, row)], query), expected)
    assert torch.equal(align([(values, row.expand(4, 6))], query), expected)


def test_gradient_flows_like_resample(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(24)
    a = torch.randn(2, 5, 3, generator=g, requires_grad=True)
    b = torch.randn(2, 7, 2, generator=g, requires_grad=True)
    ta = torch.sort(torch.rand(2, 5, generator=g), dim=1).values
    tb = torch.sort(torch.rand(2, 7, generator=g), dim=1).values
    query = torch.rand(2, 6, generator=g)
    weights = torch.randn(2, 6, 5, generator=g)
    (align([(a, ta), (b, tb)], query) * weights).sum().backward()
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    expected = torch.cat([resample(a2, ta, query), resample(b2, tb, query)], dim=-1)
    (expected * weights).sum().backward()
    assert torch.allclose(a.grad, a2.grad) and torch.allclose(b.grad, b2.grad)


def test_error_policy_names_stream(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(25)
    streams = make_streams(SPEC, 2, g)
    with pytest.raises(ValueError, match=r"streams\[\d\]: row \d query \d+"):
        align(streams, torch.full((2, 3), 50.0), out_of_range="error")


def test_error_policy_passes_nan_queries_through(cpu_path: str) -> None:
    """A NaN query yields NaN under every policy, "error" included, in every stream."""
    g = torch.Generator().manual_seed(26)
    streams = make_streams(SPEC, 2, g)
    first = max(float(t[..., 0].max()) for _, t in streams)
    last = min(float(t[..., -1].min()) for _, t in streams)
    assert first < last  # one time inside every stream's every row
    inside = (first + last) / 2
    query = torch.tensor([[inside, float("nan")], [float("nan"), inside]])
    out = align(streams, query, out_of_range="error")
    assert out[0, 1].isnan().all() and out[1, 0].isnan().all()
    assert not out[0, 0].isnan().any() and not out[1, 1].isnan().any()


@pytest.mark.parametrize(
    ("streams", "query", "kwargs", "error", "match"),
    [
        ([], torch.rand(4), {}, ValueError, "streams: expected at least one"),
        (torch.rand(3), torch.rand(4), {}, TypeError, "streams: expected a sequence"),
        ([(torch.rand(3, 2),)], torch.rand(4), {}, TypeError, r"streams\[0\]: expected a"),
        (
            [(torch.rand(2, 3, 2), torch.rand(2, 3)), (torch.rand(3, 3, 2), torch.rand(3))],
            torch.rand(4), {}, ValueError, r"streams\[1\] values: expected batch size 2",
        ),
        (
            [(torch.rand(3, 2), torch.arange(3).long())], torch.rand(4), {}, TypeError,
            "int64 nanosecond",
        ),
        (
            [(torch.rand(3, 2), torch.arange(3.0))], torch.rand(4), {"methods": ["linear"] * 2},
            ValueError, "methods: expected one method name or one per stream",
        ),
        (
            [(torch.rand(3, 2), torch.arange(3.0))], torch.rand(4), {"methods": "slerp"},
            ValueError, "expects quaternions",
        ),
        (
            [(torch.rand(3, 2), torch.tensor([0.0, 2.0, 1.0]))], torch.rand(4), {}, ValueError,
            r"streams\[0\] times: .* row 0 decreases",
        ),
    ],
)  # fmt: skip
def test_invalid_arguments(streams, query, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        align(streams, query, **kwargs)


# streams of every value dtype, widths 1 to 33 and rates from 2 to 40 samples over the span
MANY = [*SPEC, (6, 4, torch.float32, 9), (7, 2, torch.float32, 9), (40, 33, torch.float16, 11),
        (2, 5, torch.float64, 10), (11, 16, torch.float32, 13), (3, 7, torch.float16, 6)]  # fmt: skip


def test_nine_streams_concat(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(26)
    streams = make_streams(MANY, 2, g)
    query = torch.rand(2, 9, generator=g) * 12 - 1
    out = align(streams, query, out_of_range="extrapolate")
    expected = torch.cat(
        [plain.resample(v, t, query, "linear", "extrapolate")[0] for v, t in streams], dim=-1
    )
    assert out.shape == (2, 9, sum(width for _, width, _, _ in MANY))
    assert (out.double() - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("streams_count", [1, 2, 4, 5, 9])
def test_every_stream_count_launches_once(
    streams_count: int, interpreter: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any number of streams of any rates, dtypes and widths resample in one kernel launch (the
    kernels' path: the reference launches none)."""
    from warpforge.robotics._kernels import resample as kernels

    spies = []
    for name in ("resample_streams_kernel", "resample_kernel", "resample_staged_kernel"):
        spies.append(LaunchSpy(getattr(kernels, name)))
        monkeypatch.setattr(kernels, name, spies[-1])
    g = torch.Generator().manual_seed(27)
    streams = make_streams(MANY[:streams_count], 2, g)
    query = torch.rand(2, 9, generator=g) * 12 - 1
    out = align(streams, query, out_of_range="clamp", assume_sorted=True)
    assert sum(len(spy.grids) for spy in spies) == 1  # a lone stream takes the resample kernel
    expected = torch.cat(
        [plain.resample(v, t, query, "linear", "clamp")[0] for v, t in streams], dim=-1
    )
    assert (out.double() - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("own_tiles_up_to", [0, 16])
def test_streams_of_one_kind(
    own_tiles_up_to: int, interpreter: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five float32 streams of one kind (method, tile), with a tile each and sharing one tile
    whose programs pick their stream at run time (the default above OWN_TILE_MAX_STREAMS
    streams); times contiguous, broadcast (stride 0) and strided (every other sample of a
    longer clock)."""
    # the module by its name: the package's `resample` is the function
    monkeypatch.setattr(sys.modules["warpforge.robotics.resample"], "OWN_TILE_MAX_STREAMS",
                        own_tiles_up_to)  # fmt: skip
    g = torch.Generator().manual_seed(28)
    streams = make_streams([(5, 3, torch.float32, 10), (8, 4, torch.float32, 8),
                            (13, 3, torch.float32, 12), (2, 4, torch.float32, 9),
                            (7, 4, torch.float32, 11)], 3, g)  # fmt: skip
    streams[1] = (streams[1][0], streams[1][1][:1].expand(3, -1))
    longer = torch.sort(torch.rand(3, 26, generator=g) * 12, dim=1).values
    streams[2] = (streams[2][0], longer[:, ::2])
    query = torch.rand(3, 11, generator=g) * 14 - 1
    outs = align(streams, query, out_of_range="nan", concat=False, assume_sorted=True)
    for out, (v, t) in zip(outs, streams, strict=True):
        expected, _ = plain.resample(v, t, query, "linear", "nan")
        assert torch.equal(out.isnan(), expected.isnan())
        assert (out.double() - expected).nan_to_num(0).abs().max().item() < 1e-5


@pytest.mark.parametrize("share_kinds", [False, True])
def test_grid_order_does_not_change_results(share_kinds: bool, interpreter: None) -> None:
    """The streams kernel's grid in groups of any number of rows (stream after stream within a
    group; a last group shorter) gives the same values, with a tile per stream and with streams
    of one kind sharing one."""
    from warpforge.robotics.resample import StreamLaunch, launch_streams

    g = torch.Generator().manual_seed(29)
    spec = [(5, 3, torch.float32, 10), (8, 4, torch.float16, 8), (13, 3, torch.float32, 12),
            (7, 3, torch.float32, 11)]  # fmt: skip
    streams = make_streams(spec, 3, g)
    query = torch.rand(3, 11, generator=g) * 14 - 1
    methods = ["linear", "nearest", "linear", "linear"]
    outs = []
    for group_rows in (1, 2, 3):
        out = torch.full((3, 11, 13), float("nan"))
        launches, column = [], 0
        for (values, times), method in zip(streams, methods, strict=True):
            launches.append(StreamLaunch(values, times, out, column, method, None))
            column += values.shape[2]
        launch_streams(launches, query, "clamp", share_kinds=share_kinds, group_rows=group_rows)
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    expected = torch.cat(
        [
            plain.resample(v, t, query, m, "clamp")[0]
            for (v, t), m in zip(streams, methods, strict=True)
        ],
        dim=-1,
    )
    assert (outs[0].double() - expected).abs().max().item() < 1e-3


def test_groups_beyond_the_grid_axis_merge_rows(
    interpreter: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More groups of rows than the grid's second axis holds (MAX_GROUPS, patched down to 2 here;
    CUDA's 65535 on a GPU) run in larger groups: the grid fits and every row is written."""
    from warpforge.robotics._kernels import resample as kernels
    from warpforge.robotics.resample import StreamLaunch, launch_streams

    # the module by its name: the package's `resample` is the function
    monkeypatch.setattr(sys.modules["warpforge.robotics.resample"], "MAX_GROUPS", 2)
    spy = LaunchSpy(kernels.resample_streams_kernel)
    monkeypatch.setattr(kernels, "resample_streams_kernel", spy)
    g = torch.Generator().manual_seed(31)
    streams = make_streams(SPEC[:2], 5, g)
    query = torch.rand(5, 7, generator=g) * 10 - 1
    out = torch.full((5, 7, 12), float("nan"))
    launches = [StreamLaunch(streams[0][0], streams[0][1], out, 0, "linear", None),
                StreamLaunch(streams[1][0], streams[1][1], out, 9, "linear", None)]  # fmt: skip
    launch_streams(launches, query, "clamp", group_rows=1)
    assert [grid[1] for grid in spy.grids] == [2]  # five rows in groups of three and two
    expected = torch.cat([plain.resample(v, t, query)[0] for v, t in streams], dim=-1)
    assert (out.double() - expected).abs().max().item() < 1e-3


@pytest.mark.parametrize("group_rows", [0, -2, 1.5, True])
def test_grid_group_rows_rejected(group_rows: object) -> None:
    from warpforge.robotics.resample import StreamLaunch, launch_streams

    streams = make_streams(SPEC[1:], 2, torch.Generator().manual_seed(30))
    out = torch.empty(2, 3, 4)
    launches = [StreamLaunch(streams[0][0], streams[0][1], out, 0, "linear", None),
                StreamLaunch(streams[1][0], streams[1][1], out, 3, "linear", None)]  # fmt: skip
    with pytest.raises(ValueError, match="group_rows: expected an int >= 1"):
        launch_streams(launches, torch.rand(2, 3), "clamp", group_rows=group_rows)


@pytest.mark.parametrize("concat", [True, False])
def test_streams_stored_in_vectors_match_reference(concat: bool, interpreter: None) -> None:
    """Widths 8, 4, 6 and 2 concatenate into rows of 20 float32 columns: the launch stores the
    first two streams in vectors of 4 elements, the others of 2 (and each of the unconcatenated
    float16 outputs in vectors of up to 8); every element still lands in its place."""
    from warpforge.robotics.resample import _output_vector

    g = torch.Generator().manual_seed(31)
    spec = [(9, 8, torch.float16, 10), (6, 4, torch.float32, 8), (13, 6, torch.float16, 12),
            (4, 2, torch.float32, 11)]  # fmt: skip
    streams = make_streams(spec, 3, g)
    query = torch.rand(3, 7, generator=g) * 14 - 1
    out = torch.empty(3, 7, 20)
    vectors = [_output_vector(out.element_size(), *out.stride()[:2], col, v.shape[2])
               for (v, _), col in zip(streams, (0, 8, 12, 18), strict=True)]  # fmt: skip
    assert vectors == [4, 4, 2, 2]
    got = align(streams, query, concat=concat, assume_sorted=True)
    expected = [plain.resample(v, t, query)[0] for v, t in streams]
    if concat:
        assert (got.double() - torch.cat(expected, dim=-1)).abs().max().item() < 1e-3
    else:
        for out_k, expected_k, (values, _) in zip(got, expected, streams, strict=True):
            assert out_k.dtype == values.dtype
            assert (out_k.double() - expected_k).abs().max().item() < 1e-2


def test_launch_plan_reused_only_for_one_layout(interpreter: None) -> None:
    """The launch plan is cached by the streams' layouts: fresh tensors of the same layout reuse
    it (and their own data is read), another stride or column misses it."""
    from warpforge.robotics.resample import _streams_plan

    g = torch.Generator().manual_seed(32)
    spec = [(9, 8, torch.float16, 10), (6, 3, torch.float32, 8)]
    query = torch.rand(3, 7, generator=g) * 12 - 1

    def check(streams: list) -> None:
        expected = torch.cat([plain.resample(v, t, query)[0] for v, t in streams], dim=-1)
        got = align(streams, query, assume_sorted=True)
        assert (got.double() - expected).abs().max().item() < 1e-3

    check(make_streams(spec, 3, g))
    hits, misses = _streams_plan.cache_info().hits, _streams_plan.cache_info().misses
    check(make_streams(spec, 3, g))  # same layouts, new data
    assert _streams_plan.cache_info().hits == hits + 1
    assert _streams_plan.cache_info().misses == misses
    streams = make_streams([(18, 8, torch.float16, 10), (6, 3, torch.float32, 8)], 3, g)
    values, times = streams[0]
    check([(values[:, ::2], times[:, ::2]), streams[1]])  # other strides: planned anew
    assert _streams_plan.cache_info().misses == misses + 1


# the interpreter fixture only sets the execution path: the same for every example
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_streams_land_in_their_columns_of_any_output_layout(data, interpreter: None) -> None:
    """Streams of random widths and value dtypes written by one launch into random columns of a
    wider, NaN-poisoned output (so each stream's vector width, from 1 to 4, and the grid's row
    groups vary): each stream's columns match the float64 reference, and no other element of
    the output changes."""
    from warpforge.robotics.resample import StreamLaunch, launch_streams

    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    g = torch.Generator().manual_seed(seed)
    batch = data.draw(st.integers(1, 3), label="batch")
    queries = data.draw(st.integers(1, 9), label="queries")
    count = data.draw(st.integers(2, 5), label="streams")
    spec = [(data.draw(st.integers(1, 12)), data.draw(st.integers(1, 9)),
             data.draw(st.sampled_from([torch.float32, torch.float16])), 10)
            for _ in range(count)]  # fmt: skip
    streams = make_streams(spec, batch, g)
    gaps = [data.draw(st.sampled_from([0, 1, 2, 4])) for _ in range(count + 1)]
    columns, column = [], gaps[0]
    for (_, width, _, _), gap in zip(spec, gaps[1:], strict=True):
        columns.append(column)
        column += width + gap
    out = torch.full((batch, queries, column), float("nan"))
    query = torch.rand(batch, queries, generator=g) * 12 - 1
    launches = [StreamLaunch(v, t, out, col, "linear", None)
                for (v, t), col in zip(streams, columns, strict=True)]  # fmt: skip
    group_rows = data.draw(st.one_of(st.none(), st.integers(1, 3)), label="group_rows")
    launch_streams(launches, query, "clamp", group_rows=group_rows)
    written = torch.zeros(column, dtype=torch.bool)
    for (v, t), col in zip(streams, columns, strict=True):
        width = v.shape[2]
        expected, _ = plain.resample(v, t, query)
        assert (out[..., col : col + width].double() - expected).abs().max().item() < 1e-3
        written[col : col + width] = True
    assert out[..., ~written].isnan().all()
