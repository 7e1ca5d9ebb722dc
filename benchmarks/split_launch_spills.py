"""Registers and local memory (spilled bytes, cuobjdump's STACK) of the split-row softmax forward
and flag-word cross-entropy kernels at candidate launches, compiled for sm_90 without a GPU (the
way ``tests/ops/test_row_kernels_compile.py`` does; this machine's Triton and ptxas, which may
differ from the GPU's: the GPU sweeps list Triton's own ``n_spills``, local bytes / 4).

    PYTHONPATH=src python benchmarks/split_launch_spills.py > OUT.txt       # CPU, a few minutes
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import warpforge.ops._rows as rows
import warpforge.ops._split_rows as split_rows
from warpforge.ops._kernels import cross_entropy as ck
from warpforge.ops._kernels import softmax as sk
from warpforge.ops._split_rows import split_row_plan
from warpforge.runtime import DeviceCapabilities

H100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
TARGET = GPUTarget("cuda", 90, 32)
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")


def resources(fn, types, constexprs, num_warps, aligned=(), **options) -> tuple[int, int, int]:
    """(registers, stack bytes, SASS instructions) of one compiled kernel; constexpr parameters
    left out of ``constexprs`` take their defaults, as in a launch."""
    defaults = {p.name: p.default for p in fn.params
                if p.is_constexpr and p.default is not inspect.Parameter.empty}  # fmt: skip
    constexprs = {**defaults, **constexprs}
    signature = {a: "constexpr" if a in constexprs else types.get(a, "i32") for a in fn.arg_names}
    # a launch specialises pointers and these ints as multiples of 16 (16-byte vectors)
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names)
             if a not in constexprs and (signature[a].startswith("*") or a in aligned)}  # fmt: skip
    kernel = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
        target=TARGET, options={"num_warps": num_warps, **options},
    )  # fmt: skip
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True)
        sass = subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True)
    reg = re.search(r"REG:([0-9]+)", res.stdout)
    stack = re.search(r"STACK:([0-9]+)", res.stdout)
    # one instruction a /*offset*/ line of the listing
    instructions = len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]", sass.stdout))
    return int(reg.group(1)), int(stack.group(1)), instructions


def usage(fn, types, constexprs, num_warps, aligned=(), **options) -> tuple[int, int]:
    """(registers, stack bytes) of one compiled kernel (see :func:`resources`)."""
    return resources(fn, types, constexprs, num_warps, aligned, **options)[:2]


def main() -> None:
    rows.device_capabilities = split_rows.device_capabilities = lambda device: H100
    print(f"triton {triton.__version__}, sm_90")
    launches = ((8192, 8, 4), (8192, 4, 4), (4096, 4, 8), (16384, 8, 2))
    for dt in ("bf16", "fp16", "fp32"):
        types = {"X": "*" + dt, "Y": "*" + dt, "PARTIALS": "*fp32", "ARRIVALS": "*i32"}
        two_bytes = dt != "fp32"
        for block, warps, per_sm in launches:
            plan = split_row_plan(8192, 262144, "cuda", block=block, num_warps=warps,
                                  programs_per_sm=per_sm, prefetch=two_bytes,
                                  release_only=two_bytes)  # fmt: skip
            for log in (False, True):
                flags = dict(LOG=log, BLOCK_N=block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0,
                             PREFETCH=plan.prefetch, RELEASE_ONLY=plan.release_only)  # fmt: skip
                reg, stack = usage(sk.softmax_fwd_split_kernel, types, flags,
                                   aligned=("stride_x", "stride_y", "N"),
                                   **plan.launch_options())  # fmt: skip
                print(f"softmax_fwd_split {dt} N=262144 {block}/{warps} x{per_sm} LOG={log} "
                      f"maxnreg={plan.max_registers}: REG {reg} STACK {stack}", flush=True)  # fmt: skip
    for dt in ("bf16", "fp16"):
        p = "*" + dt
        types = dict(logits_ptr=p, grad_ptr=p, grad_logits_ptr=p, target_ptr="*i64",
                     loss_ptr="*fp32", lse_ptr="*fp32", grad_loss_ptr="*fp32",
                     label_smoothing="fp32", z_loss="fp32", partials_ptr="*fp32",
                     arrivals_ptr="*i32", words_ptr="*i64")  # fmt: skip
        for vocab in (65536, 128256, 262144):
            for block, warps, per_sm in ((4096, 4, 8), (8192, 4, 4), (8192, 8, 4)):
                plan = split_row_plan(4096, vocab, "cuda", block=block, num_warps=warps,
                                      programs_per_sm=per_sm, prefetch=True, flag_words=True)  # fmt: skip
                if plan.chunks_pow2 > 64:
                    continue
                for smoothing in (False, True):
                    flags = dict(HAS_SMOOTHING=smoothing, CHECK_TARGETS=False, BLOCK=block,
                                 CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=True)  # fmt: skip
                    reg, stack = usage(ck.cross_entropy_fwd_grad_flags_kernel, types, flags,
                                       aligned=("n_cols", "logits_row_stride", "grad_row_stride"),
                                       **plan.launch_options())  # fmt: skip
                    print(f"ce_fwd_grad_flags {dt} V={vocab} {block}/{warps} x{per_sm} "
                          f"chunks_pow2={plan.chunks_pow2} smoothing={smoothing}: "
                          f"REG {reg} STACK {stack}", flush=True)  # fmt: skip

    softmax_backward()


BWD_LAUNCHES = ((8192, 4, 4), (8192, 8, 2), (8192, 8, 4), (4096, 4, 4), (4096, 4, 8))


def softmax_backward(dtypes=("bf16", "fp32"), n_cols=(131072, 262144)) -> None:
    """The split-row backward (``softmax_bwd_flags_kernel``): y and dy held in registers."""
    rows.device_capabilities = split_rows.device_capabilities = lambda device: H100
    for dt in dtypes:
        types = {"DY": "*" + dt, "Y": "*" + dt, "DX": "*" + dt, "WORDS": "*i64"}
        for n in n_cols:
            for (block, warps, per_sm), prefetch in itertools.product(BWD_LAUNCHES, (True, False)):
                plan = split_row_plan(8192, n, "cuda", block=block, num_warps=warps,
                                      programs_per_sm=per_sm, prefetch=prefetch, flag_words=True)  # fmt: skip
                if plan is None or plan.chunks_pow2 > 64:
                    continue
                for log in (False, True):
                    flags = dict(LOG=log, BLOCK_N=block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0,
                                 PREFETCH=prefetch)  # fmt: skip
                    reg, stack = usage(sk.softmax_bwd_flags_kernel, types, flags,
                                       aligned=("stride_dy", "stride_y", "stride_dx", "N"),
                                       **plan.launch_options())  # fmt: skip
                    print(f"softmax_bwd_flags {dt} N={n} {block}/{warps} x{per_sm} "
                          f"prefetch={prefetch} LOG={log} "
                          f"maxnreg={plan.max_registers}: REG {reg} STACK {stack}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
