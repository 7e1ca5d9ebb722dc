"""scripts/gpu/matmul_lowering_ab.py: its one-GEMM blueprints compute what they are named for."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from script_module import load_script

matmul_lowering_ab = load_script("scripts/gpu/matmul_lowering_ab.py")


def test_one_gemm_blueprints_match_float64() -> None:
    one = matmul_lowering_ab._one_gemm_blueprints("float32")
    x, w1, b1 = torch.randn(7, 24), torch.randn(40, 24) / 5, torch.randn(40)
    h, w2, b2 = torch.randn(7, 40), torch.randn(24, 40) / 7, torch.randn(24)
    g, beta = torch.randn(24), torch.randn(24)
    d = torch.Tensor.double
    cases = [
        (one["linear_gelu"](x, w1, b1), F.gelu(F.linear(d(x), d(w1), d(b1)), approximate="tanh")),
        (one["linear_residual"](h, w2, b2, x), F.linear(d(h), d(w2), d(b2)) + d(x)),
        (one["layer_norm"](x, g, beta), F.layer_norm(d(x), (24,), d(g), d(beta), 1e-5)),
    ]
    for got, want in cases:
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)


def test_refuses_to_run_without_cuda(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the script would run for real")
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        matmul_lowering_ab.main([str(tmp_path / "ab.json")])
