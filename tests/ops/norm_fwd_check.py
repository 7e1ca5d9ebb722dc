"""The float64 reference and the checks of the norm forward kernels' (y, h, mean, rstd), shared
by the split-row and the whole-row forward tests."""

from __future__ import annotations

import torch

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def operands(M, N, dtype, device, stride=None, shift=0.0):
    """x (a row view of a wider buffer with ``stride``; ``shift`` moves rows far from zero,
    where a sum-of-squares variance cancels), residual, weight, bias."""
    x = (torch.randn(M, stride or N, device=device) * 2 + shift)[:, :N].to(dtype)
    r = torch.randn(M, stride or N, device=device)[:, :N].to(dtype)
    w = torch.randn(N, device=device).to(dtype)
    b = torch.randn(N, device=device).to(dtype)
    return x, r, w, b


def expected(x, w, b, r, eps, offset, center):
    """(y, h, mean, rstd) in float64, computed on the CPU and returned on x's device; h = x + r
    rounded to the input dtype, as the kernels do."""
    device = x.device
    x, w, b, r = (None if t is None else t.cpu() for t in (x, w, b, r))
    h = (x.float() + r.float()).to(x.dtype) if r is not None else x
    h64 = h.double()
    mean = h64.mean(-1) if center else torch.zeros(h.shape[0], dtype=torch.float64)
    c = h64 - mean[:, None] if center else h64
    rstd = torch.rsqrt(c.square().mean(-1) + eps)
    y = c * rstd[:, None]
    if w is not None:
        y = y * (offset + w.double())
    if b is not None:
        y = y + b.double()
    return tuple(t.to(device) for t in (y, h, mean, rstd))


def check(got, want, dtype, center, residual):
    """A kernel's (y, h, mean, rstd) against ``expected``'s: y within the dtype's tolerance, the
    statistics to 1e-5, h bit-exact; the outputs a variant does not produce are empty."""
    y, h, mean, rstd = got
    wy, wh, wmean, wrstd = want
    assert y.dtype == dtype and y.shape == wy.shape
    torch.testing.assert_close(y.double(), wy, atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(rstd.double(), wrstd, atol=1e-5, rtol=1e-5)
    if center:
        torch.testing.assert_close(mean.double(), wmean, atol=1e-5, rtol=1e-5)
    else:
        assert mean.numel() == 0
    if residual:
        assert torch.equal(h, wh)
    else:
        assert h.numel() == 0


def public_forward(op, x, r, w, b):
    """The public op's outputs, ``(y,)`` or ``(y, h)``, and :func:`expected`'s for norm ``op``
    ("rms", "add_rms" with residual ``r``, "layer" with bias ``b``), eps 1e-6 (LayerNorm 1e-5)."""
    from warpforge.ops import layer_norm, rms_norm

    if op == "layer":
        return (layer_norm(x, w, b, 1e-5),), expected(x, w, b, None, 1e-5, 0.0, True)
    if op == "add_rms":
        return rms_norm(x, w, 1e-6, residual=r), expected(x, w, None, r, 1e-6, 0.0, False)
    return (rms_norm(x, w, 1e-6),), expected(x, w, None, None, 1e-6, 0.0, False)
