"""The split-row softmax / log-softmax backward (``softmax_bwd_flags_kernel``): programs of a
row hold their chunk of y and dy, meet through flag words, write dx. Against float64 formulas,
on poisoned outputs; the interpreter runs its two-launch fallback."""

from __future__ import annotations

import pytest
import torch
from softmax_check import assert_dx_close, wrong_elements

import warpforge.ops._kernels.softmax
from launch_spy import LaunchSpy
from warpforge.ops import log_softmax, softmax, softmax_ops
from warpforge.ops._split_rows import split_row_plan

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# A row's total (sum of dy, or of dy * y) is added in float32 whatever the dtype, and dx_j
# carries weight_j times its rounding error (weight exp(y_j) or y_j), so a row with one dominant
# element shows it: 262144 columns put about 1e-4 of rounding into a total of |512|, 4e-5 into
# a dx of weight 0.33, over the fixed tolerance (H200, session 26 call 1). A tree sum's error
# has a spread of about eps * ||terms||_2 * sqrt(log2 N); the allowance is 16 of those, still
# a thousandth of what one lost or stale chunk partial (a 4096-column sum of dy, ~64) moves.
ROUNDING_SPREADS = 16


def expected_dx(dy: torch.Tensor, y: torch.Tensor, log: bool) -> torch.Tensor:
    dy64, y64 = dy.double(), y.double()
    if log:
        return dy64 - y64.exp() * dy64.sum(-1, keepdim=True)
    return y64 * (dy64 - (dy64 * y64).sum(-1, keepdim=True))


def operands(M, N, dtype, device, log, stride=None):
    """y as the forward makes it (a row of softmax or log-softmax), dy random; with ``stride``
    both are row views of wider buffers (row stride != N)."""
    x = torch.randn(M, stride or N, device=device) * 3
    x[0, N - 1] = 30.0  # a dominant element in the last chunk
    x = x[:, :N]
    y = (torch.log_softmax(x.double(), -1) if log else torch.softmax(x.double(), -1)).to(dtype)
    dy = (torch.randn(M, stride or N, device=device)[:, :N]).to(dtype)
    if stride is not None:
        y = torch.empty(M, stride, dtype=dtype, device=device)[:, :N].copy_(y)
    return dy, y


def allowed_error(dy: torch.Tensor, y: torch.Tensor, log: bool, want: torch.Tensor) -> torch.Tensor:
    """Per element: the dtype's tolerance plus the float32 rounding of the row total that dx_j
    carries (see ``ROUNDING_SPREADS``)."""
    dy64, y64 = dy.double(), y.double()
    terms, weight = (dy64, y64.exp()) if log else (dy64 * y64, y64)
    N = y.shape[-1]
    spread = (
        torch.finfo(torch.float32).eps * terms.norm(dim=-1, keepdim=True) * (N.bit_length() ** 0.5)
    )
    return TOL[y.dtype] * (1 + want.abs()) + weight.abs() * ROUNDING_SPREADS * spread


def row_errors(
    dx: torch.Tensor, want: torch.Tensor, y: torch.Tensor, log: bool, allowed: torch.Tensor
) -> str:
    """Which rows are wrong and, for log-softmax, the row total each implies (dx = dy -
    exp(y) * total, read at the row's largest exp(y)) against the right one: a chunk's partial
    missing or taken from another row shows as a difference of one chunk's sum of dy."""
    bad = wrong_elements(dx, want, allowed).any(-1)
    rows = bad.nonzero().flatten()[:8].tolist()
    lines = [f"{int(bad.sum())} of {dx.shape[0]} rows wrong, first {rows}"]
    if log:
        for row in rows:
            col = int(y[row].argmax())
            weight = y[row, col].double().exp()
            lines.append(
                f"row {row}: total off by {float((dx[row, col].double() - want[row, col]) / -weight):.6g}"
            )
    return "\n".join(lines)


def run_split(dy, y, log, plan):
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    softmax_ops.split_softmax_backward(dy, y, dx, log, plan)
    return dx


