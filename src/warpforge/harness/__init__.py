"""Verification and timing of kernels against PyTorch references. Knows nothing of warpforge.ops.

Names are resolved lazily so that importing ``warpforge.harness.commands`` (the CLI) does not
import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    "BaselineUnavailable": "warpforge.harness.problem",
    "compile_baseline": "warpforge.harness.problem",
    "Problem": "warpforge.harness.problem",
    "Tolerance": "warpforge.harness.problem",
    "get_problem": "warpforge.harness.registry",
    "register_problem": "warpforge.harness.registry",
    "registered_problems": "warpforge.harness.registry",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'warpforge.harness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
