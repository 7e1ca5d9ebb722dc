"""Config spaces: the launch parameters a kernel can be tuned over, and the rules that prune them.

A :class:`ConfigSpace` is a set of named parameters, each with an ordered tuple of values (block
sizes, ``num_warps``, ``num_stages``, kernel-specific knobs), and :class:`Constraint` objects that
reject impossible or pointless configs for a given problem *before anything is compiled*. Every
rejection carries a reason, so ``warpforge tune`` can say why a config was never tried.

Values are ordered so that "one step up or down" is meaningful: local search moves along them.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from warpforge.validation import describe

Config = dict[str, object]
Features = Mapping[str, object]

ConstraintCheck = Callable[[Mapping[str, object], Features], "str | None"]
"""``check(config, features)`` -> ``None`` when allowed, else the reason it is rejected."""

H100_SHARED_MEMORY_BYTES = 227 * 1024
"""Opt-in shared memory per block on sm_90; used when the device cannot be asked."""

MAX_REGISTERS_PER_THREAD = 255


@dataclass(frozen=True)
class Constraint:
    """A named rule that rejects configs, with the reason it gives."""

    name: str
    check: ConstraintCheck

    def reason(self, config: Mapping[str, object], features: Features) -> str | None:
        """``None`` when ``config`` is allowed for ``features``; otherwise why it is not."""
        why = self.check(config, features)
        return None if why is None else f"{self.name}: {why}"


@dataclass(frozen=True)
class Rejection:
    """A config the space pruned, and why."""

    config: Config
    reason: str


def divisible(parameter: str, by: str | int) -> Constraint:
    """``parameter`` must divide evenly by ``by``; each is a config parameter, a feature or (``by``)
    a number, e.g. ``divisible("N", "BLOCK")`` for a kernel without a tail mask."""

    def check(config: Mapping[str, object], features: Features) -> str | None:
        divisor = _resolve(by, config, features)
        value = _resolve(parameter, config, features)
        if divisor == 0 or value % divisor:
            return f"{parameter}={value} is not a multiple of {by}={divisor}"
        return None

    return Constraint(f"divisible({parameter}, {by})", check)


def at_most(
    parameter: str, bound: Callable[[Mapping[str, object], Features], int], what: str
) -> Constraint:
    """``config[parameter] <= bound(config, features)``; ``what`` names the bound in the reason."""

    def check(config: Mapping[str, object], features: Features) -> str | None:
        limit = bound(config, features)
        value = int(config[parameter])  # type: ignore[call-overload]
        if value > limit:
            return f"{parameter}={value} exceeds {what} ({limit})"
        return None

    return Constraint(f"at_most({parameter})", check)


def shared_memory_budget(
    bytes_needed: Callable[[Mapping[str, object], Features], int], budget_bytes: int | None = None
) -> Constraint:
    """The config's shared memory (``bytes_needed``) must fit the per-block budget.

    The budget defaults to the current device's opt-in limit, or the H100's when there is no GPU,
    so pruning on a CPU machine matches the machine the tuning is meant for.
    """

    def check(config: Mapping[str, object], features: Features) -> str | None:
        budget = budget_bytes if budget_bytes is not None else _device_shared_memory()
        need = bytes_needed(config, features)
        if need > budget:
            return f"needs {need} bytes of shared memory, the budget is {budget}"
        return None

    return Constraint("shared_memory", check)


def register_budget(
    registers_per_thread: Callable[[Mapping[str, object], Features], int],
    limit: int = MAX_REGISTERS_PER_THREAD,
) -> Constraint:
    """An estimate of registers per thread must stay under ``limit`` (spills are never worth it)."""

    def check(config: Mapping[str, object], features: Features) -> str | None:
        estimate = registers_per_thread(config, features)
        if estimate > limit:
            return f"estimated {estimate} registers per thread, the limit is {limit}"
        return None

    return Constraint("registers", check)


def relation(name: str, check: ConstraintCheck) -> Constraint:
    """Any other rule between config and problem size; ``check`` returns the reason or ``None``."""
    return Constraint(name, check)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _resolve(ref: str | int, config: Mapping[str, object], features: Features) -> int:
    if isinstance(ref, int):
        return ref
    if ref in config:
        return int(config[ref])  # type: ignore[call-overload]
    return int(features[ref])  # type: ignore[call-overload]


def _device_shared_memory() -> int:
    from warpforge import runtime

    if runtime.cuda_available():
        limit = runtime.device_capabilities().max_shared_memory_per_block
        if limit:
            return int(limit)
    return H100_SHARED_MEMORY_BYTES


class ConfigSpace:
    """Named parameters with ordered candidate values, pruned by constraints.

    >>> space = ConfigSpace({"BLOCK": (64, 128), "num_warps": (1, 2, 4)})
    >>> space.size
    6
    """

    def __init__(
        self,
        parameters: Mapping[str, Sequence[object]],
        constraints: Sequence[Constraint] = (),
    ) -> None:
        if not isinstance(parameters, Mapping) or not parameters:
            raise ValueError(
                f"parameters: expected a non-empty mapping of name -> values, got {describe(parameters)}"
            )
        cleaned: dict[str, tuple[object, ...]] = {}
        for name, values in parameters.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"parameters: expected string names, got {describe(name)}")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ValueError(
                    f"parameters[{name!r}]: expected a non-empty sequence of values, "
                    f"got {describe(values)}"
                )
            if len(set(map(repr, values))) != len(values):
                raise ValueError(
                    f"parameters[{name!r}]: values must be distinct, got {list(values)}"
                )
            cleaned[name] = tuple(values)
        for constraint in constraints:
            if not isinstance(constraint, Constraint):
                raise TypeError(
                    f"constraints: expected Constraint objects, got {describe(constraint)}"
                )
        self.parameters: Mapping[str, tuple[object, ...]] = cleaned
        self.constraints: tuple[Constraint, ...] = tuple(constraints)

    def __repr__(self) -> str:
        names = ", ".join(f"{k}={list(v)}" for k, v in self.parameters.items())
        return f"ConfigSpace({names}; {len(self.constraints)} constraint(s))"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.parameters)

    @property
    def size(self) -> int:
        """Number of configs before pruning."""
        return math.prod(len(v) for v in self.parameters.values())

    def all_configs(self) -> Iterator[Config]:
        """Every config of the cartesian product, pruned or not, in a fixed order."""
        names = self.names
        for values in itertools.product(*self.parameters.values()):
            yield dict(zip(names, values, strict=True))

    def rejection(self, config: Mapping[str, object], features: Features) -> str | None:
        """Why ``config`` is not allowed for ``features`` (``None`` when it is)."""
        if set(config) != set(self.parameters):
            return (
                f"config keys {sorted(config)} do not match the space's parameters "
                f"{sorted(self.parameters)}"
            )
        for name, value in config.items():
            if value not in self.parameters[name]:
                return f"{name}={value!r} is not one of {list(self.parameters[name])}"
        for constraint in self.constraints:
            why = constraint.reason(config, features)
            if why is not None:
                return why
        return None

    def allows(self, config: Mapping[str, object], features: Features) -> bool:
        return self.rejection(config, features) is None

    def enumerate(self, features: Features) -> tuple[list[Config], list[Rejection]]:
        """All configs for ``features``, split into the valid ones and the rejections with reasons."""
        valid: list[Config] = []
        rejected: list[Rejection] = []
        for config in self.all_configs():
            why = self.rejection(config, features)
            if why is None:
                valid.append(config)
            else:
                rejected.append(Rejection(config, why))
        return valid, rejected

    def valid_configs(self, features: Features) -> list[Config]:
        return self.enumerate(features)[0]

    def neighbours(self, config: Mapping[str, object], features: Features) -> list[Config]:
        """Valid configs one step away along one parameter (the moves of coordinate descent)."""
        result: list[Config] = []
        for name, values in self.parameters.items():
            index = values.index(config[name])
            for step in (-1, 1):
                j = index + step
                if 0 <= j < len(values):
                    candidate = {**config, name: values[j]}
                    if self.allows(candidate, features):
                        result.append(candidate)
        return result

    def sample(self, features: Features, count: int, rng: random.Random) -> list[Config]:
        """Up to ``count`` distinct valid configs drawn uniformly at random."""
        valid = self.valid_configs(features)
        return rng.sample(valid, min(count, len(valid)))


def config_key(config: Mapping[str, object]) -> str:
    """A canonical string for a config (stable order), used to deduplicate and to store."""
    import json

    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))
