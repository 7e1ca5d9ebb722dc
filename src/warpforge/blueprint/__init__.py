"""The blueprint compiler: a graph IR compiled to fused Triton kernels (see docs/compiler.md).

Heavy pieces (codegen, Triton) load lazily: importing this package builds only the IR and the
operator registry.
"""

from __future__ import annotations

import importlib
from typing import Any

from warpforge.blueprint.ir import (
    BlueprintBuilder,
    BlueprintCycleError,
    BlueprintError,
    BlueprintIR,
    IRNode,
    TensorSchema,
)
from warpforge.blueprint.registry import OperatorRegistry, OperatorSpec, default_registry, operator

# Imported eagerly so the name ``trace`` is the function, not the ``trace`` submodule.
from warpforge.blueprint.trace import UnsupportedOperationError, trace

_LAZY = {
    "compile": ("warpforge.blueprint.compiler", "compile"),
    "CompiledBlueprint": ("warpforge.blueprint.compiler", "CompiledBlueprint"),
    "BlueprintCompileError": ("warpforge.blueprint.compiler", "BlueprintCompileError"),
    "KernelSourceGenerator": ("warpforge.blueprint.codegen", "KernelSourceGenerator"),
}

__all__ = [
    "BlueprintBuilder",
    "BlueprintCycleError",
    "BlueprintError",
    "BlueprintIR",
    "IRNode",
    "OperatorRegistry",
    "OperatorSpec",
    "TensorSchema",
    "UnsupportedOperationError",
    "default_registry",
    "operator",
    "trace",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'warpforge.blueprint' has no attribute {name!r}")
