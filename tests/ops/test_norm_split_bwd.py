"""The split-row norm backward of long rows (``norm_bwd_flags_kernel``): programs of a row hold
their chunk of x and dy, publish ``(sum(w dy), sum(w dy xhat))`` as flag words, write dx from
registers; dweight / dbias from per-slot partial rows. Against float64 formulas, on poisoned
outputs; the interpreter runs its two-launch fallback."""

from __future__ import annotations

import pytest
import torch

import warpforge.ops._kernels.norm_split_bwd
from launch_spy import LaunchSpy
from warpforge.ops import layer_norm, norm, rms_norm
from warpforge.ops._split_rows import split_row_plan

TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def operands(M, N, dtype, device, stride=None, shift=0.0):
    """x and dy (row views of wider buffers with ``stride``; ``shift`` moves x far from zero),
    dh, weight and the forward's float32 mean and rstd of x."""

    def rows(scale=1.0, add=0.0):
        return (torch.randn(M, stride or N, device=device) * scale + add)[:, :N].to(dtype)

    x, dy, dh = rows(2.0, shift), rows(), rows()
    w = torch.randn(N, device=device).to(dtype)
    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt((x64 - mean[:, None]).square().mean(-1) + 1e-5)
    return x, dy, dh, w, mean.float(), rstd.float()


def expected(dy, x, w, mean, rstd, dh, offset, center):
    """(dx, dweight, dbias) in float64 from the statistics the kernel is given."""
    x64, dy64, mean64, rstd64 = x.double(), dy.double(), mean.double(), rstd.double()
    xhat = ((x64 - mean64[:, None]) if center else x64) * rstd64[:, None]
    wdy = dy64 * (offset + w.double()) if w is not None else dy64
    dx = wdy - xhat * (wdy * xhat).mean(-1, keepdim=True)
    if center:
        dx = dx - wdy.mean(-1, keepdim=True)
    dx = dx * rstd64[:, None]
    if dh is not None:
        dx = dx + dh.double()
    return dx, (dy64 * xhat).sum(0), dy64.sum(0)


def check(got, want, dtype, weight_grad, bias_grad, wdtype=None):
    dx, dw, db = got
    wdx, wdw, wdb = want
    assert dx.dtype == dtype and dx.shape == wdx.shape
    torch.testing.assert_close(dx.double(), wdx, atol=TOL[dtype], rtol=TOL[dtype])
    wdtype = wdtype or dtype
    if weight_grad:
        assert dw.dtype == wdtype and dw.shape == wdw.shape
        torch.testing.assert_close(dw.double(), wdw, atol=TOL[wdtype], rtol=TOL[wdtype])
    else:
        assert dw.numel() == 0
    if bias_grad:
        assert db.dtype == wdtype and db.shape == wdb.shape
        torch.testing.assert_close(db.double(), wdb, atol=TOL[wdtype], rtol=TOL[wdtype])
    else:
        assert db.numel() == 0


CASES = [(1, 16, None), (7, 37, None), (5, 17, None), (4, 100, 131), (3, 67, None), (2, 643, 701),
         (9, 48, 53)]  # fmt: skip
KINDS = [(False, False), (False, True), (True, False)]


# the flag-word split backwards: dx from held chunks (the next row's loaded late or early) or,
# lagged an iteration, from a re-read of the row (norm_bwd_lag_flags_kernel)
BACKWARDS = {
    "load": (lambda *a: norm.split_norm_backward(*a), False),
    "prefetch": (lambda *a: norm.split_norm_backward(*a), True),
    "lag": (lambda *a: norm.lag_norm_backward(*a), False),
}


