"""Searching a config space: exhaustive for small spaces, random + coordinate descent under a budget,
and a short descent from carried-over configs that refines a nearest match (:func:`refine_search`).

Every candidate goes through :func:`evaluate_config`: it runs once on fresh random inputs and is
compared with the float64 reference *before* it is timed, so a fast wrong config is recorded as
``"incorrect"`` and can never win. A config that fails to compile, runs out of resources or raises
is recorded as ``"error"`` with its message; the search carries on. Timing goes through the
harness (:func:`warpforge.harness.timing.measure`).

Each finished trial is handed to ``on_trial`` and, when a database is given, written at once, so a
crash mid-search loses nothing already measured.

Two kinds of config stop a search, because nothing after them in the process could be trusted:

* a hung launch (a split kernel whose programs wait on each other, say) cannot be interrupted from
  Python, so ``trial_timeout_s`` arms a watchdog per trial: past it, the trial is written to the
  database as a timed-out error and the process exits with :data:`STOPPED_EXIT_CODE`;
* a config whose error leaves the device unusable (an illegal memory access poisons the CUDA
  context: every later trial would fail and be stored as a false error) is written as having
  broken the device, and the search raises :class:`DeviceBroken`.

Every later search of that problem (same kernel source, device and features) in that database
skips such a config, so running the search again goes on past it.
"""

from __future__ import annotations

import functools
import math
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

from warpforge.harness.timing import Measurement, measure
from warpforge.tune import STOPPED_EXIT_CODE
from warpforge.tune.space import Config, ConfigSpace, config_key
from warpforge.tune.tunable import Shape, TunableKernel, device_fingerprint
from warpforge.validation import check_positive, describe

if TYPE_CHECKING:
    from warpforge.tune.database import PerfDatabase

OK, INCORRECT, ERROR = "ok", "incorrect", "error"
STATUSES = (OK, INCORRECT, ERROR)

EXHAUSTIVE_LIMIT = 256
"""Spaces with at most this many valid configs are searched exhaustively by default."""

TIMED_OUT = "timed out"
"""How a timed-out trial's error starts (later searches of its problem skip its config)."""

BROKE_DEVICE = "broke the device"
"""How the error of a trial after which the device was unusable starts."""

_STOPPED_THE_SEARCH = (TIMED_OUT, BROKE_DEVICE)


class DeviceBroken(RuntimeError):
    """A config's error left the device unusable; its trial is stored, later searches skip it,
    and this process cannot tune any further (start a new one)."""


def device_usable(device: torch.device) -> bool:
    """Whether ``device`` still runs work after a trial failed: an illegal memory access leaves
    a CUDA context that fails every later call. The CPU always is."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
        return float((torch.ones(1, device=device) + 1).item()) == 2.0
    except RuntimeError:
        return False


class TrialTimer(Protocol):
    """Times ``fn(*inputs)`` over ``input_sets``; ``config`` is passed for timers that model time
    (tests inject a synthetic timer so search tests are deterministic)."""

    def __call__(
        self, fn: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], *, config: Config
    ) -> Measurement: ...


@dataclass(frozen=True)
class TimingOptions:
    """How hard each trial is timed (passed to the harness's ``measure``)."""

    min_samples: int = 10
    max_samples: int = 500
    max_time_s: float = 0.5
    target_rel_stderr: float = 0.01
    cold: bool = True
    input_sets: int = 3
    """Distinct random input sets rotated during timing."""

    @classmethod
    def quick(cls) -> TimingOptions:
        """Few samples: for the CPU interpreter, where times only check that the plumbing works."""
        return cls(min_samples=2, max_samples=3, max_time_s=0.05, input_sets=1)


@dataclass(frozen=True)
class HarnessTimer:
    """The default timer: the harness's ``measure`` with :class:`TimingOptions`."""

    options: TimingOptions = field(default_factory=TimingOptions)

    def __call__(
        self, fn: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], *, config: Config
    ) -> Measurement:
        o = self.options
        return measure(
            fn,
            input_sets,
            cold=o.cold,
            min_samples=o.min_samples,
            max_samples=o.max_samples,
            max_time_s=o.max_time_s,
            target_rel_stderr=o.target_rel_stderr,
        )


@dataclass(frozen=True)
class Trial:
    """One config tried on one problem."""

    config: Config
    status: str
    median_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    rel_stderr: float | None = None
    samples: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass
