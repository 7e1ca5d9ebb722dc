"""The whole-row kernels of rows of 16385-32768 columns (``warpforge.ops._kernels.wide_rows``):
norm forwards (RMSNorm, add+RMSNorm, LayerNorm), softmax / log-softmax forward and backward,
every launch option, against float64 formulas on poisoned outputs; ragged widths (16411,
24577), row views of wider buffers, the dispatch of the public ops."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from norm_fwd_check import TOL, check, expected, operands, public_forward

import warpforge.ops._kernels.wide_rows as wide_kernels
from launch_spy import LaunchSpy
from warpforge.ops import layer_norm, log_softmax, norm, rms_norm, softmax, softmax_ops
from warpforge.ops._wide_rows import MAX_UNROLLED_CHUNKS, WIDE_ROWS, WideLaunch, wide_launch

NORMS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}
# every kernel option: one row a program, weight early or late, streaming hints, x read again,
# 16 warps
LAUNCHES = {
    "32w": WideLaunch(32),
    "32w-early": WideLaunch(32, early_w=True),
    "16w-early-stream": WideLaunch(16, early_w=True, stream=True),
    "32w-stream": WideLaunch(32, stream=True),
    "16w-early-reload": WideLaunch(16, early_w=True, reload=True),
}


def softmax_expected(x, log):
    x64 = x.double()
    shifted = x64 - x64.amax(-1, keepdim=True)
    out = shifted - shifted.exp().sum(-1, keepdim=True).log()
    return out if log else out.exp()


def softmax_atol(dtype, log):
    """Absolute tolerance of (log-)softmax outputs: log-softmax subtracts the log of a sum of
    exps carried in float32, near 1 for a dominant logit, so even its outputs near 0 are off by
    a few of its float32 ulps (up to 2.3e-7 in 60 runs of ``test_softmax_forward_looped``'s
    rows on the interpreter), more than ``TOL * 1e-2`` alone allows in float32."""
    return TOL[dtype] * 1e-2 + (4 * torch.finfo(torch.float32).eps if log else 0.0)


def softmax_dx_expected(dy, y, log):
    dy64, y64 = dy.double(), y.double()
    if log:
        return dy64 - y64.exp() * dy64.sum(-1, keepdim=True)
    return y64 * (dy64 - (dy64 * y64).sum(-1, keepdim=True))


def _dtypes(device):
    # bf16 loads are wrong under the interpreter: bf16 on the GPU only
    return (
        (torch.float32, torch.float16) if device.type == "cpu" else (torch.float32, torch.bfloat16)
    )


@pytest.mark.parametrize("launch", list(LAUNCHES))
@pytest.mark.parametrize("op", list(NORMS))
@pytest.mark.parametrize(
    ("M", "N", "stride"),
    [(3, 16411, None), (2, 32768, 32800), (4, 24577, None), (5, 4099, 4104)],
)
def test_norm_forward_launches(op, launch, M, N, stride, device, poison_outputs):
    _check_forward(op, LAUNCHES[launch], M, N, stride, device)


def _check_forward(op, launch, M, N, stride, device):
    """``wide_norm_forward`` on ``launch`` in each dtype of this tier against float64, on rows
    far from zero for LayerNorm (shift 20, where a sum-of-squares variance would cancel)."""
    center, residual = NORMS[op]
    for dtype in _dtypes(device):
        x, r, w, b = operands(M, N, dtype, device, stride, shift=20.0 if center else 0.0)
        r = r if residual else None
        b = b if center else None
        got = norm.wide_norm_forward(x, w, b, r, 1e-6, 0.5, center, launch)
        check(got, expected(x, w, b, r, 1e-6, 0.5, center), dtype, center, residual)


# the looped kernel (chunk columns at a time): chunks of 1-4 warps, a row of one partial chunk,
# of several with a ragged last one, wider than the whole-row kernels take
LOOPED = {
    "256c-2w": WideLaunch(2, chunk=256),
    "1024c-4w-forwards": WideLaunch(4, chunk=1024, forwards=True),
    "512c-4w-unrolled": WideLaunch(4, chunk=512, unrolled=True),
    "256c-2w-unrolled-forwards": WideLaunch(2, chunk=256, unrolled=True, forwards=True),
}


LOOPED_ROWS = [(1, 1, None), (3, 251, None), (5, 4099, 4104), (2, 40009, None), (3, 2048, 2056)]
LOOPED_CASES = [
    (launch, *row)
    for launch, la in LOOPED.items()
    for row in LOOPED_ROWS
    # unrolled launches take at most MAX_UNROLLED_CHUNKS chunks a row; the 40009-column row
    # only on 1024-column chunks (the interpreter walks chunks one by one: 157 of 256 columns)
    if (not la.unrolled or -(-row[1] // la.chunk) <= MAX_UNROLLED_CHUNKS)
    and (row[1] < 32768 or la.chunk >= 1024)
]
"""(launch, M, N, row stride) of the looped kernels' tests."""


@pytest.mark.parametrize(
    ("launch", "M", "N", "stride"),
    LOOPED_CASES,
)
@pytest.mark.parametrize("op", list(NORMS))
def test_norm_forward_looped(op, launch, M, N, stride, device, poison_outputs):
    """Rows far from zero (shift 20): a one-pass sum-of-squares variance would cancel there;
    the kernel's per-lane running statistics do not."""
    _check_forward(op, LOOPED[launch], M, N, stride, device)


ONE_REDUCTION = {
    "4w": WideLaunch(4, one_reduction=True),
    "4w-reload": WideLaunch(4, reload=True, one_reduction=True),
    "4w-early-reload": WideLaunch(4, early_w=True, reload=True, one_reduction=True),
}