@pytest.mark.parametrize("backward", BACKWARDS)
@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
@pytest.mark.parametrize(("M", "N", "stride"), CASES)
def test_split_backward_small_chunks(center, residual, M, N, stride, backward, device,
                                     poison_outputs):  # fmt: skip
    """16-column chunks: a ragged last chunk, whole chunks (the lagged kernel unmasked in
    float16), one row (no lagged iteration), primes, more rows
    than slots (each slot's partial rows sum several rows), row strides wider than the row, 41
    chunks (two vectors of words; in float16 only, the interpreter's slowest case: the words'
    layout depends on the chunks, not the dtype)."""
    run, prefetch = BACKWARDS[backward]
    plan = split_row_plan(M, N, device, block=16, num_warps=1, prefetch=prefetch, flag_words=True)
    assert plan is not None and plan.chunks == -(-N // 16)
    for dtype in (torch.float16,) if plan.chunks > 32 else (torch.float32, torch.float16):
        x, dy, dh, w, mean, rstd = operands(M, N, dtype, device, stride, 30.0 if center else 0.0)
        dh = dh if residual else None
        offset = 0.0 if center else 1.0
        got = run(dy, x, w, mean if center else None, rstd, dh, offset, center, True, center,
                  plan)  # fmt: skip
        want = expected(dy, x, w, mean, rstd, dh, offset, center)
        check(got, want, dtype, True, center)


@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
@pytest.mark.parametrize(("M", "N", "stride"), [(7, 37, None), (9, 48, 53)])
def test_lag_backward_with_l2_hints(center, residual, M, N, stride, device, poison_outputs):
    """The lagged backward with its eviction hints (KEEP / DROP: the first read of x and dy
    kept in L2 for the re-read, the re-read and dx let go first) computes what it computes
    without them: a ragged last chunk, whole chunks, more rows than slots, strided rows."""
    plan = split_row_plan(M, N, device, block=16, num_warps=1, flag_words=True)
    for dtype in (torch.float32, torch.float16):
        x, dy, dh, w, mean, rstd = operands(M, N, dtype, device, stride, 30.0 if center else 0.0)
        dh = dh if residual else None
        offset = 0.0 if center else 1.0
        got = norm.lag_norm_backward(dy, x, w, mean if center else None, rstd, dh, offset,
                                     center, True, center, plan, l2_hints=True)  # fmt: skip
        check(got, expected(dy, x, w, mean, rstd, dh, offset, center), dtype, True, center)


@pytest.mark.parametrize("prefetch", [False, True], ids=["load", "prefetch"])
@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
@pytest.mark.interpreter
def test_split_backward_flushes_parameter_gradients(center, residual, prefetch, device,
                                                    poison_outputs, monkeypatch):  # fmt: skip
    """With NORM_BWD_FLUSH_ROWS (made 2 here) a program adds its dweight / dbias sums into its
    slot's zeroed partial row every 2 of its rows and after its last (11 rows over 3 slots:
    4, 4 and 3 rows, an odd remainder), matching float64; a flush longer than any slot's rows
    leaves the single store."""
    from warpforge.ops._kernels import norm_split_bwd

    spy = LaunchSpy(norm_split_bwd.norm_bwd_flags_kernel)
    monkeypatch.setattr(norm_split_bwd, "norm_bwd_flags_kernel", spy)
    monkeypatch.setattr(norm, "NORM_BWD_FLUSH_ROWS", {4: 2, 2: 2})
    plan = split_row_plan(11, 37, device, block=16, num_warps=1, prefetch=prefetch,
                          flag_words=True)  # fmt: skip
    assert plan.programs // plan.chunks == 3
    for dtype in (torch.float32, torch.float16):
        x, dy, dh, w, mean, rstd = operands(11, 37, dtype, device, None, 30.0 if center else 0.0)
        dh = dh if residual else None
        offset = 0.0 if center else 1.0
        got = norm.split_norm_backward(dy, x, w, mean if center else None, rstd, dh, offset,
                                       center, True, center, plan)  # fmt: skip
        check(got, expected(dy, x, w, mean, rstd, dh, offset, center), dtype, True, center)
    assert [launch["FLUSH"] for launch in spy.launches][::2] == [2, 2]
    monkeypatch.setattr(norm, "NORM_BWD_FLUSH_ROWS", {4: 4})  # no slot owns more than 4 rows
    x, dy, _, w, mean, rstd = operands(11, 37, torch.float32, device)
    norm.split_norm_backward(dy, x, w, mean, rstd, None, 0.0, True, True, True, plan)
    assert spy.launches[-1]["FLUSH"] == 0


@pytest.mark.parametrize("backward", ["load", "lag"])
@pytest.mark.parametrize("center", [False, True], ids=["rms", "layer"])
@pytest.mark.parametrize(("weight_grad", "bias_grad"), [(False, False), (True, False),
                                                        (False, True)])  # fmt: skip
def test_split_backward_without_weight_or_gradients(center, weight_grad, bias_grad, backward,
                                                    device, poison_outputs):  # fmt: skip
    run, _ = BACKWARDS[backward]
    plan = split_row_plan(5, 53, device, block=16, num_warps=1, flag_words=True)
    x, dy, _, w, mean, rstd = operands(5, 53, torch.float32, device)
    bias_grad = bias_grad and center
    for weight in (None, w):
        got = run(dy, x, weight, mean, rstd, None, 0.0, center, weight_grad, bias_grad, plan)
        want = expected(dy, x, weight, mean, rstd, None, 0.0, center)
        check(got, want, torch.float32, weight_grad, bias_grad)


def test_split_backward_float32_weight_of_half_rows(device, poison_outputs):
    # dweight in the weight's dtype, dx in x's
    plan = split_row_plan(4, 70, device, block=16, num_warps=1, flag_words=True)
    x, dy, _, w, mean, rstd = operands(4, 70, torch.float16, device)
    got = norm.split_norm_backward(dy, x, w.float(), mean, rstd, None, 0.0, True, True, True,
                                   plan)  # fmt: skip
    check(got, expected(dy, x, w.float(), mean, rstd, None, 0.0, True), torch.float16, True,
          True, torch.float32)  # fmt: skip


@pytest.mark.parametrize("backward", ["load", "lag"])
def test_split_backward_refuses_bad_plans(backward, device):
    run, _ = BACKWARDS[backward]
    x = torch.randn(2, 16 * 65, device=device)
    plan = split_row_plan(2, 16 * 65, device, block=16, num_warps=1, flag_words=True)
    with pytest.raises(ValueError, match="at most 64 chunks"):
        run(x, x, None, None, x[:, 0], None, 0.0, False, False, False, plan)
    plan = split_row_plan(3, 32, device, block=16, num_warps=1, flag_words=True)
    with pytest.raises(ValueError, match="slots"):
        run(x[:, :32], x[:, :32], None, None, x[:, 0], None, 0.0, False, False, False, plan)


def _gradients(op, x, r, w, b, dy):
    leaves = [t.detach().requires_grad_() for t in (x, r, w, b)]
    x, r, w, b = leaves
    if op == "rms":
        outs = (rms_norm(x, w, 1e-6, offset=0.5),)
        grads, inputs = (dy,), (x, w)
    elif op == "add_rms":
        outs = rms_norm(x, w, 1e-6, residual=r)
        grads, inputs = (dy, dy.flip(0)), (x, r, w)
    else:
        outs = (layer_norm(x, w, b, 1e-5),)
        grads, inputs = (dy,), (x, w, b)
    return torch.autograd.grad(outs, inputs, grads)


@pytest.mark.parametrize("op", ["rms", "add_rms", "layer"])
def test_public_ops_of_long_rows_take_the_split_backward(op, monkeypatch, device):
    """From 65536 columns the backward splits rows over programs by default, with the autograd
    result of the other kernels; WARPFORGE_NORM_BWD_SPLIT=0 turns it off, and 65535 columns
    keep the other kernels (with NORM_BWD_NARROW empty: its float32 entries reach 65536)."""
    kernels = warpforge.ops._kernels.norm_split_bwd
    spy = LaunchSpy(kernels.norm_bwd_flags_kernel)
    monkeypatch.setattr(kernels, "norm_bwd_flags_kernel", spy)
    monkeypatch.delenv(norm.NORM_BWD_SPLIT, raising=False)
    monkeypatch.delenv(norm.NORM_BWD_NARROW_ENV, raising=False)
    monkeypatch.setattr(norm, "NORM_BWD_NARROW", {})
    norm.norm_bwd_split_plan.cache_clear()
    norm.norm_bwd_narrow_plan.cache_clear()
    M, N = 3, 65536 + 3
    x, dy, r, w, _, _ = operands(M, N, torch.float32, device)
    b = torch.randn(N, device=device)
    got = _gradients(op, x, r, w, b, dy)
    assert len(spy.grids) == (2 if device.type == "cpu" else 1)
    monkeypatch.setenv(norm.NORM_BWD_SPLIT, "0")
    spy.grids.clear()
    other = _gradients(op, x, r, w, b, dy)
    assert not spy.grids
    for g, o in zip(got, other, strict=True):
        torch.testing.assert_close(g, o, atol=1e-4, rtol=1e-4)
    monkeypatch.delenv(norm.NORM_BWD_SPLIT)
    n = 65536 - 1
    _gradients(op, x[:, :n], r[:, :n], w[:n], b[:n], dy[:, :n])
    assert not spy.grids


@pytest.mark.gpu
@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("M", "N"), [(300, 262144), (5, 131072 + 7), (64, 65536)])
def test_split_backward_gpu(center, residual, dtype, M, N, poison_outputs):
    """The one-launch meeting through flag words at the default plan and other candidates."""
    x, dy, dh, w, mean, rstd = operands(M, N, dtype, "cuda", shift=20.0 if center else 0.0)
    dh = dh if residual else None
    want = expected(dy, x, w, mean, rstd, dh, 0.0, center)
    plan = norm.norm_bwd_split_plan(M, N, dtype.itemsize, "cuda")
    plans = [plan] if plan is not None else []
    for launch in SWEEP_LAUNCHES:
        p = split_row_plan(M, N, "cuda", **launch, flag_words=True)
        if p is not None and p.chunks_pow2 <= 64:
            plans.append(p)
    assert plans
    for p in plans:
        got = norm.split_norm_backward(dy, x, w, mean, rstd, dh, 0.0, center, True, center, p)
        check(got, want, dtype, True, center)


SWEEP_LAUNCHES = ({"block": 8192, "num_warps": 16, "programs_per_sm": 1, "prefetch": True},)
