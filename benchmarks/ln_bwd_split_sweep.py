"""LayerNorm backward alone (no autograd, no baselines): the shipped launch against split-row
launches (``layer_norm_bwd_split_kernel``) and lagged split launches (``layer_norm_bwd_lag_kernel``,
dx written LAG rows late) of several chunk widths, warps and programs per SM.

Every contender is checked against a float64 reference first (dx, dweight, dbias), then timed
with ``triton.testing.do_bench`` (median). Bytes counted: x and dy read, dx written. A copy of
1 GiB measures the device-to-device ceiling in the same run.

    PYTHONPATH=src python benchmarks/ln_bwd_split_sweep.py --out FILE.json
    PYTHONPATH=src python benchmarks/ln_bwd_split_sweep.py --out FILE.json --smoke  # interpreter

    PYTHONPATH=src python benchmarks/ln_bwd_split_sweep.py --out FILE.json --held  # held kernel

    PYTHONPATH=src python benchmarks/ln_bwd_split_sweep.py --out FILE.json --pairs  # pairs kernel

    PYTHONPATH=src python benchmarks/ln_bwd_split_sweep.py --out FILE.json --pairs --lag-l2

Writes FILE.json after every case (a cut-off run keeps what it measured). ``--held`` times
``layer_norm_bwd_held_kernel`` launches (block, warps, programs an SM, rows a group, hold,
prefetch) against the default lagged launch of each dtype, at 4096 x 16384 only. ``--pairs``
times ``layer_norm_bwd_pairs_kernel`` launches (block, warps, programs an SM, weight held,
evict-first re-read) against the default launch and the former held default, bfloat16 only
(``ln16k2-sweep1-2026-11-25-h100.json``, one step an iteration; ``ln16k2-sweep2-...``, the
contenders below). The committed runs:
``benchmarks/results/lnbwd-sweep-2026-11-24-h100.json`` and ``lnbwd-sweep2-2026-11-24-h100.json``
(``--held``: ``ln16k-sweep1-2026-11-25-h100.json``, whose prefetch launches were wrong, and
``ln16k-sweep2-2026-11-25-h100.json``);
``--pairs --lag-l2`` times the pairs kernel's lag 2 and L2 prefetch options (``BF16_PAIRS_LAG``)
with the default launch timed first and again last (``ln16k3-sweep1-2026-11-25-h100.json``);
``--pairs --words`` its poll and L1 options (``BF16_PAIRS_WORDS``, ``ln16k3-sweep2-...``);
``--pairs --wide`` its chunks of 512-2048 columns on more warps (``BF16_PAIRS_WIDE``), at
4096 x 16384 and 4096 x 32768.
The second also timed two kernel variants since removed (the next row's sums published before
this row's wait, with x and dy of both rows held; a ``nanosleep`` between counter polls), which
were no faster than the prefetch.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

SMOKE = "--smoke" in sys.argv
if SMOKE:  # before triton is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")

import torch  # noqa: E402 (after the environment is set)

# (block, num_warps, programs_per_sm, prefetch) of the split contenders: the shipped launch of
# each element size (the full sweeps of these are lnbwd-sweep*-2026-11-24-h100.json)
WIDE_SPLITS = [(2048, 4, 4, True), (2048, 4, 4, False)]
NARROW_SPLITS = [(2048, 4, 4, True)]
# (block, num_warps, programs_per_sm, lag, rows a group) of layer_norm_bwd_lag_kernel
# contenders; the sm_90 compile (ptxas under each launch's register cap) spills at most 8 bytes
# of these in bf16; in fp32 the one-row launches with a lag and 16 elements a thread, or a
# 64-register cap, spill 16-56 bytes
WIDE_LAGS = [
    (2048, 4, 4, 0, 1), (2048, 4, 4, 1, 1), (2048, 4, 4, 2, 1), (2048, 8, 2, 1, 1),
    (1024, 4, 4, 1, 1), (1024, 4, 8, 1, 1), (1024, 4, 8, 2, 1), (2048, 8, 4, 1, 1),
    (512, 2, 16, 1, 1), (4096, 16, 2, 1, 1), (4096, 8, 2, 1, 1), (1024, 4, 4, 1, 2),
    (2048, 8, 2, 1, 2), (1024, 4, 8, 0, 1),
]  # fmt: skip
NARROW_LAGS = [(2048, 4, 4, 1, 1), (2048, 8, 2, 1, 1), (1024, 4, 8, 1, 1), (1024, 4, 4, 1, 1),
               (2048, 8, 4, 1, 1), (4096, 16, 2, 1, 1), (1024, 4, 4, 1, 2)]  # fmt: skip
# the best lagged launches of the first sweep (lnbwd-lag-sweep-2026-11-24-h100.json)
# (lnbwd-lag-sweep2-2026-11-24-h100.json also timed layer_norm_bwd_staged_kernel, the lagged
# split in blocks of rows pipelined through shared memory, since removed: commit c73cc7c;
# lnbwd-lag-sweep3 also 256-column chunks of 1 warp, 32 an SM, refused since: 64 chunks a row)
WIDE_LAGS_2 = [(512, 2, 16, 1, 1), (1024, 4, 4, 1, 2), (2048, 8, 2, 1, 2), (512, 2, 16, 2, 1)]
NARROW_LAGS_2 = [(4096, 16, 2, 1, 1), (1024, 4, 4, 1, 2), (512, 2, 16, 1, 1)]
CASES = [
    (torch.bfloat16, 4096, 16384, WIDE_SPLITS, WIDE_LAGS_2),
    (torch.float32, 4096, 16384, WIDE_SPLITS, WIDE_LAGS_2),
    (torch.bfloat16, 16384, 4096, NARROW_SPLITS, NARROW_LAGS_2),
    (torch.float32, 16384, 4096, NARROW_SPLITS, NARROW_LAGS_2),
]
if "--first" in sys.argv:  # the first sweep's contenders (lnbwd-lag-sweep-2026-11-24-h100.json)
    CASES = [
        (torch.bfloat16, 4096, 16384, WIDE_SPLITS, WIDE_LAGS),
        (torch.float32, 4096, 16384, WIDE_SPLITS, WIDE_LAGS),
        (torch.bfloat16, 16384, 4096, NARROW_SPLITS, NARROW_LAGS),
        (torch.float32, 16384, 4096, NARROW_SPLITS, NARROW_LAGS),
    ]
# (block, num_warps, programs_per_sm, rows a group, hold, prefetch) of layer_norm_bwd_held_kernel
# contenders (sm_90 ptxas through the CPU's Triton: registers, spills in bytes, loop instructions
# an element a thread; the lagged kernel's default launch: bf16 64 regs, 56 an element)
BF16_HELDS = [
    (512, 2, 12, 1, True, True),  # 80 regs, 48 B spilled, 39.2
    (512, 2, 10, 1, True, True),  # 96 regs, 38.1
    (512, 2, 10, 1, False, True),  # 92 regs, 47.6
    (1024, 4, 6, 1, False, True),  # 80 regs, 47.5
    (2048, 4, 4, 1, False, True),  # 128 regs, 35.2
    (1024, 4, 4, 2, False, True),  # 126 regs, 40.6
    (512, 2, 12, 1, True, False),  # 80 regs, 8 B spilled, 38.2
]
FP32_HELDS = [
    (1024, 4, 4, 1, True, True),  # 110 regs, 34.6
    (1024, 4, 4, 1, True, False),  # 96 regs, 32.1
    (2048, 8, 2, 1, True, True),  # 108 regs, 34.5
]
# the first --held sweep (ln16k-sweep1-2026-11-25-h100.json, where every prefetch launch had
# phase B on group 0's statistics: a loop-carried name Triton's frontend did not carry, since
# fixed) also timed (512, 2, 8|16, 1, *), (1024, 4, 4|8, 1|2, True, False), (1024, 2, 8, 1, ...)
# and the float32 launches (1024, 4, 4|6, 1|2, True, False), (512, 2, 8, 1|2, ...)
LAG_REFERENCES = {torch.bfloat16: [(512, 2, 16, 1, 1)], torch.float32: []}
"""(block, num_warps, programs_per_sm, lag, rows) of lagged launches timed beside the held ones:
the lagged kernel's former bf16 default."""
HELD_CASES = [(torch.bfloat16, 4096, 16384, BF16_HELDS), (torch.float32, 4096, 16384, FP32_HELDS)]
# (block, num_warps, programs_per_sm, options of _layer_norm_pairs_backward) of
# layer_norm_bwd_pairs_kernel contenders (sm_90 ptxas of Triton 3.6: registers, spilled bytes,
# loop instructions a pipeline step a thread; the held kernel's former default 512/2w/x12: 80
# regs, 385). The first --pairs sweep (ln16k2-sweep1-2026-11-25-h100.json, one step an
# iteration, dx from a re-read) timed 512/2w/x12 with and without the weight held or an
# evict-first re-read, 512/2w/x10 and x16, 1024/2w/x8 and 256/1w/x24 and x32: 160.4-174.8 us.
BF16_PAIRS = [
    (256, 1, 32, {"hold_weight": True, "unroll": 3}),  # 64 regs, 8 B spilled, 249
    (256, 1, 32, {"hold_weight": True, "unroll": 1}),  # 64 regs, 8 B spilled, 268 (sweep1)
    (256, 1, 32, {"hold_weight": True, "evict_first": True, "unroll": 3}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3}),  # 72 regs, 247
    (256, 1, 24, {"hold_weight": True, "unroll": 3}),  # 79 regs, 252 (sweep2: 309.8 us, once)
    (256, 1, 24, {"hold_weight": True, "hold_rows": True, "unroll": 1}),  # 80 regs, 274
    (256, 1, 24, {"hold_weight": True, "hold_rows": True, "unroll": 3}),  # 80, 56 B spilled, 240
    (256, 1, 20, {"hold_weight": True, "hold_rows": True, "unroll": 3}),  # 96 regs, 228
    (512, 2, 10, {"hold_weight": True, "hold_rows": True, "unroll": 1}),  # 96 regs, 281
    (512, 2, 12, {"hold_weight": True, "unroll": 3}),  # 80 regs, 259
]
# lag 2 (dx written two steps after the row's sums are published) and L2 prefetch (each step asks
# L2 for the row l2_ahead rows past its register prefetch); sm_90 ptxas of Triton 3.6, all at
# their register cap: 256/1w x28 72 registers, no spill, main loop 780 instructions a 3-step
# iteration at the default, 807 lag 2, 827 l2_ahead 1, 872 both; 512/2w x12 l2_ahead 1 80
# registers, 8 bytes spilled (x32 with l2_ahead spills 24 bytes, not timed)
BF16_PAIRS_LAG = [
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "lag": 2}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "l2_ahead": 1}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "l2_ahead": 2}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "lag": 2, "l2_ahead": 1}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "lag": 2, "l2_ahead": 2}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "evict_first": True, "l2_ahead": 1}),
    (512, 2, 12, {"hold_weight": True, "unroll": 3, "l2_ahead": 1}),
]
# ln16k3-sweep1: lag 2 slower at every l2_ahead (177.8-200.0 us against 156.6-158.7 for the
# default), l2_ahead 1 neutral (158.8-159.7), l2_ahead 2 slower (219.2). ncu of the default
# (ln16k3-ncu1-...): 70% of stall samples in the words' poll, L2 84% busy, the poll 55% of the
# L2 sectors, half of them excessive (two 8-byte loads a lane, split by the mask by chunks).
# --words: the poll in one 16-byte load a lane (full_words, the new default) against the old
# poll, and evict-last first reads for the re-read (keep_rows)
BF16_PAIRS_WORDS = [
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "full_words": False}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "keep_rows": True}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "keep_rows": True, "evict_first": True}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "l2_ahead": 1}),
    (256, 1, 32, {"hold_weight": True, "unroll": 3}),
    (512, 2, 12, {"hold_weight": True, "unroll": 3}),
]
# --wide: wider chunks of more warps at the default's 8 columns a thread and 28 warps an SM (or
# 32), so a row meets fewer programs (the H200's split softmax backward ran 15% faster at half
# the programs a row); at 4096 x 16384 and at 4096 x 32768 (the flag-word kernel's rows before
# session40-h200-2026-12-01/lnbwd-pairs-wide-call6.txt, the wide pairs launch's on the H200 since)
BF16_PAIRS_WIDE = [
    (256, 1, 28, {"hold_weight": True, "unroll": 3}),
    (512, 2, 14, {"hold_weight": True, "unroll": 3}),
    (1024, 4, 7, {"hold_weight": True, "unroll": 3}),
    (1024, 4, 8, {"hold_weight": True, "unroll": 3}),
    (2048, 8, 3, {"hold_weight": True, "unroll": 3}),
    (2048, 8, 4, {"hold_weight": True, "unroll": 3}),
]
PAIRS_REFERENCES = [(512, 2, 12, 1, False, True)]
"""The held kernel's former default launch, timed beside the pairs launches."""
SMOKE_PAIRS = [
    (
        torch.float16,
        5,
        300,
        [
            (128, 4, 1, {"hold_weight": True}),
            (64, 4, 1, {"evict_first": True, "unroll": 1}),
            (64, 4, 1, {"lag": 2, "l2_ahead": 1}),
        ],
    )
]
SMOKE_HELD_CASES = [(torch.float32, 5, 300, [(128, 4, 1, 1, True, True), (64, 4, 1, 2, False, True),
                                             (128, 4, 1, 2, True, False)])]  # fmt: skip