@pytest.mark.parametrize("launch", list(ONE_REDUCTION))
@pytest.mark.parametrize("rows", ["around-one-mean", "first-value-far"])
@pytest.mark.parametrize("residual", [False, True], ids=["layer", "add-layer"])
def test_layer_norm_one_reduction(launch, rows, residual, device, poison_outputs):
    """LayerNorm's moments from one reduction shifted by each row's first value: rows around
    one mean (most rows' shift close) and rows whose first value lies 30 standard deviations
    off (far: the two reductions on x read again, without which rstd misses 1e-5), against
    float64; a row of one column, a prime width in a wider buffer, with a residual (the shift
    unrounded)."""
    for M, N, stride in ((2, 1, None), (5, 4099, 4104)):
        for dtype in (torch.float32, torch.float16):
            x, r, w, b = operands(M, N, dtype, device, stride, shift=20.0)
            if rows == "first-value-far":
                x[:, 0] = 80.0
            r = r if residual else None
            got = norm.wide_norm_forward(x, w, b, r, 1e-6, 0.0, True, ONE_REDUCTION[launch])
            check(got, expected(x, w, b, r, 1e-6, 0.0, True), dtype, True, residual)


SPECIALIZED = {
    "whole-4w": WideLaunch(4, specialized=True),
    "whole-4w-reload-one-reduction": WideLaunch(4, reload=True, one_reduction=True,
                                                specialized=True),
    "looped-256c-2w": WideLaunch(2, chunk=256, specialized=True),
    "looped-256c-2w-unrolled-forwards": WideLaunch(2, chunk=256, unrolled=True, forwards=True,
                                                   specialized=True),
}  # fmt: skip


@pytest.mark.parametrize("launch", list(SPECIALIZED))
@pytest.mark.parametrize("op", list(NORMS))
def test_norm_forward_specialized(op, launch, monkeypatch, device, poison_outputs):
    """Launches compiled for the row length (``specialized``) on packed rows (a ragged last
    chunk, whole chunks), and on rows of a wider buffer, which run unspecialized; against
    float64, with the compiled length checked."""
    la = SPECIALIZED[launch]
    name = "norm_fwd_looped_kernel" if la.chunk else "norm_fwd_wide_kernel"
    spy = LaunchSpy(getattr(wide_kernels, name))
    monkeypatch.setattr(wide_kernels, name, spy)
    center, residual = NORMS[op]
    for M, N, stride in ((3, 1000, None), (2, 1024, None), (2, 1000, 1024)):
        for dtype in _dtypes(device):
            x, r, w, b = operands(M, N, dtype, device, shift=20.0 if center else 0.0)
            if stride:  # rows of a wider buffer, in every dtype
                x = torch.zeros(M, stride, dtype=dtype, device=device)[:, :N].copy_(x)
            r = r if residual else None
            b = b if center else None
            got = norm.wide_norm_forward(x, w, b, r, 1e-6, 0.5, center, la)
            check(got, expected(x, w, b, r, 1e-6, 0.5, center), dtype, center, residual)
        assert {k["SPECIALIZED"] for k in spy.launches} == {0 if stride else N}
        spy.launches.clear()


def test_specialized_row_launch_only_on_packed_rows(monkeypatch, device, poison_outputs):
    """The public LayerNorm takes the shipped specialized launch (2-byte rows of 16384 columns)
    on packed rows, compiled for their length, and its other kernels on rows of a wider buffer
    (``packed_only``); RMSNorm's specialized launch runs unspecialized there."""
    launch = norm.NORM_FWD_ROW_LAUNCHES[(2, "layer_norm.fwd", 16384)]
    assert launch.specialized and launch.chunk and launch.packed_only
    spy = LaunchSpy(wide_kernels.norm_fwd_looped_kernel)
    monkeypatch.setattr(wide_kernels, "norm_fwd_looped_kernel", spy)
    x, _, w, b = operands(3, 16384, torch.float16, device, shift=20.0)
    wider = torch.zeros(3, 16400, dtype=torch.float16, device=device)[:, :16384].copy_(x)
    for rows in (x, wider):
        y = layer_norm(rows, w, b, eps=1e-6)
        torch.testing.assert_close(y.double(), expected(rows, w, b, None, 1e-6, 0.0, True)[0],
                                   atol=TOL[torch.float16], rtol=TOL[torch.float16])  # fmt: skip
    assert [k["SPECIALIZED"] for k in spy.launches] == [16384]
    # RMSNorm's launch takes rows of a wider buffer too, unspecialized
    spy.launches.clear()
    for rows in (x, wider):
        y = rms_norm(rows, w, eps=1e-6)
        torch.testing.assert_close(y.double(), expected(rows, w, None, None, 1e-6, 0.0, False)[0],
                                   atol=TOL[torch.float16], rtol=TOL[torch.float16])  # fmt: skip
    assert [k["SPECIALIZED"] for k in spy.launches] == [16384, 0]


def test_unrolled_looped_launch_refuses_long_rows(device):
    x = torch.randn(1, 256 * MAX_UNROLLED_CHUNKS + 1, device=device)
    launch = WideLaunch(2, chunk=256, unrolled=True)
    with pytest.raises(ValueError, match=f"at most {MAX_UNROLLED_CHUNKS} chunks"):
        norm.wide_norm_forward(x, None, None, None, 1e-6, 0.0, False, launch)


def test_norm_forward_looped_without_weight(device, poison_outputs):
    x, _, _, _ = operands(4, 1500, torch.float32, device, shift=-7.0)
    for center in (False, True):
        got = norm.wide_norm_forward(x, None, None, None, 1e-5, 0.0, center, LOOPED["256c-2w"])
        check(got, expected(x, None, None, None, 1e-5, 0.0, center), torch.float32, center, False)


@pytest.mark.parametrize("op", list(NORMS))
def test_norm_forward_without_weight(op, device, poison_outputs):
    center, residual = NORMS[op]
    x, r, _, _ = operands(2, 16389, torch.float32, device)
    r = r if residual else None
    for launch in (WideLaunch(32), WideLaunch(32, early_w=True)):
        got = norm.wide_norm_forward(x, None, None, r, 1e-5, 0.0, center, launch)
        want = expected(x, None, None, r, 1e-5, 0.0, center)
        check(got, want, torch.float32, center, residual)


