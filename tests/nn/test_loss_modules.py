"""warpforge.nn loss modules and SwiGLU block, and a small Llama-style block trained with
warpforge ops against the same block in plain PyTorch."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hf_style_norms import LlamaRMSNorm
from torch import nn

import warpforge.nn.modules as warpforge_norm_modules
from warpforge import ops
from warpforge.nn import RMSNorm, replace_modules
from warpforge.nn.loss_modules import CrossEntropyLoss, LinearCrossEntropyLoss, SwiGLU


def test_cross_entropy_loss_module_matches_torch():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(10, 23, generator=gen, requires_grad=True)
    target = torch.randint(0, 23, (10,), generator=gen)
    target[3] = 4
    module = CrossEntropyLoss(ignore_index=4, reduction="sum", label_smoothing=0.2)
    expected = F.cross_entropy(logits, target, ignore_index=4, reduction="sum", label_smoothing=0.2)
    torch.testing.assert_close(module(logits, target), expected)
    assert "label_smoothing=0.2" in repr(module)


def test_cross_entropy_loss_module_adds_z_loss():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 9, generator=gen)
    target = torch.randint(0, 9, (6,), generator=gen)
    with_z = CrossEntropyLoss(z_loss=0.01)(logits, target)
    expected = F.cross_entropy(logits, target) + 0.01 * logits.logsumexp(-1).square().mean()
    torch.testing.assert_close(with_z, expected)


def test_linear_cross_entropy_loss_module_matches_unfused():
    gen = torch.Generator().manual_seed(2)
    head = nn.Linear(16, 41)
    hidden = torch.randn(2, 7, 16, generator=gen, requires_grad=True)
    target = torch.randint(0, 41, (2, 7), generator=gen)
    loss = LinearCrossEntropyLoss(chunk_size=5, reduction="none")(
        hidden, head.weight, target, head.bias
    )
    expected = F.cross_entropy(head(hidden).reshape(-1, 41), target.reshape(-1), reduction="none")
    torch.testing.assert_close(loss, expected.reshape(2, 7), atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(loss.sum(), (hidden, head.weight, head.bias))
    expected_grads = torch.autograd.grad(expected.sum(), (hidden, head.weight, head.bias))
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_swiglu_block_matches_plain_mlp():
    torch.manual_seed(3)
    block = SwiGLU(12, 30)
    x = torch.randn(3, 5, 12, requires_grad=True)
    out = block(x)
    expected = block.down_proj(F.silu(block.gate_proj(x)) * block.up_proj(x))
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    params = (x, *block.parameters())
    for got, want in zip(
        torch.autograd.grad(out.sum(), params),
        torch.autograd.grad(expected.sum(), params),
        strict=True,
    ):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: CrossEntropyLoss(reduction="avg"), ValueError, "reduction"),
        (lambda: CrossEntropyLoss(z_loss=-1.0), ValueError, "z_loss"),
        (lambda: CrossEntropyLoss(label_smoothing=3), ValueError, "label_smoothing"),
        (lambda: LinearCrossEntropyLoss(chunk_size=0), ValueError, "chunk_size"),
        (lambda: LinearCrossEntropyLoss(ignore_index="x"), TypeError, "ignore_index"),
        (lambda: SwiGLU(0, 4), ValueError, "hidden_size"),
        (lambda: SwiGLU(4, 2.5), ValueError, "intermediate_size"),
    ],
)
def test_invalid_module_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ---------------------------------------------------------------------------------------------
# A small Llama-style language model, built once with warpforge ops and once with plain torch.
# ---------------------------------------------------------------------------------------------


def rope_reference(q, k, cos, sin):
    def rotate(x):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos[:, None, :].to(x.dtype) + rotated * sin[:, None, :].to(x.dtype)

    return rotate(q), rotate(k)


NORMS = ("attn_norm", "mlp_norm", "final_norm")
LOSSES = ("cross_entropy", "fused_linear_cross_entropy")


class TinyLlama(nn.Module):
    """Plain PyTorch with ``loss=None``; with ``loss`` in LOSSES, warpforge's rope, SwiGLU and
    that loss (the norms are whatever modules it holds: patch them with replace_modules)."""

    def __init__(self, vocab=96, dim=64, heads=4, kv_heads=2, ffn=160, seq=16, loss=None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.loss = loss
        self.embed = nn.Embedding(vocab, dim)
        self.attn_norm = LlamaRMSNorm(dim)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = LlamaRMSNorm(dim)
        self.mlp = SwiGLU(dim, ffn)
        self.final_norm = LlamaRMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        angles = torch.arange(seq)[:, None] * 10000 ** (
            -torch.arange(0, self.head_dim, 2) / self.head_dim
        )
        self.register_buffer("cos", torch.cat([angles, angles], -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([angles, angles], -1).sin(), persistent=False)

    def forward(self, tokens, target):
        b, s = tokens.shape
        x = self.embed(tokens)
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.head_dim)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.head_dim)
        cos, sin = self.cos[:s], self.sin[:s]
        q, k = ops.rope(q, k, cos, sin) if self.loss else rope_reference(q, k, cos, sin)
        groups = self.heads // self.kv_heads
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, s, -1))
        h = self.mlp_norm(x)
        if self.loss:
            x = x + self.mlp(h)
        else:
            mlp = self.mlp
            x = x + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
        h = self.final_norm(x)
        if self.loss == "fused_linear_cross_entropy":
            return ops.fused_linear_cross_entropy(h, self.lm_head.weight, target, chunk_size=16)
        if self.loss == "cross_entropy":
            return ops.cross_entropy(self.lm_head(h), target)
        return F.cross_entropy(self.lm_head(h).flatten(0, 1).float(), target.flatten())


def train_losses(model, steps, batches, lr=3e-3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        tokens, target = batches[step % len(batches)]
        loss = model(tokens, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def compare_training(device, dtype, steps, rtol, loss, monkeypatch):
    """The plain model and a deep copy patched with replace_modules (every Llama-style norm
    swapped for warpforge's, whose op runs 3 times a step) that also uses warpforge's rope,
    SwiGLU and ``loss``: the same loss curve."""
    norm_calls = []

    def counted_rms_norm(*args, **kwargs):
        norm_calls.append(args[0].shape)
        return real_rms_norm(*args, **kwargs)

    real_rms_norm = warpforge_norm_modules.rms_norm
    monkeypatch.setattr(warpforge_norm_modules, "rms_norm", counted_rms_norm)
    torch.manual_seed(7)
    reference = TinyLlama().to(device=device, dtype=dtype)
    candidate = copy.deepcopy(reference)
    weights = {name: getattr(candidate, name).weight for name in NORMS}
    report = replace_modules(candidate)
    assert sorted(s.path for s in report.swapped) == sorted(NORMS), str(report)
    assert not report.skipped, str(report)
    for name in NORMS:
        norm = getattr(candidate, name)
        assert isinstance(norm, RMSNorm), (name, type(norm))
        assert norm.weight is weights[name]  # the copy's own parameter, kept
        assert norm.eps == getattr(reference, name).variance_epsilon
        assert isinstance(getattr(reference, name), LlamaRMSNorm)
    candidate.loss = loss
    gen = torch.Generator().manual_seed(8)
    batches = []
    for _ in range(4):
        tokens = torch.randint(0, 96, (2, 16), generator=gen)
        target = torch.roll(tokens, -1, dims=1)
        target[:, -1] = -100
        batches.append((tokens.to(device), target.to(device)))
    expected = train_losses(reference, steps, batches)
    assert not norm_calls  # the plain model never reaches warpforge's norm
    got = train_losses(candidate, steps, batches)
    assert len(norm_calls) == 3 * steps
    assert all(math.isfinite(v) for v in got)
    assert got[-1] < got[0] - 0.3, "the model should learn"
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("loss", LOSSES)
def test_tiny_llama_training_matches_pytorch_cpu(loss, monkeypatch):
    compare_training("cpu", torch.float32, steps=6, rtol=1e-4, loss=loss, monkeypatch=monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("loss", LOSSES)
def test_tiny_llama_training_matches_pytorch_gpu_fp32(loss, monkeypatch):
    torch.backends.cuda.matmul.allow_tf32 = False
    compare_training("cuda", torch.float32, steps=50, rtol=1e-4, loss=loss, monkeypatch=monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("loss", LOSSES)
def test_tiny_llama_training_matches_pytorch_gpu_bf16(loss, monkeypatch):
    compare_training(
        "cuda", torch.bfloat16, steps=50, rtol=2e-2, loss=loss, monkeypatch=monkeypatch
    )
