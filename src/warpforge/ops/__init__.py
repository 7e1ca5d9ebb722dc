"""Fused training ops. Each public function validates its arguments, then dispatches to a
``torch.library`` custom op (Triton on GPU / interpreter, PyTorch reference otherwise).

Names resolve lazily so ``import warpforge.ops`` compiles nothing.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# public function -> module that defines it. A module must not share its function's name:
# importing ``warpforge.ops.<name>`` would bind the module over the function on this package.
_OPS: dict[str, str] = {
    "rms_norm": "warpforge.ops.norm",
    "layer_norm": "warpforge.ops.norm",
    "softmax": "warpforge.ops.softmax_ops",
    "log_softmax": "warpforge.ops.softmax_ops",
    "cross_entropy": "warpforge.ops.cross_entropy",
    "fused_linear_cross_entropy": "warpforge.ops.fused_linear_cross_entropy",
    "swiglu": "warpforge.ops.activations",
    "geglu": "warpforge.ops.activations",
    "rope": "warpforge.ops.rope",
}

__all__ = sorted(_OPS)


def __getattr__(name: str) -> Any:
    if name in _OPS:
        function = getattr(importlib.import_module(_OPS[name]), name)
        globals()[name] = function
        return function
    raise AttributeError(f"module 'warpforge.ops' has no attribute {name!r}")


class _OpsNamespace(types.ModuleType):
    """Keeps ``warpforge.ops.cross_entropy`` the function when the same-named submodule loads.

    Importing ``warpforge.ops.cross_entropy`` (the module) makes Python bind the submodule as an
    attribute of this package, shadowing the public function of the same name; this guard
    drops that binding so the name resolves through ``__getattr__`` to the function.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OPS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _OpsNamespace


def __dir__() -> list[str]:
    return __all__
