"""Norm kernels alone (no autograd, no baselines): each launch choice the op could make, timed.

Backward cases call ``warpforge.ops.norm._norm_backward`` (rows kernel + partial-sum kernel) from
saved statistics with forced knobs: the (ROWS, num_warps) tile, partials in registers or in
memory, prefetching the next tile, reloading the tile from cache after the row reductions
(``reload``), the persistent grid size and the partial-sum kernel's column block. Forward cases
call ``_norm_forward`` with forced (ROWS, num_warps). Every contender is checked against a
float64 reference first, then all of a case are timed together with
``warpforge.harness.timing.measure_interleaved`` (L2 flushed before each call). The register
count and spill bytes of every compiled kernel variant are listed too.

    PYTHONPATH=src python benchmarks/norm_launch_sweep.py --out DIR [--budget-s 240]
    PYTHONPATH=src python benchmarks/norm_launch_sweep.py --out DIR --smoke   # CPU interpreter

Writes DIR/norm_launch_sweep.json after every case (a cut-off run keeps what it measured).
The committed run (benchmarks/results/norm-launch-sweep-2026-11-22-h100.json) also timed an
``l2pre`` variant (the next tile prefetched into L2 by inline PTX), which lost everywhere and
was removed from the kernel.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SMOKE = "--smoke" in sys.argv
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

BWD_FAMILIES = {
    "layer_norm": (True, False),
    "rms_norm": (False, False),
    "add_rms_norm": (False, True),
}


@contextlib.contextmanager
def _forced(norm: Any, programs: int | None, partial_block: int | None) -> Iterator[None]:
    """The op's grid cap and partial-sum column block replaced for one call."""
    saved = norm._bwd_grid, norm._PARTIAL_BLOCK_N
    if programs is not None:
        norm._bwd_grid = lambda config, *args: config.num_programs
    if partial_block is not None:
        norm._PARTIAL_BLOCK_N = partial_block
    try:
        yield
    finally:
        norm._bwd_grid, norm._PARTIAL_BLOCK_N = saved


def _launch(M: int, N: int, dtype: torch.dtype, device, knob: dict, backward: bool):
    """The forced launch of a contender (``None``: the op's own), whole rows per block."""
    from warpforge.ops._rows import row_launch_shape

    if "ROWS" not in knob:
        return None
    launch = row_launch_shape(
        M, N, dtype, device, block_n=1 << (N - 1).bit_length(), rows_per_program=knob["ROWS"],
        num_warps=knob["warps"], reread_operands=2 if backward else 1,
        resident_warps=32 if backward else None,
    )  # fmt: skip
    if knob.get("programs"):  # with _forced: the grid exactly, not capped by the register model
        launch = type(launch)(**{**launch.__dict__, "num_programs": knob["programs"]})
    return launch


def _bwd_case(family: str, M: int, N: int, dtype: torch.dtype, knobs: list[dict], device):
    from warpforge.ops import norm

    center, residual = BWD_FAMILIES[family]
    g = torch.Generator().manual_seed(0)
    x, dy = (torch.randn(M, N, generator=g).to(device, dtype) for _ in range(2))
    w = torch.randn(N, generator=g).to(device, dtype)
    dh = torch.randn(M, N, generator=g).to(device, dtype) if residual else None
    xf = x.float()
    mean = xf.mean(-1) if center else None
    rstd = torch.rsqrt((xf - mean[:, None] if center else xf).square().mean(-1) + 1e-5)
    del xf
    empty = torch.empty(0, device=device, dtype=torch.float64)
    expected = norm._reference_backward(
        dy.double(), x.double(), w.double(), mean.double() if center else None, rstd.double(),
        dh.double() if residual else None, 0.0, center,
        torch.empty(M, N, device=device, dtype=torch.float64),
        torch.empty(N, device=device, dtype=torch.float64),
        torch.empty(N, device=device, dtype=torch.float64) if center else empty,
    )  # fmt: skip

    def run_with(knob: dict):
        launch = _launch(M, N, dtype, device, knob, backward=True)
        bwd_knobs = norm.BwdKnobs(bool(knob.get("reload"))) if launch is not None else None

        def run(dy, x, w, mean, rstd, dh):
            with _forced(norm, knob.get("programs"), knob.get("partial_block")):
                return norm._norm_backward(
                    dy, x, w, mean, rstd, dh, 0.0, center, True, center, launch=launch,
                    in_memory=knob.get("mem"), prefetch=knob.get("pre"), knobs=bwd_knobs,
                )  # fmt: skip

        return run

    inputs = (dy, x, w, mean, rstd, dh)
    moved = (3 + int(residual)) * M * N * dtype.itemsize
    return inputs, expected, {_name(k): run_with(k) for k in knobs}, moved


