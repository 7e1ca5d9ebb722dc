"""Benchmark problems for softmax and log-softmax over the last dimension (importing registers
them). ``softmax.bwd`` and ``log_softmax.bwd`` time forward + backward and count both: forward
reads x, writes y; backward reads y and dy, writes dx. Every problem is row-independent, so the
harness verifies 8192 x 262144 (too large for a float64 reference and autograd graph in one
piece) a block of rows at a time (``row_split``; for the backward, rows of x and dy)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from warpforge.harness.problem import Problem, Tolerance
from warpforge.harness.registry import register_problem
from warpforge.ops._row_problems import (
    BACKWARD_TOLERANCE,
    CPU_SHAPES,
    SMALL_VALUE_ATOL,
    SWEEP,
    backward_baselines,
    forward_baselines,
    gradients,
    per_element_flops,
    randn,
    row_bytes,
    split_rows,
    ulp,
)
from warpforge.ops.liger_baselines import liger_attribute

SHAPES = (
    {"M": 32768, "N": 256},
    {"M": 16384, "N": 4096},
    {"M": 4096, "N": 16384},
    {"M": 8192, "N": 262144},
)


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float() if x.dtype != torch.float64 else x
    e = (xf - xf.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def log_softmax_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float() if x.dtype != torch.float64 else x
    shifted = xf - xf.amax(dim=-1, keepdim=True)
    return (shifted - shifted.exp().sum(dim=-1, keepdim=True).log()).to(x.dtype)


def _warpforge_softmax(x: torch.Tensor) -> torch.Tensor:
    from warpforge.ops.softmax_ops import softmax

    return softmax(x, -1)


def _warpforge_log_softmax(x: torch.Tensor) -> torch.Tensor:
    from warpforge.ops.softmax_ops import log_softmax

    return log_softmax(x, -1)


def _eager_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _eager_log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, dim=-1)


def _liger_softmax() -> Callable[[torch.Tensor], torch.Tensor]:
    return liger_attribute("liger_kernel.ops.softmax", "LigerSoftmaxFunction").apply


def _inputs(shape, dtype, device, generator):
    return (randn(dtype, device, generator, shape["M"], shape["N"]),)


def _bwd_inputs(shape, dtype, device, generator):
    M, N = shape["M"], shape["N"]
    return randn(dtype, device, generator, M, N), randn(dtype, device, generator, M, N)


# softmax's outputs and gradients are ~1/N: relative bounds (see SMALL_VALUE_ATOL)
SOFTMAX_TOLERANCE = Tolerance(atol=SMALL_VALUE_ATOL, relative_floor=True)
SOFTMAX_BACKWARD_TOLERANCE = Tolerance(
    atol=SMALL_VALUE_ATOL, rtol=BACKWARD_TOLERANCE.rtol, relative_floor=True
)


def _softmax_saved_rounding(inputs, dtype):
    """dx = y * (dy - sum(dy * y)) from the forward's y at ``dtype``: y off by one ulp moves
    dx by ulp(y) * |dy - sum(dy * y)| plus y * sum(|dy| * ulp(y)) through the sum."""
    x, dy = inputs
    y = torch.softmax(x, dim=-1)
    unit = ulp(y, dtype)
    total = (dy * y).sum(dim=-1, keepdim=True)
    return (unit * (dy - total).abs() + y * (dy.abs() * unit).sum(dim=-1, keepdim=True),)


def _log_softmax_saved_rounding(inputs, dtype):
    """dx = dy - exp(y) * sum(dy) from the forward's y at ``dtype``: y off by one ulp moves dx
    by exp(y) * |sum(dy)| * ulp(y); at bf16 and 8192 columns that passes 2x PyTorch's own
    error where the two forwards round one y of millions to neighbouring values."""
    x, dy = inputs
    y = torch.log_softmax(x, dim=-1)
    return (y.exp() * dy.sum(dim=-1, keepdim=True).abs() * ulp(y, dtype),)


register_problem(
    Problem(
        name="softmax.fwd",
        reference=softmax_reference,
        implementation=_warpforge_softmax,
        make_inputs=_inputs,
        flops=per_element_flops(4),
        bytes_moved=row_bytes(2),  # read x, write y
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(_eager_softmax, _liger_softmax),
        tolerance=SOFTMAX_TOLERANCE,
        sweep=SWEEP,
        row_split=split_rows,
        description="softmax over the last dim of (M, N)",
    )
)

register_problem(
    Problem(
        name="softmax.bwd",
        reference=gradients(softmax_reference),
        implementation=gradients(_warpforge_softmax),
        make_inputs=_bwd_inputs,
        flops=per_element_flops(8),
        bytes_moved=row_bytes(5),  # forward: read x, write y; backward: read y, dy, write dx
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=backward_baselines(_eager_softmax, _liger_softmax),
        tolerance=SOFTMAX_BACKWARD_TOLERANCE,
        saved_rounding=_softmax_saved_rounding,
        sweep=SWEEP,
        row_split=split_rows,
        description="forward + backward of softmax.fwd; returns dx for dy",
    )
)

register_problem(
    Problem(
        name="log_softmax.fwd",
        reference=log_softmax_reference,
        implementation=_warpforge_log_softmax,
        make_inputs=_inputs,
        flops=per_element_flops(4),
        bytes_moved=row_bytes(2),  # read x, write y
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        baselines=forward_baselines(_eager_log_softmax),
        sweep=SWEEP,
        row_split=split_rows,
        description="log-softmax over the last dim of (M, N)",
    )
)

register_problem(
    Problem(
        name="log_softmax.bwd",
        reference=gradients(log_softmax_reference),
        implementation=gradients(_warpforge_log_softmax),
        make_inputs=_bwd_inputs,
        flops=per_element_flops(8),
        bytes_moved=row_bytes(5),  # forward: read x, write y; backward: read y, dy, write dx
        shapes=SHAPES,
        cpu_shapes=CPU_SHAPES,
        # Liger-Kernel 0.6 has no log-softmax (only softmax and losses built on it)
        baselines=backward_baselines(_eager_log_softmax),
        tolerance=BACKWARD_TOLERANCE,
        saved_rounding=_log_softmax_saved_rounding,
        sweep=SWEEP,
        row_split=split_rows,
        description="forward + backward of log_softmax.fwd; returns dx for dy",
    )
)
