"""Gated activations ``act(gate) * up`` (SwiGLU, GeGLU): elementwise kernels over rows.

Memory bound: every element is loaded once and stored once, in 16-byte vectors, with math in
float32. The backward recomputes the activation from ``gate`` instead of saving it, which costs
nothing extra in bytes. Inputs are ``[rows, cols]`` with a unit column stride and any row stride
(so ``gate, up = gate_up.chunk(2, -1)`` is read in place); contiguous inputs come as one long
row. A 1-D grid enumerates (row, column block) pairs; offsets are int64 where an operand
reaches 2**31 elements. Outputs are contiguous.
"""

from __future__ import annotations

import triton
import triton.language as tl

_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_INV_SQRT_2 = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)
_GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def _block(n_cols, n_col_blocks, BLOCK: tl.constexpr, ONE_ROW: tl.constexpr, WIDE: tl.constexpr):
    """(row, columns, mask) of this program's block. A contiguous input is one long row, and
    then no division places the block: the integer division would delay every program's first
    load. Offsets are 64-bit only when some operand needs them (``WIDE``), as the 32-bit index
    arithmetic is cheaper per element."""
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    if ONE_ROW:
        row = 0
        cols = pid * BLOCK + tl.arange(0, BLOCK)
    else:
        row = pid // n_col_blocks
        cols = (pid % n_col_blocks) * BLOCK + tl.arange(0, BLOCK)
    return row, cols, cols < n_cols


@triton.jit
def _tanh_complements(u):
    """(1 + tanh(u), 1 - tanh(u)**2) without cancellation: with e = exp(-2|u|) (never
    overflows), 1 + tanh(u) is 2/(1+e) for u >= 0 and 2e/(1+e) below, and 1 - tanh(u)**2 is
    4e/(1+e)**2. Forming them from tanh itself loses every digit where tanh(u) is near -1 or 1,
    which the GeGLU gradient then multiplies by |gate| and |grad_out * up|."""
    e = tl.exp(-2.0 * tl.abs(u))
    r = 1.0 / (1.0 + e)
    one_plus_t = tl.where(u < 0, 2.0 * e * r, 2.0 * r)
    return one_plus_t, 4.0 * e * r * r


@triton.jit
def _load_row(ptr, row, row_stride, cols, mask, EVEN: tl.constexpr):
    """``EVEN``: the blocks tile the row exactly, so the accesses need no predicate."""
    if EVEN:
        x = tl.load(ptr + row * row_stride + cols)
    else:
        x = tl.load(ptr + row * row_stride + cols, mask=mask, other=0.0)
    return x.to(tl.float32)


@triton.jit
def _store_row(ptr, row, n_cols, cols, mask, value, EVEN: tl.constexpr):
    if EVEN:
        tl.store(ptr + row * n_cols + cols, value.to(ptr.dtype.element_ty))
    else:
        tl.store(ptr + row * n_cols + cols, value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_fwd_kernel(
    gate_ptr, up_ptr, out_ptr, n_cols, n_col_blocks, gate_row_stride, up_row_stride,
    BLOCK: tl.constexpr, ONE_ROW: tl.constexpr, WIDE: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    row, cols, mask = _block(n_cols, n_col_blocks, BLOCK, ONE_ROW, WIDE)
    g = _load_row(gate_ptr, row, gate_row_stride, cols, mask, EVEN)
    u = _load_row(up_ptr, row, up_row_stride, cols, mask, EVEN)
    _store_row(out_ptr, row, n_cols, cols, mask, g * tl.sigmoid(g) * u, EVEN)


@triton.jit
def swiglu_bwd_kernel(
    grad_out_ptr, gate_ptr, up_ptr, grad_gate_ptr, grad_up_ptr, n_cols, n_col_blocks,
    grad_out_row_stride, gate_row_stride, up_row_stride,
    BLOCK: tl.constexpr, ONE_ROW: tl.constexpr, WIDE: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    row, cols, mask = _block(n_cols, n_col_blocks, BLOCK, ONE_ROW, WIDE)
    dy = _load_row(grad_out_ptr, row, grad_out_row_stride, cols, mask, EVEN)
    g = _load_row(gate_ptr, row, gate_row_stride, cols, mask, EVEN)
    u = _load_row(up_ptr, row, up_row_stride, cols, mask, EVEN)
    s = tl.sigmoid(g)
    d_silu = s * (1.0 + g * (1.0 - s))
    _store_row(grad_gate_ptr, row, n_cols, cols, mask, dy * u * d_silu, EVEN)
    _store_row(grad_up_ptr, row, n_cols, cols, mask, dy * g * s, EVEN)


@triton.jit
def _gelu_and_derivative(g, APPROX_TANH: tl.constexpr):
    if APPROX_TANH:
        inner = _SQRT_2_OVER_PI * (g + _GELU_CUBIC * g * g * g)
        one_plus_t, sech2 = _tanh_complements(inner)
        gelu = 0.5 * g * one_plus_t
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * g * g)
        d_gelu = 0.5 * one_plus_t + 0.5 * g * sech2 * d_inner
    else:
        cdf = 0.5 * (1.0 + tl.math.erf(g * _INV_SQRT_2))
        gelu = g * cdf
        d_gelu = cdf + g * _INV_SQRT_2PI * tl.exp(-0.5 * g * g)
    return gelu, d_gelu


@triton.jit
def geglu_fwd_kernel(
    gate_ptr, up_ptr, out_ptr, n_cols, n_col_blocks, gate_row_stride, up_row_stride,
    APPROX_TANH: tl.constexpr, BLOCK: tl.constexpr, ONE_ROW: tl.constexpr, WIDE: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    row, cols, mask = _block(n_cols, n_col_blocks, BLOCK, ONE_ROW, WIDE)
    g = _load_row(gate_ptr, row, gate_row_stride, cols, mask, EVEN)
    u = _load_row(up_ptr, row, up_row_stride, cols, mask, EVEN)
    gelu, _ = _gelu_and_derivative(g, APPROX_TANH)
    _store_row(out_ptr, row, n_cols, cols, mask, gelu * u, EVEN)


@triton.jit
def geglu_bwd_kernel(
    grad_out_ptr, gate_ptr, up_ptr, grad_gate_ptr, grad_up_ptr, n_cols, n_col_blocks,
    grad_out_row_stride, gate_row_stride, up_row_stride,
    APPROX_TANH: tl.constexpr, BLOCK: tl.constexpr, ONE_ROW: tl.constexpr, WIDE: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    row, cols, mask = _block(n_cols, n_col_blocks, BLOCK, ONE_ROW, WIDE)
    dy = _load_row(grad_out_ptr, row, grad_out_row_stride, cols, mask, EVEN)
    g = _load_row(gate_ptr, row, gate_row_stride, cols, mask, EVEN)
    u = _load_row(up_ptr, row, up_row_stride, cols, mask, EVEN)
    gelu, d_gelu = _gelu_and_derivative(g, APPROX_TANH)
    _store_row(grad_gate_ptr, row, n_cols, cols, mask, dy * u * d_gelu, EVEN)
    _store_row(grad_up_ptr, row, n_cols, cols, mask, dy * gelu, EVEN)