def test_wide_forwards_refuse_rows_past_32768(device):
    x = torch.randn(1, 32769, device=device)
    with pytest.raises(ValueError, match="at most 32768"):
        norm.wide_norm_forward(x, None, None, None, 1e-6, 0.0, False, WideLaunch())
    with pytest.raises(ValueError, match="at most 32768"):
        softmax_ops.wide_softmax_forward(x, False, WideLaunch())


@pytest.mark.parametrize("launch", ["32w", "32w-stream", "16w-early-stream"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("M", "N", "stride"), [(3, 16411, None), (2, 32768, 32800), (4, 24577, None)]
)
def test_softmax_forward_launches(log, launch, M, N, stride, device, poison_outputs):
    for dtype in _dtypes(device):
        x = (torch.randn(M, stride or N, device=device) * 3)[:, :N].to(dtype)
        x[0, N - 1] = 40.0  # a dominant last logit
        x[M - 1, : N // 2] = float("-inf")  # half a row of -inf
        y = softmax_ops.wide_softmax_forward(x, log, LAUNCHES[launch])
        want = softmax_expected(x.cpu(), log).to(device)
        assert y.dtype == dtype
        if log:  # -inf where x is -inf, finite elsewhere
            finite = torch.isfinite(want)
            assert torch.equal(torch.isfinite(y), finite)
            y, want = y[finite], want[finite]
        torch.testing.assert_close(y.double(), want, atol=softmax_atol(dtype, log),
                                   rtol=TOL[dtype])  # fmt: skip


@pytest.mark.parametrize(
    ("launch", "M", "N", "stride"),
    LOOPED_CASES,
)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_forward_looped(log, launch, M, N, stride, device, poison_outputs):
    """The looped kernel against float64: logits far from zero, a dominant logit in the last
    chunk, a whole chunk of -inf and a row's first column -inf (a lane that starts empty)."""
    chunk = LOOPED[launch].chunk
    for dtype in _dtypes(device):
        x = (torch.randn(M, stride or N, device=device) * 4 - 30)[:, :N].to(dtype)
        x[0, N - 1] = 20.0
        if chunk < N:  # a row of only -inf is NaN (test_softmax_forward_looped_nonfinite_rows)
            x[M - 1, :chunk] = float("-inf")
        if N > 1:
            x[0, 0] = float("-inf")
        y = softmax_ops.wide_softmax_forward(x, log, LOOPED[launch])
        want = softmax_expected(x.cpu(), log).to(device)
        assert y.dtype == dtype
        finite = torch.isfinite(want)
        assert torch.equal(torch.isfinite(y), finite)  # log: -inf exactly where x is -inf
        if not log:
            assert torch.equal(y[x == float("-inf")], torch.zeros_like(y[x == float("-inf")]))
        torch.testing.assert_close(y[finite].double(), want[finite],
                                   atol=softmax_atol(dtype, log), rtol=TOL[dtype])  # fmt: skip


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's NumPy on inf, NaN
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_forward_looped_nonfinite_rows(log, device, poison_outputs):
    """A row of only -inf is NaN throughout, as PyTorch's; so is a row with a NaN or a +inf
    (also as PyTorch's); the other rows are left alone."""
    x = torch.randn(4, 1000, device=device)
    x[0] = float("-inf")
    x[1, 700] = float("nan")
    x[3, 300] = float("inf")
    for launch in (LOOPED["256c-2w"], LOOPED["512c-4w-unrolled"]):
        y = softmax_ops.wide_softmax_forward(x, log, launch)
        assert torch.isnan(y[[0, 1, 3]]).all()
        assert torch.isnan((torch.log_softmax if log else torch.softmax)(x[[0, 1, 3]], -1)).all()
        want = softmax_expected(x[2:].cpu(), log)[0].to(device)
        torch.testing.assert_close(y[2].double(), want, atol=1e-5, rtol=1e-5)


def test_register_cap_reaches_every_launch(monkeypatch, device, poison_outputs):
    """A launch's ``max_registers`` goes to each kernel as ``maxnreg`` (absent without one),
    and the capped launch computes what the uncapped one does."""
    names = ("norm_fwd_looped_kernel", "norm_fwd_wide_kernel", "softmax_fwd_looped_kernel",
             "softmax_fwd_wide_kernel", "softmax_bwd_wide_kernel")  # fmt: skip
    spies = {name: LaunchSpy(getattr(wide_kernels, name)) for name in names}
    for name, spy in spies.items():
        monkeypatch.setattr(wide_kernels, name, spy)
    x = torch.randn(3, 700, device=device) * 3
    w = torch.randn(700, device=device)
    for cap in (None, 64):
        looped = WideLaunch(2, chunk=256, unrolled=True, max_registers=cap)
        whole = WideLaunch(2, max_registers=cap)
        outs = [
            norm.wide_norm_forward(x, w, None, None, 1e-6, 0.0, True, looped)[0],
            norm.wide_norm_forward(x, w, None, None, 1e-6, 0.0, False, whole)[0],
            softmax_ops.wide_softmax_forward(x, False, looped),
            y := softmax_ops.wide_softmax_forward(x, True, whole),
            softmax_ops.wide_softmax_backward(x, y, torch.empty_like(y), True, whole),
        ]
        if cap is None:
            uncapped = outs
        else:
            for got, want in zip(outs, uncapped, strict=True):
                torch.testing.assert_close(got, want, atol=0, rtol=0)
    for name, spy in spies.items():
        assert [la.get("maxnreg") for la in spy.launches] == [None, 64], name
        assert {la["num_warps"] for la in spy.launches} == {2}, name


def test_looped_softmax_refuses_too_many_unrolled_chunks(device):
    x = torch.randn(1, 256 * MAX_UNROLLED_CHUNKS + 1, device=device)
    with pytest.raises(ValueError, match=f"at most {MAX_UNROLLED_CHUNKS} chunks"):
        softmax_ops.wide_softmax_forward(x, False, WideLaunch(2, chunk=256, unrolled=True))


@pytest.mark.parametrize("launch", ["32w", "32w-stream", "16w-early-stream"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(("M", "N", "stride"), [(3, 16411, None), (2, 32768, 32800)])
def test_softmax_backward_launches(log, launch, M, N, stride, device, poison_outputs):
    for dtype in _dtypes(device):
        x = torch.randn(M, stride or N, device=device) * 3
        y = (torch.log_softmax(x, -1) if log else torch.softmax(x, -1))[:, :N].to(dtype)
        dy = torch.randn(M, stride or N, device=device)[:, :N].to(dtype)
        dx = torch.empty(M, N, dtype=dtype, device=device)
        softmax_ops.wide_softmax_backward(dy, y, dx, log, LAUNCHES[launch])
        want = softmax_dx_expected(dy.cpu(), y.cpu(), log).to(device)
        scale = want.abs().max().item()
        torch.testing.assert_close(dx.double() / scale, want / scale, atol=TOL[dtype],
                                   rtol=TOL[dtype])  # fmt: skip


@pytest.fixture
def wide_on(monkeypatch):
    """The tables' launches for fp32 and fp16 rows, whatever the shipped defaults are."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    for size in (2, 4):
        for kernel in ("rms_norm.fwd", "add_rms_norm.fwd", "layer_norm.fwd"):
            monkeypatch.setitem(norm.NORM_FWD_WIDE_LAUNCHES, (size, kernel), WideLaunch(32))
        monkeypatch.setitem(softmax_ops.FWD_WIDE_LAUNCHES, size, WideLaunch(32))
        monkeypatch.setitem(softmax_ops.BWD_WIDE_LAUNCHES, size, WideLaunch(32))
        monkeypatch.setitem(softmax_ops.LOG_BWD_WIDE_LAUNCHES, size, WideLaunch(32))
    monkeypatch.setattr(norm, "NORM_FWD_ROW_LAUNCHES", {})  # rows <= 16384: the tiled kernel


@pytest.mark.parametrize("op", list(NORMS))
def test_public_norms_take_the_row_table(op, monkeypatch, device, poison_outputs):
    """Rows of 1025-16384 columns take the whole-row kernel where ``NORM_FWD_ROW_LAUNCHES``
    lists their power of two (rows of whole 16-byte vectors only), the tiled kernel elsewhere;
    either way the result is right."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    spy = LaunchSpy(wide_kernels.norm_fwd_wide_kernel)
    monkeypatch.setattr(wide_kernels, "norm_fwd_wide_kernel", spy)
    center, residual = NORMS[op]
    kernel = "layer_norm.fwd" if center else "add_rms_norm.fwd" if residual else "rms_norm.fwd"
    launch = WideLaunch(4, early_w=True, reload=True, min_n=1, aligned=True)
    monkeypatch.setattr(norm, "NORM_FWD_ROW_LAUNCHES", {(4, kernel, 4096): launch})
    # listed power of two (2049-4096, aligned), unaligned, another power of two, too narrow
    for N, launches in ((4096, 1), (2052, 1), (4095, 0), (4100, 0), (1024, 0)):
        spy.grids.clear()
        x, r, w, b = operands(3, N, torch.float32, device, shift=20.0 if center else 0.0)
        got, want = public_forward(op, x, r, w, b)
        assert len(spy.grids) == launches, N
        torch.testing.assert_close(got[0].double(), want[0], atol=1e-5, rtol=1e-5)
        if residual:
            assert torch.equal(got[1], want[1])


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op=st.sampled_from(sorted(NORMS)),
    dtype=st.sampled_from([torch.float32, torch.float16]),
    m=st.integers(1, 3),
    vectors=st.integers(129, 2048),  # N = 8 * vectors - short: 1025-16384 columns
    short=st.sampled_from([0, 0, 0, 1, 2, 4, 7]),
    weight=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_public_forwards_of_1025_to_16384_columns(op, dtype, m, vectors, short, weight, seed,
                                                  monkeypatch, device):  # fmt: skip
    """The public norm forwards with the shipped row table, at random widths (mostly whole
    16-byte vectors, which the table's launches take, some not), against float64; whichever
    kernel the dispatch picks, the table's one-row-a-program one (whole-row or looped) exactly
    where ``norm_fwd_wide_launch`` says."""
    torch.manual_seed(seed)
    center, residual = NORMS[op]
    N = 8 * vectors - short
    x, r, w, b = operands(m, N, dtype, device, shift=20.0 if center else 0.0)
    w = w if weight else None
    with monkeypatch.context() as patched:  # undone after each example
        patched.delenv(WIDE_ROWS, raising=False)
        spies = {name: LaunchSpy(getattr(wide_kernels, name))
                 for name in ("norm_fwd_wide_kernel", "norm_fwd_looped_kernel")}  # fmt: skip
        for name, spy in spies.items():
            patched.setattr(wide_kernels, name, spy)
        if op == "layer":
            b = b if weight else None
            got, want = (layer_norm(x, w, b, 1e-5),), expected(x, w, b, None, 1e-5, 0.0, True)
        elif op == "add_rms":
            got = rms_norm(x, w, 1e-6, residual=r)
            want = expected(x, w, None, r, 1e-6, 0.0, False)
        else:
            offset = 0.25 if weight else 0.0  # an offset needs a weight (ValueError)
            got = (rms_norm(x, w, 1e-6, offset=offset),)
            want = expected(x, w, None, None, 1e-6, offset, False)
    kernel = "layer_norm.fwd" if center else "add_rms_norm.fwd" if residual else "rms_norm.fwd"
    launched = sum(len(spy.grids) for spy in spies.values())
    assert launched == (norm.norm_fwd_wide_launch(N, x.element_size(), kernel) is not None)
    assert got[0].dtype == dtype
    torch.testing.assert_close(got[0].double(), want[0], atol=TOL[dtype], rtol=TOL[dtype])
    if residual:
        assert torch.equal(got[1], want[1])


@pytest.mark.parametrize(
    "key", sorted(norm.NORM_FWD_ROW_LAUNCHES), ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}"
)
def test_shipped_row_launches_compute_right(key, device, poison_outputs):
    """Each launch of the shipped row table at a ragged row of its power of two."""
    size, kernel, block = key
    launch = norm.NORM_FWD_ROW_LAUNCHES[key]
    # one 16-byte vector short of the power of two, or the narrowest row the launch takes; a
    # whole-chunks launch one chunk short (the power of two where that is its only chunk), and
    # not one vector short of that
    N = max(block - 16 // size, launch.min_n)
    if launch.whole_chunks:
        N = block - launch.chunk if block > launch.chunk else block
        assert norm.norm_fwd_wide_launch(N - 16 // size, size, kernel) is None
    assert norm.norm_fwd_wide_launch(N, size, kernel) == launch
    assert norm.norm_fwd_wide_launch(block // 2, size, kernel) != launch
    center, residual = kernel.startswith("layer"), kernel.startswith("add_")
    dtype = torch.float32 if size == 4 else torch.float16  # bf16 loads: GPU only
    x, r, w, b = operands(3, N, dtype, device, shift=20.0 if center else 0.0)
    b = b if center else None
    r = r if residual else None
    got = norm.wide_norm_forward(x, w, b, r, 1e-6, 0.0, center, launch)
    check(got, expected(x, w, b, r, 1e-6, 0.0, center), dtype, center, residual)


SHIPPED_TABLES = {
    "wide": (norm.NORM_FWD_WIDE_LAUNCHES, lambda size: (16384 + 16 // size, 32768, 24577)),
    "long": (norm.NORM_FWD_LONG_LAUNCHES, lambda size: (32768 + 16 // size, 65536, 40961)),
}
"""The shipped norm forward tables of one-row-a-program launches, each with the row lengths
its launches are checked at: one 16-byte vector past the narrowest, the widest and one of no
whole 16-byte vectors (the op keeps its other kernels there where the launch is ``aligned``)."""


@pytest.mark.parametrize(
    ("table", "key"),
    [(name, key) for name, (launches, _) in SHIPPED_TABLES.items() for key in sorted(launches)],
    ids=lambda v: v if isinstance(v, str) else f"{v[1]}-{v[0]}B",
)
def test_shipped_wide_launches_compute_right(table, key, monkeypatch, device, poison_outputs):
    """Each launch of the shipped tables through the public op, on the kernel it names (the
    looped one: a ragged last chunk, then whole chunks only), at ``SHIPPED_TABLES``' lengths,
    and one column past the table's widest taking no launch of it."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    size, kernel = key
    launches, lengths = SHIPPED_TABLES[table]
    launch = launches[key]
    name = "norm_fwd_looped_kernel" if launch.chunk else "norm_fwd_wide_kernel"
    spy = LaunchSpy(getattr(wide_kernels, name))
    monkeypatch.setattr(wide_kernels, name, spy)
    center, residual = kernel.startswith("layer"), kernel.startswith("add_")
    # bf16 loads are wrong under the interpreter: fp16 there
    dtype = (
        torch.float32 if size == 4 else torch.float16 if device.type == "cpu" else torch.bfloat16
    )
    widest = max(lengths(size))
    for N in (*lengths(size), widest + 1):
        spy.grids.clear()
        x, r, w, b = operands(2, N, dtype, device, shift=20.0 if center else 0.0)
        if center:
            got, want = (layer_norm(x, w, b, 1e-5),), expected(x, w, b, None, 1e-5, 0.0, True)
        elif residual:
            got, want = rms_norm(x, w, 1e-6, residual=r), expected(x, w, None, r, 1e-6, 0.0, False)
        else:
            got, want = (rms_norm(x, w, 1e-6),), expected(x, w, None, None, 1e-6, 0.0, False)
        taken = widest >= N and not (launch.aligned and N * size % 16)
        assert (norm.norm_fwd_wide_launch(N, size, kernel) == launch) == taken, N
        if widest >= N:  # past it, other tables' or kernels' launches may run this kernel
            assert len(spy.grids) == taken, N
        torch.testing.assert_close(got[0].double(), want[0], atol=TOL[dtype], rtol=TOL[dtype])
        if residual:
            assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("op", list(NORMS))
def test_public_norms_take_the_wide_kernel(op, wide_on, monkeypatch, device, poison_outputs):
    """16385-32768 columns take the whole-row kernel where its table lists a launch;
    WARPFORGE_WIDE_ROWS=0 turns it off; 16384 and 32769 columns never take it."""
    spy = LaunchSpy(wide_kernels.norm_fwd_wide_kernel)
    monkeypatch.setattr(wide_kernels, "norm_fwd_wide_kernel", spy)
    center, residual = NORMS[op]

    def run(N):
        x, r, w, b = operands(2, N, torch.float32, device)
        if op == "rms":
            return (rms_norm(x, w, 1e-6, offset=0.5),), expected(x, w, None, None, 1e-6, 0.5, False)
        if op == "add_rms":
            return rms_norm(x, w, 1e-6, residual=r), expected(x, w, None, r, 1e-6, 0.0, False)
        return (layer_norm(x, w, b, 1e-5),), expected(x, w, b, None, 1e-5, 0.0, True)

    for N, launches in ((16411, 1), (32768, 1), (16384, 0), (32769, 0)):
        spy.grids.clear()
        got, want = run(N)
        assert len(spy.grids) == launches, N
        torch.testing.assert_close(got[0].double(), want[0], atol=1e-5, rtol=1e-5)
        if residual:
            assert torch.equal(got[1], want[1])
    monkeypatch.setenv(WIDE_ROWS, "0")
    spy.grids.clear()
    run(16411)
    assert not spy.grids
    monkeypatch.delenv(WIDE_ROWS)
    kernel = "layer_norm.fwd" if center else "add_rms_norm.fwd" if residual else "rms_norm.fwd"
    monkeypatch.delitem(norm.NORM_FWD_WIDE_LAUNCHES, (4, kernel))
    run(16411)
    assert not spy.grids  # not listed: the chunked kernel


SOFTMAX_TABLES = {
    "wide": (softmax_ops.FWD_WIDE_LAUNCHES, (16385, 24577, 32768)),
    "long": (softmax_ops.FWD_LONG_LAUNCHES, (32769, 40961, 65536)),
}
"""The shipped softmax forward tables, each with the row lengths it is checked at (the
narrowest and one other of no whole 16-byte vectors, the widest)."""


@pytest.mark.parametrize(
    ("table", "size"),
    [(name, size) for name, (launches, _) in SOFTMAX_TABLES.items() for size in sorted(launches)],
    ids=lambda v: v if isinstance(v, str) else f"{v}B",
)
def test_shipped_softmax_launches_compute_right(table, size, monkeypatch, device, poison_outputs):
    """Each launch of the shipped softmax forward tables through the public ops, on the
    kernel it names, where it applies (``aligned`` launches leave rows of no whole 16-byte
    vectors to the split kernel), and one column past the table's widest taking none of it."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    launches, lengths = SOFTMAX_TABLES[table]
    launch = launches[size]
    name = "softmax_fwd_looped_kernel" if launch.chunk else "softmax_fwd_wide_kernel"
    spy = LaunchSpy(getattr(wide_kernels, name))
    monkeypatch.setattr(wide_kernels, name, spy)
    dtype = (
        torch.float32 if size == 4 else torch.float16 if device.type == "cpu" else torch.bfloat16
    )
    for N in (*lengths, max(lengths) + 1):
        taken = max(lengths) >= N and not (launch.aligned and N * size % 16)
        assert (softmax_ops.softmax_fwd_wide_launch(N, size) == launch) == taken, N
        x = (torch.randn(2, N, device=device) * 3).to(dtype)
        for log in (False, True):
            spy.grids.clear()
            y = (log_softmax if log else softmax)(x)
            if max(lengths) >= N:
                assert len(spy.grids) == taken, N
            torch.testing.assert_close(y.double(), softmax_expected(x, log),
                                       atol=softmax_atol(dtype, log), rtol=TOL[dtype])  # fmt: skip


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_shipped_softmax_backward_routes(fn, monkeypatch, device, poison_outputs):
    """The shipped 2-byte backward tables through autograd: softmax takes its whole-row launch
    from 24576 columns; log-softmax takes its own (32 warps) from 28672 and, at the narrower
    rows softmax's launch takes, the split kernel; both right against float64, with the
    incoming gradient's rows apart in memory."""
    import warpforge.ops._kernels.softmax as softmax_kernels

    monkeypatch.delenv(WIDE_ROWS, raising=False)
    wide = LaunchSpy(wide_kernels.softmax_bwd_wide_kernel)
    split = LaunchSpy(softmax_kernels.softmax_bwd_flags_kernel)
    monkeypatch.setattr(wide_kernels, "softmax_bwd_wide_kernel", wide)
    monkeypatch.setattr(softmax_kernels, "softmax_bwd_flags_kernel", split)
    log = fn is log_softmax
    dtype = torch.float16 if device.type == "cpu" else torch.bfloat16
    for N in (24576, 28671, 28672, 32768):
        wide.launches.clear()
        split.grids.clear()
        x = (torch.randn(2, N, device=device) * 3).to(dtype).requires_grad_()
        dy = torch.randn(2, N + 8, device=device).to(dtype)[:, :N]  # rows 8 elements apart
        y = fn(x, -1)
        (dx,) = torch.autograd.grad(y, x, dy)
        whole_row = not log or N >= 28672
        assert len(wide.launches) == whole_row, N
        assert bool(split.grids) == (not whole_row), N
        if whole_row:
            assert wide.launches[0]["num_warps"] == (32 if log else 16), N
        want = softmax_dx_expected(dy, y.detach(), log)
        torch.testing.assert_close(dx.double(), want, atol=TOL[dtype] * 1e-1, rtol=TOL[dtype])


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_public_softmax_takes_the_wide_kernels(fn, wide_on, monkeypatch, device, poison_outputs):
    fwd = LaunchSpy(wide_kernels.softmax_fwd_wide_kernel)
    bwd = LaunchSpy(wide_kernels.softmax_bwd_wide_kernel)
    monkeypatch.setattr(wide_kernels, "softmax_fwd_wide_kernel", fwd)
    monkeypatch.setattr(wide_kernels, "softmax_bwd_wide_kernel", bwd)
    log = fn is log_softmax
    for N, launches in ((16411, 1), (32768, 1), (16384, 0), (32769, 0)):
        fwd.grids.clear()
        bwd.grids.clear()
        x = (torch.randn(2, N, device=device) * 3).requires_grad_()
        dy = torch.randn(2, N, device=device)
        y = fn(x, -1)
        (dx,) = torch.autograd.grad(y, x, dy)
        assert (len(fwd.grids), len(bwd.grids)) == (launches, launches), N
        torch.testing.assert_close(y.double(), softmax_expected(x.detach(), log),
                                   atol=1e-7, rtol=1e-5)  # fmt: skip
        torch.testing.assert_close(dx.double(), softmax_dx_expected(dy, y.detach(), log),
                                   atol=1e-5, rtol=1e-5)  # fmt: skip
    monkeypatch.setenv(WIDE_ROWS, "off")
    fwd.grids.clear()
    fn(torch.randn(2, 16411, device=device), -1)
    assert not fwd.grids


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(NORMS))
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"]
)
@pytest.mark.parametrize(
    ("M", "N"),
    [(300, 32768), (5, 16411), (131, 24577), (1, 16385), (129, 4096), (7, 2040), (3, 16376)],
)
def test_norm_forward_gpu(op, dtype, M, N, poison_outputs):
    """Every launch option and the public op (the shipped dispatch, the row table's launches at
    2040-16376 columns) on the GPU."""
    center, residual = NORMS[op]
    x, r, w, b = operands(M, N, dtype, "cuda", shift=20.0 if center else 0.0)
    r = r if residual else None
    b = b if center else None
    want = expected(x, w, b, r, 1e-6, 0.0, center)
    for launch in LAUNCHES.values():
        got = norm.wide_norm_forward(x, w, b, r, 1e-6, 0.0, center, launch)
        check(got, want, dtype, center, residual)
    got = norm._forward(x, w, b, r, 1e-6, 0.0, center)
    check(got, want, dtype, center, residual)


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(NORMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_norm_forward_specialized_gpu(op, dtype, poison_outputs):
    """Launches compiled for the row length (the sweeps' shapes) on the GPU against float64:
    packed rows, a ragged width, and rows of a wider buffer (run unspecialized)."""
    center, residual = NORMS[op]
    launches = [WideLaunch(16, reload=True, specialized=True),
                WideLaunch(16, chunk=2048, forwards=True, specialized=True),
                WideLaunch(16, chunk=4096, forwards=True, unrolled=True, max_registers=64,
                           specialized=True)]  # fmt: skip
    for M, N, stride in ((300, 16384, None), (5, 16411, None), (129, 8192, None), (7, 8192, 8200)):
        x, r, w, b = operands(M, N, dtype, "cuda", stride, shift=20.0 if center else 0.0)
        if stride:
            x = torch.zeros(M, stride, dtype=dtype, device="cuda")[:, :N].copy_(x)
        r = r if residual else None
        b = b if center else None
        want = expected(x, w, b, r, 1e-6, 0.0, center)
        for la in launches:
            check(norm.wide_norm_forward(x, w, b, r, 1e-6, 0.0, center, la), want, dtype,
                  center, residual)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("launch", [16, 32])
@pytest.mark.parametrize("rows", ["around-one-mean", "first-value-far"])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"]
)
def test_layer_norm_one_reduction_gpu(launch, rows, dtype, poison_outputs):
    """The one-reduction LayerNorm moments compiled for the GPU at the sweeps' warp counts, x
    held and read again, rows around one mean and rows whose first value is far (the second
    reduction), against float64."""
    for M, N in ((300, 16384), (5, 16411), (129, 8192), (3, 32768)):
        x, _, w, b = operands(M, N, dtype, "cuda", shift=20.0)
        if rows == "first-value-far":
            x[:, 0] = 80.0
        for reload in (False, True):
            la = WideLaunch(launch, reload=reload, one_reduction=True)
            got = norm.wide_norm_forward(x, w, b, None, 1e-6, 0.0, True, la)
            check(got, expected(x, w, b, None, 1e-6, 0.0, True), dtype, True, False)


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"]
)
@pytest.mark.parametrize(("M", "N"), [(300, 32768), (5, 16411), (131, 24577)])
def test_softmax_gpu(log, dtype, M, N, poison_outputs):
    x = (torch.randn(M, N, device="cuda") * 3).to(dtype)
    x[0, N - 1] = 40.0
    want = softmax_expected(x, log)
    for launch in ("32w", "32w-stream", "16w-early-stream", None):
        if launch is None:
            y = (log_softmax if log else softmax)(x)
        else:
            y = softmax_ops.wide_softmax_forward(x, log, LAUNCHES[launch])
        torch.testing.assert_close(y.double(), want, atol=softmax_atol(dtype, log),
                                   rtol=TOL[dtype])  # fmt: skip
    y = want.to(dtype)
    dy = torch.randn(M, N, device="cuda").to(dtype)
    want_dx = softmax_dx_expected(dy, y, log)
    scale = want_dx.abs().max().item()
    for launch in ("32w", "32w-stream", "16w-early-stream"):
        dx = torch.empty_like(y)
        softmax_ops.wide_softmax_backward(dy, y, dx, log, LAUNCHES[launch])
        torch.testing.assert_close(dx.double() / scale, want_dx / scale, atol=TOL[dtype],
                                   rtol=TOL[dtype])  # fmt: skip


LOOPED_GPU = {
    "4096c-16w-unrolled-forwards": WideLaunch(16, chunk=4096, forwards=True, unrolled=True),
    "8192c-32w-unrolled": WideLaunch(32, chunk=8192, unrolled=True),
    "2048c-8w": WideLaunch(8, chunk=2048),
}
"""Looped launches of the sizes the sweeps time, compiled by the GPU's Triton."""


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"]
)
@pytest.mark.parametrize(("M", "N"), [(300, 32768), (5, 16411), (67, 65536), (3, 40961)])
def test_softmax_looped_gpu(log, dtype, M, N, poison_outputs):
    """The looped softmax forward on the GPU against float64: logits far from zero, a
    dominant last logit, a chunk of -inf."""
    x = (torch.randn(M, N, device="cuda") * 4 - 30).to(dtype)
    x[0, N - 1] = 20.0
    x[M - 1, 4096:8192] = float("-inf")
    want = softmax_expected(x, log)
    finite = torch.isfinite(want)
    # fp32 log-softmax near the row's max: (x - max) exact, then log(sum) off by its ulps
    atol = TOL[dtype] * 1e-2 + (2 * torch.finfo(dtype).eps if log else 0.0)
    for launch in LOOPED_GPU.values():
        y = softmax_ops.wide_softmax_forward(x, log, launch)
        assert torch.equal(torch.isfinite(y), finite)
        torch.testing.assert_close(y[finite].double(), want[finite], atol=atol, rtol=TOL[dtype])


@pytest.mark.gpu
def test_more_than_2_to_31_elements_gpu():
    """64-bit row offsets: the last rows of a 2**31 + 32768-element bf16 matrix."""
    n = 32768
    m = 2**31 // n + 1
    x = torch.empty(m, n, dtype=torch.bfloat16, device="cuda").normal_()
    w = torch.randn(n, device="cuda").to(torch.bfloat16)
    tail = slice(m - 2, m)
    for launch in (WideLaunch(32), WideLaunch(16)):
        y = norm.wide_norm_forward(x, w, None, None, 1e-6, 0.0, False, launch)[0]
        want = expected(x[tail], w, None, None, 1e-6, 0.0, False)
        torch.testing.assert_close(y[tail].double(), want[0], atol=1.6e-2, rtol=1.6e-2)
        del y
        for softmax_launch in (launch, LOOPED_GPU["4096c-16w-unrolled-forwards"]):
            s = softmax_ops.wide_softmax_forward(x, False, softmax_launch)
            # probabilities of about 1 / n: an absolute tolerance of that size would pass zeros
            torch.testing.assert_close(s[tail].double(), softmax_expected(x[tail], False),
                                       atol=1.6e-2 / n, rtol=1.6e-2)  # fmt: skip
            del s


def test_a_launch_serves_rows_from_its_min_n(monkeypatch):
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    launches = {2: WideLaunch(32, min_n=24576), 4: WideLaunch(16), 8: WideLaunch(aligned=True)}
    assert wide_launch(launches, 2, 24575, 2) is None
    assert wide_launch(launches, 2, 24576, 2) == launches[2]
    assert wide_launch(launches, 2, 32768, 2) == launches[2]
    assert wide_launch(launches, 2, 32769, 2) is None
    assert wide_launch(launches, 4, 16384, 4) is None
    assert wide_launch(launches, 4, 16385, 4) == launches[4]
    assert wide_launch(launches, 1, 20000, 1) is None
    assert wide_launch(launches, 4, 20000, 4, enabled=False) is None
    # aligned: rows of whole 16-byte vectors only
    assert wide_launch(launches, 8, 20000, 2) == launches[8]
    assert wide_launch(launches, 8, 20004, 2) is None
    assert wide_launch(launches, 8, 20004, 4) == launches[8]
    monkeypatch.setenv(WIDE_ROWS, "no")
    assert wide_launch(launches, 4, 20000, 4) is None


def test_shipped_tables_route_as_measured(monkeypatch):
    """bf16 LayerNorm takes its looped launch for rows of no whole 16-byte vectors too, bf16
    RMSNorm and add+RMSNorm leave those rows to the split kernel; past 32768 columns the long
    table's launches, rows of whole 16-byte vectors only; the softmax forward's tables; the
    2-byte softmax backward takes the whole-row kernel from 24576 columns."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    assert norm.norm_fwd_wide_launch(24576, 2, "layer_norm.fwd") is not None
    assert norm.norm_fwd_wide_launch(24577, 2, "layer_norm.fwd").chunk == 4096
    assert norm.norm_fwd_wide_launch(24576, 2, "rms_norm.fwd") is not None
    assert norm.norm_fwd_wide_launch(24577, 2, "rms_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(24577, 2, "add_rms_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(16385, 4, "layer_norm.fwd") is not None
    # past 32768 columns, bf16 LayerNorm and RMSNorm walk rows of up to 65536 in 8192-column
    # chunks (not rows of no whole 16-byte vectors); float32 and add+RMSNorm keep the split kernel
    assert norm.norm_fwd_wide_launch(65536, 2, "layer_norm.fwd").chunk == 8192
    assert norm.norm_fwd_wide_launch(40968, 2, "rms_norm.fwd").chunk == 8192
    assert norm.norm_fwd_wide_launch(40961, 2, "rms_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(40961, 2, "layer_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(65537, 2, "layer_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(65536, 4, "layer_norm.fwd") is None
    assert norm.norm_fwd_wide_launch(65536, 2, "add_rms_norm.fwd") is None
    # the 2-byte softmax forward walks rows of 16385-65536 columns in 4096-column chunks, on 16
    # warps; float32 holds its row whole to 32768 columns
    fwd = softmax_ops.softmax_fwd_wide_launch
    assert fwd(16384, 2) is fwd(65537, 2) is None
    assert fwd(16385, 2).chunk == fwd(24577, 2).chunk == fwd(32768, 2).chunk == 4096
    assert fwd(32769, 2).chunk == fwd(40961, 2).chunk == fwd(65536, 2).chunk == 4096
    assert fwd(16385, 4).chunk == 0
    assert fwd(32769, 4) is None
    bwd = softmax_ops.BWD_WIDE_LAUNCHES
    assert wide_launch(bwd, 2, 24575, 2) is None
    assert wide_launch(bwd, 2, 24576, 2) is not None
    assert wide_launch(bwd, 4, 32768, 4) is None
    # log-softmax's backward: 32 warps from 28672 columns (its 16-warp launch lost on the H200)
    log_bwd = softmax_ops.LOG_BWD_WIDE_LAUNCHES
    assert wide_launch(log_bwd, 2, 28671, 2) is None
    assert wide_launch(log_bwd, 2, 28672, 2).num_warps == 32
    assert wide_launch(log_bwd, 4, 32768, 4) is None
    # register caps of 64 a thread where they won on the H200 (session 31), not elsewhere
    assert fwd(16385, 2).max_registers == fwd(32768, 2).max_registers == 64
    assert fwd(32769, 2).max_registers == fwd(65536, 2).max_registers == 64
    assert norm.norm_fwd_wide_launch(32768, 2, "layer_norm.fwd").max_registers == 64
    assert norm.norm_fwd_wide_launch(65536, 2, "layer_norm.fwd").max_registers == 64
    assert norm.norm_fwd_wide_launch(65536, 2, "rms_norm.fwd").max_registers == 64
    assert norm.norm_fwd_wide_launch(32768, 2, "rms_norm.fwd").max_registers is None
