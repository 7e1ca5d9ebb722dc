"""The interval search of the resample kernels: guided and binary, every tile, same answers.

The guided search guesses a query's interval by interpolation and only verifies it with the loaded
times, so clocks that defeat the guess (random-walk jitter, exponential spacing, duplicate runs,
padding) must still give exactly the interval of ``bisect_right``. ``previous`` with values equal
to the sample index exposes the interval itself; ``linear`` checks the weight from the interval's
times against the plain float64 reference.
"""

from __future__ import annotations

import pytest
import robotics_plain_reference as plain
import torch
from robotics_paths import use_interpreter

from warpforge.robotics.align import align
from warpforge.robotics.resample import (
    GatherTile,
    LaunchConfig,
    StreamLaunch,
    launch_single,
    launch_streams,
    resample_reference,
    run_backward_kernel,
)

# binary search; guided with two, three and four probes; small and large query blocks, and
# column blocks narrower than the rows (the interpreter's time grows with the program count)
CONFIGS = [
    LaunchConfig(block_t=64, block_d=4, num_warps=2, probes=0),
    LaunchConfig(block_t=16, block_d=4, num_warps=1, probes=2),
    LaunchConfig(block_t=64, block_d=2, num_warps=2, probes=3),
    LaunchConfig(block_t=128, block_d=4, num_warps=4, probes=4),
    LaunchConfig(block_t=32, block_d=4, num_warps=2, probes=8),
]
CONFIG_IDS = ["binary", "guided2-t16", "guided3-d2", "guided4-t128", "guided8-t32"]


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    use_interpreter(monkeypatch)


