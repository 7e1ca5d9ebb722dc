"""The split-row norm forward (``norm_fwd_flags_kernel``): programs of a row hold their chunk
of x (or h = x + r), publish its statistics as flag words (RMSNorm: sum of squares; LayerNorm:
chunk mean and M2, combined with Chan's formula), write y. Against float64 formulas, on
poisoned outputs; the interpreter runs its two-launch fallback."""

from __future__ import annotations

import pytest
import torch
from norm_fwd_check import check, expected, operands

import warpforge.ops._kernels.norm_split
from launch_spy import LaunchSpy
from warpforge.ops import layer_norm, norm, rms_norm
from warpforge.ops._split_rows import split_row_plan
from warpforge.ops._wide_rows import WIDE_ROWS

CASES = [(1, 16, None), (7, 37, None), (5, 17, None), (4, 100, 131), (3, 67, None), (2, 643, 701),
         (9, 48, 53)]  # fmt: skip


# (prefetch, lag_depth, hold_weight, packed): norm_fwd_flags_kernel without / with the next
# row's load; norm_fwd_lag_kernel one and two rows ahead, w and b held, 2-byte rows as pairs
# (fp16 here: the interpreter's bf16 is wrong; odd N and strides fall back to unpacked)
VARIANTS = {"load": (False, 0, False, False), "prefetch": (True, 0, False, False),
            "lag1": (False, 1, False, False), "lag2-hold": (False, 2, True, False),
            "lag1-packed": (False, 1, True, True), "lag2-packed": (False, 2, False, True)}  # fmt: skip


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(("center", "residual"), [(False, False), (False, True), (True, False)],
                         ids=["rms", "add_rms", "layer"])  # fmt: skip
