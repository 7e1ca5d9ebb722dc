"""``torch.nn`` modules backed by warpforge's fused ops, and :func:`replace_modules` to swap them
into an existing model. Names resolve lazily so ``import warpforge.nn`` compiles nothing."""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it
_NAMES: dict[str, str] = {
    "RMSNorm": "warpforge.nn.modules",
    "LayerNorm": "warpforge.nn.modules",
    "replace_modules": "warpforge.nn.replace",
    "ReplacementReport": "warpforge.nn.replace",
    "PromotedRMSNorm": "warpforge.nn.replace",
    "LinearCrossEntropyLoss": "warpforge.nn.loss_modules",
    "CrossEntropyLoss": "warpforge.nn.loss_modules",
    "SwiGLU": "warpforge.nn.loss_modules",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'warpforge.nn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
