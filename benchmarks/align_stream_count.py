"""How ``align``'s one launch scales with the number of streams: compile time, correctness, time.

``resample_streams_kernel`` unrolls one guarded tile per stream at compile time, so its compile
time and its parameter space grow with the stream count. For each count this script aligns that
many streams (cycling through the kinds of a robot's sensors: bf16 camera features, float32
joints, force/torque, IMU, float16 tactile pads, float64 odometry and slerped float32
orientations) onto a 50 Hz clock, in a fresh Triton cache:

- the first call's wall time (Triton's compile and load of that kernel),
- the largest error against the float64 reference of each stream, concatenated,
- the kernel launches of one call (``align`` must make one),
- a call's median time (``triton.testing.do_bench``, L2 flushed) against one ``resample`` per
  stream and ``cat`` (warpforge's own single-stream kernel per stream, then the concatenation).

Speed against the baselines the issue names is the harness's job (``warpforge bench --problem
'align*'``); this is the scaling check. Usage::

    PYTHONPATH=src python benchmarks/align_stream_count.py --out DIR [--counts 2,4,8,16,32,64]

writes ``DIR/align-stream-count.json`` (environment fingerprint, one row per count).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
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


def make_streams(count: int, generator: torch.Generator) -> tuple[list, torch.Tensor, list[str]]:
    streams, methods = [], []
    for k in range(count):
        rate, width, dtype, method = SENSOR_KINDS[k % len(SENSOR_KINDS)]
        samples = rate * SECONDS
        values = torch.randn(ROWS, samples, 4 if method == "slerp" else width, generator=generator)
        if method == "slerp":
            values = values / values.norm(dim=-1, keepdim=True)
        times = torch.sort(torch.rand(ROWS, samples, generator=generator), dim=1).values * SECONDS
        streams.append((values.to(dtype).cuda(), times.cuda()))
        methods.append(method)
    query = torch.linspace(0, SECONDS, CLOCK_HZ * SECONDS).expand(ROWS, -1).contiguous().cuda()
    return streams, query, methods


def count_launches(fn) -> int:
    """Kernel launches of one ``fn()`` call (the profiler's CUDA kernel events)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.device_type.name == "CUDA")


def row(count: int, do_bench) -> dict[str, object]:
    from warpforge.robotics import align, resample
    from warpforge.robotics.resample import resample_reference

    streams, query, methods = make_streams(count, torch.Generator().manual_seed(count))

    def aligned() -> torch.Tensor:
        return align(streams, query, methods=methods, assume_sorted=True)

    def one_per_stream() -> torch.Tensor:
        outs = [resample(v, t, query, method=m, assume_sorted=True).float()
                for (v, t), m in zip(streams, methods, strict=True)]  # fmt: skip
        return torch.cat(outs, dim=-1)

    torch.cuda.synchronize()
    start = time.perf_counter()
    out = aligned()
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start
    expected = torch.cat(
        [resample_reference(v.double(), t.double(), query.double(), None, m, "clamp")[0]
         for (v, t), m in zip(streams, methods, strict=True)], dim=-1,
    )  # fmt: skip
    error = (out.double() - expected).abs().max().item()
    one_per_stream()  # compile its kernels before timing
    return {
        "streams": count,
        "columns": out.shape[-1],
        "first_call_s": round(first_call_s, 3),
        "max_abs_error": error,
        "launches": count_launches(aligned),
        "align_us": round(do_bench(aligned, return_mode="median") * 1e3, 2),
        "resample_per_stream_cat_us": round(
            do_bench(one_per_stream, return_mode="median") * 1e3, 2
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--counts", default="2,4,8,16,32,64")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # a fresh Triton cache: the first call compiles
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="align-stream-count-")
    from triton.testing import do_bench

    from warpforge.environment import environment_fingerprint

    report: dict[str, object] = {"environment": environment_fingerprint(), "rows": []}
    for count in (int(c) for c in args.counts.split(",")):
        try:
            result = row(count, do_bench)
        except Exception as error:  # a count past a limit (parameter space): recorded, go on
            result = {"streams": count, "error": f"{type(error).__name__}: {error}"[:2000]}
        report["rows"].append(result)
        print(json.dumps(result), flush=True)
        # after every row: a count whose compile outlasts the call's limit leaves the others
        path = args.out / "align-stream-count.json"
        path.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
