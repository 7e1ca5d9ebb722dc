"""Rotary position embedding kernel: one launch rotates q and k, one program per (token, block of
heads of q and/or of k).

The grid is 1-D and token-major: consecutive programs take consecutive head blocks of one token,
then of the next, so the launch walks q and k in address order as a copy does. (With the head
block on a second grid axis, every token's first block ran before any second block: with 64
query heads in two blocks the stream read 8 KB of every 16 KB row, then came back for the rest.)

One launch instead of two, so k (a few heads under grouped-query attention) never runs as a
small launch of its own with its own ramp-up and tail. A program takes one block of q's heads or
of k's, or (``PAIRED``) a block of q's and the same-numbered block of k's. It loads the token's
cos/sin row once and applies it to every head in its block, so the table costs one small read
per token instead of one per head. Each output element pairs with one partner: ``d <-> d + D/2``
(half rotation, NeoX/Llama ``rotate_half``) or ``2i <-> 2i+1`` (interleaved, GPT-J). With
per-element tables ``c``, ``s`` the forward is

    o1 = x1 * c1 - x2 * s1        o2 = x2 * c2 + x1 * s2

and the backward is its transpose, ``g1 * c1 + g2 * s2`` and ``g2 * c2 - g1 * s1``: the forward
with ``(s1, s2) -> (-s2, -s1)`` (a rotation by ``-sin`` when the two halves share a table).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _rope_apply(
    token,
    head_block,
    x_ptr,
    out_ptr,
    cos_ptr,
    sin_ptr,
    seq_len,
    n_heads,
    x_stride_b,
    x_stride_s,
    x_stride_h,
    out_stride_b,
    out_stride_s,
    out_stride_h,
    table_stride_b,
    table_stride_s,
    HEAD_DIM: tl.constexpr,
    HALF_TABLE: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    BACKWARD: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    b = token // seq_len
    s = token % seq_len
    heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    pair = tl.arange(0, BLOCK_D)
    pair_mask = pair < HEAD_DIM // 2
    if INTERLEAVED:
        first = 2 * pair
        second = 2 * pair + 1
    else:
        first = pair
        second = pair + HEAD_DIM // 2

    table = b * table_stride_b + s * table_stride_s
    if HALF_TABLE:
        c1 = tl.load(cos_ptr + table + pair, mask=pair_mask, other=0.0).to(tl.float32)
        s1 = tl.load(sin_ptr + table + pair, mask=pair_mask, other=0.0).to(tl.float32)
        c2 = c1
        s2 = s1
    else:
        c1 = tl.load(cos_ptr + table + first, mask=pair_mask, other=0.0).to(tl.float32)
        c2 = tl.load(cos_ptr + table + second, mask=pair_mask, other=0.0).to(tl.float32)
        s1 = tl.load(sin_ptr + table + first, mask=pair_mask, other=0.0).to(tl.float32)
        s2 = tl.load(sin_ptr + table + second, mask=pair_mask, other=0.0).to(tl.float32)
    if BACKWARD:
        s1, s2 = -s2, -s1

    mask = (heads[:, None] < n_heads) & pair_mask[None, :]
    x_row = x_ptr + b * x_stride_b + s * x_stride_s + heads[:, None].to(tl.int64) * x_stride_h
    # read once, written once: no reason to keep either in L2 (the tables should stay there)
    x1 = tl.load(x_row + first[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
    x2 = tl.load(x_row + second[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
    x1 = x1.to(tl.float32)
    x2 = x2.to(tl.float32)
    o1 = x1 * c1[None, :] - x2 * s1[None, :]
    o2 = x2 * c2[None, :] + x1 * s2[None, :]
    out_row = (
        out_ptr + b * out_stride_b + s * out_stride_s + heads[:, None].to(tl.int64) * out_stride_h
    )
    tl.store(out_row + first[None, :], o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + second[None, :], o2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(
    q_ptr, q_out_ptr, k_ptr, k_out_ptr, cos_ptr, sin_ptr, seq_len, q_heads, k_heads,
    q_stride_b, q_stride_s, q_stride_h, qo_stride_b, qo_stride_s, qo_stride_h,
    k_stride_b, k_stride_s, k_stride_h, ko_stride_b, ko_stride_s, ko_stride_h,
    table_stride_b, table_stride_s, blocks_per_token,
    HEAD_DIM: tl.constexpr, HALF_TABLE: tl.constexpr, INTERLEAVED: tl.constexpr,
    BACKWARD: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
    BLOCK_D: tl.constexpr, PAIRED: tl.constexpr,
):  # fmt: skip
    """q and k of one token; the backward (``BACKWARD``) maps output gradients to input
    gradients. ``blocks_per_token`` programs per token, program ``token * blocks_per_token +
    block``. With ``PAIRED``: ``max(q_blocks, k_blocks)`` blocks, block ``j`` rotating q's head
    block ``j`` and k's head block ``j`` where they exist (one program per token when each fits
    one block); else ``q_blocks + k_blocks``, one block each."""
    program = tl.program_id(0)  # the grid's size fits an int32
    token = (program // blocks_per_token).to(tl.int64)
    block = program % blocks_per_token
    q_blocks = tl.cdiv(q_heads, BLOCK_HQ)
    if PAIRED:
        do_q = block < q_blocks
        do_k = block < tl.cdiv(k_heads, BLOCK_HK)
        k_block = block
    else:
        do_q = block < q_blocks
        do_k = block >= q_blocks
        k_block = block - q_blocks
    if do_q:
        _rope_apply(
            token, block, q_ptr, q_out_ptr, cos_ptr, sin_ptr, seq_len, q_heads,
            q_stride_b, q_stride_s, q_stride_h, qo_stride_b, qo_stride_s, qo_stride_h,
            table_stride_b, table_stride_s,
            HEAD_DIM, HALF_TABLE, INTERLEAVED, BACKWARD, BLOCK_HQ, BLOCK_D,
        )  # fmt: skip
    if do_k:
        _rope_apply(
            token, k_block, k_ptr, k_out_ptr, cos_ptr, sin_ptr, seq_len, k_heads,
            k_stride_b, k_stride_s, k_stride_h, ko_stride_b, ko_stride_s, ko_stride_h,
            table_stride_b, table_stride_s,
            HEAD_DIM, HALF_TABLE, INTERLEAVED, BACKWARD, BLOCK_HK, BLOCK_D,
        )  # fmt: skip
