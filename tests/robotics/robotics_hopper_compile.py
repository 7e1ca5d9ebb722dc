"""Compile the robotics kernels for Hopper (sm_90) without a GPU and print a JSON summary.

Run as a script with TRITON_INTERPRET=0 (under the interpreter @triton.jit yields functions the
compiler cannot take): ``python robotics_hopper_compile.py``.
"""

from __future__ import annotations

import json
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HOPPER = GPUTarget("cuda", 90, 32)


def compile_for_hopper(fn, types: dict[str, object], constants: dict, divisible: list[str]) -> str:
    """PTX of ``fn``; integer arguments are i32 unless given (a tuple argument's type is a tuple
    of types), and pointers and ``divisible`` sizes (every entry of a tuple) are specialised as
    multiples of 16, as a launch with such values would be."""
    signature = {
        name: "constexpr" if name in constants else types.get(name, "i32") for name in fn.arg_names
    }
    attrs = {}
    for name in divisible:
        index, kind = fn.arg_names.index(name), signature[name]
        for path in (
            [(index, k) for k in range(len(kind))] if isinstance(kind, tuple) else [(index,)]
        ):
            attrs[path] = [["tt.divisibility", 16]]
    source = ASTSource(fn, signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=HOPPER, options={"num_warps": 4}).asm["ptx"]


def resample_cases(kernels) -> dict[str, str]:
    constants = {"METHOD": 0, "POLICY": 1, "TIME_KIND": 0, "COMPUTE_F64": False,
                 "HAS_LENGTHS": True, "WRITE_MASK": True, "PROBES": 4, "PREFETCH_V": 0,
                 "PREFETCH_T": 0, "BLOCK_T": 32, "BLOCK_D": 128,
                 "q_stride_t": 1, "t_ss": 1, "v_ss": 128, "o_st": 128}  # fmt: skip
    types = {"q_ptr": "*fp32", "lengths_ptr": "*i64", "v": "*bf16", "t": "*fp32", "o": "*bf16",
             "m": "*u8"}  # fmt: skip
    divisible = ["q_ptr", "v", "t", "o", "m", "v_sb", "o_sb", "t_sb", "q_stride_b", "D", "T", "B"]
    out = {"resample_bf16": compile_for_hopper(kernels.resample_kernel, types, constants,
                                               divisible)}  # fmt: skip
    slerp = {**constants, "METHOD": 3, "BLOCK_D": 4, "TIME_KIND": 2, "v_ss": 4, "o_st": 4}
    types64 = {**types, "q_ptr": "*i64", "t": "*i64", "v": "*fp32", "o": "*fp32"}
    out["resample_slerp_int64"] = compile_for_hopper(kernels.resample_kernel, types64, slerp, [])
    # each program asks L2 for its share of its row before its first load
    out["resample_prefetch"] = compile_for_hopper(
        kernels.resample_kernel, types, {**constants, "PREFETCH_V": 64, "PREFETCH_T": 32},
        divisible,
    )  # fmt: skip
    backward = {"METHOD": 0, "POLICY": 2, "TIME_KIND": 1, "COMPUTE_F64": False,
                "HAS_LENGTHS": True, "QUERY_GRAD": True, "PROBES": 2, "BLOCK_T": 32,
                "BLOCK_D": 128}  # fmt: skip
    backward_types = {"q_ptr": "*fp64", "lengths_ptr": "*i64", "v": "*bf16", "t": "*fp64",
                      "g": "*bf16", "gv": "*fp32", "gq": "*fp32"}  # fmt: skip
    out["resample_backward"] = compile_for_hopper(
        kernels.resample_backward_kernel, backward_types, backward, []
    )
    brackets_types = {**backward_types, "order": "*i64", "ia_ptr": "*i32", "ib_ptr": "*i32",
                      "wa_ptr": "*fp32", "wb_ptr": "*fp32"}  # fmt: skip
    out["resample_brackets"] = compile_for_hopper(
        kernels.resample_brackets_kernel, brackets_types, {**backward, "BLOCK_D": 32}, []
    )
    gather_types = {"first_ptr": "*i32", "end_ptr": "*i32", "ia_ptr": "*i32", "ib_ptr": "*i32",
                    "wa_ptr": "*fp32", "wb_ptr": "*fp32", "order": "*i64", "g": "*fp32",
                    "gv": "*fp32"}  # fmt: skip
    gather = {"COMPUTE_F64": False, "BLOCK_S": 64, "BLOCK_D": 32}
    out["resample_gather_grad"] = compile_for_hopper(
        kernels.resample_gather_grad_kernel, gather_types, gather, ["g", "gv", "g_sb", "gv_sb"]
    )
    int_tuples = ("v_strides_b", "v_strides_s", "t_strides_b", "t_strides_s", "samples",
                  "out_strides_b", "out_strides_t", "out_cols", "widths", "first_items",
                  "search_steps")  # fmt: skip
    for time_kind, time_type in ((1, "fp64"), (2, "i64")):
        # six streams in five kinds, every method; streams 1 and 2 share a kind (one tile)
        value_types = ("bf16", "fp32", "fp32", "fp16", "fp32", "fp64")
        streams = len(value_types)
        types = {"q_ptr": f"*{time_type}", "values": tuple(f"*{t}" for t in value_types),
                 "times": (f"*{time_type}",) * streams, "outs": ("*fp32",) * streams,
                 "masks": ("*u8",) * streams}  # fmt: skip
        types |= {name: ("i32",) * streams for name in int_tuples}
        constants = {"ROLES": (0, 1, 3, 0, 0, 0), "METHODS": (0, 1, 1, 2, 3, 0), "BLOCK_DS": (256, 32, 32, 8, 4, 16),
                     "BLOCK_TS": (16, 128, 128, 256, 256, 64), "POLICY": 2,
                     "TIME_KIND": time_kind, "COMPUTE_F64": True, "WRITE_MASK": True,
                     "PROBES": 4, "OUT_VECS": (1, 2, 2, 1, 4, 1)}  # fmt: skip
        out[f"streams_{time_type}"] = compile_for_hopper(
            kernels.resample_streams_kernel, types, constants, []
        )
    # three bf16 streams of one kind, one tile: with every stream's rows 16-byte aligned (as the
    # launch specialises them) the tile's pick of them must still load in 16-byte vectors
    types = {"q_ptr": "*fp32", "values": ("*bf16",) * 3, "times": ("*fp32",) * 3,
             "outs": ("*fp32",) * 3, "masks": ("*u8",) * 3}  # fmt: skip
    types |= {name: ("i32",) * 3 for name in int_tuples}
    shared = {"ROLES": (1, 2, 3), "METHODS": (0,) * 3, "BLOCK_DS": (256,) * 3,
              "BLOCK_TS": (8,) * 3, "POLICY": 0, "TIME_KIND": 0, "COMPUTE_F64": False,
              "WRITE_MASK": False, "PROBES": 4, "OUT_VECS": (4,) * 3}  # fmt: skip
    aligned = ["values", "outs", "v_strides_b", "v_strides_s", "out_strides_b", "out_strides_t",
               "out_cols", "widths"]  # fmt: skip
    out["streams_shared_bf16"] = compile_for_hopper(
        kernels.resample_streams_kernel, types, shared, aligned
    )
    # align.fwd's float32 output: 550 columns, rows 8-byte aligned at best (strides not
    # multiples of 16, so unspecialised), each stream's column and width even: 8-byte stores
    types = {"q_ptr": "*fp32", "values": ("*bf16", "*fp32", "*fp32"), "times": ("*fp32",) * 3,
             "outs": ("*fp32",) * 3, "masks": ("*u8",) * 3}  # fmt: skip
    types |= {name: ("i32",) * 3 for name in int_tuples}
    for vecs in ((2, 2, 2), (1, 1, 1)):
        three = {"ROLES": (0, 0, 0), "METHODS": (0, 0, 0), "BLOCK_DS": (256, 32, 8),
                 "BLOCK_TS": (8, 64, 128), "POLICY": 0, "TIME_KIND": 0, "COMPUTE_F64": False,
                 "WRITE_MASK": False, "PROBES": 4, "OUT_VECS": vecs}  # fmt: skip
        out[f"streams_out_vec{vecs[0]}"] = compile_for_hopper(
            kernels.resample_streams_kernel, types, three, ["values", "outs", "v_strides_b"]
        )
    return out


