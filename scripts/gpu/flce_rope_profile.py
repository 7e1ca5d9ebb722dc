"""Where the time goes, on the GPU: FLCE bf16 forward + backward at 16384 x 4096 x 128256, ours
against torch.compile of the unfused code (the harness baseline), CUDA time per kernel family
from torch.profiler; and RoPE fp32 at the harness shapes rotated into new tensors against the
same kernel rotating in place (as Liger-Kernel does), to size what the in-place write saves.

Usage (GPU, repository root): PYTHONPATH=src python scripts/gpu/flce_rope_profile.py OUT_DIR
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from warpforge.harness.timing import measure_interleaved
from warpforge.ops.loss_problems import (
    _flce_inputs,
    _linear_loss_and_grads,
    fused_linear_cross_entropy_implementation,
    unfused_linear_cross_entropy,
)


def family(name: str) -> str:
    """Kernel names folded into families: cuBLAS GEMMs by their tile name, Triton by function."""
    lowered = name.lower()
    if "gemm" in lowered or "sm90_xmma" in lowered or "cutlass" in lowered or "nvjet" in lowered:
        return "gemm " + name[:70]
    return name[:90]


def kernel_times(fn, inputs) -> dict[str, float]:
    for _ in range(2):
        fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*inputs)
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[family(event.name)] += event.device_time_total / 1e3  # ms
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def flce_breakdown() -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = {"tokens": 16384, "hidden": 4096, "vocab": 128256}
    inputs = _flce_inputs(shape, torch.bfloat16, torch.device("cuda"), gen)
    contenders = {
        "warpforge": _linear_loss_and_grads(fused_linear_cross_entropy_implementation),
        "torch.compile": _linear_loss_and_grads(torch.compile(unfused_linear_cross_entropy)),
    }
    out = {}
    for name, fn in contenders.items():
        times = kernel_times(fn, inputs)
        out[name] = {"total_ms": sum(times.values()), "kernels_ms": times}
        print(f"\n{name}: {out[name]['total_ms']:.2f} ms of kernels")
        for kernel, ms in list(times.items())[:10]:
            print(f"  {ms:9.3f} ms  {kernel}")
    return out


def rope_in_place() -> dict:
    from warpforge.ops.rope_problems import SHAPES

    try:
        from liger_kernel.ops.rope import LigerRopeFunction
    except ImportError:
        LigerRopeFunction = None
    out = {}
    for shape in SHAPES:
        case = f"rope.fwd fp32 {shape['batch']}x{shape['seq']}"
        out[case] = rope_case(shape, LigerRopeFunction)
        for name, us in out[case].items():
            print(f"{case:28s} {name:24s} {us:8.1f} us")
    return out


def rope_case(shape, liger_rope) -> dict[str, float]:
    from warpforge.ops.rope_problems import _inputs

    rope_module = importlib.import_module("warpforge.ops.rope")
    kernels = importlib.import_module("warpforge.ops._kernels.rope")
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, cos, sin = _inputs(shape, torch.float32, torch.device("cuda"), gen)
    q_in, k_in = q.clone(), k.clone()
    batch, seq, q_heads, head_dim = q_in.shape
    k_heads = k_in.shape[2]
    blocks = (q_heads + 31) // 32 + (k_heads + 7) // 8  # the op's launch: (32, 8, 4 warps)

    def in_place():
        kernels.rope_kernel[(batch * seq * blocks,)](
            q_in, q_in, k_in, k_in, cos, sin, seq, q_heads, k_heads,
            *q_in.stride()[:3], *q_in.stride()[:3], *k_in.stride()[:3], *k_in.stride()[:3],
            0, cos.stride(0), blocks, HEAD_DIM=head_dim, HALF_TABLE=False,
            INTERLEAVED=False, BACKWARD=False, BLOCK_HQ=32, BLOCK_HK=8,
            BLOCK_D=head_dim // 2, PAIRED=False, num_warps=4,
        )  # fmt: skip

    fns = {
        "new tensors (the op)": lambda: rope_module._rotate(q, k, cos, sin, False, False),
        "same kernel, in place": in_place,
    }
    if liger_rope is not None:
        qt, kt = q.transpose(1, 2).clone(), k.transpose(1, 2).clone()
        fns["liger (in place)"] = lambda: liger_rope.apply(qt, kt, cos[None], sin[None])
    marker = (torch.empty(1, device="cuda"),)  # the timer takes its device from the inputs
    timed = measure_interleaved(
        {name: (lambda f: lambda _m: f())(fn) for name, fn in fns.items()}, [marker],
        max_time_s=4.0,
    )  # fmt: skip
    return {name: m.median_s * 1e6 for name, m in timed.items()}


def main() -> None:
    out_dir = sys.argv[1]
    report = {"device": torch.cuda.get_device_name(), "rope_in_place": rope_in_place()}
    report["flce_bf16_kernels"] = flce_breakdown()
    with open(f"{out_dir}/flce_rope_profile.json", "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
