"""resample: the semantics table against a plain float64 reference, on every CPU path."""

from __future__ import annotations

import math
import re

import pytest
import robotics_plain_reference as plain
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from robotics_paths import INTERPRETER, use_interpreter, use_torch_reference

from warpforge.robotics import resample
from warpforge.robotics.resample import METHODS, NEARLY_PARALLEL, resample_reference

POLICIES = ("clamp", "extrapolate", "nan")


def random_quaternions(*shape: int, generator: torch.Generator) -> torch.Tensor:
    q = torch.randn(*shape, 4, generator=generator)
    return q / q.norm(dim=-1, keepdim=True)


def assert_matches(out: torch.Tensor, expected: torch.Tensor, *, tol: float = 1e-5) -> None:
    assert out.shape == expected.shape
    assert torch.equal(out.isnan(), expected.isnan()), "NaN positions differ"
    diff = (out.double() - expected).nan_to_num(0.0).abs()
    bound = tol + tol * expected.nan_to_num(0.0).abs()
    assert bool((diff <= bound).all()), f"max error {diff.max().item():.3g}"


HOUR_NS = 3600 * 10**9
TIME_KINDS = ("float32 seconds", "float64 seconds one hour in", "int64 nanoseconds one hour in")


def clock(eighths: list[list[int]], kind: str) -> torch.Tensor:
    """Times given in eighths of a second, as a tensor of ``kind``: exact in every kind, so the
    plain reference sees the very times the op does, ties and exact hits included."""
    ticks = torch.tensor(eighths, dtype=torch.int64)
    if kind == "int64 nanoseconds one hour in":
        return HOUR_NS + ticks * 125_000_000
    if kind == "float64 seconds one hour in":
        return 3600.0 + ticks.double() / 8  # float32 could not tell these eighths apart
    return ticks.float() / 8


