"""Compiling a search's configs ahead, in worker processes, so its trials hit Triton's disk cache.

A search times its configs one after another in one process, and on a GPU most of a trial's wall
time is Triton compiling the config. Compilation is CPU work that does not depend on the other
configs, so :class:`CompilePool` runs every config once in ``workers`` spawned processes (each
with its own CUDA context, on the same inputs as the search, so Triton specialises identically);
their binaries land in Triton's shared on-disk cache, and the search's own first launch of each
config only loads it. Nothing a worker measures is used: correctness and timing stay in the search.

A worker that dies (e.g. a config corrupting its CUDA context) breaks the pool: the pool then
closes itself and :meth:`CompilePool.compile` returns ``False``; the search compiles as usual.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import multiprocessing
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from warpforge.tune.tunable import Shape, dtype_name
from warpforge.validation import describe

logger = logging.getLogger("warpforge.tune")

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
    """``workers`` spawned processes that compile configs ahead of a search (see module doc)."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers: expected a positive int, got {describe(workers)}")
        self.workers = workers
        context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        self._executor: concurrent.futures.ProcessPoolExecutor | None = (
            concurrent.futures.ProcessPoolExecutor(workers, mp_context=context)
        )
        self.compiled = 0
        """Configs the workers ran without error, over the pool's life."""

    @property
    def usable(self) -> bool:
        return self._executor is not None

    def start(self) -> None:
        """Start every worker and import the tunables there (otherwise the first compile pays)."""
        if self._executor is not None:
            futures = [self._executor.submit(_warm_up) for _ in range(self.workers)]
            self._wait(futures)

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
        """Run ``configs`` of ``kernel`` on the workers and wait; ``False`` if the pool broke."""
        if self._executor is None or not configs:
            return self._executor is not None
        todo = [dict(c) for c in configs]
        size = max(1, min(chunk, math.ceil(len(todo) / self.workers)))
        futures = [
            self._executor.submit(
                _run_configs,
                kernel,
                {k: int(v) for k, v in shape.items()},
                dtype_name(dtype),
                str(device),
                todo[i : i + size],
                seed,
            )
            for i in range(0, len(todo), size)
        ]
        results = self._wait(futures)
        self.compiled += sum(r for r in results if isinstance(r, int))
        return self._executor is not None

    def _wait(self, futures: list[concurrent.futures.Future]) -> list[object]:
        results: list[object] = []
        for future in futures:
            try:
                results.append(future.result())
            except concurrent.futures.process.BrokenProcessPool as exc:
                logger.warning("compile-ahead pool broke (%s); compiling in the search", exc)
                self.close()
                break
            except Exception as exc:  # a worker-side failure only loses the head start
                logger.debug("compile-ahead task failed: %s", exc)
                results.append(exc)
        return results

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
