"""warpforge: fused Triton kernels, a blueprint compiler and a benchmark harness for PyTorch.

Importing warpforge is cheap: nothing is compiled and no GPU work happens until an op is called.
Public names are resolved lazily on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from warpforge import runtime as runtime

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "ops": "warpforge.ops",
    "nn": "warpforge.nn",
    "robotics": "warpforge.robotics",
    "blueprint": "warpforge.blueprint",
    "cache": "warpforge.cache",
    "tune": "warpforge.tune",
    "harness": "warpforge.harness",
}
# public function -> (module, attribute)
_LAZY_ATTRS: dict[str, tuple[str, str]] = {
    "compile": ("warpforge.blueprint.compiler", "compile"),
}

__all__ = ["__version__", *sorted(_LAZY), *sorted(_LAZY_ATTRS)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'warpforge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
