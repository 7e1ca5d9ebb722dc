"""Kernel-alone sweep of the softmax / log-softmax backward (issue #4; H100, then H200): the split-row
flag-word kernel (``softmax_bwd_flags_kernel``) at candidate launches against the
one-program-per-row chunked kernel (the backward before it, which reads y and dy twice).

Each contender first writes into a NaN-poisoned output and is compared with a float64 reference
(``||dx - ref|| / ||ref||``), then is timed with ``triton.testing.do_bench`` (median, L2 flushed),
``--repeat`` passes round-robin over the contenders of a shape. GB/s counts read y, dy, write dx;
``of_copy`` divides by the copy bandwidth measured in the same process. Contenders:
``BLOCK/WARPS xPROGRAMS_PER_SM[ p]`` (``p``: prefetch the next row's chunks), ``chunked`` (the
old kernel, forced), ``default`` (the op as dispatched now).

    PYTHONPATH=src python benchmarks/softmax_bwd_split_sweep.py --out DIR --repeat 3   # GPU
    TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/softmax_bwd_split_sweep.py --out DIR --smoke
"""

from __future__ import annotations

import torch
from softmax_split_sweep import rel_err, report_kernel_usage, report_shape, sweep_json, sweep_setup

SHAPES = ((8192, 262144, "bf16"), (8192, 131072, "bf16"), (8192, 262144, "fp32"),
          (8192, 131072, "fp32"))  # fmt: skip
CONTENDERS = ("chunked", "default", "8192/8 x2 p", "8192/8 x2", "4096/4 x4 p", "4096/4 x4",
              "8192/4 x4 p")  # fmt: skip
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def contender_plan(name: str, M: int, N: int, dev: str, shrink: int = 1):
    from warpforge.ops._split_rows import split_row_plan

    launch, per_sm, *flags = name.split()
    block, warps = (int(v) for v in launch.split("/"))
    return split_row_plan(
        M, N, dev, block=block // shrink, num_warps=warps, programs_per_sm=int(per_sm[1:]),
        prefetch="p" in flags, flag_words=True,
    )  # fmt: skip


def main() -> None:
    args, dev, shapes, shrink, dtypes, do_bench, copy, names, device = sweep_setup(
        __doc__.splitlines()[0], SHAPES, CONTENDERS
    )
    from warpforge.ops import softmax_ops
    from warpforge.ops._kernels.softmax import softmax_bwd_flags_kernel

    lines = [f"copy bandwidth {copy / 1e9:.0f} GB/s ({device})"]
    rows_out: list[dict[str, object]] = []

    def write() -> None:  # after every shape: a sweep cut short keeps what it timed
        (args.out / "softmax_bwd_split_sweep.txt").write_text("\n".join(lines) + "\n")
        (args.out / "softmax_bwd_split_sweep.json").write_text(sweep_json(copy, device, rows_out))

    real_plan = softmax_ops._bwd_split_plan
    for M, N, dt in shapes:
        dtype = dtypes[dt]
        gen = torch.Generator(device=dev).manual_seed(M + N)
        x = torch.randn(M, N, device=dev, generator=gen).to(dtype)
        dy = torch.randn(M, N, device=dev, generator=gen).to(dtype)
        for log in (False, True):
            family = "log_softmax" if log else "softmax"
            y = softmax_ops.softmax_forward(x, log)
            ref = torch.empty(M, N, dtype=torch.float32, device=dev)
            for s in range(0, M, 512):
                yd, g = y[s : s + 512].double(), dy[s : s + 512].double()
                if log:
                    ref[s : s + 512] = (g - yd.exp() * g.sum(-1, keepdim=True)).float()
                else:
                    ref[s : s + 512] = (yd * (g - (g * yd).sum(-1, keepdim=True))).float()
                del yd, g
            timed = []
            for name in names:
                row = {"shape": f"M={M} N={N}", "dtype": dt, "family": family, "contender": name}
                if name in ("chunked", "default"):
                    if name == "chunked":

                        def run(dy=dy, y=y, log=log):
                            softmax_ops._bwd_split_plan = lambda *a: None
                            try:
                                return softmax_ops._softmax_bwd(dy, y, log)
                            finally:
                                softmax_ops._bwd_split_plan = real_plan
                    else:
                        plan = real_plan(M, N, y.element_size(), y.device)
                        row["plan"] = (f"{plan.block}/{plan.num_warps} x{plan.programs} "
                                       f"p={plan.prefetch}" if plan else "chunked")  # fmt: skip

                        def run(dy=dy, y=y, log=log):
                            return softmax_ops._softmax_bwd(dy, y, log)
                else:
                    plan = contender_plan(name, M, N, dev, shrink)
                    if plan is None or plan.chunks_pow2 > 64:
                        continue

                    def run(dy=dy, y=y, log=log, plan=plan):
                        dx = torch.empty_like(y)
                        softmax_ops.split_softmax_backward(dy, y, dx, log, plan)
                        return dx

                try:
                    torch.full_like(x, float("nan"))  # a freed NaN block for the output
                    out = run()
                    err = rel_err(out, ref)
                    del out
                    passes = [do_bench(run, return_mode="median")]
                except Exception as exc:  # recorded, the sweep goes on
                    row["error"] = repr(exc)[:300]
                    rows_out.append(row)
                    lines.append(f"{dt} M={M} N={N} {family} {name}: ERROR {exc!r}"[:200])
                    continue
                row.update(rel_err=err, verified=err == err and err <= 1e-2)
                rows_out.append(row)
                timed.append((row, run, passes, 3 * M * N * x.element_size()))
            prefix = f"{dt:4s} M={M:<5d} N={N:<7d} {family:11s}"
            report_shape(timed, args.repeat, do_bench, copy, lines, prefix)
            del ref, y
            write()
        del x, dy
    report_kernel_usage(softmax_bwd_flags_kernel, lines, rows_out)
    write()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
