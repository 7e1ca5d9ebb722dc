"""The norm, softmax and cross-entropy kernels (the split-row and looped ones included) compile
for sm_90 with the launch shapes the ops pick for the benchmark shapes, the whole-row and
looped cross-entropy kernels without register spills. Runs without a GPU: Triton lowers to PTX and cubin for a named
target, which catches what the interpreter cannot (type rules of compiled loops, constexpr
branches)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

SRC = Path(__file__).resolve().parents[2] / "src"

COMPILE_ALL = textwrap.dedent(
    """
    import inspect, torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import warpforge.ops._rows as rows
    import warpforge.ops._split_rows as split_rows
    from warpforge.ops._split_rows import split_row_plan
    from warpforge.runtime import DeviceCapabilities
    from warpforge.ops._kernels import norm as nk, softmax as sk, wide_rows as wk
    from warpforge.ops import norm, softmax_ops
    from warpforge.ops._wide_rows import row_blocks

    # the pairs kernel's default launch (256 columns, 1 warp, 28 an SM, 72 registers): no spill
    # under the ptxas of Triton 3.6 (the GPU's), 8 bytes under Triton 3.9's
    PAIRS_SPILL_ALLOWED = 8
    h100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
    h200 = DeviceCapabilities("NVIDIA H200", (9, 0), 132, 50 * 2**20, 141 * 2**30, 232448)
    rows.device_capabilities = split_rows.device_capabilities = lambda device: h100
    target = GPUTarget("cuda", 90, 32)

    def with_defaults(fn, constexprs):
        # constexpr parameters left out take their defaults, as in a launch
        defaults = {p.name: p.default for p in fn.params
                    if p.is_constexpr and p.default is not inspect.Parameter.empty}
        return {**defaults, **constexprs}

    def build(fn, types, constexprs, num_warps, **options):
        constexprs = with_defaults(fn, constexprs)
        signature = {a: "constexpr" if a in constexprs else types[a] for a in fn.arg_names}
        triton.compile(
            ASTSource(fn=fn, signature=signature, constexprs=constexprs),
            target=target,
            options={"num_warps": num_warps, **options},
        )

    for dt, tdt in (("bf16", torch.bfloat16),):
        p = "*" + dt
        fwd_types = dict.fromkeys(["X", "R", "W", "B", "Y", "H"], p)
        fwd_types.update(MEAN="*fp32", RSTD="*fp32", eps="fp32", offset="fp32")
        fwd_types.update(dict.fromkeys(["stride_x", "stride_r", "stride_y", "stride_h", "M", "N"], "i32"))
        bwd_types = dict.fromkeys(["DY", "X", "W", "DH", "DX"], p)
        bwd_types.update(MEAN="*fp32", RSTD="*fp32", DW_PARTIAL="*fp32", DB_PARTIAL="*fp32", offset="fp32")
        bwd_types.update(dict.fromkeys(["stride_dy", "stride_x", "stride_dh", "stride_dx", "M", "N"], "i32"))
        sm_types = {"X": p, "Y": p, "DY": p, "DX": p}
        sm_types.update(dict.fromkeys(["stride_x", "stride_y", "stride_dy", "stride_dx", "M", "N"], "i32"))
        for M, N in ((32768, 256), (4096, 16384), (8192, 262144)):
            f = norm._fwd_launch_config(M, N, tdt, "cuda")
            b, knobs = norm._bwd_launch_config(M, N, tdt, "cuda")
            for center in (False, True):
                flags = dict(CENTER=center, HAS_RESIDUAL=not center, HAS_WEIGHT=True, HAS_BIAS=center, BLOCK_N=f.block_n)
                if f.single_pass:
                    build(nk.norm_fwd_rows_kernel, fwd_types, dict(flags, ROWS=f.rows_per_program), f.num_warps)
                else:
                    build(nk.norm_fwd_chunked_kernel, fwd_types, flags, f.num_warps)
                flags = dict(CENTER=center, HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=center, HAS_DH=not center, BLOCK_N=b.block_n)
                if b.single_pass:
                    in_memory = norm.partials_in_memory(b, norm._bwd_row_operands(center, True, center))
                    build(nk.norm_bwd_rows_kernel, bwd_types, dict(flags, ROWS=b.rows_per_program, PARTIALS_IN_MEMORY=in_memory, PREFETCH=norm.prefetch_tiles(b), RELOAD=knobs.reload), b.num_warps)
                else:
                    build(nk.norm_bwd_chunked_kernel, bwd_types, flags, b.num_warps)
            f = softmax_ops._fwd_launch_config(M, N, tdt, "cuda")
            b = softmax_ops._bwd_launch_config(M, N, tdt, "cuda")
            for log in (False, True):
                if f.single_pass:
                    build(sk.softmax_fwd_rows_kernel, sm_types, dict(LOG=log, ROWS=f.rows_per_program, BLOCK_N=f.block_n), f.num_warps)
                    build(sk.softmax_bwd_rows_kernel, sm_types, dict(LOG=log, ROWS=b.rows_per_program, BLOCK_N=b.block_n), b.num_warps)
                else:
                    build(sk.softmax_fwd_chunked_kernel, sm_types, dict(LOG=log, BLOCK_N=f.block_n), f.num_warps)
                    split = softmax_ops._fwd_split_plan(M, N, tdt.itemsize, "cuda", log)
                    if split.reread_lag:
                        build(sk.softmax_fwd_reread_kernel, dict(sm_types, WORDS="*i64"), dict(LOG=log, BLOCK_N=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0, LAG=split.reread_lag, PREFETCH=split.prefetch, KEEP="evict_last", DROP="evict_first"), **split.launch_options())
                    elif split.flag_words:
                        build(sk.softmax_fwd_lag_kernel, dict(sm_types, WORDS="*i64"), dict(LOG=log, BLOCK_N=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0), **split.launch_options())
                    else:
                        split_types = dict(sm_types, PARTIALS="*fp32", ARRIVALS="*i32")
                        build(sk.softmax_fwd_split_kernel, split_types, dict(LOG=log, BLOCK_N=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0, PREFETCH=split.prefetch, RELEASE_ONLY=split.release_only), **split.launch_options())
                    build(sk.softmax_bwd_chunked_kernel, sm_types, dict(LOG=log, BLOCK_N=b.block_n), b.num_warps)
        # the 2-byte softmax forward's looped launches at the widest rows they take
        for N in (32768, 65536):
            launch = softmax_ops.softmax_fwd_wide_launch(N, tdt.itemsize)
            block, chunks = row_blocks(N, launch)
            for log in (False, True):
                build(wk.softmax_fwd_looped_kernel, sm_types, dict(LOG=log, BLOCK_N=block, EVEN=True, FORWARDS=launch.forwards, CHUNKS=chunks), **launch.launch_options())
        build(nk.partial_sum_kernel, {"DW_PARTIAL": "*fp32", "DW": p, "DB_PARTIAL": "*fp32", "DB": p, "num_partials": "i32", "N": "i32"}, dict(BLOCK_P=256, BLOCK_N=16), 4)
    # float32 long rows: the re-reading flag-word softmax forward (and the lag kernel it replaced)
    for log in (False, True):
        split = softmax_ops._fwd_split_plan(8192, 262144, 4, "cuda", log)
        assert split.flag_words and split.reread_lag == 2, split
        lag_types = {"X": "*fp32", "Y": "*fp32", "WORDS": "*i64"}
        lag_types.update(dict.fromkeys(["stride_x", "stride_y", "M", "N"], "i32"))
        build(sk.softmax_fwd_reread_kernel, lag_types, dict(LOG=log, BLOCK_N=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0, LAG=split.reread_lag, PREFETCH=split.prefetch, KEEP="evict_last", DROP="evict_first"), **split.launch_options())
        build(sk.softmax_fwd_lag_kernel, lag_types, dict(LOG=log, BLOCK_N=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0), **split.launch_options())
    import importlib, os, re, subprocess, tempfile
    from warpforge.ops._kernels import cross_entropy as ck
    ce = importlib.import_module("warpforge.ops.cross_entropy")
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")

    def spilled_bytes(fn, types, constexprs, num_warps, aligned=(), **options):
        constexprs = with_defaults(fn, constexprs)
        signature = {a: "constexpr" if a in constexprs else types.get(a, "i32") for a in fn.arg_names}
        # a launch specialises pointers and these ints as multiples of 16 (16-byte vectors)
        attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names)
                 if a not in constexprs and (signature[a].startswith("*") or a in aligned)}
        kernel = triton.compile(
            ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
            target=target, options={"num_warps": num_warps, **options},
        )
        if not os.path.exists(cuobjdump):
            return 0
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"])
            f.flush()
            usage = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True).stdout
        return int(re.search(r"STACK:([0-9]+)", usage).group(1))

    for dt, tdt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        p = "*" + dt
        types = dict(logits_ptr=p, grad_ptr=p, grad_logits_ptr=p, target_ptr="*i64", loss_ptr="*fp32",
                     lse_ptr="*fp32", grad_loss_ptr="*fp32", label_smoothing="fp32", z_loss="fp32")
        for vocab in (32000, 128256, 262144):
            flags = dict(HAS_SMOOTHING=True, CHECK_TARGETS=False)
            block, warps = ce.fused_grad_launch_heuristic(vocab, tdt.itemsize)
            if block >= vocab:  # the whole row stays in registers: it must not spill
                stack = spilled_bytes(ck.cross_entropy_fwd_grad_row_kernel, types, dict(flags, BLOCK=block, EARLY=True), warps)
                assert stack == 0, f"whole-row kernel spills {stack} bytes ({dt}, BLOCK={block})"
                looped = ce.fwd_grad_looped_launch(vocab, tdt.itemsize)
                if looped is not None:  # the op's looped launch there
                    lblock, chunks = row_blocks(vocab, looped)
                    stack = spilled_bytes(ck.cross_entropy_fwd_grad_looped_kernel, types, dict(flags, BLOCK=lblock, CHUNKS=chunks, FORWARDS=looped.forwards), aligned=("n_cols", "logits_row_stride", "grad_row_stride"), **looped.launch_options())
                    assert stack == 0, f"looped kernel spills {stack} bytes ({dt}, {looped})"
                looped = ce.fwd_looped_launch(vocab, tdt.itemsize)
                if looped is not None:  # the loss-only forward's looped launch there
                    lblock, chunks = row_blocks(vocab, looped)
                    stack = spilled_bytes(ck.cross_entropy_fwd_kernel, types, dict(flags, BLOCK=lblock, CHUNKS=chunks), aligned=("n_cols", "logits_row_stride"), **looped.launch_options())
                    assert stack == 0, f"loss-only looped kernel spills {stack} bytes ({dt}, {looped})"
            else:
                spilled_bytes(ck.cross_entropy_fwd_grad_kernel, types, dict(flags, BLOCK=block), warps)
                split = split_row_plan(4096, vocab, "cuda", **split_rows.split_launch(tdt.itemsize))
                split_types = dict(types, partials_ptr="*fp32", arrivals_ptr="*i32")
                stack = spilled_bytes(ck.cross_entropy_fwd_grad_split_kernel, split_types, dict(flags, BLOCK=split.block, CHUNKS_POW2=split.chunks_pow2, STAGE=0, PREFETCH=split.prefetch, EARLY=ce.SPLIT_EARLY_TARGET, RELEASE_ONLY=split.release_only), aligned=("n_cols", "logits_row_stride", "grad_row_stride"), **split.launch_options())
                # the prefetching 2-byte launch (8192 columns, 8 warps, 4 an SM, early target
                # loads) keeps the next chunk under a 64-register cap and spills 40-48 bytes; it
                # was measured faster than the launches that spill less or not at all
                # (benchmarks/results/ce16-sweep2-2026-11-24-h100.txt), so that much is allowed
                allowed = 48 if split.prefetch else 0
                assert stack <= allowed, f"split kernel spills {stack} bytes under its register cap ({dt})"
                # the op's 2-byte plan: the flag-word meeting (four 8192-column programs of 4
                # warps an SM), measured faster than the counter launch above
                # (benchmarks/results/ce16b-sweep*-, ce262k-sweep2- and
                # split4w-ce-sweep-2026-11-25-h100.txt); the same allowance
                plan = ce._fwd_grad_split_plan(4096, vocab, tdt.itemsize, "cuda")
                if plan.flag_words:
                    stack = spilled_bytes(ck.cross_entropy_fwd_grad_flags_kernel, dict(split_types, words_ptr="*i64"), dict(flags, BLOCK=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch, ALIGN=1), aligned=("n_cols", "logits_row_stride", "grad_row_stride"), **plan.launch_options())
                    assert stack <= allowed, f"flag-word split kernel spills {stack} bytes under its register cap ({dt}, {vocab})"
            block, warps = ce.launch_heuristic(vocab, tdt.itemsize)
            spilled_bytes(ck.cross_entropy_fwd_kernel, types, dict(flags, BLOCK=block), warps)
            block, warps = ce.bwd_launch_heuristic(vocab, tdt.itemsize)
            spilled_bytes(ck.cross_entropy_bwd_kernel, types, dict(BLOCK=block), warps)
        # rows that start off 16-byte boundaries (50257 classes): the flag-word kernel with
        # chunks from aligned addresses, at the op's plan (bf16 prefetching: the same
        # allowance; float32 without a prefetch: none)
        align = 16 // tdt.itemsize
        plan = ce._flag_word_plan(4096, 50257 + align - 1, tdt.itemsize, "cuda")
        split_types = dict(types, words_ptr="*i64")
        stack = spilled_bytes(ck.cross_entropy_fwd_grad_flags_kernel, split_types, dict(HAS_SMOOTHING=True, CHECK_TARGETS=False, BLOCK=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch, ALIGN=align), **plan.launch_options())
        assert stack <= (48 if plan.prefetch else 0), f"aligned flag-word split kernel spills {stack} bytes ({dt})"
    # on the H200 float32 rows meet through flag words too (FLOAT32_FLAG_WORDS_BY_MODEL: two
    # 16384-column 8-warp programs an SM, 128 registers a thread): no spills; an H100 keeps the
    # counter launch
    assert not ce._fwd_grad_split_plan(4096, 262144, 4, "cuda").flag_words
    rows.device_capabilities = split_rows.device_capabilities = lambda device: h200
    ce._fwd_grad_split_plan.cache_clear()
    for vocab in (128256, 151936, 262144):
        plan = ce._fwd_grad_split_plan(4096, vocab, 4, "cuda")
        assert plan.flag_words and (plan.block, plan.num_warps) == (16384, 8), plan
        fp32_types = dict(logits_ptr="*fp32", grad_ptr="*fp32", target_ptr="*i64", loss_ptr="*fp32",
                          lse_ptr="*fp32", grad_loss_ptr="*fp32", label_smoothing="fp32", z_loss="fp32",
                          words_ptr="*i64")
        stack = spilled_bytes(ck.cross_entropy_fwd_grad_flags_kernel, fp32_types, dict(HAS_SMOOTHING=True, CHECK_TARGETS=False, BLOCK=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch, ALIGN=1), aligned=("n_cols", "logits_row_stride", "grad_row_stride"), **plan.launch_options())
        assert stack == 0, f"float32 flag-word split kernel spills {stack} bytes ({vocab})"
    rows.device_capabilities = split_rows.device_capabilities = lambda device: h100
    ce._fwd_grad_split_plan.cache_clear()
    # the norm forward's shipped one-row-a-program launches at their widest rows: no spills (the
    # one-reduction LayerNorm launch exists to need fewer registers)
    wide_types = dict.fromkeys(["X", "R", "W", "B", "Y", "H"], "*fp32")
    wide_types.update(MEAN="*fp32", RSTD="*fp32", eps="fp32", offset="fp32")
    for (size, kernel, block), launch in sorted(norm.NORM_FWD_ROW_LAUNCHES.items()):
        types = {k: v.replace("fp32", "bf16") if size == 2 and k in ("X", "R", "W", "B", "Y", "H") else v
                 for k, v in wide_types.items()}
        flags = dict(CENTER=kernel.startswith("layer"), HAS_RESIDUAL=kernel.startswith("add"),
                     HAS_WEIGHT=True, HAS_BIAS=kernel.startswith("layer"),
                     SPECIALIZED=block if launch.specialized else 0)
        if launch.chunk:
            fn = wk.norm_fwd_looped_kernel
            flags.update(BLOCK_N=launch.chunk, EVEN=True, FORWARDS=launch.forwards,
                         CHUNKS=block // launch.chunk if launch.unrolled else 0)
        else:
            fn = wk.norm_fwd_wide_kernel
            flags.update(BLOCK_N=block, EARLY_W=launch.early_w, STREAM=launch.stream,
                         RELOAD=launch.reload, ONE_REDUCTION=launch.one_reduction)
        stack = spilled_bytes(fn, types, flags, aligned=("stride_x", "stride_r", "stride_y", "stride_h", "N"), **launch.launch_options())
        assert stack == 0, f"row launch spills {stack} bytes ({size}, {kernel}, {block})"
    # the norm backward's measured rows-kernel launches (NORM_BWD_ROW_LAUNCHES): no spills (the
    # 16-warp LayerNorm launch's register cap exists to fit two programs an SM, not to spill)
    for (size, kernel, block), launch in sorted(norm.NORM_BWD_ROW_LAUNCHES.items()):
        bwd_types = dict.fromkeys(["DY", "X", "W", "DH", "DX"], "*bf16" if size == 2 else "*fp32")
        bwd_types.update(MEAN="*fp32", RSTD="*fp32", DW_PARTIAL="*fp32", DB_PARTIAL="*fp32", offset="fp32")
        center = kernel.startswith("layer")
        flags = dict(CENTER=center, HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=center,
                     HAS_DH=kernel.startswith("add"), BLOCK_N=launch.block_n, ROWS=launch.rows,
                     PARTIALS_IN_MEMORY=False, PREFETCH=launch.prefetch, RELOAD=launch.reload)
        options = rows.launch_options(launch.num_warps, launch.max_registers)
        stack = spilled_bytes(nk.norm_bwd_rows_kernel, bwd_types, flags,
                              aligned=("stride_dy", "stride_x", "stride_dh", "stride_dx", "N"), **options)
        assert stack == 0, f"backward row launch spills {stack} bytes ({size}, {kernel}, {block})"
    # the split-row softmax backward at the op's launches: y and dy held under the register cap,
    # no spills (the launch's reason: 4-warp 8192-column programs spill 536-744 bytes); an H100
    # keeps the 8192-column launch, where the H200 takes the wide one for bf16 rows of 65536
    # columns and more and float32 rows of 262144 (BWD_SPLIT_WIDE_LAUNCHES_BY_MODEL)
    assert softmax_ops._bwd_split_plan(8192, 262144, 2, "cuda").block == 8192
    rows.device_capabilities = split_rows.device_capabilities = lambda device: h200
    softmax_ops._bwd_split_plan.cache_clear()
    assert softmax_ops._bwd_split_plan(8192, 65536, 2, "cuda").block == 16384
    assert softmax_ops._bwd_split_plan(4096, 32768, 2, "cuda").block == 8192
    for dt, tdt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        types = {"DY": "*" + dt, "Y": "*" + dt, "DX": "*" + dt, "WORDS": "*i64"}
        for N in (131072, 262144):
            plan = softmax_ops._bwd_split_plan(8192, N, tdt.itemsize, "cuda")
            assert plan is not None and plan.flag_words, f"expected a split backward ({dt}, {N})"
            want = (8192, 8) if (dt, N) == ("fp32", 131072) else (16384, 16)
            assert (plan.block, plan.num_warps) == want, f"{dt}, {N}: expected {want}, got {plan}"
            for log in (False, True):
                flags = dict(LOG=log, BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch)
                stack = spilled_bytes(sk.softmax_bwd_flags_kernel, types, flags,
                                      aligned=("stride_dy", "stride_y", "stride_dx", "N"), **plan.launch_options())
                assert stack == 0, f"split softmax backward spills {stack} bytes ({dt}, {N}, LOG={log})"
    rows.device_capabilities = split_rows.device_capabilities = lambda device: h100
    # the split-row LayerNorm backwards at their launches (the split kernel for rows wider than
    # the held / lagged kernels take, the held (2-byte) or lagged (4-byte) one at the benchmark
    # rows): under their register caps
    # they must not spill (their reason to exist: the whole-row kernel's partials spill at
    # 16384 columns)
    for dt, tdt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        p = "*" + dt
        types = dict.fromkeys(["DY", "X", "W", "DX"], p)
        types.update(MEAN="*fp32", RSTD="*fp32", DW_PARTIAL="*fp32", DB_PARTIAL="*fp32",
                     PARTIALS="*fp32", ARRIVALS="*i32")
        plan, lag, _, _ = norm._default_split(4096, 65536, tdt.itemsize, "cuda")
        assert lag is None, "65536 columns: expected the split kernel's launch"
        flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=True, BLOCK_N=plan.block,
                     CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch)
        stack = spilled_bytes(nk.layer_norm_bwd_split_kernel, types, flags,
                              aligned=("stride_dy", "stride_x", "stride_dx", "N"), **plan.launch_options())
        assert stack == 0, f"split LayerNorm backward spills {stack} bytes under its register cap ({dt})"
        plan, lag, lag_rows, hold = norm._default_split(4096, 16384, tdt.itemsize, "cuda")
        if hold is not None:
            types = {k: v for k, v in types.items() if k not in ("PARTIALS", "ARRIVALS")}
            flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=True, ROWS=lag_rows, BLOCK_N=plan.block,
                         CHUNKS_POW2=plan.chunks_pow2, HOLD=hold, PREFETCH=plan.prefetch, EVEN_N=True, STAGE=0)
            stack = spilled_bytes(nk.layer_norm_bwd_held_kernel, dict(types, SUMS="*i64"), flags,
                                  aligned=("stride_dy", "stride_x", "stride_dx", "N"), **plan.launch_options())
            assert stack == 0, f"held LayerNorm backward spills {stack} bytes under its register cap ({dt})"
        elif lag is not None:
            types = {k: v for k, v in types.items() if k not in ("PARTIALS", "ARRIVALS")}
            flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=True, ROWS=lag_rows, BLOCK_N=plan.block,
                         CHUNKS_POW2=plan.chunks_pow2, LAG=lag, STAGE=0)
            stack = spilled_bytes(nk.layer_norm_bwd_lag_kernel, dict(types, SUMS="*i64"), flags,
                                  aligned=("stride_dy", "stride_x", "stride_dx", "N"), **plan.launch_options())
            assert stack == 0, f"lagged LayerNorm backward spills {stack} bytes under its register cap ({dt})"
    # the pairs kernel (2-byte rows as int32 words) at its default launch
    plan = norm._default_pairs_plan(4096, 16384, 2, "cuda")
    assert plan is not None, "4096 x 16384 bf16: expected the pairs kernel's launch"
    types = dict(DY="*i32", X="*i32", W="*i32", DX="*bf16", MEAN="*fp32", RSTD="*fp32",
                 DW_PARTIAL="*fp32", DB_PARTIAL="*fp32", SUMS="*i64")
    options = norm.LAYER_NORM_BWD_PAIRS
    flags = dict(HAS_WEIGHT=True, WEIGHT_GRAD=True, BIAS_GRAD=True, BLOCK_N=plan.block,
                 CHUNKS_POW2=plan.chunks_pow2, BF16=True, HOLD_W=options["hold_weight"],
                 HOLD_X=options["hold_rows"], UNROLL=options["unroll"], EVEN_N=True, WIDE=False,
                 EVICT_FIRST=options["evict_first"], STAGE=0, LAG=options.get("lag", 1),
                 L2_AHEAD=options.get("l2_ahead", 0), FULL_WORDS=plan.chunks == plan.chunks_pow2,
                 KEEP_ROWS=options.get("keep_rows", False))
    assert set(flags) | {"DY", "X", "W", "MEAN", "RSTD", "DX", "DW_PARTIAL", "DB_PARTIAL", "SUMS",
                         "stride_dy", "stride_x", "stride_dx", "M", "N"} == set(nk.layer_norm_bwd_pairs_kernel.arg_names)
    stack = spilled_bytes(nk.layer_norm_bwd_pairs_kernel, types, flags,
                          aligned=("stride_dy", "stride_x", "stride_dx", "N"), **plan.launch_options())
    assert stack <= PAIRS_SPILL_ALLOWED, f"pairs LayerNorm backward spills {stack} bytes under its register cap"
    # the split-row norm forward at its default launches of 262144 columns and 65536: without a
    # residual the re-reading kernel (8192 columns; bf16 8 warps 2 an SM, float32 16 warps 1 an
    # SM), with one bf16's lag kernel from 16 chunks and the flags kernel under them and in
    # float32; N a multiple of 16 as a launch specialises it. Spills measured under Triton
    # 3.9's ptxas: none but the float32 flags kernel's few bytes (8 for add+RMSNorm at 262144),
    # measured faster than the launches that spill less (benchmarks/norm_split_fwd.py spills;
    # normfwd-sweep-2026-11-25-h100.json)
    from warpforge.ops._kernels.norm_split import (
        norm_fwd_flags_kernel,
        norm_fwd_lag_kernel,
        norm_fwd_reread_kernel,
    )
    for dt, tdt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        types = dict.fromkeys(["X", "R", "W", "B", "Y", "H"], "*" + dt)
        types.update(MEAN="*fp32", RSTD="*fp32", WORDS="*i64", eps="fp32", offset="fp32")
        for N in (262144, 65536):
            for center, residual in ((False, False), (False, True), (True, False)):
                plan = norm.norm_fwd_split_plan(8192, N, tdt.itemsize, "cuda", residual)
                assert plan is not None and plan.flag_words, f"expected a split forward ({dt})"
                options = norm.norm_fwd_split_options(tdt.itemsize, residual, plan.chunks, center)
                flags = dict(CENTER=center, HAS_WEIGHT=True, HAS_BIAS=center,
                             BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0)
                aligned = ("stride_x", "stride_y", "N", "M")
                if plan.reread_lag:
                    kernel = norm_fwd_reread_kernel
                    flags.update(LAG=plan.reread_lag, PREFETCH=plan.prefetch,
                                 HOLD_W=options.get("hold_weight", False),
                                 HOLD_B=options.get("hold_bias", False),
                                 ONE_PASS=options.get("one_pass", False), LEAN=dt == "bf16",
                                 HAS_OFFSET=False, EVEN=True, KEEP="evict_last",
                                 DROP="evict_first")
                else:
                    flags.update(HAS_RESIDUAL=residual)
                    aligned += ("stride_r", "stride_h")
                    if options:
                        kernel = norm_fwd_lag_kernel
                        flags.update(DEPTH=options["lag_depth"], HOLD_W=options.get("hold_weight", False),
                                     PACKED=options.get("packed", False),
                                     ONE_PASS=options.get("one_pass", False))
                    else:
                        kernel = norm_fwd_flags_kernel
                        flags.update(PREFETCH=plan.prefetch)
                expected_kernel = (norm_fwd_reread_kernel if not residual else
                                   norm_fwd_lag_kernel if dt == "bf16" and N == 262144 else norm_fwd_flags_kernel)
                assert kernel is expected_kernel, (dt, N, center, residual)
                stack = spilled_bytes(kernel, types, flags, aligned=aligned, **plan.launch_options())
                allowed = 128 if kernel is norm_fwd_flags_kernel and dt == "fp32" else 0
                assert stack <= allowed, f"split norm forward spills {stack} bytes ({dt}, N={N}, CENTER={center}, residual={residual})"
    print("compiled-all")
    """
)


def test_kernels_compile_for_sm90(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA present: the GPU tier compiles and runs these kernels for real")
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except ImportError as exc:  # an older Triton without the explicit-target API
        pytest.skip(f"this Triton cannot compile for a named target: {exc}")
    env = dict(os.environ, TRITON_INTERPRET="0", WARPFORGE_INTERPRET="0", PYTHONPATH=str(SRC))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # private: no races with other runs
    done = subprocess.run(
        [sys.executable, "-c", COMPILE_ALL], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "compiled-all" in done.stdout, done.stderr[-4000:]