@st.composite
def resample_case(draw: st.DrawFn, kind: str, policy: str) -> dict:
    method = draw(st.sampled_from(METHODS))
    batch = draw(st.integers(1, 3))
    samples = draw(st.integers(1, 9))
    queries = draw(st.integers(1, 12))
    width = 4 if method == "slerp" else draw(st.integers(1, 6))
    # whole-second times with duplicates; queries on a 1/8 grid so ties and exact hits are exact
    rows = [
        sorted(draw(st.lists(st.integers(0, 12), min_size=samples, max_size=samples)))
        for _ in range(batch)
    ]
    times = clock([[8 * t for t in row] for row in rows], kind)
    if draw(st.booleans()):  # one row for the whole batch, as a stride-0 view
        times = times[0].expand(batch, samples)
    query = [[draw(st.integers(-16, 112)) for _ in range(queries)] for _ in range(batch)]
    use_lengths = draw(st.booleans())
    lengths = [draw(st.integers(1, samples)) for _ in range(batch)] if use_lengths else None
    return {
        "method": method,
        "policy": policy,
        "times": times,
        "query": clock(query, kind),
        "lengths": lengths,
        "width": width,
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


# every time kind and policy, each a few examples: drawn at random instead, the rarer
# combinations (such as "error" with int64 times) were often missed
@pytest.mark.parametrize("policy", (*POLICIES, "error"))
@pytest.mark.parametrize("kind", TIME_KINDS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_property_matches_plain_reference(data: st.DataObject, kind: str, policy: str) -> None:
    case = data.draw(resample_case(kind, policy))
    paths = ("1", "0") if INTERPRETER else ("0",)  # interpreter, then the torch reference path
    for path in paths:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", path)
            mp.setenv("WARPFORGE_INTERPRET", path)
            _check_case(case)


def _check_case(case: dict) -> None:
    g = torch.Generator().manual_seed(case["seed"])
    times, query, lengths, policy = case["times"], case["query"], case["lengths"], case["policy"]
    batch, samples = times.shape
    if case["method"] == "slerp":
        values = random_quaternions(batch, samples, generator=g)
    else:
        values = torch.randn(batch, samples, case["width"], generator=g)
    if lengths is not None:  # padding holds garbage that must never be read
        pad = torch.arange(samples) >= torch.tensor(lengths).unsqueeze(1)
        if times.stride(0) != 0:  # a shared (stride-0) row holds every row's valid times
            times = times.masked_fill(pad, -(10**9))
        values = values.masked_fill(pad.unsqueeze(-1), 1e30)
    # "error" returns what "clamp" does, unless a query lies outside its row's valid times
    expected, expected_mask = plain.resample(
        values, times, query, case["method"], "clamp" if policy == "error" else policy, lengths
    )

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        return resample(
            values,
            times,
            query,
            method=case["method"],
            out_of_range=policy,
            lengths=torch.tensor(lengths) if lengths is not None else None,
            return_mask=True,
        )

    if policy == "error" and not expected_mask.all():
        row, col = (~expected_mask).nonzero()[0].tolist()  # the first, in row-major order
        time = query[row, col].item()
        with pytest.raises(ValueError, match=re.escape(f"row {row} query {col} (time {time!r})")):
            run()
        return
    out, mask = run()
    assert_matches(out, expected)
    assert torch.equal(mask, expected_mask)


@pytest.mark.parametrize("method", METHODS)
def test_last_sample_and_duplicates_are_exact(cpu_path: str, method: str) -> None:
    g = torch.Generator().manual_seed(1)
    values = random_quaternions(1, 5, generator=g) if method == "slerp" else torch.randn(1, 5, 3)
    times = torch.tensor([[0.0, 1.0, 1.0, 2.0, 3.0]])
    query = torch.tensor([[3.0, 1.0, 0.0]])
    out = resample(values, times, query, method=method)
    # q == t[n-1] -> v[n-1]; q on a duplicate -> v[i], the last sample with t <= q
    expected = values[0, [4, 2, 0]]
    if method == "slerp":
        assert_matches(out, expected.double()[None], tol=1e-6)
    else:
        assert torch.equal(out[0], expected)


def test_single_sample_row(cpu_path: str) -> None:
    values = torch.randn(1, 4)
    out, mask = resample(
        values, torch.tensor([2.0]), torch.tensor([1.0, 2.0, 3.0]), return_mask=True
    )
    assert torch.equal(out, values.expand(3, 4))
    assert mask.tolist() == [False, True, False]
    nan = resample(values, torch.tensor([2.0]), torch.tensor([1.0, 2.0]), out_of_range="nan")
    assert nan[0].isnan().all() and torch.equal(nan[1], values[0])


@pytest.mark.parametrize("width", [1, 3, 17, 130, 1024])
def test_widths(width: int) -> None:
    g = torch.Generator().manual_seed(width)
    values = torch.randn(2, 6, width, generator=g)
    times = torch.sort(torch.rand(2, 6, generator=g) * 5, dim=1).values
    query = torch.rand(2, 7, generator=g) * 6 - 0.5
    expected, _ = plain.resample(values, times, query)
    assert_matches(resample(values, times, query), expected)


def test_stride_zero_times_and_queries(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(2)
    values = torch.randn(4, 9, 5, generator=g)
    row = torch.sort(torch.rand(9, generator=g) * 3, dim=0).values
    query_row = torch.rand(6, generator=g) * 3.4 - 0.2
    expected, _ = plain.resample(values, row.expand(4, 9), query_row.expand(4, 6))
    for times in (row, row.expand(4, 9), row.unsqueeze(0)):
        assert_matches(resample(values, times, query_row), expected)
        assert_matches(resample(values, times, query_row.expand(4, 6)), expected)


def test_non_contiguous_and_unbatched(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(3)
    base = torch.randn(5, 8, 3, generator=g)
    values = base.transpose(0, 1)  # [8, 5, 3], non-contiguous
    times = torch.sort(torch.rand(5, 8, generator=g), dim=0).values.t()  # [8, 5] strided
    query = torch.rand(8, 4, generator=g)
    expected, _ = plain.resample(values, times, query)
    assert_matches(resample(values, times, query), expected)
    single = resample(values[0], times[0], query[0])
    assert single.shape == (4, 3)
    assert_matches(single, expected[0])


def test_float16_values(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(4)
    values = torch.randn(2, 10, 8, generator=g).half()
    times = torch.sort(torch.rand(2, 10, generator=g), dim=1).values
    query = torch.rand(2, 12, generator=g)
    out = resample(values, times, query)
    assert out.dtype == torch.float16
    expected, _ = plain.resample(values, times, query)
    assert_matches(out, expected, tol=2e-3)


def test_float16_rows_of_more_than_256_columns_on_one_warp(cpu_path: str) -> None:
    # rows longer than the staged default's and wider than one 256-column block: the launch of
    # single_stream_config's exception (8 x 256 tiles on 1 warp), the second block ragged
    from warpforge.robotics.resample import STAGED_DEFAULT_MAX_SAMPLES

    g = torch.Generator().manual_seed(41)
    samples = STAGED_DEFAULT_MAX_SAMPLES + 7
    values = torch.randn(2, samples, 300, generator=g).half()
    times = torch.sort(torch.rand(2, samples, generator=g), dim=1).values
    query = torch.rand(2, 13, generator=g) * 1.2 - 0.1  # some out of range
    out = resample(values, times, query, out_of_range="nan")
    expected, _ = plain.resample(values, times, query, policy="nan")
    assert_matches(out, expected, tol=2e-3)


def test_int64_nanoseconds_one_hour_in(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(5)
    hour = 3600 * 10**9
    times = hour + torch.arange(200, dtype=torch.int64) * 1_000_000  # 1 kHz
    query = hour + torch.randint(0, 199_000_000, (300,), generator=g, dtype=torch.int64)
    values = torch.randn(200, 3, generator=g)
    out = resample(values, times, query)
    expected, _ = plain.resample(values[None], times[None], query[None])
    assert_matches(out, expected[0], tol=2e-6)
    # float32 times could not even tell the samples apart this far in
    assert torch.float32 not in (times.dtype, query.dtype)


def test_float64_seconds_one_hour_in(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(6)
    times = 3600.0 + torch.arange(300, dtype=torch.float64) * 1e-3
    query = 3600.0 + torch.rand(257, generator=g, dtype=torch.float64) * 0.299
    values = torch.randn(300, 2, generator=g)
    expected, _ = plain.resample(values[None], times[None], query[None])
    for method in ("linear", "nearest", "previous"):
        expected, _ = plain.resample(values[None], times[None], query[None], method)
        assert_matches(resample(values, times, query, method=method), expected[0], tol=2e-6)


def test_float32_queries_widen_to_float64_times(cpu_path: str) -> None:
    times = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    values = torch.tensor([[0.0], [10.0], [20.0]])
    out = resample(values, times, torch.tensor([0.25, 1.5]))
    assert out.flatten().tolist() == [2.5, 15.0]


def test_large_rows_reference_path(monkeypatch: pytest.MonkeyPatch) -> None:
    use_torch_reference(monkeypatch)
    g = torch.Generator().manual_seed(7)
    samples = queries = 100_000
    times = torch.cumsum(torch.randint(0, 3, (samples,), generator=g), 0).double()
    query = torch.rand(queries, generator=g, dtype=torch.float64) * (times[-1] + 2) - 1
    values = torch.randn(samples, 1, generator=g)
    expected, _ = plain.resample(values[None], times[None], query[None], "linear", "nan")
    assert_matches(resample(values, times, query, out_of_range="nan"), expected[0])


def test_large_rows_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    use_interpreter(monkeypatch)
    g = torch.Generator().manual_seed(8)
    samples = 100_000  # 17 search steps; past the 512-sample limit of other implementations
    times = torch.cumsum(torch.randint(1, 3, (samples,), generator=g), 0).float()
    query = torch.rand(200, generator=g) * (float(times[-1]) + 10) - 5
    values = torch.randn(samples, 2, generator=g)
    expected, _ = plain.resample(values[None], times[None], query[None])
    assert_matches(resample(values, times, query), expected[0])


def test_slerp_unit_norm_and_shortest_path(cpu_path: str) -> None:
    g = torch.Generator().manual_seed(9)
    values = random_quaternions(2, 6, generator=g)
    times = torch.sort(torch.rand(2, 6, generator=g), dim=1).values
    query = torch.rand(2, 20, generator=g)
    out = resample(values, times, query, method="slerp")
    assert torch.allclose(out.norm(dim=-1), torch.ones(2, 20), atol=1e-6)
    flipped = values.clone()
    flipped[:, 1::2] *= -1  # the same rotations: the interpolated rotation must not change
    out_flipped = resample(flipped, times, query, method="slerp")
    sign = torch.sign((out * out_flipped).sum(-1, keepdim=True))
    assert torch.allclose(out, sign * out_flipped, atol=1e-6)
    expected, _ = plain.resample(values, times, query, "slerp")
    assert_matches(out, expected)
    # halfway between identity and a 90-degree turn is a 45-degree turn: shortest path
    pair = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, -math.sqrt(0.5), -math.sqrt(0.5)]])
    half = resample(pair, torch.tensor([0.0, 1.0]), torch.tensor([0.5]), method="slerp")
    angle = 2 * math.acos(abs(float(half[0, 3])))
    assert abs(angle - math.pi / 4) < 1e-5


def quaternion_chain(first: torch.Tensor, cosines: list[float], seed: int) -> torch.Tensor:
    """float64 unit quaternions [len(cosines) + 1, 4], consecutive dot products ``cosines``."""
    g = torch.Generator().manual_seed(seed)
    chain = [first.double() / first.double().norm()]
    for cos in cosines:
        a = chain[-1]
        if abs(cos) == 1.0:
            chain.append(cos * a)  # exactly the same rotation: no orthogonal part to round
            continue
        r = torch.randn(4, generator=g, dtype=torch.float64)
        u = r - (r @ a) * a  # orthogonal to a; normalised below
        chain.append(cos * a + math.sqrt(1.0 - cos * cos) * u / u.norm())
    return torch.stack(chain)


# float64 pins each pair to its branch: next to the threshold, at w = 1/4 or 3/4, normalised lerp
# and slerp differ by ~5e-7 and the op matches its branch to ~1e-14. float32 rounding is too
# coarse for that; there the checks are no NaN, unit norm and the hemisphere flip.
@pytest.mark.parametrize(
    ("dtype", "tol"),
    [
        pytest.param(torch.float32, 1e-6, id="float32"),
        pytest.param(torch.float64, 1e-9, id="float64"),
    ],
)
def test_slerp_nearly_parallel_and_antiparallel_pairs(
    cpu_path: str, dtype: torch.dtype, tol: float
) -> None:
    cosines = [
        1.0,  # identical: sin(angle) == 0, so slerp's own formula would give 0 / 0
        1.0 - 1e-9,  # nearly identical: their dot rounds to 1 in float32
        NEARLY_PARALLEL + 1e-5,  # just above the threshold: normalised lerp
        NEARLY_PARALLEL - 1e-5,  # just below: slerp proper
        -(1.0 - 1e-9),  # nearly antiparallel: the hemisphere flip makes them nearly identical
        -1.0,  # q and -q, the same rotation
        -(NEARLY_PARALLEL + 1e-5),  # flipped, just above the threshold
        -(NEARLY_PARALLEL - 1e-5),  # flipped, just below
    ]
    values = quaternion_chain(torch.tensor([0.3, -0.5, 0.1, 0.8]), cosines, seed=13).to(dtype)
    intervals = len(cosines)
    times = torch.arange(intervals + 1, dtype=torch.float32)
    # every interval at w = 0, 1/4, 1/2, 3/4, then the last sample
    query = (torch.arange(4 * intervals + 1, dtype=torch.float32) / 4)[None]
    out = resample(values[None], times[None], query, method="slerp")
    assert out.dtype == dtype and not out.isnan().any()
    assert bool(((out.double().norm(dim=-1) - 1).abs() <= tol).all())
    expected, _ = plain.resample(values[None], times[None], query, "slerp")
    assert_matches(out, expected, tol=tol)


def test_gradients_match_plain_lerp_derivatives(cpu_path: str) -> None:
    values = torch.tensor([[0.0, 1.0], [2.0, 5.0], [4.0, -1.0]], requires_grad=True)
    times = torch.tensor([0.0, 1.0, 3.0])
    query = torch.tensor([0.5, 2.0, 5.0], requires_grad=True)
    out = resample(values, times, query, out_of_range="extrapolate")
    out.sum().backward()
    # d out / d q = sum_d (v[i+1] - v[i]) / (t[i+1] - t[i]); q = 5 extrapolates from [1, 3]
    assert query.grad.tolist() == pytest.approx([6.0, -2.0, -2.0])
    # weights: q=0.5 -> (0.5, 0.5) on v0, v1; q=2 -> (0.5, 0.5) on v1, v2; q=5 -> (-1, 2) on v1, v2
    assert values.grad.flatten().tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0, 2.5, 2.5])


@pytest.mark.parametrize("method", METHODS)
def test_gradcheck_float64(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    # the reference path on CPU (the interpreter is too slow for gradcheck's many calls); the
    # same check runs on CUDA in test_resample_gpu.py
    use_torch_reference(monkeypatch)
    gradcheck_resample(method, torch.device("cpu"))


def gradcheck_resample(method: str, device: torch.device) -> None:
    g = torch.Generator().manual_seed(10)
    if method == "slerp":
        values = random_quaternions(2, 4, generator=g).double()
    else:
        values = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    times = torch.tensor([[0.0, 1.0, 2.5, 4.0], [0.5, 1.0, 1.0, 3.0]], dtype=torch.float64)
    query = torch.tensor([[0.3, 1.7, 4.5], [0.2, 2.2, 2.9]], dtype=torch.float64)
    values, times, query = values.to(device), times.to(device), query.to(device)
    values.requires_grad_(True)
    query.requires_grad_(method == "linear")
    policy = "extrapolate" if method == "linear" else "clamp"

    def f(v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return resample(v, times, q, method=method, out_of_range=policy)

    # nondet_tol: the kernel's default backward adds by atomics, whose order may vary; under
    # torch.use_deterministic_algorithms the sort + gather backward repeats exactly
    assert torch.autograd.gradcheck(f, (values, query), nondet_tol=1e-12)
    if method != "slerp":
        deterministic = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            assert torch.autograd.gradcheck(f, (values, query))
        finally:
            torch.use_deterministic_algorithms(deterministic)


@pytest.mark.parametrize("time_dtype", [torch.float32, torch.float64, torch.int64])
def test_backward_kernel_matches_reference_vjp(
    monkeypatch: pytest.MonkeyPatch, time_dtype: torch.dtype
) -> None:
    use_interpreter(monkeypatch)
    g = torch.Generator().manual_seed(12)
    values = torch.randn(3, 9, 5, generator=g)
    times = torch.sort(torch.randint(0, 6, (3, 9), generator=g), dim=1).values.to(time_dtype)
    query = (torch.randint(-8, 56, (3, 11), generator=g) * 1.0 / 8).to(time_dtype)
    if time_dtype == torch.int64:
        query = torch.randint(-1, 7, (3, 11), generator=g)
    lengths = torch.tensor([9, 1, 4])
    weights = torch.randn(3, 11, 5, generator=g)
    for method in ("linear", "previous", "nearest"):
        for policy in POLICIES:
            grads = []
            for run in (resample, None):
                v = values.clone().requires_grad_(True)
                q = query.clone().requires_grad_(time_dtype != torch.int64)
                if run is None:
                    out, _ = resample_reference(v, times, q, lengths, method, policy)
                else:
                    out = run(v, times, q, method=method, out_of_range=policy, lengths=lengths)
                wrt = [v, q] if q.requires_grad else [v]
                grads.append(torch.autograd.grad((out.nan_to_num(0) * weights).sum(), wrt,
                                                 allow_unused=True))  # fmt: skip
            kernel, reference = grads
            assert torch.allclose(kernel[0], reference[0], atol=1e-5), (method, policy)
            if len(kernel) > 1:
                expected = reference[1] if reference[1] is not None else torch.zeros_like(query)
                expected = expected.nan_to_num(0) if method == "linear" else 0 * expected
                assert torch.allclose(kernel[1], expected, atol=1e-4), (method, policy)


def test_torch_reference_agrees_with_interpreter_including_lengths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = torch.Generator().manual_seed(11)
    values = torch.randn(3, 12, 5, generator=g)
    times = torch.sort(torch.randint(0, 8, (3, 12), generator=g).float(), dim=1).values
    query = torch.randint(-8, 80, (3, 9), generator=g).float() / 8
    lengths = torch.tensor([12, 1, 5])
    use_interpreter(monkeypatch)
    for method in METHODS[:3]:
        for policy in POLICIES:
            kernel = resample(values, times, query, method=method, out_of_range=policy,
                              lengths=lengths)  # fmt: skip
            reference, _ = resample_reference(values, times, query, lengths, method, policy)
            assert torch.equal(kernel.isnan(), reference.isnan())
            assert torch.equal(kernel.nan_to_num(0), reference.nan_to_num(0))


@pytest.mark.parametrize("policy", ["clamp", "extrapolate", "nan", "error"])
def test_nan_query_gives_nan(policy: str, cpu_path: str) -> None:
    """Under every policy, "error" included: a NaN query is not out of range."""
    out, mask = resample(
        torch.randn(3, 2), torch.tensor([0.0, 1.0, 2.0]), torch.tensor([float("nan"), 1.0]),
        out_of_range=policy, return_mask=True,
    )  # fmt: skip
    assert out[0].isnan().all() and not out[1].isnan().any()
    assert mask.tolist() == [False, True]


def test_error_policy_skips_nan_queries_and_names_the_first_out_of_range(cpu_path: str) -> None:
    query = torch.tensor([float("nan"), 1.0, 3.5])
    with pytest.raises(ValueError, match=r"row 0 query 2 \(time 3.5\)"):
        resample(torch.randn(3, 2), torch.tensor([0.0, 1.0, 2.0]), query, out_of_range="error")


# --- errors -----------------------------------------------------------------------------------


def test_error_policy_names_row_and_time(cpu_path: str) -> None:
    times = torch.tensor([[0.0, 1.0], [0.0, 2.0]])
    query = torch.tensor([[0.5, 1.0], [1.5, 2.5]])
    with pytest.raises(ValueError, match=r"row 1 query 1 \(time 2.5\)"):
        resample(torch.randn(2, 2, 3), times, query, out_of_range="error")
    out = resample(torch.randn(2, 2, 3), times, query.clamp(max=1.0), out_of_range="error")
    assert out.shape == (2, 2, 3)


def test_unsorted_and_nan_times_name_the_row(cpu_path: str) -> None:
    values = torch.randn(3, 4, 2)
    times = torch.tensor([[0.0, 1, 2, 3], [0.0, 1, 2, 3], [0.0, 2, 1, 3]])
    with pytest.raises(ValueError, match="row 2 decreases at sample 2"):
        resample(values, times, torch.rand(3, 5))
    times[2] = torch.tensor([0.0, 1.0, float("nan"), 3.0])
    with pytest.raises(ValueError, match="row 2 holds nan at sample 2; times must be finite"):
        resample(values, times, torch.rand(3, 5))
    times[2] = torch.tensor([float("-inf"), 1.0, 2.0, 3.0])  # sorted, yet no interval to weigh
    with pytest.raises(ValueError, match="row 2 holds -inf at sample 0"):
        resample(values, times, torch.rand(3, 5))
    # padding past lengths is never checked
    times[2] = torch.tensor([0.0, 1.0, -5.0, float("nan")])
    out = resample(values, times, torch.rand(3, 5), lengths=torch.tensor([4, 4, 2]))
    assert not out.isnan().any()
    with pytest.raises(ValueError, match=r"lengths: expected every length in \[1, 4\]"):
        resample(values, torch.zeros(3, 4), torch.rand(3, 5), lengths=torch.tensor([4, 0, 2]))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"values": torch.randn(2, 0, 3)}, ValueError, "values: expected a non-empty"),
        ({"query_times": torch.zeros(2, 0)}, ValueError, "query_times: expected a non-empty"),
        ({"times": torch.zeros(3, 4)}, ValueError, r"times: expected shape \[2, 4\] or \[4\]"),
        ({"query_times": torch.zeros(3, 5)}, ValueError, r"query_times: expected shape \[2, T\]"),
        ({"values": torch.randn(2, 4, 3).int()}, TypeError, "values: expected dtype"),
        ({"times": torch.zeros(2, 4).half()}, TypeError, "times: expected dtype"),
        ({"times": torch.zeros(2, 4).long()}, TypeError, "int64 nanosecond times need int64"),
        ({"method": "cubic"}, ValueError, "method: expected one of"),
        ({"out_of_range": "wrap"}, ValueError, "out_of_range: expected one of"),
        ({"method": "slerp"}, ValueError, "slerp' expects unit quaternions"),
        ({"lengths": torch.tensor([1, 2, 3])}, ValueError, r"lengths: expected shape \[2\]"),
        ({"lengths": torch.tensor([1.0, 2.0])}, TypeError, "lengths: expected dtype"),
    ],
)
def test_invalid_arguments(kwargs: dict, error: type, match: str) -> None:
    args = {
        "values": torch.randn(2, 4, 3),
        "times": torch.arange(4.0),
        "query_times": torch.rand(2, 5),
    }
    args.update(kwargs)
    positional = [args.pop(k) for k in ("values", "times", "query_times")]
    with pytest.raises(error, match=match):
        resample(*positional, **args)
