"""Normalisation layers that run warpforge's fused kernels (drop-in for ``torch.nn`` ones)."""

from __future__ import annotations

import torch
from torch import nn

from warpforge.ops.norm import layer_norm, rms_norm
from warpforge.validation import check_positive, describe

__all__ = ["LayerNorm", "RMSNorm"]


def _last_dim_size(normalized_shape: object) -> int:
    """The size of the one normalised (last) dimension, from an int or a 1-element sequence."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    if (
        not isinstance(shape, (tuple, list, torch.Size))
        or len(shape) != 1
        or isinstance(shape[0], bool)
        or not isinstance(shape[0], int)
        or shape[0] < 1
    ):
        raise ValueError(
            "normalized_shape: expected a positive int (or a 1-element sequence; only the last "
            f"dimension is normalised), got {describe(normalized_shape)}"
        )
    return int(shape[0])


def _check_last_dim(x: object, size: int) -> None:
    """A clearer error than the op's weight-shape one: the module owns the weight."""
    if isinstance(x, torch.Tensor) and (x.dim() == 0 or x.shape[-1] != size):
        raise ValueError(
            f"x: expected a last dimension of size {size} (normalized_shape), got {describe(x)}"
        )


class RMSNorm(nn.Module):
    """RMSNorm over the last dimension: ``x * rsqrt(mean(x**2) + eps) * (offset + weight)``.

    ``eps=None`` uses ``torch.finfo(x.dtype).eps`` like ``torch.nn.RMSNorm``. ``offset=1.0``
    gives Gemma's ``(1 + weight)`` scaling. ``forward(x, residual)`` also adds the residual and
    returns ``(y, x + residual)`` from one pass over memory.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = 1e-6,
        *,
        elementwise_affine: bool = True,
        offset: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.normalized_shape = (_last_dim_size(normalized_shape),)
        self.eps = None if eps is None else check_positive("eps", eps, finite=True)
        self.offset = float(offset)
        if elementwise_affine:
            init = 0.0 if self.offset else 1.0  # (offset + weight) starts at 1 either way
            self.weight = nn.Parameter(
                torch.full(self.normalized_shape, init, device=device, dtype=dtype)
            )
        else:
            self.register_parameter("weight", None)

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        _check_last_dim(x, self.normalized_shape[0])
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return rms_norm(x, self.weight, eps, residual=residual, offset=self.offset)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, offset={self.offset}"


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension, with optional weight and bias (fp32 statistics)."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.normalized_shape = (_last_dim_size(normalized_shape),)
        self.eps = check_positive("eps", eps, finite=True)
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, **factory))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **factory))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim(x, self.normalized_shape[0])
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"