def _fwd_case(family: str, M: int, N: int, dtype: torch.dtype, knobs: list[dict], device):
    from warpforge.ops import norm

    center = family == "layer_norm"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(M, N, generator=g).to(device, dtype)
    w, b = (torch.randn(N, generator=g).to(device, dtype) for _ in range(2))
    y64 = norm._reference_forward(
        x.double(), w.double(), b.double() if center else None, None, 1e-5, 0.0, center,
        torch.empty(M, N, device=device, dtype=torch.float64), None,
        torch.empty(M, device=device, dtype=torch.float64),
        torch.empty(M, device=device, dtype=torch.float64),
    )[0]  # fmt: skip

    def run_with(knob: dict):
        launch = _launch(M, N, dtype, device, knob, backward=False)

        def run(x, w, b):
            return norm._norm_forward(x, w, b if center else None, None, 1e-5, 0.0, center, launch)[
                :1
            ]

        return run

    return (x, w, b), (y64,), {_name(k): run_with(k) for k in knobs}, 2 * M * N * dtype.itemsize


def _name(knob: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in knob.items()) or "default"


def _error(got, want, dtype) -> float:
    """Worst |got - want| over the tolerance, relative to each output's scale."""
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    worst = 0.0
    for a, b in zip(got, want, strict=False):
        if b.numel() == 0:
            continue
        scale = max(b.abs().max().item(), 1.0)
        worst = max(worst, ((a.double() - b).abs().max().item() / scale) / tol)
    return worst


def _registers() -> list[dict[str, Any]]:
    """Registers and spills of every compiled norm kernel variant (best effort)."""
    from warpforge.ops._kernels import norm as nk

    out = []
    for name in ("norm_bwd_rows_kernel", "norm_fwd_rows_kernel", "partial_sum_kernel"):
        fn = getattr(nk, name)
        for entry in getattr(fn, "device_caches", {}).values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            for key, kernel in getattr(cache, "items", dict)():
                with contextlib.suppress(Exception):
                    out.append({
                        "kernel": name, "key": str(key)[-400:],
                        "n_regs": kernel.n_regs, "n_spills": kernel.n_spills,
                        "num_warps": kernel.metadata.num_warps,
                    })  # fmt: skip
    return out


