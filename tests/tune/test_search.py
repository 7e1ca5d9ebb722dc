from __future__ import annotations

import math

import pytest
import torch
from tune_synthetic import (
    BEST,
    RAISES,
    WRONG_BUT_FAST,
    FakeTimer,
    make_synthetic,
    synthetic_space,
    synthetic_time,
)

from warpforge.tune.search import budgeted_search, exhaustive_search, tune
from warpforge.tune.space import config_key

SHAPE = {"N": 1024}


def test_exhaustive_finds_the_known_best_and_records_every_valid_config() -> None:
    kernel = make_synthetic()
    timer = FakeTimer()
    result = exhaustive_search(kernel, SHAPE, torch.float32, "cpu", timer=timer)
    valid = kernel.space.valid_configs(kernel.features(SHAPE, torch.float32))
    assert len(result.trials) == len(valid)
    assert result.rejected == kernel.space.size - len(valid) > 0
    assert result.best is not None and result.best.config == BEST
    assert result.best.median_s == pytest.approx(synthetic_time(BEST))


def test_a_fast_wrong_config_never_wins_and_is_recorded_incorrect() -> None:
    result = exhaustive_search(make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer())
    by_key = {config_key(t.config): t for t in result.trials}
    wrong = by_key[config_key(WRONG_BUT_FAST)]
    assert (
        wrong.status == "incorrect"
        and wrong.median_s is None
        and "off the reference" in wrong.error
    )
    assert result.best.config != WRONG_BUT_FAST


def test_a_raising_config_is_an_error_not_a_crash() -> None:
    result = exhaustive_search(make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer())
    err = {config_key(t.config): t for t in result.trials}[config_key(RAISES)]
    assert err.status == "error" and "RuntimeError: out of resources" in err.error


def test_nan_output_is_incorrect() -> None:
    kernel = make_synthetic()
    nan_kernel = type(kernel)(
        **{**kernel.__dict__, "run": lambda c, x: torch.full_like(x, math.nan)}
    )
    result = exhaustive_search(nan_kernel, SHAPE, torch.float32, "cpu", timer=FakeTimer())
    assert result.best is None and {t.status for t in result.trials} == {"incorrect"}


def test_budgeted_search_finds_the_best_with_fewer_trials() -> None:
    kernel = make_synthetic(space=synthetic_space(blocks=tuple(2**i for i in range(3, 11))))
    timer = FakeTimer()
    result = budgeted_search(
        kernel,
        SHAPE,
        torch.float32,
        "cpu",
        budget_s=30,
        timer=timer,
        clock=timer.clock,
        seed=1,
        random_samples=4,
    )
    valid = kernel.space.valid_configs(kernel.features(SHAPE, torch.float32))
    assert result.best.config == BEST
    assert len(result.trials) <= 31 < len(valid)


@pytest.mark.parametrize("seed", range(5))
def test_budgeted_search_never_picks_the_wrong_config_even_when_seeded_with_it(seed: int) -> None:
    timer = FakeTimer()
    result = budgeted_search(
        make_synthetic(),
        SHAPE,
        torch.float32,
        "cpu",
        budget_s=25,
        timer=timer,
        clock=timer.clock,
        seed=seed,
        initial=[WRONG_BUT_FAST, RAISES],
    )
    statuses = {config_key(t.config): t.status for t in result.trials}
    assert statuses[config_key(WRONG_BUT_FAST)] == "incorrect"
    assert statuses[config_key(RAISES)] == "error"
    assert result.best is not None and result.best.config != WRONG_BUT_FAST


def test_budget_stops_the_search() -> None:
    timer = FakeTimer()
    result = budgeted_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", budget_s=5, timer=timer, clock=timer.clock
    )
    assert 5 <= timer.calls <= 6
    assert len(result.trials) <= 8
    limited = budgeted_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", max_trials=3, timer=FakeTimer()
    )
    assert len(limited.trials) == 3


def test_budgeted_search_stops_once_every_config_was_tried() -> None:
    kernel = make_synthetic(space=synthetic_space(blocks=(64, 128)))
    timer = FakeTimer()
    result = budgeted_search(
        kernel, SHAPE, torch.float32, "cpu", budget_s=10_000, timer=timer, clock=timer.clock
    )
    assert len(result.trials) == len(kernel.space.valid_configs({"N": 1024, "dtype": "float32"}))


def test_tune_picks_exhaustive_for_small_spaces_and_budgeted_when_asked() -> None:
    kernel = make_synthetic()
    assert tune(kernel, SHAPE, torch.float32, "cpu", timer=FakeTimer()).strategy == "exhaustive"
    timer = FakeTimer()
    r = tune(kernel, SHAPE, torch.float32, "cpu", budget_s=3, timer=timer, clock=timer.clock)
    assert r.strategy == "budgeted"


