"""Peak memory and speed of the fused linear cross entropy against the unfused PyTorch path.

Runs forward + backward (loss, grad_hidden, grad_weight) of an LM head + mean cross entropy
for warpforge's fused op, the unfused PyTorch code (logits, upcast to float32, cross entropy;
as Hugging Face models do) and Liger-Kernel when installed, and writes one JSON file.

    PYTHONPATH=src python benchmarks/flce_memory.py --out results/flce
    PYTHONPATH=src python benchmarks/flce_memory.py --tokens 16384 --hidden 4096 --vocab 128256
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

# the same timing as the ops check (this script's folder is on sys.path when it runs)

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _time(fn, inputs) -> dict:
    """Median and 95% interval through the harness' timing (events, L2 flush, launch hold)."""
    from warpforge.harness.timing import measure

    m = measure(fn, [inputs], max_time_s=3.0)
    return {"median_s": m.median_s, "ci_low_s": m.ci_low_s, "ci_high_s": m.ci_high_s,
            "method": "warpforge.harness.timing.measure"}  # fmt: skip


def unfused(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy((hidden @ weight.t()).float(), target)


def fused(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    from warpforge.ops import fused_linear_cross_entropy

    return fused_linear_cross_entropy(hidden, weight, target)


def liger_or_none() -> Callable[..., torch.Tensor] | None:
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import (
            LigerFusedLinearCrossEntropyFunction,
        )
    except ImportError:
        return None

    def run(hidden, weight, target):
        out = LigerFusedLinearCrossEntropyFunction.apply(hidden, weight, target)
        return out[0] if isinstance(out, tuple) else out

    return run


def fwd_bwd(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., tuple[torch.Tensor, ...]]:
    def run(hidden, weight, target):
        h, w = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
        loss = loss_fn(h, w, target)
        return (loss.detach(), *torch.autograd.grad(loss, (h, w)))

    return run


def peak_bytes(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> int:
    """Peak allocation above what the inputs already hold, for one call (outputs included)."""
    fn(*inputs)  # warm-up: compile kernels, create cuBLAS workspaces
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn(*inputs)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak


def max_abs_diff(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> list[float]:
    return [float((x.float() - y.float()).abs().max()) for x, y in zip(a, b, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("flce_memory: needs a CUDA device", file=sys.stderr)
        return 2

    from warpforge.environment import environment_fingerprint

    dtype = DTYPES[args.dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(args.tokens, args.hidden, device="cuda", generator=gen).to(dtype)
    weight = (torch.randn(args.vocab, args.hidden, device="cuda", generator=gen)
              * args.hidden**-0.5).to(dtype)  # fmt: skip
    target = torch.randint(0, args.vocab, (args.tokens,), device="cuda", generator=gen)
    target[1::16] = -100
    inputs = (hidden, weight, target)

    candidates: dict[str, Callable[..., Any]] = {
        "warpforge_fused": fwd_bwd(fused),
        "torch_unfused": fwd_bwd(unfused),
    }
    liger = liger_or_none()
    if liger is not None:
        candidates["liger_fused"] = fwd_bwd(liger)

    reference = candidates["torch_unfused"](*inputs)
    results: dict[str, Any] = {}
    for name, fn in candidates.items():
        try:
            diff = max_abs_diff(fn(*inputs), reference)
            results[name] = {
                "peak_bytes": peak_bytes(fn, inputs),
                "time": _time(fn, inputs),
                "max_abs_diff_vs_torch_unfused": dict(
                    zip(("loss", "grad_hidden", "grad_weight"), diff, strict=True)
                ),
            }
        except torch.cuda.OutOfMemoryError as exc:
            results[name] = {"error": f"out of memory: {exc}"}
            torch.cuda.empty_cache()
        print(name, json.dumps(results[name], default=str)[:300])

    logits_bytes = args.tokens * args.vocab * torch.finfo(dtype).bits // 8
    report = {
        "benchmark": "fused_linear_cross_entropy.memory",
        "shape": {"tokens": args.tokens, "hidden": args.hidden, "vocab": args.vocab},
        "dtype": args.dtype,
        "logits_bytes": logits_bytes,
        "flops_fwd_bwd": 6 * args.tokens * args.hidden * args.vocab,
        "results": results,
        "environment": environment_fingerprint(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"flce_memory_{args.dtype}_{args.tokens}x{args.hidden}x{args.vocab}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str))
    tmp.replace(path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