class SearchResult:
    """Every trial of one search and the winner (fastest correct config), if any."""

    kernel: str
    features: dict[str, object]
    device: str
    strategy: str
    trials: list[Trial]
    elapsed_s: float
    rejected: int = 0

    @property
    def best(self) -> Trial | None:
        good = [t for t in self.trials if t.ok and t.median_s is not None]
        # Ties go to the smallest config JSON, as in the database's best_configs.
        return min(good, key=lambda t: (t.median_s, config_key(t.config))) if good else None  # type: ignore[arg-type,return-value]


@dataclass
class TuningProblem:
    """The inputs and expected output of one (kernel, shape, dtype, device), built once."""

    kernel: TunableKernel
    shape: dict[str, int]
    dtype: torch.dtype
    device: torch.device
    features: dict[str, object]
    input_sets: list[tuple[Any, ...]]
    expected64: Any
    expected_at_dtype: Any

    @classmethod
    def build(
        cls,
        kernel: TunableKernel,
        shape: Shape,
        dtype: torch.dtype,
        device: torch.device,
        *,
        input_sets: int,
        seed: int = 0,
    ) -> TuningProblem:
        generator = torch.Generator(device="cpu").manual_seed(seed)
        sets = [
            kernel.make_inputs(shape, dtype, device, generator) for _ in range(max(1, input_sets))
        ]
        first = sets[0]
        expected64 = kernel.reference(*_to_float64(first))
        expected_at_dtype = kernel.reference(*first)
        return cls(
            kernel,
            dict(shape),
            dtype,
            device,
            kernel.features(shape, dtype),
            sets,
            expected64,
            expected_at_dtype,
        )


def _to_float64(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        for x in inputs
    )


def check_output(problem: TuningProblem, output: Any) -> str | None:
    """``None`` when ``output`` matches the reference; otherwise what is wrong.

    Allowed error per element: ``max(atol + rtol * |ref64|, 2 * |torch_at_dtype - ref64|)``, so a
    config that loses precision fails while one matching PyTorch's own rounding passes.
    """
    outs = output if isinstance(output, (tuple, list)) else (output,)
    refs = (
        problem.expected64
        if isinstance(problem.expected64, (tuple, list))
        else (problem.expected64,)
    )
    at_dtype = (
        problem.expected_at_dtype
        if isinstance(problem.expected_at_dtype, (tuple, list))
        else (problem.expected_at_dtype,)
    )
    if len(outs) != len(refs):
        return f"expected {len(refs)} output(s), got {len(outs)}"
    atol, rtol = problem.kernel.tolerance(problem.dtype)
    for i, (out, ref, own) in enumerate(zip(outs, refs, at_dtype, strict=True)):
        if not isinstance(out, torch.Tensor):
            return f"output {i}: expected a tensor, got {describe(out)}"
        if tuple(out.shape) != tuple(ref.shape):
            return f"output {i}: expected shape {tuple(ref.shape)}, got {tuple(out.shape)}"
        # Compared where the output lives: copying a large float64 tensor to the host costs more
        # than a GPU trial itself.
        got = out.detach().to(torch.float64)
        ref64 = ref.detach().to(device=got.device, dtype=torch.float64)
        own_err = (own.detach().to(device=got.device, dtype=torch.float64) - ref64).abs()
        allowed = torch.maximum(atol + rtol * ref64.abs(), 2 * own_err)
        err = (got - ref64).abs()
        bad = ~((err <= allowed) | (got == ref64))  # NaN is bad; the same infinity is not
        if bool(bad.any()):
            worst = float(torch.nan_to_num(err - allowed, nan=math.inf).max())
            return f"output {i}: {int(bad.sum())} element(s) off the reference (worst excess {worst:.3g})"
    return None


def evaluate_config(problem: TuningProblem, config: Config, timer: TrialTimer) -> Trial:
    """Check ``config`` against the reference, then time it. Never raises for a bad config."""
    fn = functools.partial(problem.kernel.run, config)
    try:
        output = fn(*problem.input_sets[0])
        if problem.device.type == "cuda":
            torch.cuda.synchronize(problem.device)
    except Exception as exc:  # compile errors, out of resources, launch failures: all recorded
        return Trial(config, ERROR, error=_describe_error(exc))
    wrong = check_output(problem, output)
    if wrong is not None:
        return Trial(config, INCORRECT, error=wrong)
    try:
        m = timer(fn, problem.input_sets, config=config)
    except Exception as exc:
        return Trial(config, ERROR, error=_describe_error(exc))
    return Trial(
        config,
        OK,
        m.median_s,
        m.ci_low_s,
        m.ci_high_s,
        None if math.isinf(m.rel_stderr) else m.rel_stderr,
        m.samples,
    )


def _describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 2000 else text[:2000] + "..."