def test_trials_are_reported_as_they_finish() -> None:
    seen = []
    result = exhaustive_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer(), on_trial=seen.append
    )
    assert seen == result.trials


def test_real_harness_timer_on_the_row_sum_example() -> None:
    from warpforge.tune.examples import ROW_SUM

    result = exhaustive_search(ROW_SUM, {"M": 3, "N": 20}, torch.float32, "cpu")
    assert result.best is not None and all(t.status == "ok" for t in result.trials)
    assert all(t.median_s > 0 and t.samples >= 2 for t in result.trials)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget_s": 0}, ValueError, "budget_s"),
        ({"budget_s": 1, "max_trials": 0}, ValueError, "max_trials"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        budgeted_search(make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer(), **kwargs)


def test_bad_kernel_shape_dtype() -> None:
    with pytest.raises(TypeError, match="kernel"):
        exhaustive_search("synthetic", SHAPE, torch.float32, "cpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        exhaustive_search(make_synthetic(), {}, torch.float32, "cpu")
    with pytest.raises(TypeError, match="dtype"):
        exhaustive_search(make_synthetic(), SHAPE, "float32", "cpu")  # type: ignore[arg-type]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_exhaustive_row_sum_finds_a_correct_best(dtype: torch.dtype) -> None:
    from warpforge.tune.examples import ROW_SUM
    from warpforge.tune.search import TimingOptions

    timing = TimingOptions(min_samples=5, max_time_s=0.05)
    result = exhaustive_search(ROW_SUM, {"M": 1000, "N": 3000}, dtype, "cuda", timing=timing)
    assert result.best is not None and result.best.median_s > 0
    assert not [t for t in result.trials if t.status == "incorrect"], (
        "a valid config gave a wrong sum"
    )
    major, minor = torch.cuda.get_device_capability()
    assert result.device.endswith(f"/sm_{major}{minor}")


def test_budgeted_search_tries_the_seeds_first() -> None:
    seeds = [
        {"BLOCK": 512, "num_warps": 2, "unroll": 4},
        {"BLOCK": 64, "num_warps": 1, "unroll": 2},
    ]
    seen = []
    timer = FakeTimer()
    budgeted_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", budget_s=4, timer=timer, clock=timer.clock,
        initial=seeds, on_trial=seen.append,
    )  # fmt: skip
    assert [t.config for t in seen[:2]] == seeds


def test_a_triton_compile_error_is_recorded_not_raised() -> None:
    from warpforge.tune.examples import ROW_SUM
    from warpforge.tune.search import HarnessTimer, TimingOptions, TuningProblem, evaluate_config

    problem = TuningProblem.build(
        ROW_SUM, {"M": 3, "N": 20}, torch.float32, torch.device("cpu"), input_sets=1
    )
    # tl.arange needs a power-of-two length: 48 cannot compile (the space never offers it).
    bad = {"BLOCK_N": 48, "ROWS": 1, "num_warps": 1, "num_stages": 1}
    trial = evaluate_config(problem, bad, HarnessTimer(TimingOptions.quick()))
    assert trial.status == "error" and trial.median_s is None and trial.error


def test_refine_search_descends_from_the_seeds_to_the_best_in_few_trials() -> None:
    from warpforge.tune.search import refine_search

    # Two steps from the best (BLOCK 128 -> 256, num_warps 4 -> 8): the descent walks back.
    seed = {"BLOCK": 256, "num_warps": 8, "unroll": 2}
    seen = []
    result = refine_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", initial=[seed], timer=FakeTimer(),
        on_trial=seen.append,
    )  # fmt: skip
    assert seen[0].config == seed
    assert result.strategy == "refined" and result.best.config == BEST
    valid = make_synthetic().space.valid_configs({"N": 1024, "dtype": "float32"})
    assert len(result.trials) <= 12 < len(valid)


def test_refine_search_stops_at_max_trials_and_skips_invalid_seeds() -> None:
    from warpforge.tune.search import refine_search

    invalid = {"BLOCK": 1000, "num_warps": 4, "unroll": 2}  # 1000 is not a BLOCK of the space
    far = {"BLOCK": 1024, "num_warps": 1, "unroll": 4}
    result = refine_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", initial=[invalid, far, far],
        max_trials=3, timer=FakeTimer(),
    )  # fmt: skip
    assert len(result.trials) == 3
    assert result.trials[0].config == far


