"""The registry of tunable kernels: what the tuner needs to know about a kernel to tune it.

A :class:`TunableKernel` bundles a kernel's :class:`~warpforge.tune.space.ConfigSpace`, a hash of
its source (stored results are keyed by it, so editing the kernel never reuses stale timings), a
``features`` function describing a problem (sizes and dtype), and the functions that build inputs,
run one config, and compute the reference output. Ops register themselves with
:func:`register_tunable`; :mod:`warpforge.tune.examples` registers a small kernel of its own.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from warpforge.tune.space import ConfigSpace
from warpforge.tune.transfer import Transfer
from warpforge.validation import describe

logger = logging.getLogger("warpforge.tune")

Shape = Mapping[str, int]
"""A problem size by name, e.g. ``{"M": 4096, "N": 1024}``."""

_REGISTRY: dict[str, TunableKernel] = {}

# Modules whose import registers tunables; loaded the first time the registry is asked.
_PROVIDERS: tuple[str, ...] = (
    "warpforge.tune.examples",
    "warpforge.ops.tunables",
    "warpforge.blueprint.tunables",
)


@dataclass(frozen=True)
class TunableKernel:
    """A kernel the tuner can search over."""

    name: str
    space: ConfigSpace
    source_hash: str
    """Hash of everything that changes the kernel's code; see :func:`source_hash`."""
    features: Callable[[Shape, torch.dtype], dict[str, object]]
    """Problem description used as the database key: sizes (ints) and categorical values
    (strings, e.g. the dtype name). Lookup matches strings exactly and compares sizes on log2."""
    make_inputs: Callable[[Shape, torch.dtype, torch.device, torch.Generator], tuple[Any, ...]]
    run: Callable[..., Any]
    """``run(config, *inputs)`` launches the kernel with one config and returns its output."""
    reference: Callable[..., Any]
    """Plain PyTorch on the same inputs; called on float64 copies for the ground truth."""
    default_config: Callable[[Mapping[str, object]], dict[str, object]]
    """The hand-picked config used when nothing is tuned, from the features."""
    shapes: Sequence[Shape] = ()
    """Shapes ``warpforge tune NAME`` tunes on a GPU when none are given."""
    cpu_shapes: Sequence[Shape] = ()
    """Tiny shapes used on the CPU (Triton interpreter)."""
    sweep: Sequence[Shape] = ()
    """More shapes for ``--sweep`` and for the nearest-match benchmark."""
    dtypes: Sequence[torch.dtype] = (torch.float32,)
    atol: Mapping[torch.dtype, float] = field(
        default_factory=lambda: {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
    )
    rtol: Mapping[torch.dtype, float] = field(
        default_factory=lambda: {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
    )
    description: str = ""
    transfer: Transfer | None = None
    """How a neighbour's config is carried to another shape by the nearest-match lookup
    (:mod:`warpforge.tune.transfer`); ``None`` uses it unchanged."""
    current_features: Callable[[Mapping[str, object]], bool] | None = None
    """Whether a stored problem's features describe code the kernel generates now (a generated
    kernel keys its configs by the graph it came from): stored configs failing it are stale.
    ``None``: every problem's features are current."""
    bypassed: Callable[[Shape, torch.dtype], str | None] | None = None
    """Where the op runs another kernel whatever is tuned (a table of measured launches takes
    those rows): what it runs there, in a few words; None where the op takes the tuned config.
    ``None``: the op always does. ``warpforge tune`` says so before it tunes such a problem."""

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        return self.atol.get(dtype, 1e-5), self.rtol.get(dtype, 1e-5)

    @property
    def dimensions(self) -> tuple[str, ...] | None:
        """The size names the kernel's declared shapes use (``None`` when it declares none)."""
        for shape in (*self.shapes, *self.cpu_shapes, *self.sweep):
            return tuple(shape)
        return None

    def check_shape(self, shape: object) -> dict[str, int]:
        """``shape`` as a dict of positive ints naming exactly the kernel's dimensions."""
        if not isinstance(shape, Mapping) or not shape:
            raise ValueError(
                f"shape: expected a non-empty mapping of name -> size, got {describe(shape)}"
            )
        for name, size in shape.items():
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"shape: size of {name!r} must be a positive int, got {size!r}")
        expected = self.dimensions
        if expected is not None and set(shape) != set(expected):
            missing = sorted(set(expected) - set(shape))
            extra = sorted(set(shape) - set(expected))
            raise ValueError(
                f"shape: {self.name} takes sizes {', '.join(expected)}; got {dict(shape)}"
                + (f" (missing {', '.join(missing)})" if missing else "")
                + (f" (unknown {', '.join(extra)})" if extra else "")
            )
        return dict(shape)


def source_hash(*objects: object) -> str:
    """A short stable hash of the source of functions/classes (Triton ``JITFunction`` included)
    and of any plain values (e.g. a version string), in order."""
    digest = hashlib.sha256()
    for obj in objects:
        target = getattr(obj, "fn", obj)  # a triton JITFunction wraps the Python function
        try:
            text = inspect.getsource(target)  # type: ignore[arg-type]
        except (OSError, TypeError):
            text = repr(obj)
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def register_tunable(kernel: TunableKernel, *, replace: bool = False) -> TunableKernel:
    """Add ``kernel`` to the registry (``replace=True`` to overwrite a name); returns it."""
    if not isinstance(kernel, TunableKernel):
        raise TypeError(f"kernel: expected a TunableKernel, got {describe(kernel)}")
    if not kernel.name or not isinstance(kernel.name, str):
        raise ValueError(f"kernel.name: expected a non-empty string, got {kernel.name!r}")
    existing = _REGISTRY.get(kernel.name)
    if existing is not None and existing is not kernel and not replace:
        raise ValueError(
            f"kernel.name: a tunable named {kernel.name!r} is already registered; "
            "pass replace=True to overwrite it"
        )
    _REGISTRY[kernel.name] = kernel
    return kernel


def unregister_tunable(name: str) -> None:
    _REGISTRY.pop(name, None)


def _load_providers() -> None:
    for module in _PROVIDERS:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # a provider that is not built yet must not break the rest
            logger.debug("tunable provider %s not importable: %s", module, exc)


def get_tunable(name: str) -> TunableKernel:
    """The registered tunable ``name``; ``KeyError`` naming the known ones otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a string, got {describe(name)}")
    if name not in _REGISTRY:
        _load_providers()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"no tunable kernel named {name!r}; registered: {known}") from None


def find_tunable(name: str) -> TunableKernel | None:
    """Like :func:`get_tunable` without loading providers or raising (for hot lookups)."""
    return _REGISTRY.get(name)


def registered_tunables() -> list[TunableKernel]:
    _load_providers()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def device_fingerprint(device: torch.device | str) -> str:
    """What a stored timing is valid for: the GPU model and architecture (or the CPU path).

    Configs tuned on one H100 apply to every H100 of the same model. Another model of the same
    architecture takes them only where nothing was tuned for it (the lookup's last resort before
    the default, :meth:`~warpforge.tune.lookup.ConfigLookup.config_for`); the interpreter never
    does, its timings mean nothing for a GPU.
    """
    from warpforge import runtime

    device = torch.device(device)
    caps = runtime.device_capabilities(device)
    if device.type == "cuda":
        return f"{caps.name}/{caps.arch}"
    return f"cpu/{runtime.execution_path(device).value}"


def parse_dtype(text: str) -> torch.dtype:
    """``"float16"`` / ``"fp16"`` / ``"bf16"`` -> the torch dtype."""
    aliases = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "float16": torch.float16,
        "fp16": torch.float16,
        "half": torch.float16,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float64": torch.float64,
        "fp64": torch.float64,
    }
    key = text.strip().lower().removeprefix("torch.") if isinstance(text, str) else text
    if key not in aliases:
        raise ValueError(f"dtype: expected one of {sorted(aliases)}, got {text!r}")
    return aliases[key]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
