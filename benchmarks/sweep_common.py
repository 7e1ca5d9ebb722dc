"""What the kernel-alone sweeps under ``benchmarks/`` share: their command line and the copy
bandwidth their ``of_copy`` columns divide by (measured in the same process).

A sweep imports it as a sibling module: ``python benchmarks/NAME.py`` puts ``benchmarks/`` on
``sys.path``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def copy_bandwidth(do_bench, device: str = "cuda") -> float:
    """Bytes a second of a 1 GiB device-to-device copy (read + write), the median of
    ``do_bench`` (``triton.testing.do_bench``)."""
    x = torch.empty(2**30, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    return 2 * x.numel() / (do_bench(lambda: y.copy_(x), return_mode="median") * 1e-3)


def start_sweep(doc: str, dtypes: str = "bfloat16,float32"):
    """A sweep's start: (arguments ``--out DIR``, created, and ``--dtypes``, comma-separated
    torch dtype names; ``triton.testing.do_bench``; the copy bandwidth; the report's first
    line, naming it and the device)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtypes", default=dtypes)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from triton.testing import do_bench

    copy = copy_bandwidth(do_bench)
    return (
        args,
        do_bench,
        copy,
        f"copy bandwidth {copy / 1e9:.0f} GB/s ({torch.cuda.get_device_name()})",
    )


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
"""The scripts' ``--dtype`` names."""


def gpu_problem(name: str, dtype: str):
    """(the built-in harness problem ``name``, the torch dtype of ``dtype``, a ``DTYPES`` name),
    or None without a CUDA device (said on stderr)."""
    import sys

    from warpforge.catalog import load_builtin_problems
    from warpforge.harness.registry import get_problem

    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return None
    load_builtin_problems()
    return get_problem(name), DTYPES[dtype]