class _Recorder:
    """Evaluates configs once each, keeps every trial, and reports them as they finish.

    With ``trial_timeout_s``, a trial still running after that many seconds is recorded as timed
    out and the process stops (:data:`STOPPED_EXIT_CODE`); a trial that leaves the device
    unusable is recorded as such and :class:`DeviceBroken` raised. Configs that did either on
    this problem in an earlier run (read from ``database``) are not run again."""

    def __init__(
        self,
        problem: TuningProblem,
        timer: TrialTimer,
        on_trial: Callable[[Trial], None] | None,
        database: PerfDatabase | None,
        trial_timeout_s: float | None = None,
    ) -> None:
        self.problem = problem
        self.timer = timer
        self.on_trial = on_trial
        self.database = database
        self.trial_timeout_s = trial_timeout_s
        self.trials: dict[str, Trial] = {}
        self.fingerprint = device_fingerprint(problem.device)
        self.stopped_before = self._stopped_before()
        self._watch = threading.Lock()

    def _stopped_before(self) -> dict[str, Trial]:
        if self.database is None:
            return {}
        from warpforge.tune.database import canonical_json

        features = canonical_json(self.problem.features)
        return {
            config_key(t.config): Trial(dict(t.config), ERROR, error=t.error)
            for t in self.database.trials(
                kernel=self.problem.kernel.name,
                source_hash=self.problem.kernel.source_hash,
                device=self.fingerprint,
                status=ERROR,
            )
            if (t.error or "").startswith(_STOPPED_THE_SEARCH)
            and canonical_json(t.features) == features
        }

    def __call__(self, config: Config) -> Trial:
        key = config_key(config)
        if key in self.trials:
            return self.trials[key]
        if key in self.stopped_before:  # already in the database: reported, not re-recorded
            trial = self.trials[key] = self.stopped_before[key]
            if self.on_trial is not None:
                self.on_trial(trial)
            return trial
        trial = self._evaluate_watched(config)
        cause = trial.error
        broken = trial.status == ERROR and not device_usable(self.problem.device)
        if broken:
            trial = Trial(
                dict(config),
                ERROR,
                error=f"{BROKE_DEVICE} (nothing ran on it afterwards), later searches of this "
                f"problem skip the config: {cause}",
            )
        self.trials[key] = trial
        self._record(trial)
        if self.on_trial is not None:
            self.on_trial(trial)
        if broken:
            raise DeviceBroken(
                f"{self.problem.kernel.name} {self.problem.features} config {key} left "
                f"{self.problem.device} unusable ({(cause or '')[:300]}); the "
                "trial is recorded and searching again, in a new process, skips the config"
            )
        return trial

    def _record(self, trial: Trial) -> None:
        if self.database is not None:
            self.database.record_trial(
                kernel=self.problem.kernel.name,
                source_hash=self.problem.kernel.source_hash,
                device=self.fingerprint,
                features=self.problem.features,
                trial=trial,
            )

    def _evaluate_watched(self, config: Config) -> Trial:
        if self.trial_timeout_s is None:
            return evaluate_config(self.problem, config, self.timer)
        done = threading.Event()
        watchdog = threading.Timer(self.trial_timeout_s, self._give_up, (config, done))
        watchdog.daemon = True
        watchdog.start()
        try:
            return evaluate_config(self.problem, config, self.timer)
        finally:
            with self._watch:  # a watchdog that fired first holds the lock until the exit
                done.set()
            watchdog.cancel()
            watchdog.join()  # no timer thread outlives its trial

    def _give_up(self, config: Config, done: threading.Event) -> None:
        with self._watch:
            if done.is_set():  # the trial finished as the watchdog fired
                return
            what = f"{self.problem.kernel.name} {self.problem.features} config {config_key(config)}"
            trial = Trial(
                dict(config),
                ERROR,
                error=f"{TIMED_OUT}: no result after {self.trial_timeout_s:g} s; the process "
                "was stopped (a hung launch cannot be interrupted), later searches of this "
                "problem skip the config",
            )
            try:
                self._record(trial)
                saved = "recorded in the database; searching again skips it"
            except Exception as exc:  # the exit below must happen whatever the database does
                saved = f"not recorded ({type(exc).__name__}: {exc})"
            print(
                f"warpforge tune: {what}: no result after {self.trial_timeout_s:g} s; "
                f"stopping the process (a hung launch cannot be interrupted); the trial is {saved}",
                file=sys.stderr,
                flush=True,
            )
            os._exit(STOPPED_EXIT_CODE)


def _score(trial: Trial) -> float:
    return trial.median_s if trial.ok and trial.median_s is not None else math.inf


