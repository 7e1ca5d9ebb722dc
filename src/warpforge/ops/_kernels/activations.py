"""Gated activations ``act(gate) * up`` (SwiGLU, GeGLU): flat elementwise kernels.

Memory bound: every element is loaded once and stored once, in 16-byte vectors, with math in
float32. The backward recomputes the activation from ``gate`` instead of saving it, which costs
nothing extra in bytes. Offsets are int64 so tensors beyond 2**31 elements work.
"""

from __future__ import annotations

import triton
import triton.language as tl

_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_INV_SQRT_2 = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)
_GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def _offsets(n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def _tanh(u):
    # tanh from exp (tl has no tanh in every Triton version); exp(-2|u|) never overflows.
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(u < 0, -t, t)


@triton.jit
def swiglu_fwd_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = g * tl.sigmoid(g) * u
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_bwd_kernel(
    grad_out_ptr, gate_ptr, up_ptr, grad_gate_ptr, grad_up_ptr, n, BLOCK: tl.constexpr
):
    offs, mask = _offsets(n, BLOCK)
    dy = tl.load(grad_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(g)
    silu = g * s
    d_silu = s * (1.0 + g * (1.0 - s))
    tl.store(grad_gate_ptr + offs, (dy * u * d_silu).to(grad_gate_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_up_ptr + offs, (dy * silu).to(grad_up_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_and_derivative(g, APPROX_TANH: tl.constexpr):
    if APPROX_TANH:
        inner = _SQRT_2_OVER_PI * (g + _GELU_CUBIC * g * g * g)
        t = _tanh(inner)
        gelu = 0.5 * g * (1.0 + t)
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * g * g)
        d_gelu = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * d_inner
    else:
        cdf = 0.5 * (1.0 + tl.math.erf(g * _INV_SQRT_2))
        gelu = g * cdf
        d_gelu = cdf + g * _INV_SQRT_2PI * tl.exp(-0.5 * g * g)
    return gelu, d_gelu


@triton.jit
def geglu_fwd_kernel(gate_ptr, up_ptr, out_ptr, n, APPROX_TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs, mask = _offsets(n, BLOCK)
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    gelu, _ = _gelu_and_derivative(g, APPROX_TANH)
    tl.store(out_ptr + offs, (gelu * u).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def geglu_bwd_kernel(
    grad_out_ptr,
    gate_ptr,
    up_ptr,
    grad_gate_ptr,
    grad_up_ptr,
    n,
    APPROX_TANH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offs, mask = _offsets(n, BLOCK)
    dy = tl.load(grad_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    gelu, d_gelu = _gelu_and_derivative(g, APPROX_TANH)
    tl.store(grad_gate_ptr + offs, (dy * u * d_gelu).to(grad_gate_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_up_ptr + offs, (dy * gelu).to(grad_up_ptr.dtype.element_ty), mask=mask)
