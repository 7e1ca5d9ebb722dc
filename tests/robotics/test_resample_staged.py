"""The staged resample forward (``launch_staged``): row values and times on chip, gathered by
index from shared memory. Against the plain float64 reference, on every policy, time dtype and
tile shape it takes; and its refusals (nothing launched, nothing written)."""

from __future__ import annotations

import importlib
import itertools

import pytest
import robotics_plain_reference as plain
import torch
from robotics_paths import use_interpreter
from test_resample import assert_matches

from warpforge.robotics import resample
from warpforge.robotics.resample import STAGED_METHODS, StagedConfig, launch_staged

# the module, not the function the package binds to the same name
resample_module = importlib.import_module("warpforge.robotics.resample")

POLICIES = ("clamp", "extrapolate", "nan", "error")
POISON = 7.0  # far from every expected value: a skipped element fails the comparison


def _case(
    batch: int,
    samples: int,
    queries: int,
    width: int,
    dtype: torch.dtype,
    *,
    seed: int,
    time_dtype: torch.dtype = torch.float32,
    device: str = "cpu",
):
    """Jittered times with duplicates; queries past both ends, on samples, at the last sample,
    and NaN; lengths shorter than the row in most batch rows."""
    g = torch.Generator().manual_seed(seed)
    times = torch.sort(torch.randint(0, 4 * samples, (batch, samples), generator=g), dim=1).values
    query = torch.randint(-8, 4 * samples * 8 + 8, (batch, queries), generator=g).double() / 8
    lengths = torch.randint(1, samples + 1, (batch,), generator=g)
    lengths[0] = samples
    if samples > 2:  # zero-width edge intervals at both ends of row 0
        times[0, 1] = times[0, 0]
        times[0, -1] = times[0, -2]
    query[:, 0] = times[:, 0].double()
    if queries > 2:
        query[0, 1] = times[0, -1].double()  # q == t[n-1]: in range, v[n-1] exactly
        query[:, 2] = times.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1).double()
    if time_dtype == torch.int64:
        hour = 3600 * 10**9  # nanoseconds an hour in: beyond float32's and float64's integers
        times = hour + times * 1_000_003
        query = hour + (query * 1_000_003).round().long()
    else:
        times, query = times.to(time_dtype), query.to(time_dtype)
        if queries > 3:
            query[-1, 3] = float("nan")
    values = torch.randn(batch, samples, width, generator=g).to(dtype)
    return values.to(device), times.to(device), query.to(device), lengths.to(device)


def _check(values, times, query, lengths, method, policy, config, *, tol) -> None:
    batch, queries = query.shape
    out = torch.full((batch, queries, values.shape[2]), POISON, dtype=values.dtype,
                     device=values.device)  # fmt: skip
    mask = torch.full((batch, queries), 2, dtype=torch.uint8, device=values.device)
    assert launch_staged(values, times, query, lengths, out, mask, method, policy, config)
    reference_policy = "clamp" if policy == "error" else policy
    expected, expected_mask = plain.resample(
        values.cpu(), times.cpu(), query.cpu(), method, reference_policy, lengths.tolist()
    )
    # the reference in float64, rounded once to the values' dtype as the kernel's store rounds
    assert_matches(out.cpu().double(), expected.to(values.dtype).double(), tol=tol)
    assert torch.equal(mask.cpu().bool(), expected_mask)


TOL = {torch.float16: 2e-3, torch.float32: 1e-5, torch.bfloat16: 1e-2}


@pytest.mark.parametrize(("method", "policy"), list(itertools.product(STAGED_METHODS, POLICIES)))
@pytest.mark.parametrize(
    ("dtype", "word_bits"), [(torch.float16, 64), (torch.float16, 32), (torch.float32, 64)]
)
def test_staged_matches_plain_reference(monkeypatch, method, policy, dtype, word_bits) -> None:
    use_interpreter(monkeypatch)
    # 16 columns: four 64-bit words of float16 in two slices of two; float32: eight words
    values, times, query, lengths = _case(3, 13, 21, 16, dtype, seed=7)
    # the search on staged times (binary) and in global memory (guided)
    for probes, staged_search in ((0, True), (4, False)):
        config = StagedConfig(8, 2, 2, word_bits, probes, staged_search)
        _check(values, times, query, lengths, method, policy, config, tol=TOL[dtype])


@pytest.mark.parametrize("time_dtype", [torch.float64, torch.int64])
@pytest.mark.parametrize("policy", ["extrapolate", "nan"])
def test_staged_wide_times(monkeypatch, time_dtype, policy) -> None:
    use_interpreter(monkeypatch)
    values, times, query, lengths = _case(2, 40, 33, 12, torch.float16, seed=8,
                                          time_dtype=time_dtype)  # fmt: skip
    for probes, staged_search in ((0, False), (3, True)):
        _check(values, times, query, lengths, "linear", policy,
               StagedConfig(16, 1, 4, 64, probes, staged_search), tol=TOL[torch.float16])  # fmt: skip


@pytest.mark.parametrize("samples", [1, 2, 3])
def test_staged_short_rows(monkeypatch, samples) -> None:
    use_interpreter(monkeypatch)
    values, times, query, lengths = _case(2, samples, 9, 2, torch.float32, seed=9)
    for policy, staged_search in (("clamp", True), ("extrapolate", True), ("extrapolate", False)):
        _check(values, times, query, lengths, "linear", policy,
               StagedConfig(4, 1, 1, 32, 4, staged_search), tol=TOL[torch.float32])  # fmt: skip


