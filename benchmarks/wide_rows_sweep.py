"""The whole-row kernels (``warpforge.ops._kernels.wide_rows``) at candidate launches against
the path they would replace (``WARPFORGE_WIDE_ROWS=0``: the split or chunked kernel) and, where
installed, Liger-Kernel's kernels, kernel alone.

    PYTHONPATH=src python benchmarks/wide_rows_sweep.py OUT_PREFIX         # GPU: OUT_PREFIX.txt/.json
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py widths OUT_PREFIX  # the tables' launches
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py long OUT_PREFIX    # 32769-65536 columns
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py softmax OUT_PREFIX # the looped softmax
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py softmax-widths OUT_PREFIX  # its widths
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py softmax-long OUT_PREFIX    # 32769-65536
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py registers OUT_PREFIX  # maxnreg caps
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py register-widths OUT_PREFIX  # their widths
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py register-rows OUT_PREFIX  # row counts
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py whole-row-caps OUT_PREFIX  # whole rows
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py softmax-bwd-widths OUT_PREFIX
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py softmax-long-caps OUT_PREFIX
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py short-softmax OUT_PREFIX  # <= 16384
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py longest-caps OUT_PREFIX  # > 65536
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py short-ln-caps OUT_PREFIX  # <= 16384
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce OUT_PREFIX      # looped CE with grad
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-fwd OUT_PREFIX  # looped CE loss only
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-fwd-unaligned OUT_PREFIX  # vocab 50257
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-split-unaligned OUT_PREFIX  # with grad
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-small OUT_PREFIX  # smaller chunks
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-registers OUT_PREFIX  # maxnreg
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-fwd-registers OUT_PREFIX  # one wave
    PYTHONPATH=src python benchmarks/wide_rows_sweep.py ce-fwd-caps OUT_PREFIX  # maxnreg

CUDA-event medians of ``triton.testing.do_bench`` (L2 flushed between runs); fraction of copy
= bytes read once and written once against ``copy_`` of the same tensor in the same run; each
candidate's output checked against the current path's (max |difference|).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import torch

from warpforge.ops import norm, softmax_ops
from warpforge.ops._rows import cdiv
from warpforge.ops._wide_rows import MAX_UNROLLED_CHUNKS, WIDE_ROWS, WideLaunch

W = WideLaunch
NORM_BF16 = {
    "32w": W(32), "32w early": W(32, early_w=True), "32w early stream": W(32, True, True),
    "32w stream": W(32, stream=True), "16w": W(16), "16w early": W(16, early_w=True),
}  # fmt: skip
NORM_FP32 = {"32w": W(32), "32w early": W(32, early_w=True), "32w stream": W(32, stream=True),
             "16w": W(16)}  # fmt: skip
NORM_ODD = {"32w": W(32), "32w early": W(32, early_w=True), "16w": W(16)}
SM_BF16 = {"32w": W(32), "32w stream": W(32, stream=True), "16w": W(16)}
SM_FP32 = SM_BF16
SM_ODD = {"32w": W(32), "16w": W(16)}
BWD = {"32w": W(32), "32w stream": W(32, stream=True), "16w": W(16)}
NARROW = {"32w": W(32), "16w": W(16)}

SHAPES = [  # (dtype, M, N, norm candidates, softmax candidates, backward candidates, liger)
    (torch.bfloat16, 4096, 32768, NORM_BF16, SM_BF16, BWD, True),
    (torch.float32, 4096, 32768, NORM_FP32, SM_FP32, BWD, False),
    (torch.bfloat16, 4096, 24577, NORM_ODD, SM_ODD, {}, False),
    (torch.bfloat16, 4096, 16384, NARROW, NARROW, {}, False),
    (torch.bfloat16, 4096, 20000, NORM_ODD, SM_ODD, {}, False),
]
OPS = {"rms": (False, False), "add_rms": (False, True), "layer": (True, False)}


def unrolls(launch, N: int) -> bool:
    """Whether ``launch`` takes rows of N columns: not an unrolled looped launch, or one with at
    most ``MAX_UNROLLED_CHUNKS`` chunks a row (``row_blocks`` refuses more)."""
    if not getattr(launch, "unrolled", False):
        return True
    return cdiv(N, launch.chunk) <= MAX_UNROLLED_CHUNKS


def current(fn):
    """``fn`` on the path the whole-row kernels replace."""

    def run():
        os.environ[WIDE_ROWS] = "0"
        try:
            return fn()
        finally:
            del os.environ[WIDE_ROWS]

    return run


def liger(op):
    try:
        if op == "rms":
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction as f

            return lambda x, r, w, b: f.apply(x, w, 1e-6, 0.0, "llama", False)
        if op == "add_rms":
            from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction as f

            return lambda x, r, w, b: f.apply(x, r, w, 1e-6, 0.0, "llama", False)
        if op == "layer":
            from liger_kernel.ops.layer_norm import LigerLayerNormFunction as f

            return lambda x, r, w, b: f.apply(x, w, b, 1e-6)
        if op in ("softmax", "log_softmax"):
            from liger_kernel.ops.softmax import LigerSoftmaxFunction as f

            return None if op == "log_softmax" else lambda x: f.apply(x)
        if op == "softmax.bwd":
            from liger_kernel.ops.softmax import _softmax_backward
            from liger_kernel.ops.utils import calculate_settings

            # Liger's own (block, warps) for the row, as its autograd function passes them
            return lambda dy, y: _softmax_backward(dy, y, *calculate_settings(y.shape[-1]), False)
    except ImportError:
        return None
    return None


def _time(label, fn, ref, moved, copy_bps, lines, rows, meta):
    import triton.testing

    try:
        got = fn()
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        err = max((g.float() - e.float()).abs().nan_to_num(0.0).max().item()
                  for g, e in zip(got, ref, strict=False) if g.numel() and g.shape == e.shape)  # fmt: skip
        del got
        ms = triton.testing.do_bench(fn, warmup=10, rep=40)
    except Exception as exc:  # a launch that fails to compile or run: report, go on
        line = f"{meta['dtype']} {meta['M']}x{meta['N']} {meta['op']:11s} {label:18s} FAILED {type(exc).__name__}: {exc}"[
            :300
        ]
        print(line, flush=True)
        lines.append(line)
        return
    frac = (moved / (ms * 1e-3)) / copy_bps
    line = (f"{meta['dtype']} {meta['M']}x{meta['N']} {meta['op']:11s} {label:18s} "
            f"{ms * 1e3:8.1f} us {frac * 100:5.1f}% of copy, max|diff| {err:.3g}")  # fmt: skip
    print(line, flush=True)
    lines.append(line)
    rows.append(dict(meta, launch=label, us=ms * 1e3, fraction_of_copy=frac,
                     copy_tbps=copy_bps / 1e12, max_abs_diff_vs_current=err))  # fmt: skip


def sweep_shape(dtype, M, N, norms, sms, bwds, with_liger, lines, rows) -> None:
    import triton.testing

    x = torch.randn(M, N, device="cuda", dtype=dtype)
    r = torch.randn(M, N, device="cuda", dtype=dtype)
    w = torch.randn(N, device="cuda", dtype=dtype)
    b = torch.randn(N, device="cuda", dtype=dtype)
    copy_ms = triton.testing.do_bench(lambda: r.copy_(x), warmup=10, rep=40)
    nbytes = x.numel() * x.element_size()
    copy_bps = 2 * nbytes / (copy_ms * 1e-3)
    dt = str(dtype)[6:]
    lines.append(f"{dt} {M}x{N} copy {copy_ms * 1e3:.1f} us = {copy_bps / 1e12:.3f} TB/s")
    with torch.no_grad():
        for op, (center, residual) in OPS.items() if norms is not None else ():
            meta = dict(dtype=dt, M=M, N=N, op=op)
            rr, bb = (r if residual else None), (b if center else None)
            moved = nbytes * (4 if residual else 2)
            base = current(lambda c=center, rr=rr, bb=bb: norm._forward(x, w, bb, rr, 1e-6, 0.0, c))
            ref = base()
            _time("current", base, ref, moved, copy_bps, lines, rows, meta)
            if with_liger and (fn := liger(op)) is not None:
                _time("liger", lambda fn=fn: fn(x, r, w, b), ref[:2], moved, copy_bps, lines,
                      rows, meta)  # fmt: skip
            per_op = norms.get(op, {}) if any(k in OPS for k in norms) else norms
            for label, launch in per_op.items():
                _time(label, lambda c=center, rr=rr, bb=bb, la=launch: norm.wide_norm_forward(
                    x, w, bb, rr, 1e-6, 0.0, c, la), ref, moved, copy_bps, lines, rows, meta)  # fmt: skip
            del ref
        for log in (False, True):
            op = "log_softmax" if log else "softmax"
            meta = dict(dtype=dt, M=M, N=N, op=op)
            base = current(lambda log=log: softmax_ops._softmax_fwd(x, log))
            ref = base()
            _time("current", base, ref, 2 * nbytes, copy_bps, lines, rows, meta)
            if with_liger and (fn := liger(op)) is not None:
                _time("liger", lambda fn=fn: fn(x), ref, 2 * nbytes, copy_bps, lines, rows, meta)
            for label, launch in sms.items():
                _time(label, lambda log=log, la=launch: softmax_ops.wide_softmax_forward(
                    x, log, la), ref, 2 * nbytes, copy_bps, lines, rows, meta)  # fmt: skip
            if bwds:
                y, dy = ref, r
                meta = dict(dtype=dt, M=M, N=N, op=op + ".bwd")
                base = current(lambda log=log, y=y, dy=dy: softmax_ops._softmax_bwd(dy, y, log))
                dref = base()
                _time("current", base, dref, 3 * nbytes, copy_bps, lines, rows, meta)
                if with_liger and not log and (fn := liger("softmax.bwd")) is not None:
                    _time("liger", lambda fn=fn, y=y, dy=dy: fn(dy, y), dref, 3 * nbytes, copy_bps,
                          lines, rows, meta)  # fmt: skip
                for label, launch in bwds.items():
                    _time(label, lambda log=log, la=launch, y=y, dy=dy: softmax_ops.wide_softmax_backward(
                        dy, y, torch.empty_like(y), log, la), dref, 3 * nbytes, copy_bps, lines,
                        rows, meta)  # fmt: skip
            del ref


WIDTHS = [(torch.bfloat16, 4096, 20000), (torch.bfloat16, 4096, 24576),
          (torch.bfloat16, 4096, 28672), (torch.bfloat16, 4096, 24577),
          (torch.float32, 4096, 20000), (torch.float32, 4096, 24576)]  # fmt: skip
"""``widths``: rows between 16384 and 32768 columns (24577: rows not 16-byte aligned)."""

LONG_WIDTHS = [(torch.bfloat16, 8192, N) for N in (40961, 49152, 57344, 65536)]
"""``long``: rows between 32768 and 65536 columns (40961: rows not 16-byte aligned)."""


def _table_launches(launches: dict, size: int) -> dict[str, dict[str, WideLaunch]]:
    """{op: {"table": launch}} of a shipped norm forward table for one element size, each
    launch's ``min_n`` lifted."""
    table = {}
    for op, kernel in (("rms", "rms_norm.fwd"), ("add_rms", "add_rms_norm.fwd"),
                       ("layer", "layer_norm.fwd")):  # fmt: skip
        if (la := launches.get((size, kernel))) is not None:
            table[op] = {"table": dataclasses.replace(la, min_n=0)}
    return table


