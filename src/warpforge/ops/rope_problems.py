"""Benchmark problems for rotary embeddings: rope.fwd and rope.bwd over Llama-3 attention
shapes. Importing this module registers them."""

from __future__ import annotations

from typing import Any

import torch

from warpforge.harness.problem import Problem, Shape
from warpforge.harness.registry import register_problem
from warpforge.ops._row_problems import forward_baselines
from warpforge.ops.liger_baselines import liger_attribute

# Llama-3 8B (32 query / 8 key heads) and 70B (64 / 8), head_dim 128
SHAPES = (
    {"batch": 4, "seq": 2048, "q_heads": 32, "k_heads": 8, "head_dim": 128},
    {"batch": 1, "seq": 4096, "q_heads": 64, "k_heads": 8, "head_dim": 128},
)
CPU_SHAPES = (
    {"batch": 2, "seq": 5, "q_heads": 4, "k_heads": 2, "head_dim": 16},
    {"batch": 1, "seq": 1, "q_heads": 1, "k_heads": 1, "head_dim": 2},
)


def _inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """q, k in [batch, seq, heads, head_dim] and full-width cos/sin [seq, head_dim]."""
    batch, seq, dim = shape["batch"], shape["seq"], shape["head_dim"]
    q = torch.randn(batch, seq, shape["q_heads"], dim, generator=generator, device=device)
    k = torch.randn(batch, seq, shape["k_heads"], dim, generator=generator, device=device)
    inv_freq = 500000.0 ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
    angles = torch.arange(seq, device=device, dtype=torch.float32)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return q.to(dtype), k.to(dtype), angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rope_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Hugging Face Llama formula: x * cos + rotate_half(x) * sin."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def rope_backward_reference(
    grad_q: torch.Tensor, grad_k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of rope: the rotation by -sin."""
    cos, sin = cos[:, None, :], -sin[:, None, :]
    return grad_q * cos + _rotate_half(grad_q) * sin, grad_k * cos + _rotate_half(grad_k) * sin


def rope_implementation(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    from warpforge.ops import rope

    return rope(q, k, cos, sin)


def rope_backward_implementation(
    grad_q: torch.Tensor, grad_k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    from warpforge.ops.rope import rope_backward

    return rope_backward(grad_q, grad_k, cos, sin)


def _liger_rope() -> Any:
    liger_rope = liger_attribute("liger_kernel.ops.rope", "LigerRopeFunction")

    def run(q, k, cos, sin):
        # Liger takes [batch, heads, seq, head_dim] and [1, seq, head_dim] tables
        q_rot, k_rot = liger_rope.apply(q.transpose(1, 2), k.transpose(1, 2), cos[None], sin[None])
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)

    return run


def _bytes(s: Shape, d: torch.dtype) -> float:
    per_token = (s["q_heads"] + s["k_heads"]) * s["head_dim"]
    tables = 2 * s["seq"] * s["head_dim"]
    return (2 * s["batch"] * s["seq"] * per_token + tables) * d.itemsize


def _flops(s: Shape, d: torch.dtype) -> float:
    return 3.0 * s["batch"] * s["seq"] * (s["q_heads"] + s["k_heads"]) * s["head_dim"]


ROPE_FWD = register_problem(
    Problem(
        name="rope.fwd",
        reference=rope_reference,
        implementation=rope_implementation,
        make_inputs=_inputs,
        flops=_flops,
        bytes_moved=_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(rope_reference, _liger_rope),
        description="rotary embedding (rotate_half) of q and k, [batch, seq, heads, head_dim]",
    )
)

ROPE_BWD = register_problem(
    Problem(
        name="rope.bwd",
        reference=rope_backward_reference,
        implementation=rope_backward_implementation,
        make_inputs=_inputs,
        flops=_flops,
        bytes_moved=_bytes,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(rope_backward_reference),
        description="gradient of rope for q and k (rotation by -sin), given output gradients",
    )
)
