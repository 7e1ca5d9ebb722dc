"""Argument validation for public APIs: one place for the wording of every error.

Each check raises ``TypeError`` (wrong kind of object or dtype) or ``ValueError`` (wrong value,
shape or device) whose message names the argument, what was expected and what was received.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def describe(x: object) -> str:
    """A short description of ``x`` for error messages."""
    if isinstance(x, torch.Tensor):
        dtype = str(x.dtype).removeprefix("torch.")
        return f"tensor of shape {tuple(x.shape)}, dtype {dtype} on {x.device}"
    return f"{type(x).__name__} {x!r}"[:200]


def check_tensor(
    name: str,
    x: object,
    *,
    dtypes: Sequence[torch.dtype] | None = None,
    ndim: int | Sequence[int] | None = None,
    min_ndim: int | None = None,
    allow_empty: bool = False,
) -> torch.Tensor:
    """Check that ``x`` is a tensor with an allowed dtype and rank; return it."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {describe(x)}")
    if dtypes is not None and x.dtype not in dtypes:
        raise TypeError(f"{name}: expected dtype in ({_dtype_names(dtypes)}), got {describe(x)}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            expected = " or ".join(f"{n}-D" for n in allowed)
            raise ValueError(f"{name}: expected a {expected} tensor, got {describe(x)}")
    if min_ndim is not None and x.dim() < min_ndim:
        raise ValueError(f"{name}: expected at least {min_ndim} dimension(s), got {describe(x)}")
    if not allow_empty and x.numel() == 0:
        raise ValueError(f"{name}: expected a non-empty tensor, got {describe(x)}")
    return x


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """All given tensors (``None`` ignored) must be on one device."""
    # compared as torch.device objects, the message built only on failure: callers such as
    # align run this every call, on the host's critical path
    devices = {v.device for v in tensors.values() if v is not None}
    if len(devices) > 1:
        where = ", ".join(f"{k} on {v.device}" for k, v in tensors.items() if v is not None)
        raise ValueError(f"expected all tensors on one device, got {where}")


def check_shape(name: str, x: torch.Tensor, expected: Sequence[int], *, what: str = "") -> None:
    """``x`` must have exactly the shape ``expected``."""
    if tuple(x.shape) != tuple(expected):
        because = f" ({what})" if what else ""
        raise ValueError(f"{name}: expected shape {tuple(expected)}{because}, got {describe(x)}")


def check_positive(
    name: str, value: object, *, allow_zero: bool = False, finite: bool = False
) -> float:
    """``value`` must be a real number > 0 (or >= 0 with ``allow_zero``), and not infinite with
    ``finite`` (an eps, a voxel edge; limits such as a byte budget may be infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {describe(value)}")
    ok = value >= 0 if allow_zero else value > 0
    if not ok or value != value or (finite and not math.isfinite(value)):  # NaN fails too
        bound = ">= 0" if allow_zero else "> 0"
        kind = "a finite number" if finite else "a number"
        raise ValueError(f"{name}: expected {kind} {bound}, got {value!r}")
    return float(value)


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """``value`` must be one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
    return value


def normalize_dim(name: str, dim: object, ndim: int) -> int:
    """A dimension index in ``[-ndim, ndim)`` made non-negative."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: expected an int, got {describe(dim)}")
    if not -ndim <= dim < ndim:
        raise ValueError(
            f"{name}: expected a dimension in [{-ndim}, {ndim - 1}] for a {ndim}-D tensor, "
            f"got {dim}"
        )
    return dim % ndim


def parse_shape(text: object) -> dict[str, int]:
    """``"M=4096,N=1024"`` -> ``{"M": 4096, "N": 1024}``, sizes > 0 (command-line shapes: the
    tuner's problems, the benchmark's row filter)."""
    form = "shape: expected NAME=SIZE[,NAME=SIZE...] with integer sizes > 0"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{form}, got {text!r}")
    shape: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"{form}, got {text!r}")
        try:
            size = int(value)
        except ValueError:
            raise ValueError(f"{form}, got {text!r} (size of {name!r}: {value!r})") from None
        if size <= 0:
            raise ValueError(f"{form}, got {text!r} (size of {name!r}: {size})")
        if name in shape:  # the later one silently won before
            raise ValueError(f"{form}, each name once, got {text!r} ({name!r} twice)")
        shape[name] = size
    return shape