def widths(prefix: str) -> None:
    """The tables' launches (ignoring their ``min_n``) against the current path at ``WIDTHS``,
    to set each launch's ``min_n``; bf16 RMSNorm also with 32w early, bf16 LayerNorm also with
    the whole-row kernel (16w), the launch its looped one replaced."""
    shapes = []
    for dtype, M, N in WIDTHS:
        size = dtype.itemsize
        table = _table_launches(norm.NORM_FWD_WIDE_LAUNCHES, size)
        if size == 2:
            table.setdefault("rms", {})["32w early"] = W(32, early_w=True)
            table.setdefault("layer", {})["16w whole-row"] = W(16)
        fwd = softmax_ops.FWD_WIDE_LAUNCHES.get(size)
        bwd = softmax_ops.BWD_WIDE_LAUNCHES.get(size)
        shapes.append((dtype, M, N, table, {"table": fwd} if fwd else {},
                       {"table": bwd} if bwd else {}, False))  # fmt: skip
    run(prefix, shapes)


def long_widths(prefix: str) -> None:
    """``NORM_FWD_LONG_LAUNCHES`` against the current path (the split kernel) at
    ``LONG_WIDTHS``, and add+RMSNorm, which the table leaves out, at the same looped launch."""
    shapes = []
    for dtype, M, N in LONG_WIDTHS:
        table = _table_launches(norm.NORM_FWD_LONG_LAUNCHES, dtype.itemsize)
        table["add_rms"] = {
            f"32w 8192{' forwards' * forwards}": W(32, chunk=8192, forwards=forwards, unrolled=True)
            for forwards in (False, True)
        }
        shapes.append((dtype, M, N, table, {}, {}, False))
    run(prefix, shapes)


