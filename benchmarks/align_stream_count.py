"""How ``align``'s one launch scales with the number of streams: compile time, correctness, time.

``resample_streams_kernel`` unrolls one guarded tile per stream at compile time, or in launches
of more than ``OWN_TILE_MAX_STREAMS`` streams one per kind of stream (value and output dtype,
method, tile shape), whose programs pick their stream at run time. For each
count this script aligns that many streams (cycling through seven kinds of a robot's sensors:
bf16 camera features, float32 joints, force/torque, IMU, float16 tactile pads, float64
odometry and slerped float32 orientations) onto a 50 Hz clock, and the eight streams of the
``align8.fwd`` harness problem, in a fresh Triton cache:

- the first call's wall time (Triton's compile and load of that kernel), for ``align`` as it
  ships and for the launch with a tile per stream and with a tile per kind
  (``launch_streams(share_kinds=False / True)``); a contender whose kernel an earlier one
  already compiled (``align`` is one of the other two) shows only its load, near 0,
- the largest error against the float64 reference of each stream, concatenated,
- the kernel launches of one call (``align`` must make one),
- the time of a call, by the harness's interleaved timing (CUDA events, L2 flushed, the
  contenders in shuffled order each round): ``align``; the launch with a tile per stream (up to
  ``--per-stream-max`` streams, its compile time growing with them) and with a tile per kind;
  ``align`` storing one output element at a time instead of in vectors (``_output_vector``);
  the grid in groups of ``--group-rows`` batch rows, stream after stream within a group
  (``launch_streams(group_rows=...)``; a group of every row is stream after stream);
  one ``resample`` per stream and ``cat`` (warpforge's single-stream kernel per stream, then the concatenation).

Speed against the baselines the issue names is ``warpforge bench --problem 'align*'``; this is
the scaling check. Usage::

    PYTHONPATH=src python benchmarks/align_stream_count.py --out DIR [--counts 2,4,8,16,32,64]

writes ``DIR/align-stream-count.json`` (environment fingerprint, one row per count) after every
row.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

# (rate in Hz, width, value dtype, method)
SENSOR_KINDS = (
    (30, 512, torch.bfloat16, "linear"),
    (100, 32, torch.float32, "linear"),
    (1000, 6, torch.float32, "linear"),
    (200, 10, torch.float32, "previous"),
    (100, 64, torch.float16, "nearest"),
    (50, 13, torch.float64, "linear"),
    (100, 4, torch.float32, "slerp"),
)
ROWS, SECONDS, CLOCK_HZ = 64, 10, 50

Streams = list[tuple[torch.Tensor, torch.Tensor]]


def make_streams(
    count: int, generator: torch.Generator, kinds: list[int] | None = None
) -> tuple[Streams, torch.Tensor, list[str]]:
    """``count`` streams cycling through ``kinds`` (indices into SENSOR_KINDS; all by default)."""
    kinds = list(range(len(SENSOR_KINDS))) if kinds is None else kinds
    streams, methods = [], []
    for k in range(count):
        rate, width, dtype, method = SENSOR_KINDS[kinds[k % len(kinds)]]
        samples = rate * SECONDS
        values = torch.randn(ROWS, samples, 4 if method == "slerp" else width, generator=generator)
        if method == "slerp":
            values = values / values.norm(dim=-1, keepdim=True)
        times = torch.sort(torch.rand(ROWS, samples, generator=generator), dim=1).values * SECONDS
        streams.append((values.to(dtype).cuda(), times.cuda()))
        methods.append(method)
    query = torch.linspace(0, SECONDS, CLOCK_HZ * SECONDS).expand(ROWS, -1).contiguous().cuda()
    return streams, query, methods


def problem_streams(name: str) -> tuple[Streams, torch.Tensor, list[str]]:
    """The inputs of a registered align problem at its (first) GPU shape."""
    import warpforge.robotics.problems  # noqa: F401  (registers)
    from warpforge.harness.registry import get_problem

    problem = get_problem(name)
    generator = torch.Generator(device="cuda").manual_seed(0)
    args = problem.make_inputs(problem.shapes[0], torch.float32, torch.device("cuda"), generator)
    pairs = [(args[k], args[k + 1]) for k in range(0, len(args) - 1, 2)]
    return pairs, args[-1], ["linear"] * len(pairs)


def launch(
    streams: Streams,
    query: torch.Tensor,
    methods: list[str],
    *,
    share_kinds: bool | None,
    group_rows: int | None = None,
):
    """The float32 concatenation of ``streams`` on ``query`` by one streams-kernel launch."""
    from warpforge.robotics.resample import StreamLaunch, launch_streams

    out = torch.empty(*query.shape, sum(v.shape[2] for v, _ in streams), device=query.device)
    launches, column = [], 0
    for (values, times), method in zip(streams, methods, strict=True):
        launches.append(StreamLaunch(values, times, out, column, method, None))
        column += values.shape[2]
    launch_streams(launches, query, "clamp", share_kinds=share_kinds, group_rows=group_rows)
    return out


def element_stores(fn: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``fn()`` with the streams kernel told no output vector width (it then stores one element
    at a time), to time what the width saves."""
    import importlib
    from unittest import mock

    # the module by its name: the package's `resample` is the function
    module = importlib.import_module("warpforge.robotics.resample")
    module._streams_plan.cache_clear()  # launch plans hold the vector widths
    try:
        with mock.patch.object(module, "_output_vector", lambda element_size, *sizes: 1):
            return fn()
    finally:
        module._streams_plan.cache_clear()


