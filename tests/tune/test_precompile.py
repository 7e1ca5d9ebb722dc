"""The compile-ahead pool runs configs in spawned workers and never takes a search down with it."""

from __future__ import annotations

import pytest
import torch

from warpforge.tune.precompile import CompilePool
from warpforge.tune.tunable import get_tunable


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_worker_count_is_validated(workers: object) -> None:
    with pytest.raises(ValueError, match="workers: expected a positive int"):
        CompilePool(workers)  # type: ignore[arg-type]


def test_workers_run_each_config_once_and_survive_failures() -> None:
    kernel = get_tunable("row_sum")
    shape = dict(kernel.cpu_shapes[0])
    configs = kernel.space.valid_configs(kernel.features(shape, torch.float32))[:3]
    with CompilePool(1) as pool:
        assert pool.compile(kernel.name, shape, torch.float32, "cpu", []) is True
        assert pool.compile(kernel.name, shape, torch.float32, "cpu", configs) is True
        assert pool.compiled == len(configs)
        # A task that fails in the worker (an unknown kernel) loses only its head start.
        assert pool.compile("no_such_kernel", shape, torch.float32, "cpu", configs) is True
        assert pool.usable and pool.compiled == len(configs)
    assert not pool.usable
    assert pool.compile(kernel.name, shape, torch.float32, "cpu", configs) is False