SOFTMAX_SHAPES = [(torch.bfloat16, 4096, 16384), (torch.bfloat16, 4096, 32768),
                  (torch.bfloat16, 8192, 65536), (torch.bfloat16, 8192, 131072),
                  (torch.float32, 4096, 16384), (torch.float32, 4096, 32768),
                  (torch.float32, 8192, 65536)]  # fmt: skip
"""``softmax``: the issue's sweep rows of 16384-131072 columns."""

SOFTMAX_LOOPED = {
    "2048c 8w": W(8, chunk=2048, unrolled=True),
    "4096c 8w": W(8, chunk=4096, unrolled=True),
    "4096c 16w": W(16, chunk=4096, unrolled=True),
    "4096c 16w fwd": W(16, chunk=4096, forwards=True, unrolled=True),
    "8192c 16w": W(16, chunk=8192, unrolled=True),
    "8192c 32w": W(32, chunk=8192, unrolled=True),
    "8192c 32w fwd": W(32, chunk=8192, forwards=True, unrolled=True),
}
"""``softmax``: the looped forward's launches, statistics pass unrolled (at most 32 chunks)."""


SOFTMAX_WIDTHS = [(torch.bfloat16, 4096, N) for N in (16384, 20000, 24576, 24577, 28672, 32768)]
SOFTMAX_WIDTHS.append((torch.bfloat16, 8192, 65536))
"""``softmax-widths``: bf16 rows from 16384 to 32768 columns (24577: no whole 16-byte
vectors) and the issue's 8192 x 65536."""

SOFTMAX_WIDTH_LAUNCHES = {
    k: SOFTMAX_LOOPED[k] for k in ("2048c 8w", "4096c 16w", "4096c 16w fwd", "8192c 16w",
                                   "8192c 32w fwd")
}  # fmt: skip
"""``softmax-widths``: the looped launches that won or came close at ``SOFTMAX_SHAPES``."""


def softmax_looped(prefix: str, shapes=SOFTMAX_SHAPES, launches=SOFTMAX_LOOPED, liger=True):
    """The looped softmax forward (``softmax_fwd_looped_kernel``) at ``launches``
    (``SOFTMAX_LOOPED``) against the split kernel, the whole-row kernel (rows of at most 32768
    columns) and Liger at ``shapes`` (``SOFTMAX_SHAPES``; no norms)."""
    runs = []
    for dtype, M, N in shapes:
        fits = {k: la for k, la in launches.items() if unrolls(la, N)}
        if N <= 32768:  # the current path with the whole-row kernels off is the split kernel
            fits["whole-row 32w"] = W(32)
        runs.append((dtype, M, N, None, fits, {}, liger))
    run(prefix, runs)


def softmax_long(prefix: str) -> None:
    """``FWD_LONG_LAUNCHES``' 2-byte launch (``min_n`` and ``aligned`` lifted) against the
    split kernel at ``LONG_WIDTHS``, without Liger."""
    table = {"table": dataclasses.replace(softmax_ops.FWD_LONG_LAUNCHES[2], min_n=0, aligned=False)}
    runs = [(dtype, M, N, None, table, {}, False) for dtype, M, N in LONG_WIDTHS]
    run(prefix, runs)


REGISTER_SHAPES = [(torch.bfloat16, 4096, 32768), (torch.bfloat16, 8192, 65536),
                   (torch.bfloat16, 4096, 16384)]  # fmt: skip
"""``registers``: the issue's bf16 rows the looped softmax and norm forwards take, and 4096 x
16384 (bf16 layer_norm.fwd's lowest row against torch.compile, which keeps the tiled kernel:
the looped launch lost there uncapped), on the 32768-column rows' launches."""

