"""Device time per kernel of a norm's forward + backward, warpforge against torch.compile (GPU).

Where the time of a harness row such as ``add_rms_norm.bwd`` at 32768 x 256 goes: each
implementation runs ``--iters`` times under ``torch.profiler`` (an L2 flush before each call, as
the harness does), and the table lists every CUDA kernel's mean device time per call. A
diagnostic, not a benchmark: the harness numbers are the ones to report.

    python scripts/gpu/norm_kernel_breakdown.py --op add_rms_norm --M 32768 --N 256 --dtype bf16
    ncu --profile-from-start off -k regex:bwd python scripts/gpu/norm_kernel_breakdown.py \
        --op rms_norm --driver  # ncu's program

``--driver``: warpforge's forward + backward, three times unprofiled and twice between
cudaProfilerStart and Stop, and nothing else (no profiler, no torch.compile), for Nsight Compute
to profile; ``--forward`` leaves the backward out,
``--looped CHUNK WARPS`` adds warpforge's forward on the looped kernel
(``norm_fwd_looped_kernel``) and ``--compile-too`` torch.compile's, each three times after it.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _implementations(op: str, looped: tuple[int, int] | None):
    import torch.nn.functional as F

    from warpforge import ops

    def eager(x, residual, w, b):
        if op == "layer_norm":
            return (F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),)
        h = x + residual if op == "add_rms_norm" else x
        y = F.rms_norm(h, (h.shape[-1],), w, 1e-6)
        return (y, h) if op == "add_rms_norm" else (y,)

    def warpforge(x, residual, w, b):
        if op == "layer_norm":
            return (ops.layer_norm(x, w, b, 1e-5),)
        if op == "add_rms_norm":
            return tuple(ops.rms_norm(x, w, 1e-6, residual=residual))
        return (ops.rms_norm(x, w, 1e-6),)

    out = {"warpforge": warpforge}
    if looped is not None:
        from warpforge.ops import norm
        from warpforge.ops._wide_rows import WideLaunch

        launch = WideLaunch(looped[1], chunk=looped[0])

        def looped_forward(x, residual, w, b):
            center = op == "layer_norm"
            r = residual if op == "add_rms_norm" else None
            eps = 1e-5 if center else 1e-6
            y, h = norm.wide_norm_forward(x, w, b if center else None, r, eps, 0.0, center,
                                          launch)[:2]  # fmt: skip
            return (y, h) if r is not None else (y,)

        out["warpforge looped"] = looped_forward
    out["torch.compile"] = torch.compile(eager)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("rms_norm", "add_rms_norm", "layer_norm"), required=True)
    parser.add_argument("--M", type=int, default=32768)
    parser.add_argument("--N", type=int, default=256)
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--driver", action="store_true")
    parser.add_argument("--forward", action="store_true", help="forward only")
    parser.add_argument("--looped", type=int, nargs=2, metavar=("CHUNK", "WARPS"))
    parser.add_argument("--compile-too", action="store_true", help="--driver: torch.compile too")
    args = parser.parse_args()
    if args.looped and not args.forward:
        parser.error("--looped: the looped kernel is a forward; add --forward")
    dtype, device = _DTYPES[args.dtype], torch.device("cuda")
    g = torch.Generator(device=device).manual_seed(0)

    def randn(*size):
        return torch.randn(*size, generator=g, device=device, dtype=torch.float32).to(dtype)

    x, residual = randn(args.M, args.N), randn(args.M, args.N)
    w, b = randn(args.N), randn(args.N)
    grads = [randn(args.M, args.N) for _ in range(2)]
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
    implementations = _implementations(args.op, tuple(args.looped) if args.looped else None)
    if args.driver and not args.compile_too:
        implementations.pop("torch.compile")
    if not args.driver:
        what = "fwd" if args.forward else "fwd+bwd"
        print(f"{args.op} {what} {args.M}x{args.N} {args.dtype}: mean device time per call (us)")
    steps = {}
    for name, fn in implementations.items():
        leaves = [t.detach().requires_grad_() for t in (x, residual, w, b)]

        def step(fn=fn, leaves=leaves):  # bound now: the loop rebinds both
            if args.forward:
                with torch.no_grad():
                    fn(*leaves)
                return
            outs = fn(*leaves)
            wrt = [leaves[0], leaves[2]] + ([leaves[3]] if args.op == "layer_norm" else [])
            torch.autograd.grad(outs, wrt, grads[: len(outs)])

        for _ in range(3):  # compile (torch.compile autotunes here) and warm up
            step()
        steps[name] = step
    torch.cuda.synchronize()
    if args.driver:  # ncu --profile-from-start off: only these launches
        torch.cuda.cudart().cudaProfilerStart()
        for step in steps.values():
            for _ in range(2):
                step()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return
    for name, step in steps.items():
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                flush.zero_()
                step()
            torch.cuda.synchronize()
        per_kernel: dict[str, float] = collections.defaultdict(float)
        for event in prof.key_averages():
            if getattr(event, "device_type", DeviceType.CUDA) != DeviceType.CUDA:
                continue  # host-side ops (their kernels are listed on their own)
            device_us = getattr(event, "device_time_total", None)
            if device_us is None:
                device_us = event.cuda_time_total
            if device_us and "fill" not in event.key.lower() and "zero" not in event.key.lower():
                per_kernel[event.key] += device_us / args.iters
        total = sum(per_kernel.values())
        print(f"  {name}: {total:.1f} us in {len(per_kernel)} kernel(s), flush excluded")
        for key, us in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
            print(f"    {us:8.1f}  {key[:110]}")


if __name__ == "__main__":
    main()