def run_kernel(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    config: LaunchConfig,
    *,
    method: str = "linear",
    policy: str = "clamp",
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch into NaN-poisoned buffers: (out [B, T, D], bool mask [B, T])."""
    batch, queries = query.shape
    out = torch.full((batch, queries, values.shape[2]), float("nan"), dtype=values.dtype)
    mask = torch.full((batch, queries), 7, dtype=torch.uint8)
    launch_single(values, times, query, lengths, out, mask, method, policy, config)
    return out, mask.view(torch.bool)


def index_values(batch: int, samples: int, width: int = 2) -> torch.Tensor:
    """values[b, s, :] = s: ``previous`` then returns the interval's index itself."""
    return torch.arange(samples, dtype=torch.float32).view(1, samples, 1).repeat(batch, 1, width)


def check_exact_interval(times, query, config, lengths=None) -> None:
    batch, samples = times.shape
    values = index_values(batch, samples)
    out, mask = run_kernel(values, times, query, config, method="previous", lengths=lengths)
    expected, expected_mask = plain.resample(
        values, times, query, "previous", "clamp", lengths.tolist() if lengths is not None else None
    )
    same = torch.equal(out.double().nan_to_num(-1.0), expected.nan_to_num(-1.0))
    assert same and torch.equal(out.isnan(), expected.isnan()), "interval differs from bisect"
    assert torch.equal(mask, expected_mask)


def check_linear(times, query, config, *, policy: str = "clamp", tol: float = 1e-5) -> None:
    g = torch.Generator().manual_seed(times.shape[1])
    values = torch.randn(times.shape[0], times.shape[1], 3, generator=g)
    out, mask = run_kernel(values, times, query, config, policy=policy)
    expected, expected_mask = plain.resample(values, times, query, "linear", policy)
    assert torch.equal(out.isnan(), expected.isnan())
    diff = (out.double() - expected).nan_to_num(0).abs()
    assert bool((diff <= tol * (1 + expected.nan_to_num(0).abs())).all()), diff.max()
    assert torch.equal(mask, expected_mask)


def queries_over(times: torch.Tensor, count: int, g: torch.Generator) -> torch.Tensor:
    """Random queries a little past both ends, plus ``count`` sample times exactly (on-sample
    hits are where a rounded guess lands one interval off) and the last one."""
    lo, hi = times[:, :1], times[:, -1:]
    span = (hi - lo).clamp_min(1)
    rand = torch.rand(times.shape[0], count, generator=g, dtype=torch.float64)
    random = (lo - 0.02 * span + rand * 1.04 * span).to(times.dtype)
    picks = torch.randint(0, times.shape[1], (count,), generator=g)
    return torch.cat([random, times[:, picks], hi], dim=1)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_uniform_clock(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(30)
    times = torch.linspace(0.0, 3.0, 301).expand(2, 301).contiguous()
    query = queries_over(times, 30, g)
    check_exact_interval(times, query, config)
    check_linear(times, query, config)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_random_walk_and_bounded_jitter(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(31)
    walk = torch.cumsum(torch.rand(2, 400, generator=g) + 0.5, dim=1)  # as the benchmark's clocks
    jitter = torch.arange(400.0) + (torch.rand(2, 400, generator=g) - 0.5) * 0.9  # around a grid
    for times in (walk, jitter):
        query = queries_over(times, 30, g)
        check_exact_interval(times, query, config)
        check_linear(times, query, config)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_adversarial_spacing(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(32)
    # exponential spacing sends every interpolated guess to the wrong end; a cluster of close
    # samples after a huge gap does the same from the other side
    exponential = torch.exp(torch.arange(150, dtype=torch.float64) * 0.4).expand(1, 150)
    clustered = torch.cat([torch.tensor([0.0]), 1e9 + torch.arange(119.0)]).double()
    for times in (exponential.contiguous(), clustered.expand(1, 120).contiguous()):
        # log-uniform queries hit every part of the exponential clock
        logs = torch.rand(1, 30, generator=g, dtype=torch.float64) * 62 - 1
        query = torch.cat([queries_over(times, 20, g), torch.exp(logs)], dim=1)
        check_exact_interval(times, query, config)
        check_linear(times, query, config, policy="extrapolate")


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_duplicate_runs_and_zero_width_intervals(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(33)
    steps = torch.randint(0, 3, (3, 100), generator=g).float()  # a third of steps are 0
    steps[1, 30:90] = 0  # a long run of one time
    times = torch.cumsum(steps, dim=1)
    times[2] = 5.0  # every sample at one time: only q == 5 is in range
    query = torch.cat([queries_over(times, 20, g), torch.randint(-2, 110, (3, 20), generator=g)],
                      dim=1)  # fmt: skip
    check_exact_interval(times, query, config)
    for policy in ("clamp", "extrapolate", "nan"):
        check_linear(times, query, config, policy=policy)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_int64_nanoseconds_one_hour_in(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(34)
    hour = 3600 * 10**9
    # a 1 kHz clock with +-0.3 ms jitter: float32 could not tell these samples apart
    grid = torch.arange(500, dtype=torch.int64) * 1_000_000
    times = hour + grid + torch.randint(-300_000, 300_000, (2, 500), generator=g)
    times[:, 0] = hour
    query = hour + torch.randint(-2_000_000, 501_000_000, (2, 70), generator=g)
    query = torch.cat([query, times[:, ::25], times[:, ::25] - 1], dim=1)
    check_exact_interval(times, query, config)
    check_linear(times, query, config, tol=2e-6)


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_lengths_padding_and_tiny_rows(config: LaunchConfig) -> None:
    g = torch.Generator().manual_seed(35)
    times = torch.cumsum(torch.rand(4, 120, generator=g) + 0.5, dim=1)
    lengths = torch.tensor([120, 1, 2, 57])
    pad = torch.arange(120) >= lengths.unsqueeze(1)
    times = times.masked_fill(pad, -1e9)  # padding that would wreck any search that read it
    query = torch.cat([torch.rand(4, 40, generator=g) * 130 - 5, times[:, :3]], dim=1)
    query[0, 0] = float("nan")
    check_exact_interval(times, query, config, lengths)
    values = torch.randn(4, 120, 3, generator=g).masked_fill(pad.unsqueeze(-1), 1e30)
    for policy in ("clamp", "extrapolate", "nan"):
        out, mask = run_kernel(values, times, query, config, policy=policy, lengths=lengths)
        expected, expected_mask = plain.resample(values, times, query, "linear", policy,
                                                 lengths.tolist())  # fmt: skip
        assert torch.equal(out.isnan(), expected.isnan())
        assert torch.allclose(out.double().nan_to_num(0), expected.nan_to_num(0), atol=1e-5)
        assert torch.equal(mask, expected_mask)


@pytest.mark.parametrize("method", ["nearest", "linear"])
def test_every_search_gives_identical_bits(method: str) -> None:
    g = torch.Generator().manual_seed(36)
    times = torch.sort(torch.rand(2, 257, generator=g, dtype=torch.float64) * 9, dim=1).values
    query = queries_over(times, 30, g)
    values = torch.randn(2, 257, 3, generator=g)
    outs = [run_kernel(values, times, query, c, method=method)[0] for c in CONFIGS]
    for out in outs[1:]:
        assert torch.equal(out, outs[0])


@pytest.mark.parametrize("probes", [0, 4])
def test_backward_kernel_with_either_search(probes: int) -> None:
    g = torch.Generator().manual_seed(37)
    times = torch.cumsum(torch.randint(0, 3, (2, 90), generator=g), dim=1).double()
    query = torch.rand(2, 33, generator=g, dtype=torch.float64) * 190 - 3
    values = torch.randn(2, 90, 4, generator=g)
    grad_out = torch.randn(2, 33, 4, generator=g)
    config = LaunchConfig(block_t=16, block_d=4, num_warps=2, probes=probes)
    for policy in ("clamp", "extrapolate"):
        grad_v, grad_q = run_backward_kernel(
            grad_out, values, times, query, None, "linear", policy, True, config
        )
        leaf_v = values.clone().requires_grad_(True)
        leaf_q = query.clone().requires_grad_(True)
        out, _ = resample_reference(leaf_v, times, leaf_q, None, "linear", policy)
        expected_v, expected_q = torch.autograd.grad(out, [leaf_v, leaf_q], grad_out)
        assert torch.allclose(grad_v, expected_v, atol=1e-5)
        assert torch.allclose(grad_q, expected_q, atol=1e-4)


@pytest.mark.parametrize("method", ["linear", "previous", "nearest"])
@pytest.mark.parametrize("policy", ["clamp", "extrapolate", "nan"])
def test_gather_backward_matches_atomic_kernel_and_reference(method: str, policy: str) -> None:
    # the deterministic backward (sort, brackets, per-sample gather) against the float64 vjp of
    # the reference, on queries sorted, unsorted, shared by every row (stride 0), with NaN,
    # duplicates of sample times and both sides out of range, and lengths; against the atomic
    # kernel (the default backward, which test_resample.py checks through the op at every method
    # and policy) on the unsorted queries, and on another tile on the shared ones (once each:
    # these interpreted launches are among the slowest CPU tests)
    g = torch.Generator().manual_seed(39)
    rows, samples, queries, width = 4, 23, 31, 5
    times = torch.cumsum(torch.randint(0, 3, (rows, samples), generator=g), dim=1).double()
    values = torch.randn(rows, samples, width, generator=g, dtype=torch.float64)
    lengths = torch.tensor([23, 1, 2, 11])
    grad_out = torch.randn(rows, queries, width, generator=g, dtype=torch.float64)
    unsorted = torch.rand(rows, queries, generator=g, dtype=torch.float64) * 56 - 4
    unsorted[:, :8] = times[:, :8]  # on-sample queries: zero-width and kink cases
    unsorted[2, 3] = float("nan")
    shared = unsorted[0].sort().values.expand(rows, queries)
    query_grad = method == "linear"
    config = LaunchConfig(block_t=16, block_d=4, num_warps=2, probes=4)
    for query, row_lengths, atomic, other_tile in (
        (unsorted, None, True, False),
        (unsorted.sort(dim=1).values, lengths, False, False),
        (shared, lengths, False, True),
    ):
        leaf_v = values.clone().requires_grad_(True)
        leaf_q = query.clone().requires_grad_(query_grad)
        out, _ = resample_reference(leaf_v, times, leaf_q, row_lengths, method, policy)
        wrt = [leaf_v, leaf_q] if query_grad else [leaf_v]
        expected = torch.autograd.grad(out, wrt, grad_out, allow_unused=True)
        results = [
            run_backward_kernel(grad_out, values, times, query, row_lengths, method, policy,
                                query_grad, config, GatherTile(8, 4, 2), deterministic=exact)
            for exact in ((True, False) if atomic else (True,))
        ]  # fmt: skip
        for grad_v, grad_q in results:
            assert torch.allclose(grad_v, expected[0], atol=1e-12), (method, policy)
            if query_grad:
                assert torch.allclose(grad_q, expected[1].nan_to_num(0), atol=1e-12)
        if other_tile:
            again = run_backward_kernel(grad_out, values, times, query, row_lengths, method,
                                        policy, query_grad, config, GatherTile(4, 2, 1),
                                        deterministic=True)  # fmt: skip
            assert torch.equal(again[0], results[0][0])  # other tile, same sums in the same order


def test_gather_tile_rejects_bad_knobs() -> None:
    with pytest.raises(ValueError, match="block_s: expected a power of two"):
        GatherTile(block_s=12, block_d=4, num_warps=2)


def test_align_streams_with_either_search() -> None:
    g = torch.Generator().manual_seed(38)
    query = torch.linspace(0, 2, 41).expand(2, 41).contiguous()
    streams = []
    for samples, width in ((61, 5), (301, 2)):  # 30 Hz and 150 Hz over two seconds, jittered
        times = torch.cumsum(torch.rand(2, samples, generator=g) + 0.5, dim=1)
        times = (times - times[:, :1]) * (2.05 / times[:, -1:])
        streams.append((torch.randn(2, samples, width, generator=g), times))
    expected = torch.cat([plain.resample(v, t, query)[0] for v, t in streams], dim=-1)
    assert torch.allclose(align(streams, query).double(), expected, atol=1e-5)
    for probes in (0, 2):
        out = torch.full((2, 41, 7), float("nan"))
        launches = [StreamLaunch(streams[0][0], streams[0][1], out, 0, "linear", None),
                    StreamLaunch(streams[1][0], streams[1][1], out, 5, "previous", None)]  # fmt: skip
        configs = [LaunchConfig(8, 8, 2, probes), LaunchConfig(32, 2, 2, probes)]
        launch_streams(launches, query, "clamp", configs)
        assert torch.allclose(out[..., :5].double(), expected[..., :5], atol=1e-5)
        previous, _ = plain.resample(*streams[1], query, "previous")
        assert torch.equal(out[..., 5:].double(), previous)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_t": 12}, "block_t: expected a power of two"),
        ({"block_d": 0}, "block_d: expected a power of two"),
        ({"num_warps": 32}, "num_warps: expected at most 16"),
        ({"probes": 1}, "probes: expected 0"),
        ({"probes": 9}, "probes: expected 0"),
    ],
)
def test_launch_config_rejects_bad_knobs(kwargs: dict, match: str) -> None:
    args = {"block_t": 16, "block_d": 4, "num_warps": 2, "probes": 4} | kwargs
    with pytest.raises(ValueError, match=match):
        LaunchConfig(**args)


def test_slerp_needs_quaternion_column_block() -> None:
    values = torch.nn.functional.normalize(torch.randn(1, 3, 4), dim=-1)
    times = torch.tensor([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="slerp' needs block_d == 4"):
        run_kernel(values, times, torch.rand(1, 2), LaunchConfig(8, 8, 2), method="slerp")


def test_prefetch_is_planned_only_with_line_sizes_and_enough_queries() -> None:
    # the launcher passes line sizes only on the GPU for packed rows; the plan then prefetches
    # when the row's queries can touch most of it (2 T >= S), and never by default
    from warpforge.robotics.resample import _single_plan, default_config

    on = LaunchConfig(32, 128, 4, 4, prefetch=True)
    fixed = ("linear", "clamp", torch.float32, False, False, False)
    assert _single_plan(4, 256, 50, 128, 2, *fixed, on, (64, 32))[2]["PREFETCH_V"] == 64
    assert _single_plan(4, 256, 50, 128, 2, *fixed, on, (0, 0))[2]["PREFETCH_V"] == 0
    sparse = _single_plan(4, 10, 50, 128, 2, *fixed, on, (64, 32))[2]
    assert sparse["PREFETCH_V"] == 0 and sparse["PREFETCH_T"] == 0
    assert _single_plan(4, 256, 50, 128, 2, *fixed, None, (64, 32))[2]["PREFETCH_V"] == 0
    assert not default_config(1000, 64, 2, "linear").prefetch


@pytest.mark.parametrize(
    ("queries", "width", "element_size", "want"),
    [
        (2000, 32, 4, (32, 32, 1)),  # 1024-element tiles for rows of <= 32 columns
        (4096, 256, 2, (8, 256, 2)),  # 2048 elements otherwise
        (1000, 64, 2, (32, 64, 2)),
        (1000, 512, 4, (16, 128, 2)),  # float32 columns in blocks of 128
        (3, 6, 4, (4, 8, 1)),  # no more queries than exist
    ],
)
def test_default_launch_gives_each_thread_32_elements(
    queries: int, width: int, element_size: int, want: tuple[int, int, int]
) -> None:
    from warpforge.robotics.resample import default_config

    config = default_config(queries, width, element_size, "linear")
    assert (config.block_t, config.block_d, config.num_warps) == want
    assert config.block_t * config.block_d <= 32 * 32 * config.num_warps


@pytest.mark.parametrize(
    ("queries", "width", "element_size", "want"),
    [
        (4096, 256, 2, (8, 256, 1, 2)),  # 16-bit rows of 256 columns: 1 warp, two probes
        (4096, 1024, 2, (8, 256, 1, 2)),
        (4096, 256, 4, (16, 128, 2, 4)),  # float32 wider than 32 columns: default_config's
        (1000, 64, 2, (32, 64, 2, 4)),
        (3, 256, 2, (4, 256, 1, 4)),  # too few queries for an 8 x 256 tile: default_config's
        (2000, 32, 4, (32, 32, 1, 4)),  # float32 rows of <= 32 columns: the row prefetch too
        (2000, 6, 4, (128, 8, 1, 4)),
        (2000, 32, 2, (32, 32, 1, 4)),  # 16-bit: no prefetch
    ],
)
def test_single_stream_forward_launch(
    queries: int, width: int, element_size: int, want: tuple[int, int, int, int]
) -> None:
    from warpforge.robotics.resample import single_stream_config

    config = single_stream_config(queries, width, element_size, "linear")
    assert (config.block_t, config.block_d, config.num_warps, config.probes) == want
    assert config.prefetch == (element_size == 4 and width <= 32)
