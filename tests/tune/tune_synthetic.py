"""A synthetic tunable with a known timing landscape, for deterministic search tests.

The "kernel" is plain PyTorch (``2 * x``); a fake timer gives each config a time from a bowl
centred on BLOCK=128, num_warps=4, so the true best is known. One config is faster than all but
returns a wrong answer, and one raises, so tests can check neither ever wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from warpforge.harness.timing import Measurement
from warpforge.tune.space import ConfigSpace, divisible, relation
from warpforge.tune.tunable import TunableKernel, dtype_name

BEST = {"BLOCK": 128, "num_warps": 4, "unroll": 2}
WRONG_BUT_FAST = {"BLOCK": 1024, "num_warps": 8, "unroll": 1}
RAISES = {"BLOCK": 16, "num_warps": 1, "unroll": 1}


def synthetic_space(blocks: Sequence[int] = (16, 32, 64, 128, 256, 512, 1024)) -> ConfigSpace:
    return ConfigSpace(
        {"BLOCK": tuple(blocks), "num_warps": (1, 2, 4, 8), "unroll": (1, 2, 4)},
        constraints=(
            divisible("N", "BLOCK"),
            relation(
                "threads",
                lambda c, f: (
                    None
                    if int(c["BLOCK"]) >= 32 * int(c["num_warps"]) // 4
                    else f"BLOCK={c['BLOCK']} too small for {c['num_warps']} warps"
                ),
            ),
        ),
    )


def synthetic_time(config: Mapping[str, object]) -> float:
    """Seconds for ``config``: a bowl with its minimum at :data:`BEST`."""
    if dict(config) == WRONG_BUT_FAST:
        return 1e-7
    b = math.log2(int(config["BLOCK"])) - 7
    w = math.log2(int(config["num_warps"])) - 2
    u = math.log2(int(config["unroll"])) - 1
    return 1e-5 * (1.0 + b * b + 0.5 * w * w + 0.25 * u * u)


def _run(config: Mapping[str, object], x: torch.Tensor) -> torch.Tensor:
    if dict(config) == RAISES:
        raise RuntimeError(
            "out of resources: shared memory, Required: 300000, Hardware limit: 232448"
        )
    out = 2 * x
    return out + 1 if dict(config) == WRONG_BUT_FAST else out


def make_synthetic(name: str = "synthetic", space: ConfigSpace | None = None) -> TunableKernel:
    return TunableKernel(
        name=name,
        space=space or synthetic_space(),
        source_hash="synthetic-v1",
        features=lambda shape, dtype: {"N": int(shape["N"]), "dtype": dtype_name(dtype)},
        make_inputs=lambda shape, dtype, device, g: (
            torch.randn(int(shape["N"]), generator=g).to(device=device, dtype=dtype),
        ),
        run=_run,
        reference=lambda x: 2 * x,
        default_config=lambda f: {"BLOCK": 64, "num_warps": 2, "unroll": 1},
        cpu_shapes=({"N": 1024},),
        shapes=({"N": 1024},),
        description="synthetic test kernel",
    )


def fake_measurement(seconds: float) -> Measurement:
    return Measurement(
        samples_s=(seconds, seconds),
        median_s=seconds,
        ci_low_s=seconds * 0.99,
        ci_high_s=seconds * 1.01,
        rel_stderr=0.001,
        clock="fake",
        cold=False,
        wall_total_s=2 * seconds,
    )


class FakeTimer:
    """Times from :func:`synthetic_time`; advances :attr:`clock` by one "second" per trial."""

    def __init__(self, time_of: Callable[[Mapping[str, object]], float] = synthetic_time) -> None:
        self.time_of = time_of
        self.now = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def __call__(
        self, fn: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], *, config: dict
    ) -> Measurement:
        fn(*input_sets[0])  # the real call still happens (correctness was checked on it)
        self.calls += 1
        self.now += 1.0
        return fake_measurement(self.time_of(config))


def fake_timer(
    fn: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], *, config: dict
) -> Measurement:
    """A stateless (picklable) :class:`FakeTimer` for worker processes."""
    return fake_measurement(synthetic_time(config))
