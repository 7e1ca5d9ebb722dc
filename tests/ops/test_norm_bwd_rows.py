"""The backward rows kernel's measured launches (``norm.NORM_BWD_ROW_LAUNCHES``): the public
ops take them for the rows they list, and compute right on them (fresh random inputs, a float64
reference, outputs poisoned, tile counts that leave a ragged last tile)."""

from __future__ import annotations

import pytest
import torch

from launch_spy import LaunchSpy
from warpforge.ops import layer_norm, norm, rms_norm
from warpforge.ops._kernels import norm as kernels

SHIPPED = sorted(norm.NORM_BWD_ROW_LAUNCHES)


def _grads(center: bool, x, w, b, dy):
    """(dx, dweight[, dbias]) of the public op and of a float64 reference on the same inputs."""
    leaves = [t.detach().requires_grad_() for t in ((x, w, b) if center else (x, w))]
    y = layer_norm(*leaves, eps=1e-5) if center else rms_norm(*leaves, eps=1e-6)
    got = torch.autograd.grad(y, leaves, dy)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    x64, w64 = ref[0], ref[1]
    if center:
        mean = x64.mean(-1, keepdim=True)
        var = (x64 - mean).pow(2).mean(-1, keepdim=True)
        y64 = (x64 - mean) * torch.rsqrt(var + 1e-5) * w64 + ref[2]
    else:
        y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
    want = torch.autograd.grad(y64, ref, dy.double())
    return got, want


def _check(center: bool, m: int, n: int, dtype, device, tol: float) -> None:
    """The op's gradients against float64 at (m, n), the inputs fresh random values."""
    gen = torch.Generator(device=device).manual_seed(m * 7919 + n)
    x, dy = (torch.randn(m, n, generator=gen, device=device).to(dtype) for _ in "xd")
    w = (1 + 0.5 * torch.randn(n, generator=gen, device=device)).to(dtype)
    b = torch.randn(n, generator=gen, device=device).to(dtype)
    got, want = _grads(center, x + 3.0 if center else x, w, b, dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=False):
        assert torch.isfinite(g).all(), name
        scale = e.abs().max().item()  # dweight sums m rows: compare relative to its size
        torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol, msg=name)


@pytest.mark.parametrize("key", SHIPPED, ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}")
@pytest.mark.parametrize("columns", ["whole", "odd"])
def test_shipped_bwd_row_launches_compute_right(key, columns, device, monkeypatch, poison_outputs):
    """Each listed launch, on its power of two and on an odd row length just over half of it,
    over 23 rows (programs walking several tiles, the last ragged), float16 (its element size, and loads the
    interpreter reads right); the rows kernel runs with the launch's tile, warps, register cap
    and prefetch."""
    size, kernel, block = key
    launch = norm.NORM_BWD_ROW_LAUNCHES[key]
    assert size == 2 and kernel in ("layer_norm.bwd", "rms_norm.bwd")
    spy = LaunchSpy(kernels.norm_bwd_rows_kernel)
    monkeypatch.setattr(kernels, "norm_bwd_rows_kernel", spy)
    n = block if columns == "whole" else block // 2 + 3
    _check(kernel == "layer_norm.bwd", 23, n, torch.float16, device, 1e-2)
    assert len(spy.launches) == 1
    (got,) = spy.launches
    assert (got["ROWS"], got["BLOCK_N"], got["num_warps"], got["PREFETCH"]) == (
        launch.rows, launch.block_n, launch.num_warps, launch.prefetch
    )  # fmt: skip
    assert got.get("maxnreg") == launch.max_registers


def test_bwd_row_launches_cover_only_their_rows(device):
    """The table's launch for rows of more than half its power of two, of its element size and
    op only; none for an empty batch."""
    for (_, kernel, block), launch in norm.NORM_BWD_ROW_LAUNCHES.items():
        dtype = torch.float16
        got = norm.norm_bwd_row_overrides(64, block, dtype, device, kernel)
        assert got["launch"].block_n == launch.block_n
        assert got["launch"].max_registers == launch.max_registers
        assert got["knobs"].programs_per_sm == launch.programs_per_sm
        assert got["prefetch"] is launch.prefetch
        assert norm.norm_bwd_row_overrides(64, block // 2 + 1, dtype, device, kernel)
        assert not norm.norm_bwd_row_overrides(64, block // 2, dtype, device, kernel)
        assert not norm.norm_bwd_row_overrides(64, block, torch.float32, device, kernel)
        assert not norm.norm_bwd_row_overrides(64, block, dtype, device, "add_rms_norm.bwd")
        assert not norm.norm_bwd_row_overrides(0, block, dtype, device, kernel)


@pytest.mark.gpu
@pytest.mark.parametrize("key", SHIPPED, ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}")
def test_shipped_bwd_row_launches_bf16_gpu(key):
    """bf16 on the GPU, 4099 rows (a prime: every program runs several tiles, the last ragged),
    at the listed power of two."""
    _, kernel, block = key
    _check(kernel == "layer_norm.bwd", 4099, block, torch.bfloat16, "cuda", 5e-2)
