"""A tunable whose run sleeps for its config's ``sleep_s``: a config that hangs a compile-ahead
worker, for the pool's time limit.

Compile-ahead workers know only warpforge's own tunables. A :class:`SleepSeconds` config value
registers this one in the worker that unpickles it (pickle calls the function its ``__reduce__``
names there, importing this module from the ``sys.path`` spawn copied from the test process);
the test process never registers it, so no other test finds it in the registry.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import torch
from tune_synthetic import make_synthetic

from warpforge.tune.space import ConfigSpace
from warpforge.tune.tunable import register_tunable


def _run(config: Mapping[str, object], x: torch.Tensor) -> torch.Tensor:
    time.sleep(int(config["sleep_s"]))  # type: ignore[call-overload]
    return 2 * x


SLEEPY = dataclasses.replace(
    make_synthetic("sleepy", ConfigSpace({"sleep_s": (0, 60)})),
    run=_run,
    default_config=lambda features: {"sleep_s": 0},
    description="sleeps for sleep_s seconds, then doubles its input",
)


class SleepSeconds(int):
    """``sleep_s`` for a config sent to compile-ahead workers: it registers :data:`SLEEPY` in
    the worker that unpickles it, before the worker looks the tunable up."""

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return _register_in_worker, (int(self),)


def _register_in_worker(sleep_s: int) -> int:
    register_tunable(SLEEPY, replace=True)
    return sleep_s