REGISTER_CAPS = {16: (48, 64, 96, 128), 32: (48, 56, 64)}
"""``registers``: num_warps -> the register caps tried (a 32-warp program holds at most 64
registers a thread, the register file over 1024 threads)."""


def _capped(launch: WideLaunch) -> dict[str, WideLaunch]:
    """{label: launch}: ``launch`` as shipped and at each of ``REGISTER_CAPS``' caps."""
    capped = {"shipped": launch}
    for cap in REGISTER_CAPS.get(launch.num_warps, ()):
        capped[f"shipped r{cap}"] = dataclasses.replace(launch, max_registers=cap)
    return capped


def registers(prefix: str) -> None:
    """The shipped looped launches of the softmax forward and of the RMSNorm and LayerNorm
    forwards at ``REGISTER_SHAPES``, as shipped (registers left to ptxas: 38-52 a thread on sm_90
    under Triton 3.9) and capped at ``REGISTER_CAPS`` (more loads in flight a thread, fewer
    programs an SM), as the cap of 64 sped up the looped cross-entropy forward with gradient
    (``session30-h200-2026-11-30/ce-registers-call11.txt``)."""
    runs = []
    for dtype, M, N in REGISTER_SHAPES:
        width = max(N, 32768)  # narrower rows on the 32768-column launches, min_n lifted
        norms = {}
        for op, tunable in (("rms", "rms_norm.fwd"), ("layer", "layer_norm.fwd")):
            launch = norm.norm_fwd_wide_launch(width, dtype.itemsize, tunable)
            if launch is not None and launch.chunk:
                norms[op] = _capped(dataclasses.replace(launch, min_n=0))
        launch = softmax_ops.softmax_fwd_wide_launch(width, dtype.itemsize)
        sms = _capped(dataclasses.replace(launch, min_n=0))
        runs.append((dtype, M, N, norms, sms, {}, False))
    run(prefix, runs)


REGISTER_WIDTHS = [(torch.bfloat16, 4096, N) for N in (20000, 24576, 24577, 28672, 32768)] + [
    (torch.bfloat16, 8192, N) for N in (40961, 49152, 57344, 65536)
]
"""``register-widths``: rows across the ranges of the looped forwards' launches that cap their
registers (24577 and 40961: rows of no whole 16-byte vectors)."""


def _capped_and_not(launch: WideLaunch | None) -> dict[str, WideLaunch]:
    """{"shipped": launch, "uncapped": launch without its register cap}, or {} where ``launch``
    is None or has no cap."""
    if launch is None or launch.max_registers is None:
        return {}
    return {"shipped": launch, "uncapped": dataclasses.replace(launch, max_registers=None)}


REGISTER_ROWS = [(dtype, M, N) for M in (132, 1056, 16384) for N in (24576, 49152)
                 for dtype in (torch.bfloat16, torch.float16)]  # fmt: skip
"""``register-rows``: the capped launches at other row counts (132 rows, one an SM of the H200;
1056, eight an SM; 16384, many waves) and in fp16, which takes the same 2-byte launches."""


def register_widths(prefix: str, shapes: list | None = None) -> None:
    """The looped softmax and norm forwards' shipped launches that cap their registers (since
    the thirty-first session, from ``registers`` at 32768 and 65536 columns) against the same
    launches uncapped, at ``shapes`` (``REGISTER_WIDTHS`` unless given): the cap must not lose
    at the narrower rows the launches also take."""
    runs = []
    for dtype, M, N in shapes or REGISTER_WIDTHS:
        size = dtype.itemsize
        norms = {}
        for op, tunable in (("rms", "rms_norm.fwd"), ("layer", "layer_norm.fwd")):
            if launches := _capped_and_not(norm.norm_fwd_wide_launch(N, size, tunable, True)):
                norms[op] = launches
        sms = _capped_and_not(softmax_ops.softmax_fwd_wide_launch(N, size, True))
        runs.append((dtype, M, N, norms, sms, {}, False))
    run(prefix, runs)


def register_rows(prefix: str) -> None:
    """``register_widths`` at ``REGISTER_ROWS``."""
    register_widths(prefix, REGISTER_ROWS)


def whole_row_caps(prefix: str) -> None:
    """The whole-row (not looped) launches at 4096 x 32768 with their registers capped
    (``REGISTER_CAPS``): the bf16 softmax backward (``BWD_WIDE_LAUNCHES``, 87% of copy for
    log-softmax in the harness) and the float32 forwards of LayerNorm (88%), RMSNorm and
    softmax, as the cap of 64 sped up the looped forwards (``register-widths``)."""
    layer, rms = (
        norm.norm_fwd_wide_launch(32768, 4, k, True) for k in ("layer_norm.fwd", "rms_norm.fwd")
    )
    runs = [
        (torch.bfloat16, 4096, 32768, None, {}, _capped(softmax_ops.BWD_WIDE_LAUNCHES[2]), False),
        (torch.float32, 4096, 32768,
         {"layer": _capped(layer), "rms": _capped(rms)},
         _capped(softmax_ops.softmax_fwd_wide_launch(32768, 4, True)), {}, False),
    ]  # fmt: skip
    run(prefix, runs)


def softmax_bwd_widths(prefix: str) -> None:
    """The bf16 softmax and log-softmax backward's whole-row launch (``BWD_WIDE_LAUNCHES``)
    against the split kernel (``current``) at 4096 rows of 24576, 28672 and 32768 columns: in
    ``whole-row-caps`` (H200) log-softmax's whole-row launch lost to the split kernel at 32768,
    where the H100 had it ahead."""
    launch = softmax_ops.BWD_WIDE_LAUNCHES[2]
    bwds = {"shipped": launch, "32w": dataclasses.replace(launch, num_warps=32)}
    run(prefix, [(torch.bfloat16, 4096, N, None, {}, bwds, False) for N in (24576, 28672, 32768)])


