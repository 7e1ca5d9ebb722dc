"""resample's shared-window path (a window of value rows times the interpolation matrix on the
tensor cores) and per-SM claimed work items, against float64 and against the default kernel."""

from __future__ import annotations

import pytest
import torch
from robotics_paths import use_interpreter

from warpforge.robotics.resample import (
    LaunchConfig,
    _claim_counters,
    default_config,
    launch_single,
    resample_reference,
)

CUDA = torch.device("cuda")


def _case(batch, samples, queries, width, *, sort, seed, dtype=torch.float16, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    # integer steps with duplicates (zero-width intervals), queries past both ends
    times = torch.cumsum(torch.randint(0, 3, (batch, samples), generator=g), 1).float()
    query = torch.rand(batch, queries, generator=g) * (float(times[:, -1].max()) + 4) - 2
    query[:, :3] = times[:, :3]  # exact hits, t[0] included
    if sort:
        query = query.sort(1).values
    values = torch.randn(batch, samples, width, generator=g).to(dtype)
    lengths = torch.randint(1, samples + 1, (batch,), generator=g)
    return [x.to(device) for x in (values, times, query, lengths)]


def _launch(values, times, query, lengths, method, policy, config):
    batch, queries, width = query.shape[0], query.shape[1], values.shape[2]
    out = torch.full((batch, queries, width), float("nan"), dtype=values.dtype,
                     device=values.device)  # fmt: skip
    mask = torch.full((batch, queries), 7, dtype=torch.uint8, device=values.device)
    launch_single(values, times, query, lengths, out, mask, method, policy, config)
    return out, mask.view(torch.bool)


def _check(values, times, query, lengths, method, policy, config, ulps=1):
    out, mask = _launch(values, times, query, lengths, method, policy, config)
    default = default_config(query.shape[1], values.shape[2], values.element_size(), method)
    base, base_mask = _launch(values, times, query, lengths, method, policy, default)
    expected, expected_mask = resample_reference(values.double(), times.double(), query.double(),
                                                 lengths, method, policy)  # fmt: skip
    assert torch.equal(mask.cpu(), expected_mask.cpu()) and torch.equal(mask, base_mask)
    assert torch.equal(out.isnan(), base.isnan()) and torch.equal(
        out.isnan().cpu(), expected.isnan().cpu()
    )
    # the product sums (1 - w) v[i] + w v[i+1] where the default forms v[i] + w (v[i+1] - v[i]):
    # both round in float32, so the 16-bit outputs differ by at most one unit in the last place
    eps = torch.finfo(values.dtype).eps
    scale = torch.maximum(out.float().abs(), base.float().abs()).nan_to_num(0)
    assert bool(((out.float() - base.float()).nan_to_num(0).abs() <= ulps * eps * scale).all())
    err = (out.double() - expected.to(out.device)).nan_to_num(0).abs()
    assert bool((err <= 1e-2 + eps * expected.to(out.device).nan_to_num(0).abs()).all())
    if method == "previous" or method == "nearest":
        assert torch.equal(out.nan_to_num(0), base.nan_to_num(0))  # one weight of 1: exact


@pytest.mark.parametrize("method", ["linear", "previous", "nearest"])
@pytest.mark.parametrize("policy", ["clamp", "extrapolate", "nan"])
def test_whole_row_window_matches(monkeypatch: pytest.MonkeyPatch, method: str, policy: str):
    use_interpreter(monkeypatch)
    case = _case(3, 20, 40, 16, sort=False, seed=1)
    _check(*case, method, policy, LaunchConfig(16, 16, 2, window=32))


@pytest.mark.parametrize("sort", [True, False])
def test_sliding_window_sorted_and_unsorted(monkeypatch: pytest.MonkeyPatch, sort: bool):
    # sorted queries fit a 16-row window (most blocks take it); unsorted ones gather
    use_interpreter(monkeypatch)
    case = _case(2, 60, 48, 32, sort=sort, seed=2)
    for policy in ("clamp", "extrapolate"):
        _check(*case, "linear", policy, LaunchConfig(16, 32, 2, window=16))


def test_window_with_non_finite_values_falls_back(monkeypatch: pytest.MonkeyPatch):
    # 0 * inf would spread NaN over every query of the window: such a block gathers instead
    use_interpreter(monkeypatch)
    values, times, query, _ = _case(2, 20, 32, 16, sort=True, seed=3)
    values[0, 5, 3] = float("inf")
    values[1, 2, 0] = float("nan")
    _check(values, times, query, None, "linear", "clamp", LaunchConfig(16, 16, 2, window=32))


def test_claimed_items_cover_every_item_and_reset(monkeypatch: pytest.MonkeyPatch):
    use_interpreter(monkeypatch)
    case = _case(3, 20, 70, 16, sort=False, seed=4)
    for config in (LaunchConfig(16, 16, 2, claim=True), LaunchConfig(16, 16, 2, window=32,
                                                                      claim=True)):  # fmt: skip
        for _ in range(2):  # the second launch needs the counters zeroed by the first
            _check(*case, "linear", "nan", config)
        counters, _ = _claim_counters(torch.device("cpu"))
        assert not bool(counters.any())


def test_window_is_ignored_where_it_cannot_run(monkeypatch: pytest.MonkeyPatch):
    # float32 values and slerp run the default path whatever the config says
    use_interpreter(monkeypatch)
    values, times, query, lengths = _case(2, 10, 20, 4, sort=False, seed=5, dtype=torch.float32)
    values = values / values.norm(dim=-1, keepdim=True)
    for method, config in (("slerp", LaunchConfig(16, 4, 2, window=16)),
                           ("linear", LaunchConfig(16, 16, 2, window=16))):  # fmt: skip
        out, _ = _launch(values, times, query, lengths, method, "clamp", config)
        expected, _ = resample_reference(values, times, query, lengths, method, "clamp")
        assert torch.allclose(out, expected, atol=1e-5)


def test_window_must_be_a_power_of_two_in_range():
    for bad in (8, 48, 512):
        with pytest.raises(ValueError, match="window"):
            LaunchConfig(16, 16, 2, window=bad)


@pytest.mark.gpu
def test_window_and_claim_on_cuda():
    # bf16 (the interpreter mishandles it); whole rows, sliding windows of sorted queries,
    # unsorted fallbacks, and claims, each launched twice (the claim counters must reset)
    configs = [LaunchConfig(32, 128, 4, window=64), LaunchConfig(64, 128, 4, window=32),
               LaunchConfig(32, 128, 4, claim=True)]  # fmt: skip
    for sort, samples in ((False, 50), (True, 300), (False, 300)):
        case = _case(6, samples, 700, 128, sort=sort, seed=6, dtype=torch.bfloat16, device=CUDA)
        for method in ("linear", "previous", "nearest"):
            for config in configs:
                for _ in range(2):
                    _check(*case, method, "extrapolate", config)