def _cases(smoke: bool) -> list[tuple[str, str, int, int, torch.dtype, list[dict]]]:
    bf16, fp32 = torch.bfloat16, torch.float32
    if smoke:
        small = [{}, {"ROWS": 2, "warps": 1, "reload": True}, {"ROWS": 2, "warps": 1, "mem": True,
                 "reload": True, "pre": True, "programs": 3, "partial_block": 32}]  # fmt: skip
        return [
            ("bwd", "layer_norm", 9, 37, fp32, small),
            ("bwd", "add_rms_norm", 9, 37, fp32, small),
            ("fwd", "layer_norm", 9, 37, fp32, [{}, {"ROWS": 2, "warps": 1}]),
        ]
    wide = [{}]
    for warps in (32, 16):
        for reload in (False, True):
            for mem in (False, True) if warps == 32 else (False,):
                wide.append({"ROWS": 1, "warps": warps, "mem": mem, "reload": reload})
    mid = [{}]
    for rows, warps in ((1, 8), (1, 16), (2, 32), (4, 32)):
        for reload in (False, True):
            mid.append({"ROWS": rows, "warps": warps, "mem": False, "reload": reload})
            if rows * 4096 // (32 * warps) <= 8:  # prefetched by default: also without
                mid.append({"ROWS": rows, "warps": warps, "mem": False, "reload": reload,
                            "pre": False})  # fmt: skip
    for programs in (264, 396):
        mid.append({"ROWS": 1, "warps": 8, "mem": False, "reload": True, "programs": programs})
        mid.append({"ROWS": 1, "warps": 16, "mem": False, "reload": True, "programs": programs})
    mid.append({"ROWS": 2, "warps": 32, "mem": True, "reload": True})
    short = [{}]
    for rows, warps in ((8, 4), (8, 8), (16, 8), (4, 4)):
        for reload in (False, True):
            short.append({"ROWS": rows, "warps": warps, "reload": reload})
    for programs in (264, 528, 1056):
        short.append({"ROWS": 8, "warps": 8, "programs": programs})
    for block in (32, 64):
        short.append({"partial_block": block})
    fwd_wide = [{}] + [{"ROWS": 1, "warps": w} for w in (4, 8, 16, 32)]
    fwd_mid = [{}] + [{"ROWS": r, "warps": w} for r in (1, 2) for w in (4, 8, 16)]
    return [  # most wanted first: a run cut short by its budget loses the tail
        ("bwd", "layer_norm", 4096, 16384, bf16, wide),
        ("bwd", "layer_norm", 16384, 4096, bf16, mid),
        ("fwd", "layer_norm", 4096, 16384, bf16, fwd_wide),
        ("bwd", "layer_norm", 4096, 16384, fp32, wide),
        ("bwd", "layer_norm", 16384, 4096, fp32, mid),
        ("bwd", "rms_norm", 16384, 4096, bf16, mid),
        ("bwd", "rms_norm", 32768, 256, bf16, short),
        ("bwd", "add_rms_norm", 32768, 256, bf16, short),
        (
            "bwd",
            "rms_norm",
            4096,
            16384,
            bf16,
            [{}, {"ROWS": 1, "warps": 32, "reload": True}],
        ),
        ("fwd", "layer_norm", 16384, 4096, bf16, fwd_mid),
        ("bwd", "add_rms_norm", 16384, 4096, bf16, mid[:13]),
        ("bwd", "layer_norm", 32768, 256, bf16, short[:12]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    from warpforge.harness.timing import measure_interleaved

    device = torch.device("cpu" if args.smoke else "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"cases": [], "device": str(device)}
    if device.type == "cuda":
        report["device_name"] = torch.cuda.get_device_name(device)
    start = time.monotonic()
    for direction, family, M, N, dtype, knobs in _cases(args.smoke):
        if time.monotonic() - start > args.budget_s:
            report["cases"].append(
                {"case": f"{direction} {family} {M}x{N} {dtype}", "skipped": True}
            )
            continue
        build = _bwd_case if direction == "bwd" else _fwd_case
        inputs, expected, fns, moved = build(family, M, N, dtype, knobs, device)
        rows, timed = [], {}
        for name, fn in fns.items():
            row: dict[str, Any] = {"contender": name}
            try:
                row["error_vs_tol"] = _error(fn(*inputs), expected, dtype)
                if row["error_vs_tol"] <= 1.0:
                    timed[name] = fn
            except Exception as exc:  # a config the compiler rejects: record it, go on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
        measured = measure_interleaved(
            timed, [inputs], max_time_s=0.05 if args.smoke else 1.0,
            min_samples=2 if args.smoke else 10,
        )  # fmt: skip
        for row in rows:
            m = measured.get(row["contender"])
            if m is not None:
                row.update(median_us=m.median_s * 1e6, gb_per_s=moved / m.median_s / 1e9)
        report["cases"].append({"case": f"{direction} {family} M={M} N={N} {dtype}",
                                "bytes_moved": moved, "contenders": rows})  # fmt: skip
        print(report["cases"][-1]["case"], flush=True)
        for row in sorted(rows, key=lambda r: r.get("median_us", 1e12)):
            print(f"   {row['contender']:60s} {row.get('median_us', float('nan')):9.1f} us "
                  f"{row.get('gb_per_s', 0):7.0f} GB/s  err/tol={row.get('error_vs_tol')}"
                  f" {row.get('error', '')}", flush=True)  # fmt: skip
        report["registers"] = _registers()
        report["wall_s"] = time.monotonic() - start
        (args.out / "norm_launch_sweep.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