SOFTMAX_LONG_CAPS = {
    "8192c 32w": W(32, chunk=8192, forwards=True, unrolled=True),  # shipped until session 31
    "4096c 16w r64": W(16, chunk=4096, forwards=True, unrolled=True, max_registers=64),
    "8192c 16w r64": W(16, chunk=8192, forwards=True, unrolled=True, max_registers=64),
    "4096c 32w r64": W(32, chunk=4096, forwards=True, unrolled=True, max_registers=64),
}
"""``softmax-long-caps``: looped launches with registers capped at 64 a thread for rows of
32769-65536 columns, where the 8192-column, 32-warp launch (shipped until session 31) capped
at 64 lost at 49152 and 57344 columns (``register-widths``) but the 32768-column launch
(4096-column chunks, 16 warps) gained from the cap at every width it takes."""


def softmax_long_caps(prefix: str) -> None:
    """``FWD_LONG_LAUNCHES``' bf16 launch (as shipped) against ``SOFTMAX_LONG_CAPS`` at 8192
    rows of 40961 (no whole 16-byte vectors), 49152, 57344 and 65536 columns."""
    sms = {"shipped": softmax_ops.FWD_LONG_LAUNCHES[2], **SOFTMAX_LONG_CAPS}
    widths = (40961, 49152, 57344, 65536)
    run(prefix, [(torch.bfloat16, 8192, N, None, sms, {}, False) for N in widths])


CE_SHAPES = [(torch.bfloat16, 16384, 32000), (torch.bfloat16, 4096, 50257),
             (torch.bfloat16, 8192, 32768)]  # fmt: skip
"""``ce``: vocabularies the whole-row kernel (32000, 32768) and the aligned split (50257, rows
of no whole 16-byte vectors) take now."""

CE_LOOPED = {k: SOFTMAX_LOOPED[k] for k in ("2048c 8w", "4096c 16w", "4096c 16w fwd",
                                            "8192c 32w fwd")}  # fmt: skip


CE_FWD_SHAPES = [(torch.bfloat16, 16384, 32000), (torch.bfloat16, 8192, 32768),
                 (torch.bfloat16, 8192, 128256), (torch.bfloat16, 2048, 151936),
                 (torch.bfloat16, 4096, 262144)]  # fmt: skip
"""``ce-fwd``: the loss-only forward's rows of whole 16-byte vectors in the issue's sweep."""

CE_FWD_LOOPED = {
    "2048c 8w": W(8, chunk=2048, unrolled=True),
    "1024c 4w": W(4, chunk=1024, unrolled=True),
    "1024c 4w rolled": W(4, chunk=1024),
    "2048c 4w rolled": W(4, chunk=2048),
    "2048c 8w rolled": W(8, chunk=2048),
    "4096c 8w rolled": W(8, chunk=4096),
    "8192c 16w": W(16, chunk=8192, unrolled=True),
}
"""``ce-fwd``: launches of the loss-only kernel, unrolled (rows of at most 32 chunks) and
rolled (any row; the current dispatch is 4096-column chunks on 16 warps in bf16, rolled). The
session-30 call-2 sweep had 2048-column chunks on 8 warps unrolled ahead at 32000 and 32768
classes; the rolled ones say whether the chunk or the unrolling won."""


CE_FWD_WIDE = [(torch.bfloat16, 2048, 151936), (torch.float32, 2048, 151936),
               (torch.bfloat16, 8192, 128256)]  # fmt: skip
"""``ce-fwd-registers``: loss-only rows past ``FWD_LOOPED_LAUNCHES`` (bf16 2048 x 151936 at
86% of copy in the harness, float32 there at 88%)."""

CE_FWD_WIDE_LAUNCHES = {
    "4096c 16w r32": W(16, chunk=4096, max_registers=32),
    "2048c 8w r32": W(8, chunk=2048, max_registers=32),
    "2048c 4w r32": W(4, chunk=2048, max_registers=32),
    "1024c 4w r32": W(4, chunk=1024, max_registers=32),
    "2048c 4w": W(4, chunk=2048),
}
"""``ce-fwd-registers``: rolled launches of the loss-only kernel with 32 registers a thread,
so that 2048 threads (64 warps) fit an SM: 2048 rows of one program each then run in one
wave on 132 SMs at 4 warps a program (16 an SM), where ~40 registers (ptxas' choice) hold 12
an SM and leave a second, partial wave."""

CE_FWD_CAP_SHAPES = [(torch.bfloat16, 16384, 32000), (torch.bfloat16, 8192, 32768),
                     (torch.bfloat16, 8192, 128256), (torch.bfloat16, 2048, 151936),
                     (torch.bfloat16, 4096, 262144)]  # fmt: skip
"""``ce-fwd-caps``: the loss-only forward's bf16 rows of whole 16-byte vectors in the issue's
sweep (``FWD_LOOPED_LAUNCHES`` takes the first two; the others run 4096-column chunks on 16
warps, rolled)."""

CE_FWD_CAPS = {
    "2048c 8w r64": W(8, chunk=2048, unrolled=True, max_registers=64),
    "2048c 8w r96": W(8, chunk=2048, unrolled=True, max_registers=96),
    "2048c 8w r128": W(8, chunk=2048, unrolled=True, max_registers=128),
    "4096c 16w": W(16, chunk=4096),
    "4096c 16w r48": W(16, chunk=4096, max_registers=48),
    "4096c 16w r64": W(16, chunk=4096, max_registers=64),
    "8192c 32w r64": W(32, chunk=8192, max_registers=64),
}
"""``ce-fwd-caps``: the loss-only forward's launches with their registers capped, as the cap
of 64 sped up the looped softmax forward (``session31-h200-2026-11-30/registers-call2.txt``)."""