def test_refine_search_never_picks_a_wrong_seed() -> None:
    from warpforge.tune.search import refine_search

    result = refine_search(
        make_synthetic(), SHAPE, torch.float32, "cpu",
        initial=[WRONG_BUT_FAST, {"BLOCK": 512, "num_warps": 8, "unroll": 1}], timer=FakeTimer(),
    )  # fmt: skip
    statuses = {config_key(t.config): t.status for t in result.trials}
    assert statuses[config_key(WRONG_BUT_FAST)] == "incorrect"
    assert result.best is not None and result.best.config != WRONG_BUT_FAST


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"initial": []}, ValueError, "initial: none of the 0"),
        ({"initial": [{"BLOCK": 3, "num_warps": 1, "unroll": 1}]}, ValueError, "none of the 1"),
        ({"initial": {"BLOCK": 64}}, TypeError, "initial: expected a sequence"),
        ({"initial": [3]}, TypeError, "initial: expected configs as mappings"),
        ({"initial": [BEST], "max_trials": 0}, ValueError, "max_trials"),
        ({"initial": [BEST], "budget_s": -1}, ValueError, "budget_s"),
    ],
)
def test_refine_search_bad_arguments(kwargs: dict, error: type[Exception], match: str) -> None:
    from warpforge.tune.search import refine_search

    with pytest.raises(error, match=match):
        refine_search(make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer(), **kwargs)


HANGS = {"BLOCK": 256, "num_warps": 4, "unroll": 1}

_HUNG_SEARCH = """
import sys, threading
sys.path.insert(0, {tests!r})
import torch
from tune_synthetic import FakeTimer, make_synthetic
from warpforge.tune.database import PerfDatabase
from warpforge.tune.search import exhaustive_search

kernel = make_synthetic()
run = kernel.run


def hangs(config, x):
    if dict(config) == {hangs!r}:
        threading.Event().wait()  # a launch that never returns
    return run(config, x)


kernel = type(kernel)(**{{**kernel.__dict__, "run": hangs}})
exhaustive_search(kernel, {{"N": 1024}}, torch.float32, "cpu", timer=FakeTimer(),
                  database=PerfDatabase({url!r}), trial_timeout_s=3.0)
print("the search finished")
"""


def test_a_hung_trial_is_recorded_stops_the_process_and_is_skipped_by_the_next_search(
    tmp_path, sqlite_url: str
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from warpforge.tune.database import PerfDatabase
    from warpforge.tune.search import STOPPED_EXIT_CODE, TIMED_OUT

    script = tmp_path / "hung_search.py"
    tests = str(Path(__file__).parent)
    script.write_text(_HUNG_SEARCH.format(tests=tests, hangs=HANGS, url=sqlite_url))
    child = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == STOPPED_EXIT_CODE, child.stderr[-2000:]
    assert "the search finished" not in child.stdout
    assert "no result after 3 s" in child.stderr and "searching again skips it" in child.stderr
    with PerfDatabase(sqlite_url) as db:
        stored = db.trials(kernel="synthetic")
    (hung,) = [t for t in stored if t.config == HANGS]
    assert hung.status == "error" and hung.error.startswith(TIMED_OUT)
    before = len(stored)

    kernel = make_synthetic()
    run = kernel.run

    def refuses_the_hung_config(config, x):
        assert dict(config) != HANGS, "a config that timed out was run again"
        return run(config, x)

    again = type(kernel)(**{**kernel.__dict__, "run": refuses_the_hung_config})
    seen = []
    with PerfDatabase(sqlite_url) as db:
        result = exhaustive_search(
            again, SHAPE, torch.float32, "cpu", timer=FakeTimer(), database=db,
            on_trial=seen.append, trial_timeout_s=60.0,
        )  # fmt: skip
        after = db.trials(kernel="synthetic")
    valid = kernel.space.valid_configs(kernel.features(SHAPE, torch.float32))
    assert len(result.trials) == len(seen) == len(valid)  # the skipped config is reported too
    by_key = {config_key(t.config): t for t in result.trials}
    assert by_key[config_key(HANGS)].error.startswith(TIMED_OUT)
    assert result.best is not None and result.best.config == BEST
    # the skipped config is not stored twice; everything else was measured again
    assert sum(t.config == HANGS for t in after) == 1
    assert len(after) == before + len(valid) - 1
    # another problem (another size) tries the config: the hang was seen on one problem only
    other = exhaustive_search(
        kernel, {"N": 2048}, torch.float32, "cpu", timer=FakeTimer(),
        database=PerfDatabase(sqlite_url), configs=[HANGS],
    )  # fmt: skip
    assert other.trials[0].ok


def test_a_trial_under_its_timeout_is_left_alone() -> None:
    import threading

    result = exhaustive_search(
        make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer(), trial_timeout_s=60.0
    )
    assert result.best is not None and result.best.config == BEST
    watchdogs = [
        t
        for t in threading.enumerate()
        if isinstance(t, threading.Timer) and getattr(t.function, "__name__", "") == "_give_up"
    ]
    assert not watchdogs  # each trial's watchdog ended with its trial


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        (0, ValueError, "trial_timeout_s: expected a finite number > 0, got 0"),
        (math.nan, ValueError, "trial_timeout_s: expected a finite number"),
        (math.inf, ValueError, "trial_timeout_s: expected a finite number"),
        ("5", TypeError, "trial_timeout_s: expected a number, got str"),
    ],
)
def test_a_bad_trial_timeout_is_refused(timeout, error, message) -> None:
    kernel = make_synthetic()
    for search in (exhaustive_search, budgeted_search):
        with pytest.raises(error, match=message):
            search(kernel, SHAPE, torch.float32, "cpu", timer=FakeTimer(), trial_timeout_s=timeout)


