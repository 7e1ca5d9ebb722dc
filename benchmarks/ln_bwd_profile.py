"""Where the harness rows ``layer_norm.bwd`` and ``rms_norm.bwd`` (forward + backward through
autograd, as ``warpforge.ops._row_problems.gradients`` runs them) spend their time on the GPU:
every kernel of one forward + backward with its mean duration (torch.profiler, CUDA activity),
and the span from the first kernel's start to the last one's end, L2 flushed before each
iteration.

    PYTHONPATH=src python benchmarks/ln_bwd_profile.py --out FILE.json [--options JSON]
    PYTHONPATH=src python benchmarks/ln_bwd_profile.py --driver [--options JSON]  # for ncu

``--norm rms`` profiles RMSNorm (weight, no bias) instead; ``--dtype`` bfloat16 (default),
float16 or float32.

``--options``: the pairs kernel's options (``LAYER_NORM_BWD_PAIRS``) to run instead of the
default's (JSON, e.g. '{"lag": 2}'); ``--driver``: three forward + backward iterations and
nothing else (a program for ``ncu`` to profile).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch


def _setup(M: int, N: int, dtype: torch.dtype, options: dict | None, center: bool = True):
    from warpforge.ops import norm
    from warpforge.ops.norm_problems import EPS, LN_EPS

    if options is not None:
        norm.LAYER_NORM_BWD_PAIRS = {**norm.LAYER_NORM_BWD_PAIRS, **options}
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", generator=g).to(dtype)
    w = torch.randn(N, device="cuda", generator=g).to(dtype)
    b = torch.randn(N, device="cuda", generator=g).to(dtype)
    dy = torch.randn(M, N, device="cuda", generator=g).to(dtype)

    def step():
        leaves = [t.detach().requires_grad_() for t in ((x, w, b) if center else (x, w))]
        if center:
            y = norm.layer_norm(*leaves, eps=LN_EPS)
        else:
            y = norm.rms_norm(*leaves, eps=EPS)
        return torch.autograd.grad((y,), leaves, (dy,))

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--driver", action="store_true")
    parser.add_argument("--options", default=None)
    parser.add_argument("--M", type=int, default=4096)
    parser.add_argument("--N", type=int, default=16384)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--norm", choices=("layer", "rms"), default="layer")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    args = parser.parse_args()
    options = json.loads(args.options) if args.options else None
    step = _setup(args.M, args.N, getattr(torch, args.dtype), options, args.norm == "layer")
    if args.driver:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        return
    flush = torch.empty(2**28 // 4, dtype=torch.int32, device="cuda")
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    spans, kernels = [], {}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.iters):
            flush.zero_()
            torch.cuda.synchronize()
            step()
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: e.time_range.start)
    # iterations are separated by the flush kernel (a fill of 256 MB)
    iteration: list = []
    groups = []
    for e in events:
        if e.name.startswith(("void at::native::vectorized_elementwise_kernel", "Memset")) and (
            e.time_range.end - e.time_range.start > 40  # the flush: ~90 us; small fills stay
        ):
            if iteration:
                groups.append(iteration)
            iteration = []
            continue
        iteration.append(e)
    if iteration:
        groups.append(iteration)
    for group in groups:
        spans.append(group[-1].time_range.end - group[0].time_range.start)
        for e in group:
            kernels.setdefault(e.name[:90], []).append(e.time_range.end - e.time_range.start)
    from warpforge.environment import environment_fingerprint

    report = {
        "environment": environment_fingerprint(),
        "device": torch.cuda.get_device_name(),
        "norm": args.norm,
        "dtype": args.dtype,
        "shape": [args.M, args.N],
        "options": options,
        "iterations": len(groups),
        "span_us_median": statistics.median(spans) if spans else None,
        "kernels": {
            k: {"count": len(v), "mean_us": statistics.mean(v), "median_us": statistics.median(v)}
            for k, v in kernels.items()
        },
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    print(f"span (first kernel start to last end) median {report['span_us_median']:.1f} us "
          f"over {len(groups)} iterations")  # fmt: skip
    for name, k in report["kernels"].items():
        print(f"  {k['median_us']:8.1f} us x{k['count'] / max(1, len(groups)):.0f}  {name}")


if __name__ == "__main__":
    main()