def test_staged_strided_inputs(monkeypatch) -> None:
    """A column slice of a wider tensor (row stride != width), stride-0 (broadcast) times and
    queries, and a word slice wider than the row (masked columns)."""
    use_interpreter(monkeypatch)
    values, times, query, lengths = _case(3, 11, 10, 24, torch.float16, seed=10)
    values = values[:, :, 4:16]  # 12 columns, row stride 24: three 64-bit words per sample
    times = times[:1].expand(3, -1)
    query = query[1:2].expand(3, -1)
    lengths = torch.full((3,), 11)
    _check(values, times, query, lengths, "linear", "extrapolate", StagedConfig(4, 4, 2, 64, 4),
           tol=TOL[torch.float16])  # fmt: skip


def test_staged_refuses_what_it_cannot_run(monkeypatch) -> None:
    use_interpreter(monkeypatch)
    values, times, query, lengths = _case(2, 5, 4, 6, torch.float16, seed=11)
    out = torch.full((2, 4, 6), POISON, dtype=torch.float16)
    config = StagedConfig(4, 1, 1, 64, 4)
    # 6 float16 columns are 12 bytes: no whole 64-bit words (32-bit words would do)
    assert not launch_staged(values, times, query, lengths, out, None, "linear", "clamp", config)
    assert launch_staged(values, times, query, lengths, out, None, "linear", "clamp",
                         StagedConfig(4, 1, 1, 32, 4))  # fmt: skip
    out.fill_(POISON)
    quaternions = torch.randn(2, 5, 4)
    q_out = torch.full((2, 4, 4), POISON)
    assert not launch_staged(quaternions, times, query, lengths, q_out, None, "slerp", "clamp",
                             config)  # fmt: skip
    wide = torch.randn(2, 5, 8, dtype=torch.float64)
    assert not launch_staged(wide, times, query, lengths, torch.empty(2, 4, 8, dtype=torch.float64),
                             None, "linear", "clamp", config)  # fmt: skip
    mixed_out = torch.full((2, 4, 8), POISON)  # float32 output of float16 values (align)
    assert not launch_staged(torch.randn(2, 5, 8).half(), times, query, lengths, mixed_out, None,
                             "linear", "clamp", config)  # fmt: skip
    # a slice too large to stage
    long_values = torch.randn(1, 20000, 8).half()
    assert not launch_staged(long_values, torch.arange(20000.0)[None], query[:1], None,
                             torch.empty(1, 4, 8).half(), None, "linear", "clamp",
                             StagedConfig(4, 2, 1, 64, 4))  # fmt: skip
    assert bool((q_out == POISON).all()) and bool((mixed_out == POISON).all())


def test_public_resample_runs_the_staged_default(monkeypatch) -> None:
    """Where ``default_staged_config`` picks the staged kernel (short rows of 16-bit values),
    ``resample`` runs it, and the gather kernel for what it refuses or is not picked for, with
    the public semantics either way."""
    use_interpreter(monkeypatch)
    calls = []
    real = resample_module.launch_staged

    def counted(*args, **kwargs):
        ran = real(*args, **kwargs)
        calls.append(ran)
        return ran

    monkeypatch.setattr(resample_module, "launch_staged", counted)
    values, times, query, lengths = _case(2, 9, 12, 8, torch.float16, seed=12)
    cases = [("linear", 8, torch.float16), ("nearest", 3, torch.float16),
             ("linear", 8, torch.float32)]  # fmt: skip
    for method, width, dtype in cases:
        v = values[:, :, :width].to(dtype).contiguous()
        out, mask = resample(v, times, query, method=method, out_of_range="nan", lengths=lengths,
                             return_mask=True)  # fmt: skip
        expected, expected_mask = plain.resample(v, times, query, method, "nan", lengths.tolist())
        assert_matches(out.double(), expected.to(dtype).double(), tol=TOL[dtype])
        assert torch.equal(mask, expected_mask)
    # 8 float16 columns: staged; 3: no whole 64-bit words, refused; float32: not picked
    assert calls == [True, False]
    long = _case(1, 65, 4, 8, torch.float16, seed=14)
    resample(*long[:3])
    assert calls == [True, False]  # 65 samples: not picked


GPU_CONFIGS = [StagedConfig(64, 4, 4, 64, 0), StagedConfig(256, 8, 8, 64, 4, False),
               StagedConfig(128, 16, 4, 32, 4), StagedConfig(1024, 2, 8, 64, 2, False)]  # fmt: skip
GPU_CASES = [
    *[(torch.bfloat16, "linear", "clamp", config) for config in GPU_CONFIGS],
    *[(torch.bfloat16, method, policy, config)
      for method, policy in (("linear", "extrapolate"), ("linear", "nan"), ("previous", "error"),
                             ("nearest", "clamp"))
      for config in GPU_CONFIGS[:2]],
    *[(dtype, "linear", "nan", config) for dtype in (torch.float16, torch.float32)
      for config in GPU_CONFIGS[1:3]],
]  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "method", "policy", "config"), GPU_CASES)
def test_staged_on_cuda(dtype, method, policy, config) -> None:
    """bf16 (wrong under the interpreter) and the tile shapes the sweep times, on the GPU."""
    values, times, query, lengths = _case(5, 300, 257, 64, dtype, seed=13, device="cuda")
    _check(values, times, query, lengths, method, policy, config, tol=TOL[dtype])