def voxelize_cases(kernels) -> dict[str, str]:
    types = {"points_ptr": "*fp32", "features_ptr": "*bf16", "batch_ptr": "*i64",
             "features_out_ptr": "*fp32", "count_ptr": "*i32", "occupancy_ptr": "*u8",
             "grid_ptr": "*fp64"}  # fmt: skip
    out = {}
    for accumulate, count, divide, occupancy in [(0, True, False, True), (1, False, True, False),
                                                 (2, False, False, True)]:  # fmt: skip
        constants = {"ACCUMULATE": accumulate, "WRITE_COUNT": count, "DIVIDE_BY_COUNT": divide,
                     "HAS_BATCH": True, "WRITE_OCCUPANCY": occupancy, "BLOCK_N": 1024,
                     "BLOCK_C": 4}  # fmt: skip
        out[f"voxelize_{accumulate}{int(count)}{int(divide)}"] = compile_for_hopper(
            kernels.voxelize_kernel, types, constants, []
        )
    return out


def main() -> None:
    from warpforge.robotics._kernels import resample, voxelize

    summary = {}
    for name, ptx in {**resample_cases(resample), **voxelize_cases(voxelize)}.items():
        summary[name] = {
            "v4_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.v4\.b32", ptx)),
            "b16_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.b16", ptx)),
            "atomics": len(re.findall(r"\batom\.", ptx)) + len(re.findall(r"\bred\.", ptx)),
            # acq_rel atomics compile to a GPU-wide fence and an L1 invalidation each
            "ordered_atomics": len(re.findall(r"\b(?:atom|red)\.[\w.]*acq_rel", ptx)),
            "prefetches": len(re.findall(r"prefetch\.global\.L2", ptx)),
            "scalar_b32_stores": len(re.findall(r"st\.global(?:\.(?!v[24]\b)\w+)*\.b32", ptx)),
            "vector_b32_stores": len(re.findall(r"st\.global(?:\.\w+)*\.v[24]\.b32", ptx)),
        }
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main()