CE_FWD_UNALIGNED = [(torch.bfloat16, 4096, 50257), (torch.bfloat16, 8192, 50257)]
"""``ce-fwd-unaligned``: rows that start off 16-byte boundaries (vocab 50257)."""

CE_FWD_UNALIGNED_LAUNCHES = {
    "2048/4": (2048, 4), "2048/8": (2048, 8), "1024/4": (1024, 4), "1024/2": (1024, 2),
    "4096/8": (4096, 8), "8192/16": (8192, 16),
}  # fmt: skip
"""``ce-fwd-unaligned``: (BLOCK, num_warps) of ``cross_entropy_fwd_aligned_kernel`` (the
current one is ``launch_heuristic``'s 4096/16), as unrolled 2048-column chunks on 8 warps
beat it on the plain kernel at 32000 classes."""


CE_SMALL_SHAPES = [(torch.bfloat16, 16384, 32000), (torch.bfloat16, 8192, 32768)]
"""``ce-small``: the vocabularies ``FWD_GRAD_LOOPED_LAUNCHES`` takes in the issue's sweep."""

CE_SMALL_CHUNKS = {
    "4096c 16w fwd": W(16, chunk=4096, forwards=True, unrolled=True),
    "2048c 8w fwd": W(8, chunk=2048, forwards=True, unrolled=True),
    "2048c 4w fwd": W(4, chunk=2048, forwards=True, unrolled=True),
    "1024c 4w fwd": W(4, chunk=1024, forwards=True, unrolled=True),
    "1024c 4w": W(4, chunk=1024, unrolled=True),
    "1024c 2w fwd": W(2, chunk=1024, forwards=True, unrolled=True),
}
"""``ce-small``: the forward with gradient's looped kernel in chunks of 1024-4096 columns (the
shipped launch first), as 2048-column chunks on 8 warps won the loss-only forward there."""

CE_REGISTERS = {
    "4096c 16w fwd": W(16, chunk=4096, forwards=True, unrolled=True),
    "4096c 16w fwd r64": W(16, chunk=4096, forwards=True, unrolled=True, max_registers=64),
    "4096c 16w fwd r96": W(16, chunk=4096, forwards=True, unrolled=True, max_registers=96),
    "4096c 16w fwd r128": W(16, chunk=4096, forwards=True, unrolled=True, max_registers=128),
    "2048c 8w r64": W(8, chunk=2048, unrolled=True, max_registers=64),
    "2048c 8w r128": W(8, chunk=2048, unrolled=True, max_registers=128),
}
"""``ce-registers``: the forward with gradient's looped kernel with its registers capped
(``maxnreg``): left to ptxas it takes 40 a thread on sm_90 (Triton 3.9), which keeps three
16-warp programs an SM but cannot hold a row's eight unrolled chunk loads at once; 64-128
trade programs an SM for loads in flight."""

CE_SPLIT_UNALIGNED = {
    "8192/4 x4 pf": dict(block=8192, num_warps=4, programs_per_sm=4, prefetch=True),
    "8192/4 x4": dict(block=8192, num_warps=4, programs_per_sm=4),
    "4096/4 x8 pf": dict(block=4096, num_warps=4, programs_per_sm=8, prefetch=True),
    "4096/4 x8": dict(block=4096, num_warps=4, programs_per_sm=8),
    "4096/8 x4 pf": dict(block=4096, num_warps=8, programs_per_sm=4, prefetch=True),
    "2048/4 x8 pf": dict(block=2048, num_warps=4, programs_per_sm=8, prefetch=True),
    "2048/2 x16 pf": dict(block=2048, num_warps=2, programs_per_sm=16, prefetch=True),
}
"""``ce-split-unaligned``: flag-word split plans (``split_row_plan`` arguments) of the forward
with gradient of rows that start off 16-byte boundaries, chunks counted from aligned addresses
(the shipped one is the first, ``FLAG_WORDS_LAUNCHES``)."""