SMOKE_CASES = [(torch.float32, 5, 300, [(128, 4, 1, False), (64, 4, 1, True)],
                [(128, 4, 1, 1, 1), (64, 4, 1, 0, 1), (128, 4, 1, 2, 2)])]  # fmt: skip


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want).norm() / want.norm().clamp_min(1e-30)).item()


def _reference(x, w, dy):
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    b64 = torch.zeros_like(w64, requires_grad=True)
    y = torch.nn.functional.layer_norm(x64, (x.shape[-1],), w64, b64, 1e-5)
    return torch.autograd.grad(y, (x64, w64, b64), dy.double())


def _copy_ceiling(device) -> float:
    import triton.testing

    src = torch.empty(2**28, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * src.numel() * 4 / (ms * 1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes")
    parser.add_argument("--first", action="store_true", help="the first sweep's contenders")
    parser.add_argument("--held", action="store_true", help="layer_norm_bwd_held_kernel launches")
    parser.add_argument("--pairs", action="store_true", help="layer_norm_bwd_pairs_kernel launches")
    parser.add_argument("--lag-l2", action="store_true", help="with --pairs: BF16_PAIRS_LAG")
    parser.add_argument("--words", action="store_true", help="with --pairs: BF16_PAIRS_WORDS")
    parser.add_argument("--wide", action="store_true", help="with --pairs: BF16_PAIRS_WIDE")
    args = parser.parse_args()

    from warpforge.ops import norm
    from warpforge.ops._split_rows import split_row_plan

    device = torch.device("cpu" if args.smoke else "cuda")
    report: dict = {"device": "interpreter" if args.smoke else torch.cuda.get_device_name(),
                    "cases": []}  # fmt: skip
    if not args.smoke:
        import triton

        report["triton"] = triton.__version__
        report["copy_ceiling_bytes_per_s"] = _copy_ceiling(device)
        from warpforge.environment import environment_fingerprint

        report["environment"] = environment_fingerprint()
    if args.pairs:
        chosen = BF16_PAIRS_LAG if args.lag_l2 else BF16_PAIRS_WORDS if args.words else BF16_PAIRS
        args.lag_l2 = args.lag_l2 or args.words  # the same references: the default, twice
        pairs_cases = SMOKE_PAIRS if args.smoke else [(torch.bfloat16, 4096, 16384, chosen)]
        if args.wide and not args.smoke:
            pairs_cases = [(torch.bfloat16, 4096, n, BF16_PAIRS_WIDE) for n in (16384, 32768)]
        cases = [(dtype, M, N, [], [] if args.lag_l2 else LAG_REFERENCES.get(dtype, []),
                  [] if args.smoke or args.lag_l2 else PAIRS_REFERENCES, pairs)
                 for dtype, M, N, pairs in pairs_cases]  # fmt: skip
    elif args.held:
        held_cases = SMOKE_HELD_CASES if args.smoke else HELD_CASES
        cases = [(dtype, M, N, [], LAG_REFERENCES.get(dtype, []), helds, [])
                 for dtype, M, N, helds in held_cases]  # fmt: skip
    else:
        cases = [(*case, [], []) for case in (SMOKE_CASES if args.smoke else CASES)]
    for dtype, M, N, splits, lags, helds, pairs in cases:
        torch.manual_seed(M + N)
        x = (torch.randn(M, N, device=device) * 3 + 2).to(dtype)
        dy = torch.randn(M, N, device=device).to(dtype)
        w = torch.randn(N, device=device).to(dtype)
        xf = x.float()
        mean = xf.mean(-1)
        rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
        want = _reference(x, w, dy)
        contenders = {}
        launches: dict = {}  # pairs contenders' launch, recorded in their rows
        if args.held or args.pairs:  # the default launch
            plan, lag, rows, hold = norm._default_split(M, N, x.element_size(), device)
            kernel = "lag" if hold is None else ("held hold" if hold else "held reread")
            name = (f"default {kernel} lag{lag} b{plan.block} w{plan.num_warps} r{rows}"
                    f"{' prefetch' if plan.prefetch else ''}" if plan else "default")  # fmt: skip
            pairs_plan = norm._default_pairs_plan(M, N, x.element_size(), device)
            if pairs_plan is not None:
                name = (f"default pairs b{pairs_plan.block} w{pairs_plan.num_warps} "
                        f"x{norm.layer_norm_bwd_pairs_launch(2)['programs_per_sm']} "
                        f"{norm.LAYER_NORM_BWD_PAIRS}")  # fmt: skip
            contenders[name] = functools.partial(
                norm.layer_norm_backward, dy, x, w, mean, rstd, True, True
            )
        else:
            contenders["shipped"] = functools.partial(
                norm._norm_backward, dy, x, w, mean, rstd, None, 0.0, True, True, True)  # fmt: skip
        for block, warps, pps, prefetch in splits:
            plan = split_row_plan(M, N, device, block=block, num_warps=warps,
                                  programs_per_sm=pps, prefetch=prefetch)  # fmt: skip
            if plan is None:
                continue
            name = f"split b{block} w{warps} x{pps}{' prefetch' if prefetch else ''}"
            contenders[name] = functools.partial(
                norm.layer_norm_backward, dy, x, w, mean, rstd, True, True, split=plan
            )
        for block, warps, pps, lag, rows in lags:
            plan = split_row_plan(M, N, device, block=block, num_warps=warps,
                                  programs_per_sm=pps)  # fmt: skip
            if plan is None:
                continue
            contenders[f"lag{lag} b{block} w{warps} x{pps} r{rows}"] = functools.partial(
                norm.layer_norm_backward, dy, x, w, mean, rstd, True, True, split=plan, lag=lag,
                lag_rows=rows,
            )  # fmt: skip
        for block, warps, pps, rows, hold, prefetch in helds:
            plan = split_row_plan(M, N, device, block=block, num_warps=warps,
                                  programs_per_sm=pps, prefetch=prefetch)  # fmt: skip
            if plan is None:
                continue
            name = (f"held b{block} w{warps} x{pps} r{rows}{' hold' if hold else ' reread'}"
                    f"{' prefetch' if prefetch else ''}")  # fmt: skip
            contenders[name] = functools.partial(
                norm.layer_norm_backward, dy, x, w, mean, rstd, True, True, split=plan, lag=1,
                lag_rows=rows, hold=hold,
            )  # fmt: skip
        for block, warps, pps, options in pairs:
            plan = split_row_plan(M, N, device, block=block, num_warps=warps,
                                  programs_per_sm=pps, prefetch=True)  # fmt: skip
            if plan is None or plan.chunks > norm.LAYER_NORM_BWD_PAIRS_MAX_CHUNKS:
                continue
            flags = [k for k in ("hold_weight", "hold_rows", "evict_first", "keep_rows")
                     if options.get(k)]  # fmt: skip
            flags += ["8-byte-poll"] if options.get("full_words") is False else []
            flags += [f"{k}{options[k]}" for k in ("lag", "l2_ahead") if k in options]
            name = (f"pairs b{block} w{warps} x{pps} u{options.get('unroll', 3)}"
                    f" {' '.join(flags)}").rstrip()  # fmt: skip
            contenders[name] = functools.partial(
                norm.layer_norm_backward, dy, x, w, mean, rstd, True, True, split=plan, lag=1,
                hold=False, pairs=options,
            )  # fmt: skip
            launches[name] = {"block": block, "num_warps": warps, "programs_per_sm": pps,
                              "options": options}  # fmt: skip
        if args.lag_l2 and not args.smoke:  # the first contender timed once more, last
            first = next(iter(contenders))
            contenders[f"{first} (again)"] = contenders[first]
        case = {"dtype": str(dtype).removeprefix("torch."), "M": M, "N": N, "rows": []}
        bytes_moved = 3 * M * N * x.element_size()
        for name, fn in contenders.items():
            row: dict = {"contender": name}
            if name in launches:
                row["launch"] = launches[name]
            try:
                got = fn()
                row["errors"] = [_relative_error(g, e) for g, e in zip(got, want, strict=True)]
                limit = 1e-4 if dtype == torch.float32 else 2e-2
                row["correct"] = all(err < limit for err in row["errors"])
                if row["correct"] and not args.smoke:
                    import triton.testing

                    ms = triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")
                    row["us"] = ms * 1e3
                    row["bytes_per_s"] = bytes_moved / (ms * 1e-3)
            except Exception as exc:  # a contender that fails to compile is reported, not fatal
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            case["rows"].append(row)
            print(json.dumps({"case": f"{case['dtype']} {M}x{N}", **row}), flush=True)
        report["cases"].append(case)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    ceiling = report.get("copy_ceiling_bytes_per_s")
    print(f"\ncopy ceiling {ceiling / 1e12:.2f} TB/s" if ceiling else "")
    for case in report["cases"]:
        for row in case["rows"]:
            us = row.get("us")
            share = f"{row['bytes_per_s'] / ceiling:6.1%}" if us and ceiling else ""
            print(f"{case['dtype']:8} {case['M']:>5}x{case['N']:<5} {row['contender']:42} "
                  f"{'ok ' if row.get('correct') else 'BAD'} "
                  f"{us if us else float('nan'):8.1f} us {share}")  # fmt: skip


if __name__ == "__main__":
    start = time.time()
    main()
    print(f"swept in {time.time() - start:.0f} s")
