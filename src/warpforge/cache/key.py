"""The cache key: everything that can change a compiled kernel, and its content address.

A kernel built for one blueprint is only reusable where the graph, the GPU architecture, the
software that generated and compiled it, and the input specialisation (dtypes, divisibility,
shape bucket) are all the same, so all of them are part of the key. ``digest()`` hashes a
canonical JSON of every field; the disk and Redis tiers store entries under that digest.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch

from warpforge import runtime
from warpforge.validation import describe

# Bumped when the digest's canonical form changes, so old and new entries never alias.
KEY_FORMAT_VERSION = 1


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {describe(value)}")
    if not value:
        raise ValueError(f"{name}: expected a non-empty string, got ''")


_TEXT_FIELDS = ("graph_hash", "arch", "warpforge_version", "triton_version", "torch_version")


def _check_specialisation(spec: object) -> tuple[tuple[str, str], ...]:
    """Specialisation given as any sequence of string pairs, as a tuple of tuples."""
    if not isinstance(spec, (tuple, list)) or not all(
        isinstance(pair, (tuple, list)) and len(pair) == 2 and all(type(p) is str for p in pair)
        for pair in spec
    ):
        raise TypeError(
            f"specialisation: expected a tuple of (name, value) string pairs, got {describe(spec)}"
        )
    return tuple((name, value) for name, value in spec)


def specialisation_value(value: object) -> str:
    """The canonical text of one specialisation value (``torch.float16`` -> ``"float16"``)."""
    if type(value) is str:
        return value
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, torch.device):
        return str(value)
    # JSON spellings (true, false, null), written out: json.dumps costs microseconds per call.
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (str, int, float)):
        return str(value) if not isinstance(value, float) else repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(specialisation_value(v) for v in value) + "]"
    raise TypeError(
        f"specialisation: expected values that are str, bool, int, float, None, torch.dtype, "
        f"torch.device or tuples of those, got {describe(value)}"
    )


@dataclass(frozen=True)
class CacheKey:
    """Identifies one compiled kernel; two keys with equal fields have equal digests."""

    graph_hash: str
    arch: str
    warpforge_version: str
    triton_version: str
    torch_version: str
    specialisation: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Exact-type checks first: keys are built on the compiler's hot path (see the
        # benchmark), so the common valid case must cost as little as possible.
        text = (self.graph_hash, self.arch, self.warpforge_version, self.triton_version,
                self.torch_version)  # fmt: skip
        for value in text:
            if type(value) is not str or not value:
                for name in _TEXT_FIELDS:
                    _check_text(name, getattr(self, name))
        spec = self.specialisation
        if type(spec) is not tuple:
            spec = _check_specialisation(spec)
        for pair in spec:
            if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not str:  # fmt: skip
                spec = _check_specialisation(spec)
                break
        normalised = tuple(sorted(spec))
        for i in range(1, len(normalised)):
            if normalised[i][0] == normalised[i - 1][0]:
                raise ValueError(
                    f"specialisation: expected unique names, got {[name for name, _ in normalised]}"
                )
        if normalised != spec:
            # Frozen dataclass: normalise once so equal keys compare and hash equal.
            object.__setattr__(self, "specialisation", normalised)
        # The memory tier hashes the key on every lookup: hash once (derived, not a field).
        self.__dict__["_hash"] = hash((*text, normalised))

    def __hash__(self) -> int:
        return self.__dict__["_hash"]

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild through the constructor: a cached str hash is only valid in the process
        # that computed it (hash randomisation), so it must never travel in a pickle.
        return (type(self), (*(getattr(self, name) for name in _TEXT_FIELDS), self.specialisation))

    @classmethod
    def for_current_environment(
        cls,
        graph_hash: str,
        specialisation: Mapping[str, object],
        device: torch.device | str | None = None,
    ) -> CacheKey:
        """A key for ``graph_hash`` on ``device`` (default: current CUDA device, else CPU) with
        this process's warpforge, Triton and torch versions."""
        if not isinstance(specialisation, Mapping):
            raise TypeError(
                f"specialisation: expected a mapping of name -> value, got {describe(specialisation)}"
            )
        pairs = []
        for name, value in specialisation.items():
            if not isinstance(name, str):
                raise TypeError(f"specialisation: expected str names, got {describe(name)}")
            pairs.append((name, specialisation_value(value)))
        warpforge_version, triton_version, torch_version = software_versions()
        return cls(
            graph_hash=graph_hash,
            arch=_arch(None if device is None else str(device)),
            warpforge_version=warpforge_version,
            triton_version=triton_version,
            torch_version=torch_version,
            specialisation=tuple(pairs),
        )

    def as_dict(self) -> dict[str, Any]:
        """All fields as JSON-ready values (the manifest records them)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["specialisation"] = [list(pair) for pair in self.specialisation]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CacheKey:
        """Inverse of :meth:`as_dict`."""
        if not isinstance(data, Mapping):
            raise TypeError(f"data: expected a mapping, got {describe(data)}")
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise ValueError(f"data: expected exactly the keys {sorted(names)}, got {sorted(data)}")
        values = dict(data)
        spec = values["specialisation"]
        if not isinstance(spec, (list, tuple)):
            raise TypeError(f"data['specialisation']: expected a list, got {describe(spec)}")
        values["specialisation"] = tuple(tuple(pair) for pair in spec)
        return cls(**values)

    def digest(self) -> str:
        """SHA-256 (hex) of a canonical JSON of every field: the entry's content address.

        Computed once per key object, and only by the disk and Redis tiers: the memory tier
        looks keys up by field equality.
        """
        cached = self.__dict__.get("_digest")
        if cached is None:
            # A JSON array is canonical by position; field order is fixed by KEY_FORMAT_VERSION.
            canonical = json.dumps(
                [KEY_FORMAT_VERSION, *(getattr(self, name) for name in _TEXT_FIELDS),
                 self.specialisation],
                separators=(",", ":"),
                ensure_ascii=True,
            )  # fmt: skip
            cached = hashlib.sha256(canonical.encode("ascii")).hexdigest()
            # Bypasses the frozen __setattr__; the digest is derived, not a field.
            self.__dict__["_digest"] = cached
        return cached


@functools.lru_cache(maxsize=1)
def software_versions() -> tuple[str, str, str]:
    """(warpforge, triton, torch) versions of this process; Triton is not imported for this."""
    from warpforge import __version__

    triton = sys.modules.get("triton")
    triton_version = getattr(triton, "__version__", None) if triton is not None else None
    if triton_version is None:
        try:
            triton_version = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            triton_version = "none"
    return __version__, str(triton_version), str(torch.__version__)


@functools.lru_cache(maxsize=16)
def _arch(device: str | None) -> str:
    return runtime.device_capabilities(device).arch
