"""Compile causal_attention_scores' generated kernel for Hopper (sm_90) without a GPU and print
a JSON summary of each variant's PTX; likewise the suite's backward row kernel with its weight
gradient summed in the kernel (codegen.COLUMN_SUMS).

Run as a script with TRITON_INTERPRET=0 (under the interpreter @triton.jit yields functions the
compiler cannot take): ``python blueprint_hopper_compile.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from warpforge.blueprint import KernelSourceGenerator, problems
from warpforge.blueprint.generated_modules import generated_kernel, load_source_module

HOPPER = GPUTarget("cuda", 90, 32)
CASES = {  # name: (EVEN_M and EVEN_N, LAST_ROWS_FIRST)
    "kept_range_even": (True, False),
    "kept_range_ragged": (False, False),
    "kept_range_ragged_last_rows_first": (False, True),
}


def _kernel():
    """The generated kernel, imported as the compiler imports it (from a file: Triton's JIT
    reads kernel source from there)."""
    source = KernelSourceGenerator(problems.attention_scores_blueprint("bfloat16")).source()
    digest = hashlib.sha256(source.encode()).hexdigest()
    return generated_kernel(
        load_source_module(source.encode(), digest), "k1_matmul_mul_where_softmax"
    )


def compile_case(kernel, even: bool, last_rows_first: bool) -> str:
    """PTX at the bench shape's launch (64 x 128 tiles, K = 64 in one block, 2 stages, 4 warps),
    unit strides and 16-divisible sizes specialised as a launch with such values would be."""
    constants = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "EVEN_K": True,
                 "SINGLE_K": True, "ONE_TILE": False, "EVEN_M": even, "EVEN_N": even,
                 "LAST_ROWS_FIRST": last_rows_first, "INDEX_64": False,
                 "a_sk": 1, "b_sk": 1, "p_causal_s3": 1, "p_softmax_0_s3": 1}  # fmt: skip
    types = {"a_ptr": "*bf16", "b_ptr": "*bf16", "p_causal": "*i1", "p_softmax_0": "*bf16"}
    names = kernel.arg_names
    signature = {n: "constexpr" if n in constants else types.get(n, "i32") for n in names}
    divisible = [*types, "a_sb", "a_sm", "b_sb", "b_sn", "M", "N", "K"]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    source = ASTSource(kernel, signature, constexprs=constants, attrs=attrs)
    options = {"num_warps": 4, "num_stages": 2}
    return triton.compile(source, target=HOPPER, options=options).asm["ptx"]


def column_sums_backward() -> str:
    """PTX of residual_rmsnorm_swiglu's generated backward row kernel in bf16 with the weight
    gradient as a column sum, at a launch for 4096-wide rows (2 rows a block, 8 warps)."""
    from warpforge.blueprint import codegen, default_registry
    from warpforge.blueprint.autodiff import backward_blueprint

    codegen.COLUMN_SUMS = True
    ir, _ = backward_blueprint(
        problems.residual_rmsnorm_swiglu_blueprint("bfloat16"), default_registry()
    )
    source = KernelSourceGenerator(ir).source()
    module = load_source_module(source.encode(), hashlib.sha256(source.encode()).hexdigest())
    (name,) = [n for n in dir(module) if n.startswith("k0_")]
    kernel = generated_kernel(module, name)
    constants = {"BLOCK_M": 2, "BLOCK_N": 4096, "INDEX_64": False}
    names = kernel.arg_names
    pointers = [n for n in names if n.startswith("p_") and "_s" not in n.removeprefix("p_")]
    types = {n: "*fp32" if n.endswith("_partial") else "*bf16" for n in pointers}
    signature = {n: "constexpr" if n in constants else types.get(n, "i32") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in pointers}
    source_ast = ASTSource(kernel, signature, constexprs=constants, attrs=attrs)
    return triton.compile(source_ast, target=HOPPER, options={"num_warps": 8}).asm["ptx"]


def main() -> int:
    kernel = _kernel()
    summary: dict[str, dict] = {"causal": {}}
    for name, (even, last_rows_first) in CASES.items():
        ptx = compile_case(kernel, even, last_rows_first)
        summary["causal"][name] = {
            "selects": ptx.count("selp."),
            "exp2": ptx.count("ex2.approx"),
            "fma": ptx.count("fma.rn.f32"),
            "wgmma": ptx.count("wgmma.mma_async"),
        }
    ptx = column_sums_backward()
    summary["column_sums"] = {"stores": ptx.count("st.global"), "branches": ptx.count("bra")}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
