"""warpforge.nn.RMSNorm / LayerNorm against torch.nn equivalents and fp64 formulas."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import warpforge.nn
from warpforge.nn import LayerNorm, RMSNorm


def test_rms_norm_module_matches_torch(device):
    n = 48
    ours = RMSNorm(n, eps=1e-5).to(device)
    theirs = nn.RMSNorm(n, eps=1e-5).to(device)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(n))
        theirs.weight.copy_(ours.weight)
    x = torch.randn(2, 3, n, device=device)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)
    ours(x).square().sum().backward()
    theirs(x).square().sum().backward()
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, atol=1e-4, rtol=1e-4)


def test_rms_norm_module_eps_none_uses_dtype_eps(device):
    ours, theirs = RMSNorm(16, eps=None).to(device), nn.RMSNorm(16).to(device)
    x = torch.randn(4, 16, device=device) * 1e-4  # small enough that eps matters
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_rms_norm_module_residual_and_offset(device):
    n = 20
    ours = RMSNorm(n, eps=1e-6, offset=1.0).to(device)
    assert torch.equal(ours.weight, torch.zeros(n, device=device))  # (1 + 0) scaling at init
    with torch.no_grad():
        ours.weight.normal_()
    x, r = torch.randn(3, n, device=device), torch.randn(3, n, device=device)
    y, h = ours(x, r)
    h64 = (x + r).double()
    y64 = h64 * torch.rsqrt(h64.square().mean(-1, keepdim=True) + 1e-6) * (1 + ours.weight.double())
    torch.testing.assert_close(y.double(), y64, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h, x + r)


@pytest.mark.parametrize(("affine", "bias"), [(True, True), (True, False), (False, False)])
def test_layer_norm_module_matches_torch(affine, bias, device):
    n = 33
    ours = LayerNorm(n, eps=1e-5, elementwise_affine=affine, bias=bias).to(device)
    theirs = nn.LayerNorm(n, eps=1e-5, elementwise_affine=affine, bias=bias).to(device)
    if affine:
        with torch.no_grad():
            ours.weight.normal_()
            theirs.weight.copy_(ours.weight)
            if bias:
                ours.bias.normal_()
                theirs.bias.copy_(ours.bias)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    x = torch.randn(5, n, device=device) + 2
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_module_argument_errors():
    with pytest.raises(ValueError, match=r"normalized_shape: expected a positive int"):
        RMSNorm((4, 8))
    with pytest.raises(ValueError, match=r"normalized_shape: expected a positive int"):
        LayerNorm(0)
    with pytest.raises(ValueError, match=r"eps: expected a finite number > 0"):
        LayerNorm(8, eps=0.0)
    with pytest.raises(ValueError, match=r"x: expected a last dimension of size 8 .*\(2, 9\)"):
        RMSNorm(8)(torch.randn(2, 9))
    with pytest.raises(ValueError, match=r"x: expected a last dimension of size 8"):
        LayerNorm(8)(torch.randn(8, 3))


def test_lazy_names_resolve():
    assert warpforge.nn.RMSNorm is RMSNorm
    assert "LinearCrossEntropyLoss" in dir(warpforge.nn)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        warpforge.nn.Nope  # noqa: B018
