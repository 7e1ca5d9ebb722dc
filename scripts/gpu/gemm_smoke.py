"""GPU smoke check of the blueprint matmul kernels: strict compile, correctness against the float64
reference and a quick event timing (default launch configs) of the matmul-bearing suite problems,
beside cuBLAS for the same GEMM shapes.

Usage (on the GPU, from the repository root): python3 scripts/gpu/gemm_smoke.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

import warpforge
from warpforge.blueprint import problems
from warpforge.harness.registry import get_problem

CASES = {
    "blueprint.layernorm_linear_gelu": problems.layernorm_linear_gelu_blueprint,
    "blueprint.mlp_block": problems.mlp_block_blueprint,
    "blueprint.causal_attention_scores": problems.attention_scores_blueprint,
}


def median_event_us(fn, iters: int = 20) -> float:
    """Median CUDA-event time of ``fn`` in microseconds (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def main(out: str) -> None:
    results = {}
    g = torch.Generator(device="cuda").manual_seed(0)
    for name, builder in CASES.items():
        problem = get_problem(name)
        shape = problem.shapes[0]
        row: dict[str, object] = {"shape": dict(shape)}
        try:
            inputs = problem.make_inputs(shape, torch.bfloat16, torch.device("cuda"), g)
            module = warpforge.compile(builder("bfloat16"), strict=True)
            got = module(*inputs)
            want = problem.reference(*[t.double() if t.is_floating_point() else t for t in inputs])
            row["max_abs_err"] = float((got.double() - want).abs().nan_to_num(0.0).max())
            row["nan_mismatch"] = bool((got.isnan() != want.isnan()).any())
            row["ours_us"] = median_event_us(lambda m=module, i=inputs: m(*i))
            row["eager_us"] = median_event_us(lambda p=problem, i=inputs: p.reference(*i))
        except Exception as error:  # report and go on with the next problem
            row["error"] = f"{type(error).__name__}: {error}"[:2000]
        results[name] = row
        print(name, row, flush=True)
    for m, n, k in ((8192, 4096, 4096), (8192, 8192, 2048), (8192, 2048, 8192)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        us = median_event_us(lambda a=a, b=b: torch.nn.functional.linear(a, b))
        results[f"cublas_{m}x{n}x{k}"] = {"us": us, "tflops": 2 * m * n * k / us / 1e6}
        print(m, n, k, us, flush=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