@pytest.mark.parametrize("prefetch", [False, True], ids=["load", "prefetch"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("M", "N", "stride"),
    [(1, 16, None), (7, 37, None), (5, 17, None), (4, 100, 131), (3, 67, None), (2, 643, 701)],
)
def test_split_backward_small_chunks(log, M, N, stride, prefetch, device, poison_outputs):
    """16-column chunks: a ragged last chunk, one row, primes, more rows than slots (each
    program loops; with ``prefetch`` it loads its next row before the poll), row strides wider
    than the row, and 41 chunks (two vectors of words; in float16 only, the interpreter's
    slowest case: the words' layout depends on the chunks, not the dtype)."""
    plan = split_row_plan(M, N, device, block=16, num_warps=1, prefetch=prefetch, flag_words=True)
    assert plan is not None and plan.chunks == -(-N // 16)
    for dtype in (torch.float16,) if plan.chunks > 32 else (torch.float32, torch.float16):
        dy, y = operands(M, N, dtype, device, log, stride)
        dx = run_split(dy, y, log, plan)
        assert dx.dtype == dtype and dx.shape == (M, N)
        torch.testing.assert_close(
            dx.double(), expected_dx(dy, y, log), atol=TOL[dtype], rtol=TOL[dtype]
        )


def test_row_errors_names_the_wrong_rows_and_the_total_they_imply():
    """The GPU test's failure message: a log-softmax dx whose row 2 used a total 0.75 too
    small (as if a chunk's partial sum of dy were lost) is reported as that row, off by -0.75;
    a NaN in row 3 (a value never written) counts as wrong too."""
    dy, y = operands(4, 300, torch.float32, "cpu", True)
    want = expected_dx(dy, y, True)
    dx = want.clone()
    dx[2] += y[2].double().exp() * 0.75  # dx = dy - exp(y) * (total - 0.75)
    dx[3, 7] = float("nan")
    report = row_errors(dx.float(), want, y, True, allowed_error(dy, y, True, want)).splitlines()
    assert report[0] == "2 of 4 rows wrong, first [2, 3]"
    prefix, implied = report[1].rsplit(" ", 1)
    assert prefix == "row 2: total off by"
    assert float(implied) == pytest.approx(-0.75, abs=1e-3)  # dx is float32, weight >= 1/N


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_allowed_error_takes_float32_rounding_and_catches_a_lost_chunk(log):
    """The allowance holds a float32 computation whose row totals add 64 chunk sums of 4096
    columns (row 0's dominant element carries its total's rounding at weight ~1) and still
    rejects the same dx with the largest chunk partial left out of row 0's total."""
    M, N, chunk = 3, 262144, 4096
    dy, y = operands(M, N, torch.float32, "cpu", log)
    dy[0, -1] = 1.5  # softmax's total is ~dy at the dominant element: keep it off zero
    want = expected_dx(dy, y, log)
    allowed = allowed_error(dy, y, log, want)
    terms = dy if log else dy * y
    partials = terms.view(M, N // chunk, chunk).sum(-1)  # float32 throughout, as the kernel
    for lost in (False, True):
        if lost:
            partials[0, partials[0].abs().argmax()] = 0.0
        total = partials.sum(-1, keepdim=True)
        dx = dy - y.exp() * total if log else y * (dy - total)
        if lost:
            with pytest.raises(AssertionError, match="off by more than allowed"):
                assert_dx_close(dx, want, allowed)
        else:
            assert_dx_close(dx, want, allowed)


def test_split_backward_refuses_more_chunks_than_the_poll_reads(device):
    plan = split_row_plan(2, 16 * 65, device, block=16, num_warps=1, flag_words=True)
    with pytest.raises(ValueError, match="at most 64 chunks"):
        run_split(*operands(2, 16 * 65, torch.float32, device, False), False, plan)


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_autograd_backward_of_long_rows_takes_the_split_kernel(fn, monkeypatch, device):
    """Past 16384 columns the backward splits rows over programs (8192-column chunks here)."""
    kernels = warpforge.ops._kernels.softmax
    spy = LaunchSpy(kernels.softmax_bwd_flags_kernel)
    monkeypatch.setattr(kernels, "softmax_bwd_flags_kernel", spy)
    softmax_ops._bwd_split_plan.cache_clear()
    M, N = 4, 16385
    x = (torch.randn(M, N, device=device) * 3).requires_grad_()
    dy = torch.randn(M, N, device=device)
    y = fn(x, -1)
    (dx,) = torch.autograd.grad(y, x, dy)
    # the interpreter runs the meeting in two launches (plan.stages()), a GPU in one
    assert len(spy.grids) == (1 if device.type == "cuda" else 2)
    torch.testing.assert_close(
        dx.double(), expected_dx(dy, y.detach(), fn is log_softmax), atol=1e-5, rtol=1e-5
    )


def test_wide_launch_only_where_its_gpu_measured_it(monkeypatch):
    """The H200 splits 2-byte rows of 65536 columns or more and float32 rows of 262144 over
    16384-column 16-warp programs (BWD_SPLIT_WIDE_LAUNCHES_BY_MODEL); narrower rows there, and
    every row on another GPU, keep BWD_SPLIT_LAUNCHES' 8192-column programs."""
    from warpforge.ops import _split_rows
    from warpforge.runtime import DeviceCapabilities

    def plan(model, N, element_size):
        caps = DeviceCapabilities(model, (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
        monkeypatch.setattr(_split_rows, "device_capabilities", lambda device: caps)
        softmax_ops._bwd_split_plan.cache_clear()
        got = softmax_ops._bwd_split_plan(8192, N, element_size, "cuda")
        return got.block, got.num_warps, -(-got.programs // 132)  # programs an SM

    try:
        wide = (16384, 16, 1)
        for N, element_size, want in ((65536, 2, wide), (262144, 2, wide), (32768, 2, None),
                                      (262144, 4, wide), (131072, 4, None)):  # fmt: skip
            narrow = softmax_ops.BWD_SPLIT_LAUNCHES[element_size]
            default = (narrow["block"], narrow["num_warps"], narrow["programs_per_sm"])
            assert plan("NVIDIA H200", N, element_size) == (want or default), (N, element_size)
            assert plan("NVIDIA H100 80GB HBM3", N, element_size) == default, (N, element_size)
    finally:
        softmax_ops._bwd_split_plan.cache_clear()


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("M", "N"), [(300, 262144), (5, 131072 + 7), (200, 40000), (1, 16385)])
def test_split_backward_gpu(log, dtype, M, N, poison_outputs):
    """The one-launch meeting through flag words, at the default plan (rows in several waves,
    ragged last chunk) and at each candidate launch of the sweep, with and without the next
    row's prefetch. Every plan is checked before the test fails, and the failure lists each
    wrong plan with its wrong rows (see ``row_errors``)."""
    dy, y = operands(M, N, dtype, "cuda", log)
    want = expected_dx(dy, y, log)
    allowed = allowed_error(dy, y, log, want)
    plan = softmax_ops._bwd_split_plan(M, N, dtype.itemsize, "cuda")
    plans = [plan] if plan is not None else []
    for block, warps, per_sm in ((8192, 4, 4), (8192, 8, 2), (4096, 4, 4), (4096, 4, 8)):
        for prefetch in (True, False):
            p = split_row_plan(M, N, "cuda", block=block, num_warps=warps,
                               programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
            if p is not None and p.chunks_pow2 <= 64:
                plans.append(p)
    assert plans
    failures = []
    for p in plans:
        dx = run_split(dy, y, log, p)
        try:
            assert_dx_close(dx, want, allowed)
        except AssertionError as mismatch:
            failures.append(f"{p}\n{mismatch}\n{row_errors(dx, want, y, log, allowed)}")
    assert not failures, f"{len(failures)} of {len(plans)} plans wrong:\n\n" + "\n\n".join(failures)
    if plan is not None:
        got = softmax_ops._softmax_bwd(dy, y, log)  # the dispatched op
        assert_dx_close(got, want, allowed)
