"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingDependencyError(ImportError):
    """An optional dependency is needed for the feature that was asked for."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise an error telling the user which extra provides it.

    >>> require("json", extra="none", feature="reading JSON").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{feature} needs the optional dependency {module!r}; "
            f"install it with: pip install 'warpforge[{extra}]'"
        ) from exc
