"""The compile-ahead pool runs configs in spawned workers and never takes a search down with it."""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import time

import pytest
import torch
from tune_sleepy import SLEEPY, SleepSeconds

from warpforge.tune.precompile import CompilePool
from warpforge.tune.tunable import get_tunable


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_worker_count_is_validated(workers: object) -> None:
    with pytest.raises(ValueError, match="workers: expected a positive int"):
        CompilePool(workers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout_s", "error", "message"),
    [
        (0, ValueError, "timeout_s: expected a finite number > 0, got 0"),
        (-1.5, ValueError, "timeout_s: expected a finite number > 0, got -1.5"),
        (math.nan, ValueError, "timeout_s: expected a finite number > 0, got nan"),
        (math.inf, ValueError, "timeout_s: expected a finite number > 0, got inf"),
        ("5", TypeError, "timeout_s: expected a number, got str '5'"),
        (True, TypeError, "timeout_s: expected a number, got bool True"),
    ],
)
def test_the_time_limit_is_validated(timeout_s: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        CompilePool(1, timeout_s=timeout_s)  # type: ignore[arg-type]


def _exists(pid: int) -> bool:
    """Whether process ``pid`` is still there, as a zombie too (signal 0 reaches one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_config_that_hangs_a_worker_stops_the_workers_not_the_search(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from warpforge.tune.search import exhaustive_search

    shape = dict(SLEEPY.cpu_shapes[0])
    others = set(multiprocessing.active_children())
    with CompilePool(1, timeout_s=0.5) as pool:
        pool.start()  # not under the 0.5 s: starting a worker takes seconds
        workers = [p.pid for p in set(multiprocessing.active_children()) - others]
        assert len(workers) == 1
        hangs = {"sleep_s": SleepSeconds(60)}
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="warpforge.tune"):
            assert pool.compile(SLEEPY.name, shape, torch.float32, "cpu", [hangs]) is False
            assert time.monotonic() - began < 10  # the limit and the kill, not the 60 s sleep
            assert not pool.usable
            assert not any(_exists(pid) for pid in workers)  # killed and reaped
            assert pool.compile(SLEEPY.name, shape, torch.float32, "cpu", [hangs]) is False
        # once, naming the kernel, the problem and the config it waited for
        (warning,) = [r for r in caplog.records if r.name == "warpforge.tune"]
        assert "sleepy {'N': 1024} float32" in warning.getMessage()
        assert 'in flight: {"sleep_s":60}' in warning.getMessage()
    # The search then compiles by itself (the hanging config is for its trial_timeout_s).
    result = exhaustive_search(SLEEPY, shape, torch.float32, "cpu", configs=[{"sleep_s": 0}])
    assert [t.status for t in result.trials] == ["ok"]


def test_workers_run_each_config_once_and_survive_failures() -> None:
    kernel = get_tunable("row_sum")
    shape = dict(kernel.cpu_shapes[0])
    configs = kernel.space.valid_configs(kernel.features(shape, torch.float32))[:3]
    with CompilePool(1, timeout_s=None) as pool:  # None: no time limit
        assert pool.compile(kernel.name, shape, torch.float32, "cpu", []) is True
        assert pool.compile(kernel.name, shape, torch.float32, "cpu", configs) is True
        assert pool.compiled == len(configs)
        # A task that fails in the worker (an unknown kernel) loses only its head start.
        assert pool.compile("no_such_kernel", shape, torch.float32, "cpu", configs) is True
        assert pool.usable and pool.compiled == len(configs)
    assert not pool.usable
    assert pool.compile(kernel.name, shape, torch.float32, "cpu", configs) is False


def test_a_worker_that_died_between_compiles_closes_the_pool_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker killed while idle (by the OOM killer, say) breaks the executor, which then
    refuses new tasks: compile returns False instead of raising into the search."""
    kernel = get_tunable("row_sum")
    shape = dict(kernel.cpu_shapes[0])
    configs = kernel.space.valid_configs(kernel.features(shape, torch.float32))[:1]
    others = set(multiprocessing.active_children())
    with CompilePool(1, timeout_s=None) as pool:
        pool.start()
        (worker,) = set(multiprocessing.active_children()) - others
        worker.kill()
        worker.join(10)
        deadline = time.monotonic() + 10  # the executor notices the death on its own thread
        with caplog.at_level(logging.WARNING, logger="warpforge.tune"):
            while pool.compile(kernel.name, shape, torch.float32, "cpu", configs):
                assert time.monotonic() < deadline, "the pool never noticed its dead worker"
                time.sleep(0.05)
        assert not pool.usable
        assert any("pool broke" in r.getMessage() for r in caplog.records)
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
