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


@pytest.mark.gpu
def test_gpu_configs_compiled_ahead_are_what_the_search_then_runs() -> None:
    from warpforge.tune.search import exhaustive_search

    kernel = get_tunable("rms_norm.bwd")
    shape = {"M": 4096, "N": 4096}
    configs = kernel.space.valid_configs(kernel.features(shape, torch.bfloat16))
    with CompilePool(4) as pool:
        assert pool.compile(kernel.name, shape, torch.bfloat16, "cuda", configs) is True
        assert pool.compiled == len(configs)
    result = exhaustive_search(kernel, shape, torch.bfloat16, "cuda")
    assert len(result.trials) == len(configs)
    assert all(t.ok for t in result.trials), [
        (t.config, t.error) for t in result.trials if not t.ok
    ]