def ce_looped(prefix: str, shapes=CE_SHAPES, launches=CE_LOOPED, grad=True) -> None:
    """Cross-entropy (mean over rows, no smoothing), the current dispatch against looped
    launches: with ``grad`` the forward with gradient on ``cross_entropy_fwd_grad_looped_kernel``
    at ``CE_LOOPED`` and ``CE_SHAPES`` (fraction of copy: the logits read once, the gradient
    written once; a launch that is a dict makes a flag-word split plan of the row widened for
    its 16-byte alignment, ``ce-split-unaligned``), else the loss-only forward (``ce-fwd``;
    the logits read once; a launch that is a (BLOCK, num_warps) pair goes to
    ``loss_only_rows`` as its ``launch``)."""
    import importlib

    import triton
    import triton.testing

    ce = importlib.import_module("warpforge.ops.cross_entropy")  # the package's attribute is the op

    lines = [
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    ]
    rows: list[dict] = []
    for dtype, M, V in shapes:
        logits = torch.randn(M, V, device="cuda", dtype=dtype) * 3
        target = torch.randint(0, V, (M,), device="cuda")
        scale = torch.full((1,), 1.0 / M, device="cuda")
        out = torch.empty_like(logits)
        copy_ms = triton.testing.do_bench(lambda o=out, x=logits: o.copy_(x), warmup=10, rep=40)
        nbytes = logits.numel() * logits.element_size()
        copy_bps = 2 * nbytes / (copy_ms * 1e-3)
        dt = str(dtype)[6:]
        lines.append(f"{dt} {M}x{V} copy {copy_ms * 1e3:.1f} us = {copy_bps / 1e12:.3f} TB/s")
        meta = dict(dtype=dt, M=M, N=V, op="ce.fwd_grad" if grad else "ce.fwd")
        moved = 2 * nbytes if grad else nbytes

        extra = {"grad_out": out, "grad_loss": scale} if grad else {}

        def forward(looped=None, logits=logits, target=target, extra=extra, out=out):
            if grad and isinstance(looped, dict):
                from warpforge.ops._split_rows import split_row_plan

                lead = 16 // logits.element_size() - 1  # the most a row's start can sit past
                plan = split_row_plan(logits.shape[0], logits.shape[1] + lead, logits.device,
                                      flag_words=True, **looped)  # fmt: skip
                loss, _ = ce.row_losses(logits, target, -100, 0.0, 0.0, split=plan, **extra)
                return loss, out
            if grad:
                loss, _ = ce.row_losses(logits, target, -100, 0.0, 0.0, looped=looped, **extra)
                return loss, out
            if isinstance(looped, WideLaunch):
                return ce.row_losses(logits, target, -100, 0.0, 0.0, looped=looped)
            return ce.loss_only_rows(logits, target, -100, 0.0, 0.0, launch=looped)

        ref = tuple(t.clone() for t in forward())
        _time("current", forward, ref, moved, copy_bps, lines, rows, meta)
        for label, launch in launches.items():
            if unrolls(launch, V):
                _time(label, lambda la=launch: forward(la), ref, moved, copy_bps, lines, rows,
                      meta)  # fmt: skip
        del logits, out, ref
        torch.cuda.empty_cache()
        with open(prefix + ".txt", "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(prefix + ".json", "w") as f:
            json.dump({"device": lines[0], "rows": rows}, f, indent=1)


def ce_fwd_looped(prefix: str) -> None:
    """``ce_looped`` of the loss-only forward at ``CE_FWD_SHAPES`` and ``CE_FWD_LOOPED``."""
    ce_looped(prefix, CE_FWD_SHAPES, CE_FWD_LOOPED, grad=False)


def ce_small(prefix: str) -> None:
    """``ce_looped`` of the forward with gradient at ``CE_SMALL_SHAPES`` and
    ``CE_SMALL_CHUNKS``."""
    ce_looped(prefix, CE_SMALL_SHAPES, CE_SMALL_CHUNKS, grad=True)


def ce_registers(prefix: str) -> None:
    """``ce_looped`` of the forward with gradient at ``CE_SMALL_SHAPES`` and
    ``CE_REGISTERS``."""
    ce_looped(prefix, CE_SMALL_SHAPES, CE_REGISTERS, grad=True)


def ce_fwd_registers(prefix: str) -> None:
    """``ce_looped`` of the loss-only forward at ``CE_FWD_WIDE`` and ``CE_FWD_WIDE_LAUNCHES``."""
    ce_looped(prefix, CE_FWD_WIDE, CE_FWD_WIDE_LAUNCHES, grad=False)


def ce_fwd_caps(prefix: str) -> None:
    """``ce_looped`` of the loss-only forward at ``CE_FWD_CAP_SHAPES`` and ``CE_FWD_CAPS``."""
    ce_looped(prefix, CE_FWD_CAP_SHAPES, CE_FWD_CAPS, grad=False)


def ce_split_unaligned(prefix: str) -> None:
    """``ce_looped`` of the forward with gradient at ``CE_FWD_UNALIGNED`` (vocab 50257: the
    aligned flag-word split kernel) and ``CE_SPLIT_UNALIGNED``."""
    ce_looped(prefix, CE_FWD_UNALIGNED, CE_SPLIT_UNALIGNED, grad=True)


def ce_fwd_unaligned(prefix: str) -> None:
    """``ce_looped`` of the loss-only forward at ``CE_FWD_UNALIGNED`` (rows off 16-byte
    boundaries: ``cross_entropy_fwd_aligned_kernel``) and ``CE_FWD_UNALIGNED_LAUNCHES``."""
    ce_looped(prefix, CE_FWD_UNALIGNED, CE_FWD_UNALIGNED_LAUNCHES, grad=False)


def softmax_widths(prefix: str) -> None:
    """``SOFTMAX_WIDTH_LAUNCHES`` at ``SOFTMAX_WIDTHS``, without Liger."""
    softmax_looped(prefix, SOFTMAX_WIDTHS, SOFTMAX_WIDTH_LAUNCHES, liger=False)


SHORT_SOFTMAX_SHAPES = [(torch.bfloat16, 16384, 4096), (torch.bfloat16, 8192, 8192),
                        (torch.bfloat16, 4096, 16384)]  # fmt: skip
"""``short-softmax``: the issue's bf16 rows of 4096-16384 columns, where the softmax forward
and backward run the tuned row kernels and sit 1-3% under Liger-Kernel's whole-row kernels
in the harness (H200, ``session24-h200-2026-11-29/smfwd-bf16-call5.json``,
``session25-h200-2026-11-29/smbwd-bf16-call4.json``)."""

SHORT_SOFTMAX_LAUNCHES = {"whole 8w": W(8), "whole 16w": W(16), "whole 32w": W(32)}
"""``short-softmax``: whole-row launches of the forward (``softmax_fwd_wide_kernel``) and
backward (``softmax_bwd_wide_kernel``), which no table gives rows of <= 16384 columns."""


def short_softmax(prefix: str) -> None:
    """``SHORT_SOFTMAX_LAUNCHES`` against the current path (tuned row kernels) and Liger at
    ``SHORT_SOFTMAX_SHAPES``, forward and backward."""
    launches = SHORT_SOFTMAX_LAUNCHES
    run(prefix, [(dtype, M, N, None, launches, launches, True)
                 for dtype, M, N in SHORT_SOFTMAX_SHAPES])  # fmt: skip


LONGEST_CAPS = {
    "8192c 32w r64": W(32, chunk=8192, forwards=True, unrolled=True, max_registers=64),
    "8192c 16w r64": W(16, chunk=8192, forwards=True, unrolled=True, max_registers=64),
    "4096c 16w r64": W(16, chunk=4096, forwards=True, unrolled=True, max_registers=64),
    "4096c 16w rolled r64": W(16, chunk=4096, forwards=True, max_registers=64),
    "8192c 32w": W(32, chunk=8192, forwards=True, unrolled=True),
}
"""``longest-caps``: looped launches (one row a program in chunks) with and without the cap of
64 registers a thread that sped up the looped forwards at 16385-65536 columns (thirty-first
session), for the rows past 65536 columns the split kernels serve at 63-81% of copy on the
H200 (bf16 8192 x 131072 and 262144). Session 28 had the uncapped looped LayerNorm 4% behind
the split kernel at 131072 (``session28-h200-2026-11-29/parity-long-call6.txt``)."""


def longest_caps(prefix: str) -> None:
    """``LONGEST_CAPS`` (unrolled only where a row has at most ``MAX_UNROLLED_CHUNKS`` chunks)
    against the current path (the split kernels) for the RMSNorm, LayerNorm and softmax
    forwards at bf16 8192 x 131072 and 8192 x 262144, without Liger."""
    runs = []
    for N in (131072, 262144):
        fits = {k: la for k, la in LONGEST_CAPS.items() if unrolls(la, N)}
        norms = {"rms": fits, "layer": fits}
        runs.append((torch.bfloat16, 8192, N, norms, fits, {}, False))
    run(prefix, runs)


SHORT_LN_CAPS = {
    f"{chunk}c {warps}w{f' r{cap}' if cap else ''}": W(
        warps, min_n=1, chunk=chunk, forwards=True, unrolled=True, max_registers=cap
    )
    for chunk, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16))
    for cap in (None, 32, 40)
}  # fmt: skip
"""``short-ln-caps``: looped LayerNorm forward launches at and under 16384 columns, uncapped and
capped at 32 or 40 registers a thread: torch.compile's kernel at bf16 4096 x 16384, where the
op sits at 0.95x of it, holds 31 registers at 88% occupancy against the looped kernel's 40 and
67% (``session27-h200-2026-11-29`` Nsight Compute, ``NORM_FWD_WIDE_LAUNCHES``' docstring);
caps of 48-128 on 16-warp launches were slower there (``session31-h200-2026-11-30/
registers-call2.txt``)."""