BREAKS = {"BLOCK": 512, "num_warps": 2, "unroll": 2}


def test_a_config_that_leaves_the_device_unusable_stops_the_search_and_is_skipped_later(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warpforge.tune import search
    from warpforge.tune.database import PerfDatabase

    kernel = make_synthetic()
    run = kernel.run
    device = {"broken": False}

    def breaks_the_device(config, x):
        if device["broken"]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if dict(config) == BREAKS:
            device["broken"] = True  # as an illegal access poisons a CUDA context
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return run(config, x)

    # the CPU cannot break; the probe stands in for the CUDA one
    monkeypatch.setattr(search, "device_usable", lambda d: not device["broken"])
    breaking = type(kernel)(**{**kernel.__dict__, "run": breaks_the_device})
    with PerfDatabase(sqlite_url) as db, pytest.raises(search.DeviceBroken, match="unusable"):
        exhaustive_search(breaking, SHAPE, torch.float32, "cpu", timer=FakeTimer(), database=db)
    with PerfDatabase(sqlite_url) as db:
        stored = db.trials(kernel="synthetic")
    # nothing after the config was stored as a (false) error; the config itself says what it did
    assert stored[-1].config == BREAKS and stored[-1].error.startswith(search.BROKE_DEVICE)
    assert "illegal memory access" in stored[-1].error
    assert all(t.status == "ok" for t in stored[:-1] if t.config != RAISES)

    device["broken"] = False  # a new process: a fresh context
    refuses = type(kernel)(
        **{**kernel.__dict__, "run": lambda c, x: pytest.fail("ran the breaking config")
           if dict(c) == BREAKS else run(c, x)}
    )  # fmt: skip
    with PerfDatabase(sqlite_url) as db:
        result = exhaustive_search(
            refuses, SHAPE, torch.float32, "cpu", timer=FakeTimer(), database=db
        )
    assert result.best is not None and result.best.config == BEST
    skipped = {config_key(t.config): t for t in result.trials}[config_key(BREAKS)]
    assert skipped.error.startswith(search.BROKE_DEVICE)


def test_an_ordinary_error_on_a_usable_device_does_not_stop_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from warpforge.tune import search

    probes = []
    monkeypatch.setattr(search, "device_usable", lambda d: probes.append(d) or True)
    result = exhaustive_search(make_synthetic(), SHAPE, torch.float32, "cpu", timer=FakeTimer())
    assert result.best is not None and result.best.config == BEST
    assert len(probes) == 1  # asked once, after the one raising config (RAISES)


_ILLEGAL_ACCESS = """
import torch
import triton
import triton.language as tl
from warpforge.tune.search import device_usable


@triton.jit
def _store_far_away(ptr):
    tl.store(ptr + (1 << 40), 1.0)  # a terabyte past a one-element tensor


device = torch.device("cuda")
print("before", device_usable(device))
try:
    _store_far_away[(1,)](torch.zeros(1, device=device))
    torch.cuda.synchronize()
except RuntimeError as exc:
    print("raised", type(exc).__name__)
print("after", device_usable(device))
"""


@pytest.mark.gpu
def test_gpu_device_usable_sees_a_context_an_illegal_access_broke(tmp_path) -> None:
    """In a child process: the broken context is that process's alone."""
    import subprocess
    import sys

    script = tmp_path / "illegal_access.py"
    script.write_text(_ILLEGAL_ACCESS)
    child = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert "before True" in child.stdout, child.stdout + child.stderr[-2000:]
    assert "after False" in child.stdout, child.stdout + child.stderr[-2000:]
