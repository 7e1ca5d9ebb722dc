"""KernelBench-format problems: a reference file and a candidate file.

A reference file defines ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``; a
candidate file defines ``ModelNew`` with the same constructor. Both models are built right after
the same ``torch.manual_seed(init_seed)``, so their parameters match.

Optional extras a reference file may define (warpforge conventions):

* ``flops(*inputs) -> float`` and ``bytes_moved(*inputs) -> float``: the analytic cost of the
  math, used for achieved TFLOP/s and GB/s and the impossible-speed floor. Without
  ``bytes_moved`` the harness uses the bytes of all inputs plus all outputs.
* ``REPEAT_ATOL``: allowed difference between repeated calls (atomics); default bitwise.
* Sizes: ``get_inputs()`` should pick small sizes when ``torch.cuda.is_available()`` is False,
  so CPU verification under Triton's interpreter stays quick.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


class LoadError(Exception):
    """A reference, candidate or baseline file cannot be loaded (exit code 2)."""


def load_module(path: str | Path, *, role: str) -> ModuleType:
    """Import the Python file at ``path`` under a unique module name; LoadError on any failure."""
    path = Path(path)
    if not path.is_file():
        raise LoadError(f"{role}: no such file {str(path)!r}")
    if path.suffix != ".py":
        raise LoadError(f"{role}: expected a .py file, got {str(path)!r}")
    name = f"warpforge_{role}_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{role}: cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise LoadError(
            f"{role}: importing {str(path)!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


@dataclass(frozen=True)
class ReferenceProgram:
    """A loaded reference file."""

    path: Path
    module: ModuleType

    @property
    def model_class(self) -> type[torch.nn.Module]:
        return self.module.Model

    def init_inputs(self) -> list[Any]:
        return list(self.module.get_init_inputs())

    def inputs(self, seed: int, device: torch.device) -> tuple[Any, ...]:
        """``get_inputs()`` under ``seed``, moved to ``device``."""
        torch.manual_seed(seed)
        return tuple(to_device(x, device) for x in self.module.get_inputs())

    def flops(self, inputs: tuple[Any, ...]) -> float | None:
        fn = getattr(self.module, "flops", None)
        return float(fn(*inputs)) if callable(fn) else None

    def bytes_moved(self, inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> float:
        fn = getattr(self.module, "bytes_moved", None)
        if callable(fn):
            return float(fn(*inputs))
        return float(
            sum(
                x.numel() * x.element_size()
                for x in (*inputs, *outputs)
                if isinstance(x, torch.Tensor)
            )
        )

    @property
    def repeat_atol(self) -> float:
        return float(getattr(self.module, "REPEAT_ATOL", 0.0))


def load_reference(path: str | Path) -> ReferenceProgram:
    """Load and check a KernelBench reference file."""
    module = load_module(path, role="reference")
    missing = [
        name for name in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, name)
    ]
    if missing:
        raise LoadError(f"reference: {str(path)!r} does not define {', '.join(missing)}")
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        raise LoadError(f"reference: Model in {str(path)!r} is not an nn.Module subclass")
    return ReferenceProgram(Path(path), module)


def model_class(module: ModuleType, path: str | Path, *, role: str) -> type[torch.nn.Module]:
    """``ModelNew`` (or, for a baseline file, ``Model``) from a loaded candidate file."""
    cls = getattr(module, "ModelNew", None)
    if cls is None and role == "baseline":
        cls = getattr(module, "Model", None)
    if cls is None:
        raise LoadError(f"{role}: {str(path)!r} does not define ModelNew")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise LoadError(f"{role}: ModelNew in {str(path)!r} is not an nn.Module subclass")
    return cls


def build_model(
    cls: type[torch.nn.Module],
    init_inputs: list[Any],
    *,
    seed: int,
    device: torch.device,
    dtype: torch.dtype | None = None,
) -> torch.nn.Module:
    """Construct ``cls(*init_inputs)`` right after ``torch.manual_seed(seed)``, on ``device``."""
    torch.manual_seed(seed)
    model = cls(*init_inputs).to(device)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()


def to_device(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def to_float64(value: Any) -> Any:
    """Floating tensors in float64 (the reference's precision); everything else unchanged."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


def compute_dtype(inputs: tuple[Any, ...]) -> torch.dtype:
    """The candidate's dtype: that of the first floating input (float32 when there is none)."""
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.dtype
    return torch.float32
