"""replace_modules swaps torch and structurally equivalent norms in place, keeping Parameters."""

from __future__ import annotations

import pytest
import torch
from hf_style_norms import LlamaRMSNorm
from torch import nn

from warpforge.nn import LayerNorm, PromotedRMSNorm, RMSNorm, replace_modules


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
        "0.input_norm": ("LlamaRMSNorm", "PromotedRMSNorm"),  # weight * x.to(input_dtype)
        "0.post_norm": ("LayerNorm", "LayerNorm"),
        "0.gemma_norm": ("GemmaRMSNorm", "RMSNorm"),
        "0.torch_rms": ("RMSNorm", "RMSNorm"),
        "1.0": ("LayerNorm", "LayerNorm"),
    }
    skipped = {s.path: s.reason for s in report.skipped}
    assert set(skipped) == {"0.wide_norm", "0.impostor"}
    assert "2 trailing dimensions" in skipped["0.wide_norm"]
    assert "does not compute x * rsqrt(mean(x^2) + eps)" in skipped["0.impostor"]
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


class BiasRMSNorm(nn.Module):
    """An RMSNorm with a bias: warpforge's has none, so it must be skipped, even while the bias
    is still zero (training would move it)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight + self.bias


class WeightPlusOneRMSNorm(nn.Module):
    """Gemma's scaling written ``(self.weight + 1.0)``."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (self.weight + 1.0)


class CenteredRMSNorm(nn.Module):
    """Named RMSNorm, computes a LayerNorm without bias: must be skipped."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class EpsOutsideRMSNorm(nn.Module):
    """eps added after the square root: equal to the formula except near sqrt(eps)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight


class HelperGemmaRMSNorm(nn.Module):
    """Hugging Face's Gemma layout: the statistics in a ``_norm`` helper, not in forward."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class TwoArgumentRMSNorm(LlamaRMSNorm):
    def forward(self, hidden_states, scale):
        return super().forward(hidden_states) * scale


def _swap_one(norm: nn.Module):
    model = nn.Sequential(norm)
    report = replace_modules(model)
    return model[0], report


@pytest.mark.parametrize(
    ("norm", "reason"),
    [
        (BiasRMSNorm(12), "does not compute"),
        (CenteredRMSNorm(12), "does not compute"),
        (EpsOutsideRMSNorm(12, eps=1e-2), "does not compute"),
        (TwoArgumentRMSNorm(12), "forward(x) failed on a probe input"),
    ],
    ids=["bias", "centered", "eps-outside-sqrt", "two-arguments"],
)
def test_norms_named_rmsnorm_that_compute_something_else_are_skipped(norm, reason):
    original = norm
    kept, report = _swap_one(norm)
    assert kept is original and not report.swapped
    (skipped,) = report.skipped
    assert reason in skipped.reason, skipped.reason


@pytest.mark.parametrize(
    ("norm_class", "to_class"),
    # x * (weight + 1.0) promotes a bfloat16 x with a float32 weight; Gemma's casts back
    [(WeightPlusOneRMSNorm, "PromotedRMSNorm"), (HelperGemmaRMSNorm, "RMSNorm")],
)
def test_gemma_scaling_is_found_however_it_is_written(norm_class, to_class, device):
    norm = norm_class(24).to(device)
    _randomize(norm)
    x = torch.randn(5, 24, device=device)
    before = norm(x)
    new, report = _swap_one(norm)
    assert [s.to_class for s in report.swapped] == [to_class]
    assert new.offset == 1.0 and new.weight is norm.weight
    torch.testing.assert_close(new(x), before, atol=1e-5, rtol=1e-5)


def test_llama_norm_with_float32_weight_keeps_its_promoted_output_dtype(device):
    """Llama multiplies a float32 weight by the normalised input cast back to bfloat16: the
    output is float32, and the swapped module's must be too."""
    norm = LlamaRMSNorm(32, eps=1e-5).to(device)
    _randomize(norm)
    x = torch.randn(3, 32, device=device).to(torch.bfloat16)
    before = norm(x)
    new, report = _swap_one(norm)
    assert isinstance(new, PromotedRMSNorm) and report.swapped[0].to_class == "PromotedRMSNorm"
    after = new(x)
    assert before.dtype == after.dtype == torch.float32
    # Llama rounds the normalised x to bfloat16 before scaling; warpforge rounds only the output
    torch.testing.assert_close(after, before, atol=2e-2, rtol=1e-2)
    same_dtype = LlamaRMSNorm(32).to(device, torch.bfloat16)
    new, _ = _swap_one(same_dtype)
    assert new(x).dtype == torch.bfloat16


def test_norm_on_the_meta_device_is_probed_and_swapped():
    """Models built on the meta device (weights loaded later) are swapped too: the probe runs
    on a CPU copy and the meta Parameter is kept."""
    with torch.device("meta"):
        norm = HelperGemmaRMSNorm(16)
    new, report = _swap_one(norm)
    assert report.swapped and new.weight is norm.weight and new.weight.is_meta
    assert new.offset == 1.0
