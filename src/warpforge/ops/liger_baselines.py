"""Liger-Kernel as a benchmark baseline: loaded lazily, reported unavailable when missing."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from warpforge.harness.problem import BaselineUnavailable


def liger_attribute(module: str, name: str) -> Any:
    """``liger_kernel.<module>.<name>``, or :class:`BaselineUnavailable` saying why not."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise BaselineUnavailable(
            f"Liger-Kernel is not installed ({module}.{name}): {exc}"
        ) from exc


def loss_only(out: Any) -> torch.Tensor:
    """Liger's loss functions return the loss alone or ``(loss, z_loss)``, by version."""
    return out[0] if isinstance(out, tuple) else out
