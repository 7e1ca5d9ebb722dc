"""The forward split in two launches, timed by robotics_sweep.py (``SplitConfig``): an experiment,
not a library path. A search kernel stores each query's two samples and weight; a gather-lerp
kernel with no dependent search then reads them, the two value rows, and writes the output. Built
from the library kernel's own pieces, so it computes the same bits."""

from __future__ import annotations

import triton
import triton.language as tl

from warpforge.robotics._kernels import resample as k


@triton.jit
def search_kernel(q_ptr, q_sb, q_st, T, t, t_sb, t_ss, S, ia_ptr, ib_ptr, w_ptr, steps,
                  POLICY: tl.constexpr, TIME_KIND: tl.constexpr, PROBES: tl.constexpr,
                  BLOCK_T: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    num_t_blocks = tl.cdiv(T, BLOCK_T)
    row = pid // num_t_blocks
    offs_t, t_in, ia, ib, w, _, in_range, is_nan = k._bracket(
        q_ptr, q_sb, q_st, T, t, t_sb, t_ss, S, row, pid % num_t_blocks, steps,
        0, POLICY, TIME_KIND, False, PROBES, BLOCK_T,
    )  # fmt: skip
    # a NaN weight makes the blend NaN: it carries the NaN rules to the second kernel
    nan = is_nan
    if POLICY == 2:
        nan = nan | ~in_range
    slot = row.to(tl.int64) * T + offs_t
    tl.store(ia_ptr + slot, ia, mask=t_in)
    tl.store(ib_ptr + slot, ib, mask=t_in)
    tl.store(w_ptr + slot, tl.where(nan, float("nan"), w), mask=t_in)


@triton.jit
def lerp_kernel(ia_ptr, ib_ptr, w_ptr, T, v, v_sb, v_ss, o, o_sb, o_st, D,
                BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    num_d_blocks = tl.cdiv(D, BLOCK_D)
    num_t_blocks = tl.cdiv(T, BLOCK_T)
    row, t_block, d_block = k._item_coords(pid, num_t_blocks, num_d_blocks)
    offs_t = t_block * BLOCK_T + tl.arange(0, BLOCK_T)
    t_in = offs_t < T
    slot = row.to(tl.int64) * T + offs_t
    ia = tl.load(ia_ptr + slot, mask=t_in, other=0)
    ib = tl.load(ib_ptr + slot, mask=t_in, other=0)
    w = tl.load(w_ptr + slot, mask=t_in, other=0)
    offs_d = d_block * BLOCK_D + tl.arange(0, BLOCK_D)
    va, vb, tile_in = k._gather_rows(v, v_sb, v_ss, row, ia, ib, t_in, offs_d, D)
    k._finish_tile(va, vb, w, t_in, offs_t < 0, offs_t, t_in, offs_d, tile_in, T,
                   o, o_sb, o_st, 0, o, row, d_block, 0, 0, False, False)  # fmt: skip