@pytest.mark.parametrize(("M", "N", "stride"), CASES)
def test_split_forward_small_chunks(center, residual, M, N, stride, variant, device,
                                    poison_outputs):  # fmt: skip
    """16-column chunks: a ragged last chunk, whole chunks (the lag kernels unmasked in
    float16), one row, primes, more rows than slots (with the
    lag kernels: rows loaded past the last one), row strides wider than the row, 41 chunks
    (two vectors of words; LayerNorm combines their halves; in float16 only, the
    interpreter's slowest case: the words' layout depends on the chunks, not the dtype)."""
    prefetch, lag_depth, hold_weight, packed = VARIANTS[variant]
    plan = split_row_plan(M, N, device, block=16, num_warps=1, prefetch=prefetch, flag_words=True)
    assert plan is not None and plan.chunks == -(-N // 16)
    for dtype in (torch.float16,) if plan.chunks > 32 else (torch.float32, torch.float16):
        x, r, w, b = operands(M, N, dtype, device, stride, shift=50.0 if center else 0.0)
        r = r if residual else None
        b = b if center else None
        offset = 0.0 if center else 1.0
        got = norm.split_norm_forward(x, w, b, r, 1e-6, offset, center, plan,
                                      lag_depth=lag_depth, hold_weight=hold_weight,
                                      packed=packed)  # fmt: skip
        check(got, expected(x, w, b, r, 1e-6, offset, center), dtype, center, residual)


# (reread_lag, prefetch, hold_weight, hold_bias, one_pass, lean): norm_fwd_reread_kernel one,
# two and five steps behind (five: more steps than a program has rows), the next row's chunk
# loaded a step early, w and b held, LayerNorm's one-pass moments, the fused multiply-add y
# (unmasked where the chunks are whole)
REREAD = {"lag1": (1, False, False, False, False, False),
          "lag2-prefetch": (2, True, False, False, False, True),
          "lag5-hold": (5, False, True, True, False, True),
          "lag1-prefetch-hold-w-1p": (1, True, True, False, True, False),
          "lag2-hold-b-1p": (2, False, False, True, True, True)}  # fmt: skip


@pytest.mark.parametrize("variant", list(REREAD))
@pytest.mark.parametrize("center", [False, True], ids=["rms", "layer"])
@pytest.mark.parametrize(("M", "N", "stride"), [(1, 16, None), (7, 37, None), (4, 100, 131),
                                                (9, 48, 53), (2, 643, 701)])  # fmt: skip
def test_split_forward_rereading(center, M, N, stride, variant, device, poison_outputs):
    """The re-reading kernel: 16-column chunks, ragged and whole, one row, more rows than
    slots, row strides wider than the row, 41 chunks (two vectors of words, float16 only)."""
    lag, prefetch, hold_weight, hold_bias, one_pass, lean = REREAD[variant]
    plan = split_row_plan(M, N, device, block=16, num_warps=1, prefetch=prefetch, flag_words=True,
                          reread_lag=lag)  # fmt: skip
    for dtype in (torch.float16,) if plan.chunks > 32 else (torch.float32, torch.float16):
        x, _, w, b = operands(M, N, dtype, device, stride, shift=50.0 if center else 0.0)
        b = b if center else None
        offset = 0.0 if center else 1.0
        got = norm.split_norm_forward(x, w, b, None, 1e-6, offset, center, plan,
                                      hold_weight=hold_weight,
                                      hold_bias=hold_bias, one_pass=one_pass,
                                      lean=lean)  # fmt: skip
        check(got, expected(x, w, b, None, 1e-6, offset, center), dtype, center, False)


@pytest.mark.parametrize("options", [{"reread_lag": -1}, {"reread_lag": 1.5},
                                     {"reread_lag": 1, "lag_depth": 1},
                                     {"reread_lag": 1, "residual": True}],
                         ids=["negative", "float", "with-lag-depth", "with-residual"])  # fmt: skip
def test_split_forward_refuses_a_bad_reread_lag(options, device):
    x, r, w, _ = operands(3, 40, torch.float32, device)
    options = dict(options)
    residual = r if options.pop("residual", False) else None
    lag = options.pop("reread_lag")
    with pytest.raises(ValueError, match="reread_lag"):
        plan = split_row_plan(3, 40, device, block=16, num_warps=1, flag_words=True,
                              reread_lag=lag)  # fmt: skip
        norm.split_norm_forward(x, w, None, residual, 1e-6, 0.0, False, plan, **options)


@pytest.mark.parametrize(("lag_depth", "hold_weight"), [(1, False), (2, True)])
@pytest.mark.parametrize(("center", "residual"), [(False, False), (False, True), (True, False)],
                         ids=["rms", "add_rms", "layer"])  # fmt: skip
@pytest.mark.parametrize(("M", "N", "stride"), [(6, 50, None), (4, 642, 704), (5, 96, None)])
def test_split_forward_packed_pairs(center, residual, M, N, stride, lag_depth, hold_weight,
                                    device, poison_outputs):  # fmt: skip
    """2-byte rows moved as int32 pairs (even N and strides): a ragged last chunk ending
    mid-vector, 41 chunks with a row stride wider than the row, whole chunks."""
    plan = split_row_plan(M, N, device, block=16, num_warps=1, flag_words=True)
    x, r, w, b = operands(M, N, torch.float16, device, stride, shift=50.0 if center else 0.0)
    r = r if residual else None
    b = b if center else None
    assert norm._pairs_fit(x, w, b, r)
    got = norm.split_norm_forward(x, w, b, r, 1e-6, 0.25, center, plan, lag_depth=lag_depth,
                                  hold_weight=hold_weight, packed=True)  # fmt: skip
    check(got, expected(x, w, b, r, 1e-6, 0.25, center), torch.float16, center, residual)


@pytest.mark.parametrize(("packed", "lag_depth"), [(False, 1), (True, 2)],
                         ids=["unpacked-lag1", "packed-lag2"])  # fmt: skip
@pytest.mark.parametrize("means", ["steady", "jumping"])
def test_layer_norm_one_pass_moments(packed, lag_depth, means, device, poison_outputs):
    """LayerNorm's chunk moments in one reduction shifted by the program's previous chunk mean
    (ONE_PASS): rows around one mean (the shift close, one reduction) and rows whose means jump
    by 100 standard deviations or more from row to row (the shift far: the two-reduction
    fallback, without which the test fails),
    against float64; 41 chunks, more rows than programs, a ragged last chunk."""
    M, N = 9, 650
    plan = split_row_plan(M, N, device, block=16, num_warps=1, flag_words=True)
    g = torch.Generator(device="cpu").manual_seed(36)
    row_means, spread = torch.full((M, 1), 50.0), 2.0
    if means == "jumping":  # each row 100 standard deviations from every other
        row_means, spread = torch.tensor([[(k - 4) * 1e4] for k in range(M)]), 100.0
    x = (torch.randn(M, N, generator=g) * spread + row_means).to(torch.float16).to(device)
    w = torch.randn(N, generator=g).to(torch.float16).to(device)
    b = torch.randn(N, generator=g).to(torch.float16).to(device)
    got = norm.split_norm_forward(x, w, b, None, 1e-6, 0.0, True, plan, lag_depth=lag_depth,
                                  packed=packed, one_pass=True)  # fmt: skip
    check(got, expected(x, w, b, None, 1e-6, 0.0, True), torch.float16, True, False)


def test_one_pass_only_with_pairs_when_pairs_asked(monkeypatch, device, poison_outputs):
    """Asked for pairs and one-pass moments (LayerNorm's default), rows that do not fit pairs
    (an odd length) run unpacked with two reductions, as measured faster; asked unpacked, the
    one pass stays."""
    kernels = warpforge.ops._kernels.norm_split
    lag = LaunchSpy(kernels.norm_fwd_lag_kernel)
    monkeypatch.setattr(kernels, "norm_fwd_lag_kernel", lag)
    plan = split_row_plan(3, 67, device, block=16, num_warps=1, flag_words=True)
    x, _, w, b = operands(3, 67, torch.float16, device, shift=20.0)
    for packed, one_pass in ((True, True), (False, True)):
        got = norm.split_norm_forward(x, w, b, None, 1e-6, 0.0, True, plan, lag_depth=1,
                                      packed=packed, one_pass=one_pass)  # fmt: skip
        check(got, expected(x, w, b, None, 1e-6, 0.0, True), torch.float16, True, False)
    assert [(k["PACKED"], k["ONE_PASS"]) for k in lag.launches][-1] == (False, True)
    assert not any(k["ONE_PASS"] for k in lag.launches[: len(lag.launches) // 2])


def test_pairs_fit_only_even_aligned_two_byte_rows():
    x = torch.zeros(4, 64, dtype=torch.float16)
    assert norm._pairs_fit(x, x[0], None)
    assert not norm._pairs_fit(x.float())
    assert not norm._pairs_fit(x[:, :63])
    assert not norm._pairs_fit(torch.zeros(4, 65, dtype=torch.float16)[:, :64])  # odd stride
    assert not norm._pairs_fit(x.view(-1)[1:].view(3, 85)[:, :64])  # 2-byte aligned start
    assert not norm._pairs_fit(x, x[0].to(torch.bfloat16))  # weight of another dtype


@pytest.mark.parametrize(("lag_depth", "hold_weight"), [(0, False), (1, True), (2, False)])
@pytest.mark.parametrize("center", [False, True], ids=["rms", "layer"])
def test_split_forward_without_weight(center, lag_depth, hold_weight, device, poison_outputs):
    plan = split_row_plan(7, 53, device, block=16, num_warps=1, flag_words=True)
    x, _, _, _ = operands(7, 53, torch.float32, device)
    got = norm.split_norm_forward(x, None, None, None, 1e-5, 0.0, center, plan,
                                  lag_depth=lag_depth, hold_weight=hold_weight)  # fmt: skip
    check(got, expected(x, None, None, None, 1e-5, 0.0, center), torch.float32, center, False)


def test_split_forward_refuses_an_unknown_lag(device):
    plan = split_row_plan(2, 64, device, block=16, num_warps=1, flag_words=True)
    with pytest.raises(ValueError, match="lag_depth"):
        norm.split_norm_forward(torch.randn(2, 64, device=device), None, None, None, 1e-6, 0.0,
                                False, plan, lag_depth=3)  # fmt: skip


def test_split_forward_refuses_more_chunks_than_the_poll_reads(device):
    plan = split_row_plan(2, 16 * 65, device, block=16, num_warps=1, flag_words=True)
    x = torch.randn(2, 16 * 65, device=device)
    with pytest.raises(ValueError, match="at most 64 chunks"):
        norm.split_norm_forward(x, None, None, None, 1e-6, 0.0, False, plan)


@pytest.mark.parametrize("op", ["rms", "add_rms", "layer"])
def test_public_ops_of_long_rows_take_the_split_kernel(op, monkeypatch, device, poison_outputs):
    """The float32 forward splits rows over 8192-column programs by default from 32769
    columns (65536 before the forty-third session), the re-reading kernel without a residual
    and the flag-word one with it; WARPFORGE_NORM_FWD_SPLIT=0 turns it off, and 32768 columns
    do not split (the whole-row kernel)."""
    kernels = warpforge.ops._kernels.norm_split
    name = "norm_fwd_flags_kernel" if op == "add_rms" else "norm_fwd_reread_kernel"
    other = "norm_fwd_reread_kernel" if op == "add_rms" else "norm_fwd_flags_kernel"
    spy = LaunchSpy(getattr(kernels, name))
    unused = LaunchSpy(getattr(kernels, other))
    monkeypatch.setattr(kernels, name, spy)
    monkeypatch.setattr(kernels, other, unused)
    monkeypatch.delenv(norm.NORM_FWD_SPLIT, raising=False)
    norm.norm_fwd_split_plan.cache_clear()
    M, N = 2, 32768 + 3
    x, r, w, b = operands(M, N, torch.float32, device)
    center = op == "layer"
    if op == "rms":
        y = rms_norm(x, w, 1e-6, offset=0.5)
        want = expected(x, w, None, None, 1e-6, 0.5, False)
    elif op == "add_rms":
        y, h = rms_norm(x, w, 1e-6, residual=r)
        want = expected(x, w, None, r, 1e-6, 0.0, False)
        assert torch.equal(h, want[1])
    else:
        y = layer_norm(x, w, b, 1e-5)
        want = expected(x, w, b, None, 1e-5, 0.0, True)
    assert len(spy.grids) == (2 if device.type == "cpu" else 1) and not unused.grids
    if op != "add_rms":  # two steps behind, w held (LayerNorm's b too in float32)
        launch = spy.launches[-1]
        assert launch["LAG"] == 2 and launch["HOLD_W"] and launch["HOLD_B"] == center
    torch.testing.assert_close(y.double(), want[0], atol=1e-5, rtol=1e-5)
    # off: the chunked kernel, same result

    def same_op(x, w, b, r):
        if op == "rms":
            return rms_norm(x, w, 1e-6, offset=0.5)
        if op == "add_rms":
            return rms_norm(x, w, 1e-6, residual=r)[0]
        return layer_norm(x, w, b, 1e-5)

    monkeypatch.setenv(norm.NORM_FWD_SPLIT, "0")
    spy.grids.clear()
    y2 = same_op(x, w, b, r)
    assert not spy.grids
    torch.testing.assert_close(y2, y, atol=1e-5, rtol=1e-5)
    monkeypatch.delenv(norm.NORM_FWD_SPLIT)
    n = 32768
    y3 = same_op(x[:, :n], w[:n], b[:n], r[:, :n])
    assert not spy.grids
    want = expected(x[:, :n], w[:n], b[:n] if center else None, r[:, :n] if op == "add_rms" else None,
                    1e-5 if center else 1e-6, 0.5 if op == "rms" else 0.0, center)  # fmt: skip
    torch.testing.assert_close(y3.double(), want[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", ["rms", "add_rms", "layer"])
def test_two_byte_long_rows_take_the_lag_kernel(op, monkeypatch, device, poison_outputs):
    """2-byte rows: from NORM_FWD_LAG_MIN_CHUNKS chunks (4 without a residual, 16 with one)
    the re-reading kernel without a residual (w held) and the lag kernel
    (pairs) with one, with a residual from 32768 columns to there the flags kernel, narrower
    rows the chunked kernel."""
    kernels = warpforge.ops._kernels.norm_split
    residual = op == "add_rms"
    lag = LaunchSpy(kernels.norm_fwd_lag_kernel)
    reread = LaunchSpy(kernels.norm_fwd_reread_kernel)
    flags = LaunchSpy(kernels.norm_fwd_flags_kernel)
    monkeypatch.setattr(kernels, "norm_fwd_lag_kernel", lag)
    monkeypatch.setattr(kernels, "norm_fwd_reread_kernel", reread)
    monkeypatch.setattr(kernels, "norm_fwd_flags_kernel", flags)
    behind = lag if residual else reread
    monkeypatch.delenv(norm.NORM_FWD_SPLIT, raising=False)
    monkeypatch.setenv(WIDE_ROWS, "0")  # 32768 columns: the split kernel, not the whole-row one
    norm.norm_fwd_split_plan.cache_clear()
    center = op == "layer"
    launches = 2 if device.type == "cpu" else 1
    fewest = norm.NORM_FWD_LAG_MIN_CHUNKS[residual]
    assert fewest == (16 if residual else 4)
    cases = [(8192 * fewest + 2, behind), (8192 * fewest, behind), (32766, None)]
    if residual:  # without one, 32768 columns (the split's narrowest) are already 4 chunks
        cases.insert(2, (8192 * (fewest - 1), flags))
    for N, spy in cases:
        for kernel in (lag, reread, flags):
            kernel.grids.clear()
        x, r, w, b = operands(2, N, torch.float16, device, shift=20.0 if center else 0.0)
        if op == "rms":
            got = (rms_norm(x, w, 1e-6, offset=0.5),)
            want = expected(x, w, None, None, 1e-6, 0.5, False)
        elif op == "add_rms":
            got = rms_norm(x, w, 1e-6, residual=r)
            want = expected(x, w, None, r, 1e-6, 0.0, False)
            assert torch.equal(got[1], want[1])
        else:
            got = (layer_norm(x, w, b, 1e-5),)
            want = expected(x, w, b, None, 1e-5, 0.0, True)
        torch.testing.assert_close(got[0].double(), want[0], atol=2e-3, rtol=2e-3)
        for kernel in (lag, reread, flags):
            assert len(kernel.grids) == (launches if spy is kernel else 0), (N, op)
        if spy is lag:  # pairs with a residual
            assert norm.norm_fwd_split_options(2, True, -(-N // 8192))["packed"]
            assert lag.launches[-1]["PACKED"]
        if spy is reread:  # two steps behind, w held (LayerNorm's b read from L2 for each row)
            launch = reread.launches[-1]
            assert launch["LAG"] == 2 and launch["HOLD_W"] and not launch["HOLD_B"]


@pytest.mark.gpu
@pytest.mark.parametrize(("center", "residual"), [(False, False), (False, True), (True, False)],
                         ids=["rms", "add_rms", "layer"])  # fmt: skip
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("M", "N"), [(300, 262144), (5, 131072 + 7), (200, 40000), (1, 16385)])
def test_split_forward_gpu(center, residual, dtype, M, N, poison_outputs):
    """The one-launch meeting through flag words at the default plan and other candidates."""
    x, r, w, b = operands(M, N, dtype, "cuda", shift=20.0 if center else 0.0)
    r = r if residual else None
    b = b if center else None
    want = expected(x, w, b, r, 1e-6, 0.0, center)
    plan = norm.norm_fwd_split_plan(M, N, dtype.itemsize, "cuda", residual)
    plans = [plan] if plan is not None else []
    # other launches of the flags kernel (the previous default and four programs an SM)
    for block, warps, per_sm, prefetch in ((8192, 8, 2, True), (8192, 8, 4, False)):
        p = split_row_plan(M, N, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm,
                           prefetch=prefetch, flag_words=True)  # fmt: skip
        if p is not None and p.chunks_pow2 <= 64:
            plans.append(p)
    assert plans
    if plan is not None:  # the default kernel and its options
        options = norm.norm_fwd_split_options(dtype.itemsize, residual, plan.chunks, center)
        got = norm.split_norm_forward(x, w, b, r, 1e-6, 0.0, center, plan, **options)
        check(got, want, dtype, center, residual)
    for p in plans:
        got = norm.split_norm_forward(x, w, b, r, 1e-6, 0.0, center, p)
        check(got, want, dtype, center, residual)
    # the lag kernel (pairs where 2-byte rows allow) on the 8192-column 2-an-SM launch
    p = split_row_plan(M, N, "cuda", block=8192, num_warps=8, programs_per_sm=2, flag_words=True)
    if p is not None and p.chunks_pow2 <= 64:
        for lag, hold, packed in ((1, False, True), (1, False, False), (2, True, True)):
            got = norm.split_norm_forward(x, w, b, r, 1e-6, 0.0, center, p, lag_depth=lag,
                                          hold_weight=hold, packed=packed)  # fmt: skip
            check(got, want, dtype, center, residual)
    if residual:
        return
    # the re-reading kernel, with and without the next row early, w held and L2 hints
    for block, warps, per_sm, prefetch, lag, hold, hints in (
        (8192, 8, 2, True, 2, True, True), (8192, 8, 2, False, 1, False, False),
        (4096, 4, 8, True, 3, False, True),
    ):  # fmt: skip
        p = split_row_plan(M, N, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm,
                           prefetch=prefetch, flag_words=True, reread_lag=lag)  # fmt: skip
        if p is not None and p.chunks_pow2 <= 64:
            got = norm.split_norm_forward(x, w, b, None, 1e-6, 0.0, center, p, hold_weight=hold,
                                          l2_hints=hints)  # fmt: skip
            check(got, want, dtype, center, residual)


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "dtype"), [("rms", torch.bfloat16), ("layer", torch.bfloat16),
                                           ("rms", torch.float32)])  # fmt: skip
def test_split_forward_past_2_to_31_elements_gpu(op, dtype, poison_outputs):
    """The re-reading split forward's 64-bit row offsets: the last rows of 8193 x 262144 (more
    than 2**31 elements) against float64, through the public op."""
    n = 262144
    m = 2**31 // n + 1
    center = op == "layer"
    x = torch.empty(m, n, dtype=dtype, device="cuda").normal_()
    w = torch.randn(n, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype) if center else None
    y = layer_norm(x, w, b, 1e-5) if center else rms_norm(x, w, 1e-5)
    tail = slice(m - 3, m)
    want = expected(x[tail], w, b, None, 1e-5, 0.0, center)
    tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    torch.testing.assert_close(y[tail].double(), want[0], atol=tol, rtol=tol)
