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


def time_small(out_path: str | None) -> int:
    _, _, t, d, dtype = SHAPES["small"]
    base = default_config(t, d, dtype.itemsize, "linear")
    configs = {"default (gather)": base}
    for block_t, warps in ((32, 4), (16, 2), (32, 2), (64, 4), (128, 8)):
        configs[f"window64 t{block_t} w{warps}"] = replace(base, block_t=block_t,
                                                           num_warps=warps, window=64)  # fmt: skip
    sets = [inputs("small", seed) for seed in range(2)]
    v, tm, q = sets[0]
    expected = resample_reference(v.double(), tm.double(), q.double())[0]
    rows, fns = {}, {}
    for label, config in configs.items():
        try:
            err = (run(config)(v, tm, q).double() - expected).abs().max().item()
        except Exception as exc:
            rows[label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            continue
        rows[label] = {"max_abs_error_vs_float64": err}
        fns[label] = run(config)
    for label, m in measure_interleaved(fns, sets, cold=True, max_time_s=1.0, seed=0).items():
        rows[label] |= {"median_us": m.median_s * 1e6, "measurement": m.as_dict()}
    print(json.dumps({k: {kk: vv for kk, vv in r.items() if kk != "measurement"}
                      for k, r in rows.items()}, indent=1))  # fmt: skip
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"shape": "B=32 S=50 T=256 D=128 bf16", "rows": rows}, f, indent=1,
                      default=str)  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["ncu", "time", "small"], required=True)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.mode == "ncu":  # the default kernel at each shape, then the small shape's window
        _, _, t, d, _ = SHAPES["small"]
        launches = [("mid", default_config(1000, 64, 2, "linear")),
                    ("fp32", default_config(2000, 32, 4, "linear")),
                    ("small", default_config(t, d, 2, "linear")),
                    ("small", replace(default_config(t, d, 2, "linear"), window=64))]  # fmt: skip
        for name, config in launches:
            print(f"ncu launch: {name} {config}", file=sys.stderr, flush=True)
            try:
                run(config)(*inputs(name))
                torch.cuda.synchronize()
            except Exception as exc:  # a variant that fails to build is a finding
                print(f"  failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return 0
    if args.mode == "small":  # whole-row windows at (32, 50 -> 256, 128) bf16, random queries
        return time_small(args.out)
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