def exhaustive_search(
    kernel: TunableKernel,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    configs: Sequence[Config] | None = None,
    timer: TrialTimer | None = None,
    timing: TimingOptions | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    database: PerfDatabase | None = None,
    seed: int = 0,
    trial_timeout_s: float | None = None,
) -> SearchResult:
    """Try every valid config (or the given ``configs``, e.g. one rank's shard).

    ``trial_timeout_s``: seconds one trial may take before the process is stopped (see the
    module's docstring); ``None`` waits for ever."""
    _check_trial_timeout(trial_timeout_s)
    problem, timer = _prepare(kernel, shape, dtype, device, timer, timing, seed)
    valid, rejected = kernel.space.enumerate(problem.features)
    todo = list(valid if configs is None else configs)
    start = time.monotonic()
    record = _Recorder(problem, timer, on_trial, database, trial_timeout_s)
    for config in todo:
        record(config)
    return SearchResult(
        kernel.name,
        problem.features,
        record.fingerprint,
        "exhaustive",
        list(record.trials.values()),
        time.monotonic() - start,
        len(rejected),
    )


def budgeted_search(
    kernel: TunableKernel,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    budget_s: float = 60.0,
    max_trials: int | None = None,
    initial: Sequence[Mapping[str, object]] = (),
    random_samples: int = 8,
    timer: TrialTimer | None = None,
    timing: TimingOptions | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    database: PerfDatabase | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.monotonic,
    trial_timeout_s: float | None = None,
) -> SearchResult:
    """Random sampling, then coordinate descent from the best, until ``budget_s`` or ``max_trials``.

    ``initial`` configs (e.g. the nearest stored neighbours' bests) are tried first. Descent moves
    one parameter one step at a time to the best improving neighbour; when it converges it restarts
    from the best of fresh random samples while budget remains, and stops when every valid config
    was tried. The result's best is the fastest correct config over all trials.
    """
    check_positive("budget_s", budget_s)
    _check_trial_timeout(trial_timeout_s)
    if max_trials is not None and (
        isinstance(max_trials, bool) or not isinstance(max_trials, int) or max_trials < 1
    ):
        raise ValueError(f"max_trials: expected a positive int or None, got {max_trials!r}")
    problem, timer = _prepare(kernel, shape, dtype, device, timer, timing, seed)
    space = kernel.space
    valid, rejected = space.enumerate(problem.features)
    valid_keys = {config_key(c) for c in valid}
    rng = random.Random(seed)
    record = _Recorder(problem, timer, on_trial, database, trial_timeout_s)
    start = clock()

    def out_of_budget() -> bool:
        if max_trials is not None and len(record.trials) >= max_trials:
            return True
        return clock() - start >= budget_s or len(record.trials) >= len(valid)

    def try_config(config: Mapping[str, object]) -> Trial | None:
        if out_of_budget() and config_key(config) not in record.trials:
            return None
        return record(dict(config))

    seeds = [dict(c) for c in initial if config_key(c) in valid_keys]
    while not out_of_budget():
        untried = [c for c in valid if config_key(c) not in record.trials]
        batch = seeds + rng.sample(untried, min(random_samples, len(untried)))
        seeds = []
        tried = []
        for config in batch:
            trial = try_config(config)
            if trial is None:
                break
            tried.append(trial)
        # Descend from this batch's best (a multi-start local search): restarting from the global
        # best would stop at once, its neighbours having been tried already.
        start_point = min(tried, key=_score, default=None)
        if start_point is None or not start_point.ok:
            continue  # nothing correct in this batch: sample again
        _descend(start_point, space, problem.features, try_config, out_of_budget)
    return SearchResult(
        kernel.name,
        problem.features,
        record.fingerprint,
        "budgeted",
        list(record.trials.values()),
        clock() - start,
        len(rejected),
    )


REFINE_TRIALS = 12
"""Trials of the short search that refines a nearest match (:func:`refine_search`)."""