SHORT_LN_SHAPES = [(torch.bfloat16, 4096, 16384), (torch.bfloat16, 8192, 8192),
                   (torch.bfloat16, 16384, 4096), (torch.bfloat16, 16384, 2048),
                   (torch.bfloat16, 32768, 1024)]  # fmt: skip
"""``short-ln-caps``: the issue's bf16 rows of 1024-16384 columns, LayerNorm forward at 83-92% of
copy and 0.95-1.10x the best baseline in the harness."""


def short_ln_caps(prefix: str) -> None:
    """``SHORT_LN_CAPS`` (those of at least two chunks a row) against the current path (the
    tuned row kernels) and Liger at ``SHORT_LN_SHAPES``, LayerNorm forward only."""
    runs = []
    for dtype, M, N in SHORT_LN_SHAPES:
        fits = {k: la for k, la in SHORT_LN_CAPS.items() if la.chunk < N and unrolls(la, N)}
        runs.append((dtype, M, N, {"layer": fits}, {}, {}, True))
    run(prefix, runs)


def run(prefix: str, shapes: list) -> None:
    """``sweep_shape`` over ``shapes`` (its arguments before ``lines``), the text and JSON
    rewritten after each."""
    import triton

    lines = [
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    ]
    rows: list[dict] = []
    for dtype, M, N, norms, sms, bwds, with_liger in shapes:
        sweep_shape(dtype, M, N, norms, sms, bwds, with_liger, lines, rows)
        torch.cuda.empty_cache()
        with open(prefix + ".txt", "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(prefix + ".json", "w") as f:
            json.dump({"device": lines[0], "rows": rows}, f, indent=1)


MODES = {
    "widths": widths,
    "long": long_widths,
    "softmax": softmax_looped,
    "softmax-widths": softmax_widths,
    "softmax-long": softmax_long,
    "registers": registers,
    "register-widths": register_widths,
    "register-rows": register_rows,
    "whole-row-caps": whole_row_caps,
    "softmax-bwd-widths": softmax_bwd_widths,
    "softmax-long-caps": softmax_long_caps,
    "short-softmax": short_softmax,
    "longest-caps": longest_caps,
    "short-ln-caps": short_ln_caps,
    "ce": ce_looped,
    "ce-fwd": ce_fwd_looped,
    "ce-fwd-unaligned": ce_fwd_unaligned,
    "ce-split-unaligned": ce_split_unaligned,
    "ce-small": ce_small,
    "ce-registers": ce_registers,
    "ce-fwd-registers": ce_fwd_registers,
    "ce-fwd-caps": ce_fwd_caps,
}

if __name__ == "__main__":
    if sys.argv[1] in MODES:
        MODES[sys.argv[1]](sys.argv[2])
    else:
        run(sys.argv[1], SHAPES)
