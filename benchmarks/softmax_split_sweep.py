"""Launch shapes of the split-row softmax / log-softmax forward (``softmax_fwd_split_kernel``) on
the H100 (issue #4), with the backward op timed beside it for context (it has no split kernel).

Every contender first writes into a NaN-poisoned output and is compared with a float64
reference (``||out - ref|| / ||ref||``; bf16 lands near 3e-3), then is timed with
``triton.testing.do_bench`` (median, L2 flushed between calls), ``--repeat`` passes round-robin
over the contenders of a shape (a drift of clocks or temperature lands on all of them). GB/s
counts the minimum bytes (forward: read x, write y; backward: read y and dy, write dx);
``of_copy`` divides by the copy bandwidth measured in the same process. After the timings the
registers and spilled bytes of every compiled split kernel (Triton's ``n_regs``/``n_spills``)
are listed.

    PYTHONPATH=src python benchmarks/softmax_split_sweep.py --out DIR --repeat 3   # GPU
    (``--shapes 8192x262144:bf16 --only "8192/8 x4,8192/4 x4,default"``)
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/softmax_split_sweep.py --out DIR --smoke

A contender is named ``BLOCK/WARPS xPROGRAMS_PER_SM`` (2-byte rows prefetch their next chunk
and arrive release-only, as ``split_launch`` plans them; float32 rows do neither), with ``lag``
after it the flag-word kernel that meets a row later (``softmax_fwd_lag_kernel``), with
``rereadK`` (and ``pf``) the re-reading kernel K rows later (``softmax_fwd_reread_kernel``;
``pf``: the next row's chunk loaded a step early), ``default``
(the op's own plan, ``softmax_ops._fwd_split_plan``) or ``bwd`` (the backward op, default
launch).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch

SHAPES = ((8192, 262144, "bf16"), (8192, 262144, "fp32"))
CONTENDERS = (
    "8192/8 x4",
    "8192/4 x4",
    "16384/8 x2",
    "8192/8 x2 lag",
    "8192/16 x2 lag",
    "4096/4 x4 lag",
    "4096/8 x4 lag",
    "default",
    "bwd",
)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def rel_err(out: torch.Tensor, ref: torch.Tensor, rows: int = 512) -> float:
    """||out - ref|| / ||ref|| in float64, a block of rows at a time (NaN stays NaN)."""
    num = den = 0.0
    for start in range(0, out.shape[0], rows):
        o = out[start : start + rows].double()
        r = ref[start : start + rows].double()
        num += float(((o - r) ** 2).sum())
        den += float((r**2).sum())
    return (num / den) ** 0.5 if den > 0 else float(num > 0)


def kernel_usage(fn) -> list[dict[str, object]]:
    """(num_warps, maxnreg, registers, spilled bytes) of every compiled version of a Triton
    kernel in this process (empty under the interpreter)."""
    found: list[dict[str, object]] = []
    try:
        for caches in getattr(fn, "device_caches", {}).values():
            for compiled in caches[0].values():
                meta = compiled.metadata
                found.append({
                    "num_warps": getattr(meta, "num_warps", None),
                    "maxnreg": getattr(meta, "maxnreg", None),
                    "n_regs": getattr(compiled, "n_regs", None),
                    "n_spills": getattr(compiled, "n_spills", None),
                })  # fmt: skip
    except Exception as exc:  # recorded, never fatal: the timings are what matters
        found.append({"error": repr(exc)[:200]})
    return found


def contender_plan(name: str, M: int, N: int, dev: str, element_size: int, shrink: int = 1):
    from warpforge.ops._split_rows import split_row_plan

    launch, per_sm, *kind = name.split()
    block, warps = (int(v) for v in launch.split("/"))
    # rereadK: the re-reading kernel K rows later (softmax_fwd_reread_kernel; "pf": the next
    # row's chunk loaded a step early)
    reread = int(kind[0].removeprefix("reread")) if kind and kind[0].startswith("reread") else 0
    lag = kind == ["lag"] or reread > 0  # flag words (softmax_fwd_lag_kernel, one row later)
    counter_two_bytes = element_size == 2 and not lag
    return split_row_plan(
        M, N, dev, block=block // shrink, num_warps=warps, programs_per_sm=int(per_sm[1:]),
        prefetch=counter_two_bytes or "pf" in kind, release_only=counter_two_bytes,
        flag_words=lag, reread_lag=reread,
    )  # fmt: skip


def sweep_setup(description: str, default_shapes, contenders):
    """What the softmax split sweeps share: their arguments, the device (the interpreter with
    tiny shapes under ``--smoke``), the timer, the copy bandwidth measured in this process, the
    shapes and contenders chosen. Returns (args, dev, shapes, shrink, dtypes, do_bench, copy,
    names, device name)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes under the interpreter")
    parser.add_argument("--shapes", default="", help="e.g. 8192x262144:bf16,8192x262144:fp32")
    parser.add_argument("--only", default="", help="contender names, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="timing passes (median reported)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev, shapes, shrink, dtypes = "cuda", default_shapes, 1, dict(DTYPES)
    if args.smoke:  # the interpreter gets bfloat16 wrong
        dev, shapes, shrink = "cpu", ((6, 300, "bf16"), (5, 1000, "fp32")), 256
        dtypes["bf16"] = torch.float16

        def do_bench(fn, return_mode="median"):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

        copy = 1.0
    else:
        from triton.testing import do_bench

        src = torch.empty(2**30, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        copy = 2 * src.numel() / (do_bench(lambda: dst.copy_(src), return_mode="median") * 1e-3)
        del src, dst
    if args.shapes:
        shapes = tuple((int(m), int(n), dt) for m, n, dt in
                       (re.split("[x:]", item) for item in args.shapes.split(",")))  # fmt: skip
    names = [n for n in args.only.split(",") if n] or list(contenders)
    device = torch.cuda.get_device_name() if dev == "cuda" else "cpu (smoke)"
    return args, dev, shapes, shrink, dtypes, do_bench, copy, names, device


def report_shape(timed, repeat, do_bench, copy, lines, prefix) -> None:
    """The timing passes after the first (round-robin over ``timed``: (row, run, passes, bytes)
    per contender), then each row's median, GB/s and share of ``copy`` into its row and a line
    of ``lines`` starting with ``prefix``. Clears ``timed`` (its closures hold the tensors)."""
    for _ in range(repeat - 1):
        for _, run, passes, _ in timed:
            passes.append(do_bench(run, return_mode="median"))
    for row, _, passes, nbytes in timed:
        ms = sorted(passes)[len(passes) // 2]
        gbs = nbytes / (ms * 1e-3)
        row.update(us=ms * 1e3, passes_us=[t * 1e3 for t in passes], gbs=gbs / 1e9,
                   of_copy=gbs / copy)  # fmt: skip
        label = row["contender"] + (f" ({row['plan']})" if "plan" in row else "")
        lines.append(
            f"{prefix} {label:32s} "
            f"{'ok ' if row['verified'] else 'BAD'} err {row['rel_err']:.1e} "
            f"{ms * 1e3:8.1f} us {gbs / 1e9:6.0f} GB/s {gbs / copy:6.1%}  passes "
            + " ".join(f"{t * 1e3:.1f}" for t in passes)
        )
    timed.clear()


def sweep_json(copy: float, device: str, rows: list) -> str:
    """A sweep's JSON report: the copy bandwidth, the device, the rows and the environment
    (versions, commit, date) the numbers came from."""
    from warpforge.environment import environment_fingerprint

    report = {"environment": environment_fingerprint(), "copy_bandwidth": copy, "device": device,
              "rows": rows}  # fmt: skip
    return json.dumps(report, indent=1)


def report_kernel_usage(kernel, lines, rows_out) -> None:
    """The compiled versions of ``kernel`` (registers, spills) appended to the report."""
    usage = kernel_usage(kernel)
    lines.append(f"compiled {kernel.fn.__name__} versions (num_warps, maxnreg, n_regs, n_spills):")
    lines += [f"  {u}" for u in usage]
    rows_out.append({"kernel_usage": usage})


def main() -> None:
    args, dev, shapes, shrink, dtypes, do_bench, copy, names, device = sweep_setup(
        __doc__.splitlines()[0], SHAPES, CONTENDERS
    )
    from warpforge.ops import softmax_ops
    from warpforge.ops._kernels.softmax import (
        softmax_fwd_lag_kernel,
        softmax_fwd_reread_kernel,
        softmax_fwd_split_kernel,
    )

    lines = [f"copy bandwidth {copy / 1e9:.0f} GB/s ({device})"]
    rows_out: list[dict[str, object]] = []

    def write() -> None:  # after every shape: a sweep cut short keeps what it timed
        (args.out / "softmax_split_sweep.txt").write_text("\n".join(lines) + "\n")
        (args.out / "softmax_split_sweep.json").write_text(sweep_json(copy, device, rows_out))

    for M, N, dt in shapes:
        dtype = dtypes[dt]
        gen = torch.Generator(device=dev).manual_seed(M + N)
        x = torch.randn(M, N, device=dev, generator=gen).to(dtype)
        dy = torch.randn(M, N, device=dev, generator=gen).to(dtype) if "bwd" in names else None
        for log in (False, True):
            family = "log_softmax" if log else "softmax"
            ref = torch.empty(M, N, dtype=torch.float32, device=dev)
            ref_dx = torch.empty_like(ref) if dy is not None else None
            for s in range(0, M, 512):
                xd = x[s : s + 512].double()
                yd = torch.log_softmax(xd, -1) if log else torch.softmax(xd, -1)
                ref[s : s + 512] = yd.float()
                if dy is not None:
                    g = dy[s : s + 512].double()
                    if log:
                        ref_dx[s : s + 512] = (g - yd.exp() * g.sum(-1, keepdim=True)).float()
                    else:
                        ref_dx[s : s + 512] = (yd * (g - (g * yd).sum(-1, keepdim=True))).float()
                del xd, yd
            timed = []
            for name in names:
                row = {"shape": f"M={M} N={N}", "dtype": dt, "family": family, "contender": name}
                if name == "bwd":
                    y = softmax_ops.softmax_forward(x, log)

                    def run(dy=dy, y=y, log=log):
                        return softmax_ops._softmax_bwd(dy, y, log)

                    nbytes, reference = 3 * M * N * x.element_size(), ref_dx
                else:
                    plan = (softmax_ops._fwd_split_plan(M, N, x.element_size(), x.device, log)
                            if name == "default" else
                            contender_plan(name, M, N, dev, x.element_size(), shrink))  # fmt: skip
                    if plan is None:
                        continue
                    if name == "default":
                        row["plan"] = f"{plan.block}/{plan.num_warps} maxnreg {plan.max_registers}"

                    def run(x=x, plan=plan, log=log):
                        return softmax_ops.softmax_forward(x, log, split=plan)

                    nbytes, reference = 2 * M * N * x.element_size(), ref
                try:
                    # the allocator hands a freed NaN block to the op's output: unwritten shows
                    torch.full_like(x, float("nan"))
                    out = run()
                    err = rel_err(out, reference)
                    del out
                    passes = [do_bench(run, return_mode="median")]
                except Exception as exc:  # recorded, the sweep goes on
                    row["error"] = repr(exc)[:300]
                    rows_out.append(row)
                    lines.append(f"{dt} M={M} N={N} {family} {name}: ERROR {exc!r}"[:200])
                    continue
                row.update(rel_err=err, verified=err == err and err <= 1e-2)
                rows_out.append(row)
                timed.append((row, run, passes, nbytes))
            prefix = f"{dt:4s} M={M:<5d} N={N:<7d} {family:11s}"
            report_shape(timed, args.repeat, do_bench, copy, lines, prefix)
            del ref, ref_dx
            write()
        del x, dy
    report_kernel_usage(softmax_fwd_split_kernel, lines, rows_out)
    report_kernel_usage(softmax_fwd_lag_kernel, lines, rows_out)
    report_kernel_usage(softmax_fwd_reread_kernel, lines, rows_out)
    write()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