def count_launches(fn: Callable[[], object]) -> int:
    """Kernel launches of one ``fn()`` call (the profiler's CUDA kernel events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.device_type.name == "CUDA")


def first_call_s(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return round(time.perf_counter() - start, 3)


def row(label: object, streams: Streams, query: torch.Tensor, methods: list[str],
        per_stream_max: int, group_rows: list[int]) -> dict[str, object]:  # fmt: skip
    from warpforge.harness.timing import measure_interleaved
    from warpforge.robotics import align, resample
    from warpforge.robotics.resample import resample_reference

    # each takes the queries: the harness finds the device (and so CUDA events) from the inputs
    contenders: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "align": lambda q: align(streams, q, methods=methods, assume_sorted=True),
    }
    if len(streams) <= per_stream_max:
        contenders["a tile per stream"] = lambda q: launch(streams, q, methods, share_kinds=False)
    contenders["a tile per kind"] = lambda q: launch(streams, q, methods, share_kinds=True)
    contenders["align, element stores"] = lambda q: element_stores(
        lambda: align(streams, q, methods=methods, assume_sorted=True)
    )
    for rows in group_rows:  # the default tile choice, the grid in groups of this many rows
        contenders[f"groups of {rows} rows"] = lambda q, rows=rows: launch(
            streams, q, methods, share_kinds=None, group_rows=rows
        )
    contenders["resample per stream + cat"] = lambda q: torch.cat(
        [resample(v, t, q, method=m, assume_sorted=True).float()
         for (v, t), m in zip(streams, methods, strict=True)], dim=-1,
    )  # fmt: skip
    result: dict[str, object] = {"streams": label, "count": len(streams)}
    result["first_call_s"] = {name: first_call_s(lambda fn=fn: fn(query))
                              for name, fn in contenders.items()}  # fmt: skip
    expected = torch.cat(
        [resample_reference(v.double(), t.double(), query.double(), None, m, "clamp")[0]
         for (v, t), m in zip(streams, methods, strict=True)], dim=-1,
    )  # fmt: skip
    result["max_abs_error"] = {
        name: (fn(query).double() - expected).abs().max().item() for name, fn in contenders.items()
    }
    result["columns"] = expected.shape[-1]
    result["launches"] = count_launches(lambda: contenders["align"](query))
    measured = measure_interleaved(contenders, [(query,)], max_time_s=2.0)
    result["clock"] = next(iter(measured.values())).clock
    result["median_us"] = {name: round(m.median_s * 1e6, 2) for name, m in measured.items()}
    result["ci95_us"] = {
        name: [round(m.ci_low_s * 1e6, 2), round(m.ci_high_s * 1e6, 2)]
        for name, m in measured.items()
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--counts", default="2,4,8,16,32,64")
    parser.add_argument("--problems", default="align8.fwd", help="align problems (comma-separated)")
    parser.add_argument("--per-stream-max", type=int, default=16,
                        help="most streams to time with a tile per stream")  # fmt: skip
    parser.add_argument("--group-rows", default="",
                        help="batch rows per group of the grid to time (comma-separated)")  # fmt: skip
    parser.add_argument("--kinds", default="",
                        help="SENSOR_KINDS indices the counted streams cycle through (default all)")  # fmt: skip
    args = parser.parse_args()
    kinds = [int(k) for k in args.kinds.split(",")] if args.kinds else None
    if kinds is not None and any(k not in range(len(SENSOR_KINDS)) for k in kinds):
        parser.error(f"--kinds: expected indices below {len(SENSOR_KINDS)}, got {args.kinds}")
    groups = [int(g) for g in args.group_rows.split(",") if g]
    args.out.mkdir(parents=True, exist_ok=True)
    # a fresh Triton cache: the first call compiles
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="align-stream-count-")
    from warpforge.environment import environment_fingerprint

    report: dict[str, object] = {"environment": environment_fingerprint(), "kinds": args.kinds or "all",
                                 "rows": []}  # fmt: skip
    cases: list[tuple[object, Callable[[], tuple[Streams, torch.Tensor, list[str]]]]] = [
        (name, lambda name=name: problem_streams(name)) for name in args.problems.split(",") if name
    ]
    cases += [(int(c), lambda c=int(c): make_streams(c, torch.Generator().manual_seed(c), kinds))
              for c in args.counts.split(",") if c]  # fmt: skip
    for label, make in cases:
        try:
            result = row(label, *make(), args.per_stream_max, groups)
        except Exception as error:  # a count past a limit (parameter space): recorded, go on
            result = {"streams": label, "error": f"{type(error).__name__}: {error}"[:2000]}
        report["rows"].append(result)
        print(json.dumps(result), flush=True)
        # after every row: a count whose compile outlasts the call's limit leaves the others
        path = args.out / "align-stream-count.json"
        path.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
