"""Where ``align``'s host time goes: the harness measures its device time (align.fwd 136.5 µs on
the H200) well below the host's time to enqueue one call (488 µs,
``session35-h200-2026-11-30/align-call5.json``).

On a GPU, for each align problem's inputs, the host time per call (no synchronisation inside the
timed loop, the GPU far behind) of:

- ``align``: the public call (validation, plan, launch),
- ``launch_streams``: the plan and the launch alone, for prebuilt ``StreamLaunch`` entries,
- ``kernel launch``: Triton's ``JITFunction`` launch alone, with the arguments ``launch_streams``
  passed (its argument binding, specialisation and cache lookup, and the driver launch),

then the 20 functions of most cumulative time in a ``cProfile`` of ``align``. Usage::

    PYTHONPATH=src python benchmarks/align_host_profile.py --out DIR

writes ``DIR/align-host-profile.json`` (environment fingerprint, one row per problem).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch


def per_call_us(fn: Callable[[], object], calls: int = 300, repeats: int = 5) -> float:
    """Median over ``repeats`` of the host time per call of ``calls`` back-to-back calls."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()  # outside the timed loop: the queue drains between repeats
    return round(statistics.median(samples), 1)


def profile_rows(name: str) -> dict[str, object]:
    import warpforge.robotics.problems  # noqa: F401  (registers)
    from warpforge.harness.registry import get_problem
    from warpforge.robotics import align
    from warpforge.robotics._kernels import resample as kernels
    from warpforge.robotics.resample import StreamLaunch

    resample_module = importlib.import_module("warpforge.robotics.resample")
    problem = get_problem(name)
    generator = torch.Generator(device="cuda").manual_seed(0)
    args = problem.make_inputs(problem.shapes[0], torch.float32, torch.device("cuda"), generator)
    pairs = [(args[k], args[k + 1]) for k in range(0, len(args) - 1, 2)]
    query = args[-1].contiguous()
    out = torch.empty(*query.shape, sum(v.shape[2] for v, _ in pairs), device="cuda")
    launches, column = [], 0
    for values, times in pairs:
        launches.append(StreamLaunch(values, times, out, column, "linear", None))
        column += values.shape[2]

    recorded: dict[str, object] = {}
    real = kernels.resample_streams_kernel

    class Recorder:
        def __getitem__(self, grid):
            def launch(*a, **k):
                recorded.update(grid=grid, args=a, kwargs=k)
                return real[grid](*a, **k)

            return launch

    kernels.resample_streams_kernel = Recorder()
    try:
        resample_module.launch_streams(launches, query, "clamp")
    finally:
        kernels.resample_streams_kernel = real
    grid, kernel_args, kernel_kwargs = recorded["grid"], recorded["args"], recorded["kwargs"]
    row: dict[str, object] = {"problem": name, "streams": len(pairs)}
    row["host_us_per_call"] = {
        "align": per_call_us(lambda: align(pairs, query, assume_sorted=True)),
        "launch_streams": per_call_us(
            lambda: resample_module.launch_streams(launches, query, "clamp")
        ),
        "kernel launch": per_call_us(lambda: real[grid](*kernel_args, **kernel_kwargs)),
    }
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(200):
        align(pairs, query, assume_sorted=True)
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(20)
    row["profile_200_calls"] = text.getvalue().splitlines()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--problems", default="align.fwd,align8.fwd")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from warpforge.environment import environment_fingerprint

    report: dict[str, object] = {"environment": environment_fingerprint(), "rows": []}
    for name in args.problems.split(","):
        row = profile_rows(name)
        report["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "profile_200_calls"}))
        print("\n".join(row["profile_200_calls"][:45]), flush=True)
        (args.out / "align-host-profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
