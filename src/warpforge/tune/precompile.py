"""Compiling a search's configs ahead, in worker processes, so its trials hit Triton's disk cache.

A search times its configs one after another in one process, and on a GPU most of a trial's wall
time is Triton compiling the config. Compilation is CPU work that does not depend on the other
configs, so :class:`CompilePool` runs every config once in ``workers`` spawned processes (each
with its own CUDA context, on the same inputs as the search, so Triton specialises identically);
their binaries land in Triton's shared on-disk cache, and the search's own first launch of each
config only loads it. Nothing a worker measures is used: correctness and timing stay in the search.

A worker that dies (e.g. a config corrupting its CUDA context) breaks the pool: the pool then
closes itself and :meth:`CompilePool.compile` returns ``False``; the search compiles as usual.
A worker that hangs (a compile that never ends, a kernel that spins) ends the pool the same way
once the pool's time limit passes: the pool kills its workers (a hung one never takes the
executor's shutdown) and the search goes on; its own watchdog (``trial_timeout_s``) deals with the
config when it tries it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import multiprocessing
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from warpforge.tune import DEFAULT_TRIAL_TIMEOUT_S
from warpforge.tune.space import config_key
from warpforge.tune.tunable import Shape, dtype_name
from warpforge.validation import check_positive, describe

logger = logging.getLogger("warpforge.tune")

START_TIMEOUT_S = 300.0
"""Seconds the workers may take to start (spawn, then import torch, Triton and the kernels: seconds
in practice). Not ``timeout_s``, which bounds a config: a short one must not fail a slow start."""

_WORKER_INPUTS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
"""One worker's inputs of its latest problem (kept: a problem's chunks arrive one after another)."""


def _run_configs(
    kernel: str, shape: dict[str, int], dtype: str, device: str, configs: list[dict], seed: int
) -> int:
    """Worker side: run each config once (compiling it); returns how many ran without error."""
    from warpforge.tune.tunable import get_tunable, parse_dtype

    tunable = get_tunable(kernel)
    key = (kernel, tuple(sorted(shape.items())), dtype, device, seed)
    inputs = _WORKER_INPUTS.get(key)
    if inputs is None:
        _WORKER_INPUTS.clear()
        generator = torch.Generator(device="cpu").manual_seed(seed)
        inputs = tunable.make_inputs(shape, parse_dtype(dtype), torch.device(device), generator)
        _WORKER_INPUTS[key] = inputs
    ran = 0
    for config in configs:
        try:
            tunable.run(config, *inputs)
            ran += 1
        except Exception:  # the search records this config's error itself
            continue
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return ran


def _warm_up() -> bool:
    import warpforge.tune.tunable as tunable

    tunable.registered_tunables()  # import the providers (and Triton) once per worker
    return True


class CompilePool:
    """``workers`` spawned processes that compile configs ahead of a search (see module doc).

    ``timeout_s``: seconds a worker may spend on one config (compiling it and running it once); when
    no worker finishes a task in that time (times the configs a task holds), the pool kills its
    workers and gives up, as when one dies. ``None`` waits for ever."""

    def __init__(self, workers: int, *, timeout_s: float | None = DEFAULT_TRIAL_TIMEOUT_S) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers: expected a positive int, got {describe(workers)}")
        if timeout_s is not None:
            check_positive("timeout_s", timeout_s, finite=True)
        self.workers = workers
        self.timeout_s = timeout_s
        context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        self._executor: concurrent.futures.ProcessPoolExecutor | None = (
            concurrent.futures.ProcessPoolExecutor(workers, mp_context=context)
        )
        self.compiled = 0
        """Configs the workers ran without error, over the pool's life."""
        self._started = False

    @property
    def usable(self) -> bool:
        return self._executor is not None

    def start(self) -> None:
        """Start every worker and import the tunables there (:meth:`compile` does it first if
        not done, so that no config's time limit pays for it)."""
        if self._executor is None or self._started:
            return
        self._started = True
        warm_ups = {self._executor.submit(_warm_up): [] for _ in range(self.workers)}
        self._wait(warm_ups, START_TIMEOUT_S, "starting the workers")

    def compile(
        self,
        kernel: str,
        shape: Shape,
        dtype: torch.dtype,
        device: torch.device | str,
        configs: Sequence[Mapping[str, object]],
        *,
        seed: int = 0,
        chunk: int = 2,
    ) -> bool:
        """Run ``configs`` of ``kernel`` on the workers and wait; ``False`` if the pool broke
        or gave up on a config past its time limit (it is then closed)."""
        if configs:
            self.start()
        if self._executor is None or not configs:
            return self.usable
        todo = [dict(c) for c in configs]
        size = max(1, min(chunk, math.ceil(len(todo) / self.workers)))
        problem = {k: int(v) for k, v in shape.items()}
        try:
            tasks = {
                self._executor.submit(
                    _run_configs,
                    kernel,
                    problem,
                    dtype_name(dtype),
                    str(device),
                    todo[i : i + size],
                    seed,
                ): todo[i : i + size]
                for i in range(0, len(todo), size)
            }
        except concurrent.futures.process.BrokenProcessPool as exc:
            # a worker died between two compiles (killed, out of memory): the executor refuses
            # new tasks, and the search must not see that
            logger.warning("compile-ahead pool broke (%s); compiling in the search", exc)
            self._kill_workers()
            return False
        limit_s = None if self.timeout_s is None else self.timeout_s * size
        doing = f"compiling {len(todo)} config(s) of {kernel} {problem} {dtype_name(dtype)}"
        results = self._wait(tasks, limit_s, doing)
        self.compiled += sum(r for r in results if isinstance(r, int))
        return self.usable

    def _wait(
        self,
        tasks: dict[concurrent.futures.Future, list[dict]],
        limit_s: float | None,
        doing: str,
    ) -> list[object]:
        """The results of ``tasks`` (futures and the configs they run); gives up, killing the
        workers, when none finishes for ``limit_s`` seconds. Every task still running then
        started at least that long ago (a worker takes its next task as it finishes one)."""
        results: list[object] = []
        pending = set(tasks)
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=limit_s, return_when=concurrent.futures.FIRST_COMPLETED
            )
            if not done:
                # running(): handed to the workers (one task may still wait in their queue)
                in_flight = [config_key(c) for f in pending if f.running() for c in tasks[f]]
                logger.warning(
                    "compile-ahead: no worker finished a task in %g s %s%s; stopping the workers, "
                    "the search compiles its configs itself",
                    limit_s,
                    doing,
                    f" (in flight: {', '.join(in_flight)})" if in_flight else "",
                )
                self._kill_workers()
                break
            for future in done:
                try:
                    results.append(future.result())
                except concurrent.futures.process.BrokenProcessPool as exc:
                    logger.warning("compile-ahead pool broke (%s); compiling in the search", exc)
                    self.close()
                    return results
                except Exception as exc:  # a worker-side failure only loses the head start
                    logger.debug("compile-ahead task failed: %s", exc)
                    results.append(exc)
        return results

    def _kill_workers(self) -> None:
        """Kill the workers and close the pool: a worker stuck in a compile or a launch never
        takes the shutdown's sentinel, so a plain :meth:`close` would wait for it for ever."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        kill_workers = getattr(executor, "kill_workers", None)  # Python 3.14 and later
        if kill_workers is not None:
            kill_workers()
        else:  # no public handle on the executor's processes before 3.14
            for process in list(executor._processes.values()):
                process.kill()
        # Seeing its workers dead, the executor fails the pending tasks and joins the processes
        # (no zombies), so this returns at once.
        executor.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