def refine_search(
    kernel: TunableKernel,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    initial: Sequence[Mapping[str, object]],
    max_trials: int = REFINE_TRIALS,
    budget_s: float = 30.0,
    timer: TrialTimer | None = None,
    timing: TimingOptions | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    database: PerfDatabase | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.monotonic,
    trial_timeout_s: float | None = None,
) -> SearchResult:
    """The short search that refines a nearest match on an unseen problem.

    Tries the ``initial`` configs (the lookup's consensus config, then the nearest stored
    neighbours' bests carried to this problem, see
    :meth:`~warpforge.tune.lookup.ConfigLookup.starting_configs`), then descends from the
    fastest correct one, one parameter one step at a time, until no move improves, ``max_trials``
    configs were tried or ``budget_s`` seconds passed. No random sampling: the neighbours are the
    prior, the descent only corrects what the transfer got slightly wrong (rows per program, warps)
    at the price of a few compiles. Raises ``ValueError`` when no ``initial`` config is valid.
    """
    check_positive("budget_s", budget_s)
    _check_trial_timeout(trial_timeout_s)
    if isinstance(max_trials, bool) or not isinstance(max_trials, int) or max_trials < 1:
        raise ValueError(f"max_trials: expected a positive int, got {max_trials!r}")
    if isinstance(initial, Mapping) or not isinstance(initial, Sequence):
        raise TypeError(f"initial: expected a sequence of configs, got {describe(initial)}")
    problem, timer = _prepare(kernel, shape, dtype, device, timer, timing, seed)
    space = kernel.space
    seeds: dict[str, dict[str, object]] = {}
    for config in initial:
        if not isinstance(config, Mapping):
            raise TypeError(f"initial: expected configs as mappings, got {describe(config)}")
        try:
            allowed = space.allows(config, problem.features)
        except (KeyError, TypeError, ValueError):  # e.g. a config of another space's parameters
            allowed = False
        if allowed:
            seeds.setdefault(config_key(config), dict(config))
    if not seeds:
        raise ValueError(
            f"initial: none of the {len(initial)} config(s) is valid for {kernel.name} "
            f"{problem.features}"
        )
    record = _Recorder(problem, timer, on_trial, database, trial_timeout_s)
    start = clock()

    def spent() -> bool:
        return len(record.trials) >= max_trials or clock() - start >= budget_s

    tried = []
    for config in seeds.values():
        if tried and spent():
            break
        tried.append(record(config))

    def try_untried(config: Mapping[str, object]) -> Trial | None:
        if config_key(config) in record.trials or spent():
            return None
        return record(dict(config))

    _descend(min(tried, key=_score), space, problem.features, try_untried, spent)
    _, rejected = space.enumerate(problem.features)
    return SearchResult(
        kernel.name,
        problem.features,
        record.fingerprint,
        "refined",
        list(record.trials.values()),
        clock() - start,
        len(rejected),
    )


def _descend(
    current: Trial,
    space: ConfigSpace,
    features: Mapping[str, object],
    try_config: Callable[[Mapping[str, object]], Trial | None],
    out_of_budget: Callable[[], bool],
) -> Trial:
    """Coordinate descent from ``current``: move to the fastest improving neighbour (one
    parameter one step) until none improves or the budget ends. ``try_config`` returns None for
    a neighbour it will not (or may no longer) try. Returns where the descent stopped."""
    while current.ok and not out_of_budget():
        moves = [
            t for t in (try_config(n) for n in space.neighbours(current.config, features)) if t
        ]
        better = min(moves, key=_score, default=None)
        if better is None or _score(better) >= _score(current):
            break
        current = better
    return current


def _check_trial_timeout(trial_timeout_s: float | None) -> None:
    if trial_timeout_s is not None:
        check_positive("trial_timeout_s", trial_timeout_s, finite=True)


def _prepare(
    kernel: TunableKernel,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device | str,
    timer: TrialTimer | None,
    timing: TimingOptions | None,
    seed: int,
) -> tuple[TuningProblem, TrialTimer]:
    if not isinstance(kernel, TunableKernel):
        raise TypeError(f"kernel: expected a TunableKernel, got {describe(kernel)}")
    shape = kernel.check_shape(shape)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype: expected a torch.dtype, got {describe(dtype)}")
    device = torch.device(device)
    if timing is None:
        timing = TimingOptions() if device.type == "cuda" else TimingOptions.quick()
    problem = TuningProblem.build(
        kernel, shape, dtype, device, input_sets=timing.input_sets, seed=seed
    )
    return problem, timer if timer is not None else HarnessTimer(timing)


def tune(
    kernel: TunableKernel,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    budget_s: float | None = None,
    exhaustive: bool | None = None,
    **options: Any,
) -> SearchResult:
    """Exhaustive when asked or when the pruned space is small (<= :data:`EXHAUSTIVE_LIMIT`),
    otherwise :func:`budgeted_search` with ``budget_s`` (default 60 s)."""
    if exhaustive is None:
        features = kernel.features(shape, dtype)
        exhaustive = (
            budget_s is None and len(kernel.space.valid_configs(features)) <= EXHAUSTIVE_LIMIT
        )
    if exhaustive:
        for budget_only in ("initial", "random_samples", "clock", "max_trials"):
            options.pop(budget_only, None)
        return exhaustive_search(kernel, shape, dtype, device, **options)
    return budgeted_search(kernel, shape, dtype, device, budget_s=budget_s or 60.0, **options)
