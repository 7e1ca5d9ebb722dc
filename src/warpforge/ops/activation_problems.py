"""Benchmark problems for the gated activations swiglu and geglu, forward and backward (the
backward kernel alone, given grad_out). Importing this module registers them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from warpforge.harness.problem import Problem, Shape
from warpforge.harness.registry import register_problem
from warpforge.ops._row_problems import forward_baselines
from warpforge.ops.liger_baselines import liger_attribute

# Llama-3 MLPs: 8B (batch 4 x seq 2048 tokens, intermediate 14336), 70B (4096 x 28672)
SHAPES = ({"tokens": 8192, "intermediate": 14336}, {"tokens": 4096, "intermediate": 28672})
CPU_SHAPES = ({"tokens": 3, "intermediate": 1031}, {"tokens": 1, "intermediate": 1})


def _gate_up(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    size = (shape["tokens"], shape["intermediate"])
    gate = torch.randn(size, generator=generator, device=device).mul_(2).to(dtype)
    up = torch.randn(size, generator=generator, device=device).to(dtype)
    return gate, up


def _gate_up_grad(shape, dtype, device, generator):
    gate, up = _gate_up(shape, dtype, device, generator)
    grad_out = torch.randn(gate.shape, generator=generator, device=device).to(dtype)
    return gate, up, grad_out


def _elements(s: Shape) -> int:
    return s["tokens"] * s["intermediate"]


# --- swiglu.fwd -----------------------------------------------------------------------------


def swiglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def swiglu_implementation(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    from warpforge.ops import swiglu

    return swiglu(gate, up)


SWIGLU_FWD = register_problem(
    Problem(
        name="swiglu.fwd",
        reference=swiglu_reference,
        implementation=swiglu_implementation,
        make_inputs=_gate_up,
        flops=lambda s, d: 5.0 * _elements(s),
        bytes_moved=lambda s, d: 3 * _elements(s) * d.itemsize,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(
            swiglu_reference,
            lambda: liger_attribute("liger_kernel.ops.swiglu", "LigerSiLUMulFunction").apply,
        ),
        description="silu(gate) * up",
    )
)


# --- swiglu.bwd -----------------------------------------------------------------------------


def swiglu_backward_reference(
    gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both input gradients of silu(gate) * up, written out."""
    sig = torch.sigmoid(gate)
    grad_gate = grad_out * up * sig * (1 + gate * (1 - sig))
    return grad_gate, grad_out * gate * sig


def swiglu_backward_implementation(
    gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    from warpforge.ops.activations import swiglu_backward

    return swiglu_backward(grad_out, gate, up)


def _liger_backward(module: str, name: str) -> Callable[[], Callable[..., Any]]:
    """Baseline factory for Liger-Kernel's gated-activation backward ``name(gate, up, grad_out)``.
    Liger writes the gradients over gate and up (the harness times it on private copies)."""

    def factory() -> Callable[..., Any]:
        backward = liger_attribute(module, name)
        return lambda gate, up, grad_out: backward(gate, up, grad_out)

    return factory


SWIGLU_BWD = register_problem(
    Problem(
        name="swiglu.bwd",
        reference=swiglu_backward_reference,
        implementation=swiglu_backward_implementation,
        make_inputs=_gate_up_grad,
        flops=lambda s, d: 10.0 * _elements(s),
        bytes_moved=lambda s, d: 5 * _elements(s) * d.itemsize,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(
            swiglu_backward_reference, _liger_backward("liger_kernel.ops.swiglu", "swiglu_backward")
        ),
        description="gradients of silu(gate) * up w.r.t. gate and up, given grad_out",
    )
)


# --- geglu.fwd ------------------------------------------------------------------------------


def geglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.gelu(gate, approximate="tanh") * up


def geglu_implementation(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    from warpforge.ops import geglu

    return geglu(gate, up, approximate="tanh")


GEGLU_FWD = register_problem(
    Problem(
        name="geglu.fwd",
        reference=geglu_reference,
        implementation=geglu_implementation,
        make_inputs=_gate_up,
        flops=lambda s, d: 10.0 * _elements(s),
        bytes_moved=lambda s, d: 3 * _elements(s) * d.itemsize,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(
            geglu_reference,
            lambda: liger_attribute("liger_kernel.ops.geglu", "LigerGELUMulFunction").apply,
        ),
        description="gelu(gate, approximate='tanh') * up",
    )
)


# --- geglu.bwd ------------------------------------------------------------------------------


def geglu_backward_reference(
    gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both input gradients of gelu_tanh(gate) * up, written out."""
    inner = 0.7978845608028654 * (gate + 0.044715 * gate.pow(3))
    t = torch.tanh(inner)
    gelu = 0.5 * gate * (1 + t)
    d_gelu = 0.5 * (1 + t) + 0.5 * gate * (1 - t * t) * 0.7978845608028654 * (
        1 + 3 * 0.044715 * gate * gate
    )
    return grad_out * up * d_gelu, grad_out * gelu


def geglu_backward_implementation(
    gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    from warpforge.ops.activations import geglu_backward

    return geglu_backward(grad_out, gate, up, approximate="tanh")


GEGLU_BWD = register_problem(
    Problem(
        name="geglu.bwd",
        reference=geglu_backward_reference,
        implementation=geglu_backward_implementation,
        make_inputs=_gate_up_grad,
        flops=lambda s, d: 20.0 * _elements(s),
        bytes_moved=lambda s, d: 5 * _elements(s) * d.itemsize,
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(
            geglu_backward_reference, _liger_backward("liger_kernel.ops.geglu", "geglu_backward")
        ),
        description="gradients of gelu(gate, approximate='tanh') * up w.r.t. gate and up",
    )
)
