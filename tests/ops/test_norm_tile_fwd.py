"""``norm_fwd_tile_kernel``: the norm forwards compiled for rows of exactly N columns (a power of
2), packed, within 32-bit offsets. Every norm, with and without weight and bias, rows a program
dividing M and not, against float64 on poisoned outputs; the rows it refuses; the public ops
taking it where ``NORM_FWD_TILE_LAUNCHES`` lists the row and keeping their kernels elsewhere."""

from __future__ import annotations

import pytest
import torch
from norm_fwd_check import TOL, check, expected, operands, public_forward

import warpforge.ops._kernels.norm as norm_kernels
from launch_spy import LaunchSpy
from warpforge.ops import norm

NORMS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}


def _dtypes(device):
    # bf16 loads are wrong under the interpreter: bf16 on the GPU only
    return (
        (torch.float32, torch.float16) if device.type == "cpu" else (torch.float32, torch.bfloat16)
    )


@pytest.mark.parametrize("op", list(NORMS))
@pytest.mark.parametrize(
    ("M", "N", "rows", "warps"),
    [(1, 1, 1, 1), (7, 16, 4, 1), (8, 256, 4, 1), (13, 256, 8, 2), (3, 1024, 2, 4)],
)
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no-weight"])
@pytest.mark.parametrize("early_w", [False, True], ids=["late-w", "early-w"])
def test_tile_forward_matches_float64(op, M, N, rows, warps, weight, early_w, device,
                                      poison_outputs):  # fmt: skip
    center, residual = NORMS[op]
    spy = LaunchSpy(norm_kernels.norm_fwd_tile_kernel)
    launch = norm.TileLaunch(rows, warps, early_w)
    for dtype in _dtypes(device):
        x, r, w, b = operands(M, N, dtype, device, shift=20.0 if center else 0.0)
        w = w if weight else None
        b = b if center and weight else None
        r = r if residual else None
        offset = 0.5 if weight and not center else 0.0
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(norm_kernels, "norm_fwd_tile_kernel", spy)
            got = norm.tile_norm_forward(x, w, b, r, 1e-6, offset, center, launch)
        check(got, expected(x, w, b, r, 1e-6, offset, center), dtype, center, residual)
    assert spy.grids == [(-(-M // rows),)] * len(_dtypes(device))
    assert {k["EVEN_ROWS"] for k in spy.launches} == {M % rows == 0}
    assert {k["N"] for k in spy.launches} == {N}
    assert {k["EARLY_W"] for k in spy.launches} == {early_w}


def test_tile_fits_only_packed_power_of_2_rows_within_32_bits():
    x = torch.randn(6, 256)
    assert norm.tile_fits(x, None, 4)
    assert norm.tile_fits(x, x.clone(), 4)
    assert not norm.tile_fits(torch.randn(6, 255), None, 1)  # not a power of 2
    assert not norm.tile_fits(torch.randn(6, 260)[:, :256], None, 1)  # rows of a wider buffer
    assert not norm.tile_fits(x, torch.randn(6, 260)[:, :256], 1)  # so is the residual
    assert not norm.tile_fits(torch.randn(256, 6).t(), None, 1)  # columns not unit-stride
    assert norm.tile_fits(torch.randn(1, 260)[:, :256], None, 1)  # one row: its stride is moot
    assert not norm.tile_fits(torch.randn(1, 512)[:, ::2], None, 1)  # its columns' is not
    # offsets of the last program's rows, masked ones included, must stay under 2**31
    big = torch.empty(2**23, 256, device="meta")  # 2**31 elements exactly
    assert not norm.tile_fits(big, None, 1)
    assert norm.tile_fits(big[: 2**23 - 1], None, 1)
    assert not norm.tile_fits(big[: 2**23 - 1], None, 2)  # padded to 2**23 rows


def test_tile_forward_refuses_rows_it_cannot_take(device):
    x = torch.randn(4, 260, device=device)[:, :256]
    with pytest.raises(ValueError, match="x: expected packed rows"):
        norm.tile_norm_forward(x, None, None, None, 1e-6, 0.0, False, norm.TileLaunch(1, 1))


@pytest.mark.parametrize("bad", [0, 3, -4, 2.0])
def test_tile_launch_takes_powers_of_2(bad):
    with pytest.raises(ValueError, match="rows: expected a power of 2"):
        norm.TileLaunch(bad, 1)
    with pytest.raises(ValueError, match="num_warps: expected a power of 2"):
        norm.TileLaunch(1, bad)


@pytest.mark.parametrize("op", list(NORMS))
def test_public_norms_take_the_tile_table(op, monkeypatch, device, poison_outputs):
    """Rows of a listed (element size, op, N) take the tile kernel when packed, the other
    kernels when not or at another length; the result is right either way."""
    center, residual = NORMS[op]
    kernel = "layer_norm.fwd" if center else "add_rms_norm.fwd" if residual else "rms_norm.fwd"
    monkeypatch.setattr(norm, "NORM_FWD_TILE_LAUNCHES", {(4, kernel, 256): norm.TileLaunch(4, 1)})
    spy = LaunchSpy(norm_kernels.norm_fwd_tile_kernel)
    monkeypatch.setattr(norm_kernels, "norm_fwd_tile_kernel", spy)
    for N, stride, launches in ((256, None, 1), (256, 264, 0), (128, None, 0)):
        spy.grids.clear()
        x, r, w, b = operands(5, N, torch.float32, device, stride, shift=20.0 if center else 0.0)
        got, want = public_forward(op, x, r, w, b)
        assert len(spy.grids) == launches, (N, stride)
        torch.testing.assert_close(got[0].double(), want[0], atol=1e-5, rtol=1e-5)
        if residual:
            assert torch.equal(got[1], want[1])


def test_one_row_of_strided_columns_keeps_the_other_kernels(monkeypatch, device, poison_outputs):
    """A single row whose columns are not unit-stride (every other column of a wider one) is
    not the tile kernel's to read: the op takes its other kernels and is right."""
    monkeypatch.setattr(
        norm, "NORM_FWD_TILE_LAUNCHES", {(4, "rms_norm.fwd", 256): norm.TileLaunch(1, 1)}
    )
    spy = LaunchSpy(norm_kernels.norm_fwd_tile_kernel)
    monkeypatch.setattr(norm_kernels, "norm_fwd_tile_kernel", spy)
    x, _, w, _ = operands(1, 512, torch.float32, device)
    got, want = public_forward("rms", x[:, ::2], None, w[::2], None)
    assert spy.grids == []
    torch.testing.assert_close(got[0].double(), want[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "key", sorted(norm.NORM_FWD_TILE_LAUNCHES), ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}"
)
def test_shipped_tile_launches_compute_right(key, device, poison_outputs):
    """Each shipped tile launch through its public op, rows a program dividing M and not."""
    size, kernel, N = key
    op = {"layer_norm.fwd": "layer", "add_rms_norm.fwd": "add_rms", "rms_norm.fwd": "rms"}[kernel]
    center, residual = NORMS[op]
    dtype = torch.float32 if size == 4 else torch.float16  # bf16 loads: GPU only
    rows = norm.NORM_FWD_TILE_LAUNCHES[key].rows
    for M in (rows * 3, rows * 3 + 1):
        x, r, w, b = operands(M, N, dtype, device, shift=20.0 if center else 0.0)
        got, want = public_forward(op, x, r, w, b)
        torch.testing.assert_close(got[0].double(), want[0], atol=TOL[dtype], rtol=TOL[dtype])
        if residual:
            assert torch.equal(got[1], want[1])
