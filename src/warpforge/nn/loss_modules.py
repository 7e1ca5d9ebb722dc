"""Module forms of warpforge's losses and gated MLP: drop-in layers for training code."""

from __future__ import annotations

import torch
from torch import nn

from warpforge.validation import check_positive, describe


class CrossEntropyLoss(nn.Module):
    """:func:`warpforge.ops.cross_entropy` as a module (class dimension last)."""

    def __init__(
        self,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        z_loss: float = 0.0,
    ) -> None:
        super().__init__()
        from warpforge.ops.cross_entropy import validate_loss_options

        self.ignore_index, self.reduction, self.label_smoothing = validate_loss_options(
            ignore_index, reduction, label_smoothing
        )
        self.z_loss = check_positive("z_loss", z_loss, allow_zero=True, finite=True)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        from warpforge.ops import cross_entropy

        return cross_entropy(
            logits,
            target,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            z_loss=self.z_loss,
        )

    def extra_repr(self) -> str:
        return (
            f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
            f"label_smoothing={self.label_smoothing}, z_loss={self.z_loss}"
        )


class LinearCrossEntropyLoss(nn.Module):
    """:func:`warpforge.ops.fused_linear_cross_entropy` as a module: ``forward(hidden, weight,
    target, bias=None)``, where ``weight``/``bias`` are typically the LM head's parameters."""

    def __init__(
        self,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__()
        from warpforge.ops.cross_entropy import validate_loss_options

        self.ignore_index, self.reduction, self.label_smoothing = validate_loss_options(
            ignore_index, reduction, label_smoothing
        )
        if chunk_size is not None and (
            isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
        ):
            raise ValueError(
                f"chunk_size: expected a positive int or None, got {describe(chunk_size)}"
            )
        self.chunk_size = chunk_size

    def forward(
        self,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        target: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from warpforge.ops import fused_linear_cross_entropy

        return fused_linear_cross_entropy(
            hidden,
            weight,
            target,
            bias,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            chunk_size=self.chunk_size,
        )

    def extra_repr(self) -> str:
        return (
            f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
            f"label_smoothing={self.label_smoothing}, chunk_size={self.chunk_size}"
        )


class SwiGLU(nn.Module):
    """Llama's MLP block: ``down_proj(silu(gate_proj(x)) * up_proj(x))``, with the gated
    activation computed by :func:`warpforge.ops.swiglu`."""

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        *,
        bias: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("hidden_size", hidden_size), ("intermediate_size", intermediate_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {describe(value)}")
        factory = {"device": device, "dtype": dtype}
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias, **factory)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias, **factory)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from warpforge.ops import swiglu

        return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))
