"""Pieces shared by the ops' benchmark problems: the baseline sets (every family) and, for the
row-wise ones (norms, softmax), seeded inputs, forward+backward runners and the byte model (Liger-Kernel
baselines load through :mod:`warpforge.ops.liger_baselines`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from warpforge.harness.problem import Tolerance, compile_baseline

SWEEP: tuple[dict[str, int], ...] = tuple(
    {"M": m, "N": n}
    for m, n in (
        (32768, 256),
        (32768, 1024),
        (16384, 2048),
        (16384, 4096),
        (8192, 8192),
        (4096, 16384),
        (4096, 32768),
        (8192, 65536),
        (8192, 131072),
        (8192, 262144),
    )
)
CPU_SHAPES = (  # small enough for the Triton interpreter; 4099 = prime, one block
    {"M": 3, "N": 67},
    {"M": 2, "N": 4099},
)
BACKWARD_TOLERANCE = Tolerance(  # dx sums N terms, so a little looser than forward
    atol={torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2},
    rtol={torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2},
)


SMALL_VALUE_ATOL = {torch.float32: 1e-9, torch.float16: 1e-7, torch.bfloat16: 1e-7}
"""Absolute floors for outputs of ~1/N (softmax and its gradient, a loss gradient away from the
target: 1e-4 and less at 8192 columns), where the default floors (bf16 8e-3) would pass an
all-zero output; under the smallest fp16 spacing of such values. Used with a relative
PyTorch floor (:attr:`Tolerance.relative_floor`)."""


def split_rows(inputs: Any, rows: slice) -> tuple[Any, ...]:
    """A problem's ``row_split``: rows ``rows`` of every (M, N) input; (N,) vectors whole."""
    return tuple(x[rows] if isinstance(x, torch.Tensor) and x.dim() >= 2 else x for x in inputs)


def randn(dtype: torch.dtype, device: torch.device, generator: torch.Generator, *size: int):
    """Standard normal values drawn in fp32 (same stream for every dtype), cast to ``dtype``."""
    return torch.randn(*size, generator=generator, device=device, dtype=torch.float32).to(dtype)


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of ``dtype`` at each of ``values`` (float64), 0 at zero."""
    finfo = torch.finfo(dtype)
    _, exponent = torch.frexp(values)  # |v| = m * 2**exponent, 0.5 <= m < 1
    unit = torch.ldexp(torch.full_like(values, finfo.eps), exponent - 1)
    return torch.where(values == 0, 0.0, unit.clamp(min=finfo.smallest_normal * finfo.eps))


def gradients(
    forward: Callable[..., Any], outputs: int = 1
) -> Callable[..., tuple[torch.Tensor, ...]]:
    """A backward problem function: ``forward`` on fresh leaves, then the gradients for the
    output gradients (the last ``outputs`` inputs, one per output of ``forward``) with respect
    to every other input. Times forward + backward, as training runs them."""

    def run(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args, output_grads = inputs[:-outputs], inputs[-outputs:]
        leaves = [a.detach().requires_grad_() for a in args]
        result = forward(*leaves)
        result = result if isinstance(result, tuple) else (result,)
        return torch.autograd.grad(result, leaves, output_grads)

    return run


def row_bytes(row_tensors: int, vectors: int = 0, stats: int = 0) -> Callable[[Any, Any], float]:
    """Bytes of ``row_tensors`` (M, N) and ``vectors`` (N,) tensors at the problem dtype, plus
    ``stats`` fp32 (M,) per-row statistics."""

    def count(shape, dtype: torch.dtype) -> float:
        M, N, size = shape["M"], shape["N"], dtype.itemsize
        return float(row_tensors * M * N * size + vectors * N * size + stats * M * 4)

    return count


def per_element_flops(flops: int) -> Callable[[Any, Any], float]:
    return lambda shape, dtype: float(flops * shape["M"] * shape["N"])


def compiled(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    """A baseline factory: ``torch.compile`` of the eager function (compiled on first call, for
    the row's shape alone: :func:`~warpforge.harness.problem.compile_baseline`)."""
    return lambda: compile_baseline(fn)


BaselineFactory = Callable[[], Callable[..., Any]]


def forward_baselines(
    eager: Callable[..., Any], liger: BaselineFactory | None = None
) -> dict[str, BaselineFactory]:
    """Baselines of a problem, named as in every ops problem: ``torch`` (eager), ``torch.compile``
    of it and, when given, ``liger`` (Liger-Kernel)."""
    baselines: dict[str, BaselineFactory] = {
        "torch": lambda: eager,
        "torch.compile": compiled(eager),
    }
    if liger is not None:
        baselines["liger"] = liger
    return baselines


def backward_baselines(
    eager: Callable[..., Any], liger: BaselineFactory | None = None, outputs: int = 1
) -> dict[str, BaselineFactory]:
    """The same baselines for a forward + backward problem (see :func:`gradients`)."""
    baselines: dict[str, BaselineFactory] = {
        "torch": lambda: gradients(eager, outputs),
        "torch.compile": lambda: gradients(compile_baseline(eager), outputs),
    }
    if liger is not None:
        baselines["liger"] = lambda: gradients(liger(), outputs)
    return baselines
