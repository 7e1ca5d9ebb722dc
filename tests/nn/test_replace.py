"""replace_modules swaps torch and structurally equivalent norms in place, keeping Parameters."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from warpforge.nn import LayerNorm, RMSNorm, replace_modules


class LlamaRMSNorm(nn.Module):
    """Written like Hugging Face's: fp32 statistics, cast back, then scaled by the weight."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (output * (1.0 + self.weight.float())).type_as(x)


class ScaleOnlyRMSNorm(nn.Module):
    """Named like an RMSNorm but computes something else: must be skipped."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = 1e-6

    def forward(self, x):
        return x * self.weight


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.input_norm = LlamaRMSNorm(n, eps=1e-5)
        self.proj = nn.Linear(n, n)
        self.post_norm = nn.LayerNorm(n)
        self.gemma_norm = GemmaRMSNorm(n)
        self.torch_rms = nn.RMSNorm(n, eps=1e-6)
        self.wide_norm = nn.LayerNorm((2, n // 2))
        self.impostor = ScaleOnlyRMSNorm(n)

    def forward(self, x):
        x = self.proj(self.input_norm(x))
        x = self.gemma_norm(self.post_norm(x))
        x = self.torch_rms(x)
        return self.impostor(self.wide_norm(x.view(*x.shape[:-1], 2, -1)).flatten(-2))


def _randomize(model):
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()


def test_swaps_in_place_and_preserves_outputs(device):
    n = 16
    model = nn.Sequential(Block(n), nn.ModuleList([nn.LayerNorm(n)])).to(device)
    _randomize(model)
    x = torch.randn(3, n, device=device)
    before = model[0](x)
    params_before = {name: p for name, p in model.named_parameters()}
    weight_object = model[0].input_norm.weight

    report = replace_modules(model)

    swapped = {s.path: (s.from_class, s.to_class) for s in report.swapped}
    assert swapped == {
        "0.input_norm": ("LlamaRMSNorm", "RMSNorm"),
        "0.post_norm": ("LayerNorm", "LayerNorm"),
        "0.gemma_norm": ("GemmaRMSNorm", "RMSNorm"),
        "0.torch_rms": ("RMSNorm", "RMSNorm"),
        "1.0": ("LayerNorm", "LayerNorm"),
    }
    skipped = {s.path: s.reason for s in report.skipped}
    assert set(skipped) == {"0.wide_norm", "0.impostor"}
    assert "2 trailing dimensions" in skipped["0.wide_norm"]
    assert "does not look like" in skipped["0.impostor"]
    assert isinstance(model[0].input_norm, RMSNorm) and isinstance(model[1][0], LayerNorm)
    assert model[0].gemma_norm.offset == 1.0 and model[0].input_norm.eps == 1e-5
    assert model[0].input_norm.weight is weight_object
    assert {name: p for name, p in model.named_parameters()} == params_before
    torch.testing.assert_close(model[0](x), before, atol=1e-5, rtol=1e-5)
    assert "swapped 5 module(s), skipped 2" in str(report)


def test_shared_module_becomes_one_shared_module():
    norm = nn.LayerNorm(8)
    model = nn.Sequential(norm, nn.Linear(8, 8), norm)
    report = replace_modules(model)
    assert [s.path for s in report.swapped] == ["0", "2"]
    assert model[0] is model[2] and isinstance(model[0], LayerNorm)


def test_training_mode_is_kept():
    model = nn.Sequential(nn.LayerNorm(8)).eval()
    replace_modules(model)
    assert not model[0].training


def test_float64_parameters_are_skipped():
    model = nn.Sequential(nn.LayerNorm(8).double())
    report = replace_modules(model)
    assert not report.swapped and "float64" in report.skipped[0].reason
    assert isinstance(model[0], nn.LayerNorm)


def test_root_norm_is_reported_not_swapped():
    report = replace_modules(nn.LayerNorm(8))
    assert report.skipped[0].reason.startswith("the root module")


def test_model_must_be_a_module():
    with pytest.raises(TypeError, match=r"model: expected a torch.nn.Module, got dict"):
        replace_modules({})
