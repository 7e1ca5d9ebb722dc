"""Benchmark problems for RMSNorm, fused add + RMSNorm and LayerNorm (importing registers them).

Backward problems time forward + backward, as training runs them, and count the bytes of both:
forward reads x (and weight), writes y; backward reads x and dy, writes dx. Per-row statistics
and weight/bias vectors are counted too, though they are a rounding error at these shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.harness.problem import Problem
from warpforge.harness.registry import register_problem
from warpforge.ops._row_problems import (
    BACKWARD_TOLERANCE,
    CPU_SHAPES,
    SWEEP,
    backward_baselines,
    forward_baselines,
    gradients,
    per_element_flops,
    randn,
    row_bytes,
    split_rows,
)
from warpforge.ops.liger_baselines import liger_attribute

EPS = 1e-6
LN_EPS = 1e-5

SHAPES = ({"M": 32768, "N": 256}, {"M": 16384, "N": 4096}, {"M": 4096, "N": 16384})


# --------------------------------------------------------------------------- references


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float() if x.dtype != torch.float64 else x
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (y * weight.to(y.dtype)).to(x.dtype)


def add_rms_norm_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return rms_norm_reference(h, weight), h


def layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    xf = x.float() if x.dtype != torch.float64 else x
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).pow(2).mean(dim=-1, keepdim=True)
    y = (xf - mean) * torch.rsqrt(var + LN_EPS) * weight.to(xf.dtype) + bias.to(xf.dtype)
    return y.to(x.dtype)


# --------------------------------------------------------------------------- implementations


def _warpforge_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    from warpforge.ops.norm import rms_norm

    return rms_norm(x, weight, EPS)


def _warpforge_add_rms_norm(x, residual, weight):
    from warpforge.ops.norm import rms_norm

    return rms_norm(x, weight, EPS, residual=residual)


def _warpforge_layer_norm(x, weight, bias):
    from warpforge.ops.norm import layer_norm

    return layer_norm(x, weight, bias, LN_EPS)


# --------------------------------------------------------------------------- baselines


def _eager_rms_norm(x, weight):
    fn = getattr(F, "rms_norm", None)  # torch >= 2.4
    return fn(x, (x.shape[-1],), weight, EPS) if fn is not None else rms_norm_reference(x, weight)


def _eager_add_rms_norm(x, residual, weight):
    h = x + residual
    return _eager_rms_norm(h, weight), h


def _eager_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, LN_EPS)


def _liger_rms_norm() -> Callable[..., torch.Tensor]:
    fn = liger_attribute("liger_kernel.ops.rms_norm", "LigerRMSNormFunction")
    # in_place=False: Liger's default overwrites dy with dx, which would corrupt repeated runs.
    return lambda x, w: fn.apply(x, w, EPS, 0.0, "llama", False)


def _liger_add_rms_norm() -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    fn = liger_attribute("liger_kernel.ops.fused_add_rms_norm", "LigerFusedAddRMSNormFunction")
    return lambda x, r, w: fn.apply(x, r, w, EPS, 0.0, "llama", False)


def _liger_layer_norm() -> Callable[..., torch.Tensor]:
    fn = liger_attribute("liger_kernel.ops.layer_norm", "LigerLayerNormFunction")
    return lambda x, w, b: fn.apply(x, w, b, LN_EPS)


# --------------------------------------------------------------------------- inputs and costs


def _rms_inputs(shape, dtype, device, generator):
    M, N = shape["M"], shape["N"]
    return randn(dtype, device, generator, M, N), randn(dtype, device, generator, N)


def _rms_bwd_inputs(shape, dtype, device, generator):
    x, w = _rms_inputs(shape, dtype, device, generator)
    return x, w, randn(dtype, device, generator, shape["M"], shape["N"])


def _add_rms_inputs(shape, dtype, device, generator):
    M, N = shape["M"], shape["N"]
    x = randn(dtype, device, generator, M, N)
    residual = randn(dtype, device, generator, M, N)
    return x, residual, randn(dtype, device, generator, N)


def _add_rms_bwd_inputs(shape, dtype, device, generator):
    x, residual, w = _add_rms_inputs(shape, dtype, device, generator)
    M, N = shape["M"], shape["N"]
    return (
        x,
        residual,
        w,
        randn(dtype, device, generator, M, N),
        randn(dtype, device, generator, M, N),
    )


def _ln_inputs(shape, dtype, device, generator):
    M, N = shape["M"], shape["N"]
    x = randn(dtype, device, generator, M, N)
    return x, randn(dtype, device, generator, N), randn(dtype, device, generator, N)


def _ln_bwd_inputs(shape, dtype, device, generator):
    x, w, b = _ln_inputs(shape, dtype, device, generator)
    return x, w, b, randn(dtype, device, generator, shape["M"], shape["N"])


register_problem(
    Problem(
        name="rms_norm.fwd",
        reference=rms_norm_reference,
        implementation=_warpforge_rms_norm,
        make_inputs=_rms_inputs,
        flops=per_element_flops(4),
        bytes_moved=row_bytes(2, 1, 0),  # read x, weight; write y
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(_eager_rms_norm, _liger_rms_norm),
        sweep=SWEEP,
        row_split=split_rows,  # rows are independent: --sweep verifies 8192 x 262144 in blocks
        description="y = x * rsqrt(mean(x^2) + 1e-6) * weight over the last dim of (M, N)",
    )
)

register_problem(
    Problem(
        name="rms_norm.bwd",
        reference=gradients(rms_norm_reference),
        implementation=gradients(_warpforge_rms_norm),
        make_inputs=_rms_bwd_inputs,
        flops=per_element_flops(12),
        # forward: read x, w, write y (rstd); backward: read x, dy (rstd), write dx, dweight
        bytes_moved=row_bytes(5, 3, 2),
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=backward_baselines(_eager_rms_norm, _liger_rms_norm),
        tolerance=BACKWARD_TOLERANCE,
        sweep=SWEEP,
        row_split=split_rows,  # dweight (and dbias) are summed over the row blocks
        row_sums=(1,),
        description="forward + backward of rms_norm.fwd; returns (dx, dweight) for dy",
    )
)

register_problem(
    Problem(
        name="add_rms_norm.fwd",
        reference=add_rms_norm_reference,
        implementation=_warpforge_add_rms_norm,
        make_inputs=_add_rms_inputs,
        flops=per_element_flops(5),
        bytes_moved=row_bytes(4, 1, 0),  # read x, residual, weight; write y, h
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(_eager_add_rms_norm, _liger_add_rms_norm),
        sweep=SWEEP,
        row_split=split_rows,  # rows are independent: --sweep verifies 8192 x 262144 in blocks
        description="h = x + residual; y = rms_norm(h) * weight; returns (y, h)",
    )
)

register_problem(
    Problem(
        name="add_rms_norm.bwd",
        reference=gradients(add_rms_norm_reference, outputs=2),
        implementation=gradients(_warpforge_add_rms_norm, outputs=2),
        make_inputs=_add_rms_bwd_inputs,
        flops=per_element_flops(14),
        # forward: read x, residual, w, write y, h (rstd); backward: read h, dy, dh (rstd),
        # write one (M, N) gradient (d x = d residual: the math allows one tensor for both) and
        # dweight
        bytes_moved=row_bytes(8, 3, 2),
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=backward_baselines(_eager_add_rms_norm, _liger_add_rms_norm, outputs=2),
        tolerance=BACKWARD_TOLERANCE,
        sweep=SWEEP,
        row_split=split_rows,  # dweight (and dbias) are summed over the row blocks
        row_sums=(2,),
        description="forward + backward of add_rms_norm.fwd; returns (dx, dresidual, dweight) "
        "for (dy, dh)",
    )
)

register_problem(
    Problem(
        name="layer_norm.fwd",
        reference=layer_norm_reference,
        implementation=_warpforge_layer_norm,
        make_inputs=_ln_inputs,
        flops=per_element_flops(7),
        bytes_moved=row_bytes(2, 2, 0),  # read x, weight, bias; write y
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(_eager_layer_norm, _liger_layer_norm),
        sweep=SWEEP,
        row_split=split_rows,  # rows are independent: --sweep verifies 8192 x 262144 in blocks
        description="y = (x - mean) * rsqrt(var + 1e-5) * weight + bias over the last dim",
    )
)

register_problem(
    Problem(
        name="layer_norm.bwd",
        reference=gradients(layer_norm_reference),
        implementation=gradients(_warpforge_layer_norm),
        make_inputs=_ln_bwd_inputs,
        flops=per_element_flops(16),
        # forward: read x, w, b, write y (mean, rstd); backward: read x, dy, w, write dx, dw, db
        bytes_moved=row_bytes(5, 5, 4),
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=backward_baselines(_eager_layer_norm, _liger_layer_norm),
        tolerance=BACKWARD_TOLERANCE,
        sweep=SWEEP,
        row_split=split_rows,  # dweight (and dbias) are summed over the row blocks
        row_sums=(1, 2),
        description="forward + backward of layer_norm.fwd; returns (dx, dweight, dbias) for dy",
    )
)
