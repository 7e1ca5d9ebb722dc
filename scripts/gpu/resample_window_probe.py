"""Probe of the resample forward's value traffic (issue #5, session 8): which launch variants
share value rows, measured two ways on the GPU.

``--mode ncu``: launch each variant once on the harness inputs (run under ``ncu --kernel-name
resample_kernel``; labels go to stderr in launch order) to read L1 hit rates and L2 sectors.
``--mode time``: cold-L2 interleaved timing (the harness's ``measure_interleaved``) of the mid
shape (256, 500 -> 1000, 64) bf16 with SORTED queries, where the sliding window can fit, against
the default; every variant is checked against float64 first. Writes ``--out`` JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import torch

from warpforge.harness.timing import measure_interleaved
from warpforge.robotics import problems
from warpforge.robotics.resample import default_config, launch_single, resample_reference

SHAPES = {"small": (32, 50, 256, 128, torch.bfloat16), "mid": (256, 500, 1000, 64, torch.bfloat16),
          "fp32": (1024, 1000, 2000, 32, torch.float32)}  # fmt: skip


def inputs(name: str, seed: int = 0, sort: bool = False):
    b, s, t, d, dtype = SHAPES[name]
    g = torch.Generator(device="cuda").manual_seed(1000 + seed)
    values, times, query = problems._resample_inputs({"B": b, "S": s, "T": t, "D": d}, dtype,
                                                     torch.device("cuda"), g)  # fmt: skip
    return values, times, query.sort(1).values if sort else query


def variants(name: str):
    _, _, t, d, dtype = SHAPES[name]
    base = default_config(t, d, dtype.itemsize, "linear")
    out = {"old default": base, "claim": replace(base, claim=True)}
    if dtype.itemsize == 2:
        out["window64"] = replace(base, window=64)
        out["window32"] = replace(base, window=32)
    return out


def run(config):
    def fn(values, times, query):
        out = values.new_empty(query.shape[0], query.shape[1], values.shape[2])
        launch_single(values, times, query, None, out, None, "linear", "clamp", config)
        return out

    return fn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["ncu", "time"], required=True)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.mode == "ncu":
        for name in ("small", "mid", "fp32"):
            x = inputs(name)
            for label, config in variants(name).items():
                print(f"ncu launch: {name} {label}", file=sys.stderr)
                run(config)(*x)
            torch.cuda.synchronize()
        return 0
    report = {"shape": "B=256 S=500 T=1000 D=64 bf16, queries sorted per row", "rows": {}}
    sets = [inputs("mid", seed, sort=True) for seed in range(2)]
    fns = {}
    for label, config in variants("mid").items():
        fn = run(config)
        v, t, q = sets[0]
        expected = resample_reference(v.double(), t.double(), q.double())[0]
        err = (fn(v, t, q).double() - expected).abs().max().item()
        report["rows"][label] = {"max_abs_error_vs_float64": err}
        fns[label] = fn
    measured = measure_interleaved(fns, sets, cold=True, max_time_s=2.0, seed=0)
    for label, m in measured.items():
        report["rows"][label]["median_us"] = m.median_s * 1e6
        report["rows"][label]["measurement"] = m.as_dict()
    print(json.dumps({k: {kk: vv for kk, vv in r.items() if kk != "measurement"}
                      for k, r in report["rows"].items()}, indent=1))  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
