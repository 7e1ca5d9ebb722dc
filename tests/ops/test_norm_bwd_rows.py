"""The backward rows kernel's measured launches (``norm.NORM_BWD_ROW_LAUNCHES``): the public
ops take them for the rows they list, and compute right on them (fresh random inputs, a float64
reference, outputs poisoned, tile counts that leave a ragged last tile)."""

from __future__ import annotations

import pytest
import torch
from norm_fwd_check import expected

from launch_spy import LaunchSpy
from warpforge.ops import layer_norm, norm, rms_norm
from warpforge.ops._kernels import norm as kernels

SHIPPED = sorted(norm.NORM_BWD_ROW_LAUNCHES)


def _outputs(kernel: str, x, r, w, b, eps: float):
    """The op's outputs: LayerNorm's y, RMSNorm's y, add+RMSNorm's (y, x + residual)."""
    if kernel == "layer_norm.bwd":
        return (layer_norm(x, w, b, eps=eps),)
    if kernel == "add_rms_norm.bwd":
        return rms_norm(x, w, eps=eps, residual=r)
    return (rms_norm(x, w, eps=eps),)


def _reference(kernel: str, x, r, w, b, eps: float):
    """The same outputs in plain float64 PyTorch (``norm_fwd_check.expected``, differentiable
    on float64 leaves)."""
    center, residual = kernel == "layer_norm.bwd", kernel == "add_rms_norm.bwd"
    y, h, _, _ = expected(x, w, b if center else None, r if residual else None, eps, 0.0, center)
    return (y, h) if residual else (y,)


def _check(kernel: str, m: int, n: int, dtype, device, tol: float) -> None:
    """The op's gradients (of every input, through every output) against float64 at (m, n), the
    inputs fresh random values."""
    gen = torch.Generator(device=device).manual_seed(m * 7919 + n)
    x, r, dy, dh = (torch.randn(m, n, generator=gen, device=device).to(dtype) for _ in "xrdh")
    w = (1 + 0.5 * torch.randn(n, generator=gen, device=device)).to(dtype)
    b = torch.randn(n, generator=gen, device=device).to(dtype)
    x = x + 3.0 if kernel == "layer_norm.bwd" else x  # rows off zero mean
    names = {"layer_norm.bwd": ("dx", "dweight", "dbias"), "rms_norm.bwd": ("dx", "dweight"),
             "add_rms_norm.bwd": ("dx", "dresidual", "dweight")}[kernel]  # fmt: skip
    inputs = {"dx": x, "dresidual": r, "dweight": w, "dbias": b}
    eps = 1e-5 if kernel == "layer_norm.bwd" else 1e-6
    leaves = {k: inputs[k].detach().requires_grad_() for k in names}
    full = {k: leaves.get(k, inputs[k]) for k in inputs}
    outputs = _outputs(kernel, full["dx"], full["dresidual"], full["dweight"], full["dbias"], eps)
    got = torch.autograd.grad(outputs, list(leaves.values()), (dy, dh)[: len(outputs)])
    ref = {k: inputs[k].detach().double().requires_grad_(k in names) for k in inputs}
    outputs = _reference(kernel, ref["dx"], ref["dresidual"], ref["dweight"], ref["dbias"], eps)
    want = torch.autograd.grad(outputs, [ref[k] for k in names],
                               (dy.double(), dh.double())[: len(outputs)])  # fmt: skip
    for name, g, e in zip(names, got, want, strict=True):
        assert torch.isfinite(g).all(), name
        scale = e.abs().max().item()  # dweight sums m rows: compare relative to its size
        torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol, msg=name)


@pytest.mark.parametrize("key", SHIPPED, ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}")
@pytest.mark.parametrize("columns", ["whole", "odd"])
def test_shipped_bwd_row_launches_compute_right(key, columns, device, monkeypatch, poison_outputs):
    """Each listed launch, on its power of two and on an odd row length just over half of it,
    over 37 rows (programs walking several tiles, the last ragged), in float16 for 2-byte
    entries (loads the interpreter reads right) and float32 for 4-byte ones; the rows kernel
    runs with the launch's tile, warps, register cap, prefetch and reload."""
    size, kernel, block = key
    launch = norm.NORM_BWD_ROW_LAUNCHES[key]
    spy = LaunchSpy(kernels.norm_bwd_rows_kernel)
    monkeypatch.setattr(kernels, "norm_bwd_rows_kernel", spy)
    n = block if columns == "whole" else block // 2 + 3
    dtype = {2: torch.float16, 4: torch.float32}[size]
    _check(kernel, 37, n, dtype, device, 1e-2 if size == 2 else 1e-4)
    assert len(spy.launches) == 1
    (got,) = spy.launches
    assert (got["ROWS"], got["BLOCK_N"], got["num_warps"], got["PREFETCH"], got["RELOAD"]) == (
        launch.rows, launch.block_n, launch.num_warps, launch.prefetch, launch.reload
    )  # fmt: skip
    assert got.get("maxnreg") == launch.max_registers


def test_bwd_row_launches_cover_only_their_rows(device):
    """The table's launch for rows of more than half its power of two, of its element size and
    op only; none for an empty batch."""
    other_size = {2: torch.float32, 4: torch.float16}
    for (size, kernel, block), launch in norm.NORM_BWD_ROW_LAUNCHES.items():
        dtype = {2: torch.float16, 4: torch.float32}[size]
        got = norm.norm_bwd_row_overrides(64, block, dtype, device, kernel)
        assert got["launch"].block_n == launch.block_n
        assert got["launch"].max_registers == launch.max_registers
        assert got["knobs"].programs_per_sm == launch.programs_per_sm
        assert got["knobs"].reload is launch.reload
        assert got["prefetch"] is launch.prefetch
        assert norm.norm_bwd_row_overrides(64, block // 2 + 1, dtype, device, kernel)
        assert not norm.norm_bwd_row_overrides(64, block // 2, dtype, device, kernel)
        if (other := (other_size[size].itemsize, kernel, block)) not in norm.NORM_BWD_ROW_LAUNCHES:
            assert not norm.norm_bwd_row_overrides(64, block, other_size[size], device, kernel), (
                other
            )
        assert not norm.norm_bwd_row_overrides(64, block, dtype, device, "softmax.bwd")
        assert not norm.norm_bwd_row_overrides(0, block, dtype, device, kernel)


@pytest.mark.gpu
@pytest.mark.parametrize("key", SHIPPED, ids=lambda k: f"{k[1]}-{k[0]}B-{k[2]}")
def test_shipped_bwd_row_launches_bf16_gpu(key):
    """On the GPU (bf16 for 2-byte entries), 4099 rows (a prime: every program runs several
    tiles, the last ragged), at the listed power of two."""
    size, kernel, block = key
    dtype = {2: torch.bfloat16, 4: torch.float32}[size]
    _check(kernel, 4099, block, dtype, "cuda", 5e-2 if size == 2 else 1e-4)
