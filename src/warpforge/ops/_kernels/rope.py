"""Rotary position embedding kernel: one launch rotates q and k, one program per (token, block of
heads of q and/or of k).

The grid is 1-D and token-major: consecutive programs take consecutive head blocks of one token,
then of the next, so the launch walks q and k in address order as a copy does. (With the head
block on a second grid axis, every token's first block ran before any second block: with 64
query heads in two blocks the stream read 8 KB of every 16 KB row, then came back for the rest.)

One launch instead of two, so k (a few heads under grouped-query attention) never runs as a
small launch of its own with its own ramp-up and tail. A program takes one block of q's heads or
of k's, or (``PAIRED``) a block of q's and the same-numbered block of k's, both loaded before
either is stored. It loads the token's
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
def _rope_tables(
    b, s, cos_ptr, sin_ptr, table_stride_b, table_stride_s,
    HEAD_DIM: tl.constexpr, HALF_TABLE: tl.constexpr, INTERLEAVED: tl.constexpr,
    BACKWARD: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The token's columns of each pair's two elements and their float32 tables."""
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
    return first, second, pair_mask, c1, c2, s1, s2


@triton.jit
def _rope_load(
    b, s, head_block, x_ptr, n_heads, x_stride_b, x_stride_s, x_stride_h,
    first, second, pair_mask, BLOCK_H: tl.constexpr,
):  # fmt: skip
    """One block of heads' two halves in float32, the block's heads and its mask (all false
    where ``n_heads`` is 0)."""
    heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = (heads[:, None] < n_heads) & pair_mask[None, :]
    x_row = x_ptr + b * x_stride_b + s * x_stride_s + heads[:, None].to(tl.int64) * x_stride_h
    # read once, written once: no reason to keep either in L2 (the tables should stay there)
    x1 = tl.load(x_row + first[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
    x2 = tl.load(x_row + second[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
    return x1.to(tl.float32), x2.to(tl.float32), heads, mask


@triton.jit
def _rope_store(
    b, s, heads, mask, x1, x2, c1, c2, s1, s2, out_ptr, out_stride_b, out_stride_s,
    out_stride_h, first, second,
):  # fmt: skip
    o1 = x1 * c1[None, :] - x2 * s1[None, :]
    o2 = x2 * c2[None, :] + x1 * s2[None, :]
    out_row = (
        out_ptr + b * out_stride_b + s * out_stride_s + heads[:, None].to(tl.int64) * out_stride_h
    )
    tl.store(out_row + first[None, :], o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + second[None, :], o2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_block(
    b, s, head_block, x_ptr, out_ptr, n_heads, x_stride_b, x_stride_s, x_stride_h,
    out_stride_b, out_stride_s, out_stride_h, first, second, pair_mask, c1, c2, s1, s2,
    BLOCK_H: tl.constexpr,
):  # fmt: skip
    """One block of heads of one tensor, loaded and stored (the branches of an unpaired
    program, whose tiles differ in shape, each in a call of its own)."""
    x1, x2, rows, mask = _rope_load(
        b, s, head_block, x_ptr, n_heads, x_stride_b, x_stride_s, x_stride_h,
        first, second, pair_mask, BLOCK_H,
    )  # fmt: skip
    _rope_store(
        b, s, rows, mask, x1, x2, c1, c2, s1, s2,
        out_ptr, out_stride_b, out_stride_s, out_stride_h, first, second,
    )  # fmt: skip


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
    b = token // seq_len
    s = token % seq_len
    first, second, pair_mask, c1, c2, s1, s2 = _rope_tables(
        b, s, cos_ptr, sin_ptr, table_stride_b, table_stride_s,
        HEAD_DIM, HALF_TABLE, INTERLEAVED, BACKWARD, BLOCK_D,
    )  # fmt: skip
    q_blocks = tl.cdiv(q_heads, BLOCK_HQ)
    if PAIRED:
        # both tiles' loads before either's stores (masked off where the block has no heads),
        # so the program has q and k in flight at once, as Liger-Kernel's program per token
        q1, q2, q_rows, q_mask = _rope_load(
            b, s, block, q_ptr, tl.where(block < q_blocks, q_heads, 0),
            q_stride_b, q_stride_s, q_stride_h, first, second, pair_mask, BLOCK_HQ,
        )  # fmt: skip
        k1, k2, k_rows, k_mask = _rope_load(
            b, s, block, k_ptr, tl.where(block < tl.cdiv(k_heads, BLOCK_HK), k_heads, 0),
            k_stride_b, k_stride_s, k_stride_h, first, second, pair_mask, BLOCK_HK,
        )  # fmt: skip
        _rope_store(
            b, s, q_rows, q_mask, q1, q2, c1, c2, s1, s2,
            q_out_ptr, qo_stride_b, qo_stride_s, qo_stride_h, first, second,
        )  # fmt: skip
        _rope_store(
            b, s, k_rows, k_mask, k1, k2, c1, c2, s1, s2,
            k_out_ptr, ko_stride_b, ko_stride_s, ko_stride_h, first, second,
        )  # fmt: skip
    elif block < q_blocks:
        _rope_block(
            b, s, block, q_ptr, q_out_ptr, q_heads, q_stride_b, q_stride_s, q_stride_h,
            qo_stride_b, qo_stride_s, qo_stride_h, first, second, pair_mask, c1, c2, s1, s2,
            BLOCK_HQ,
        )  # fmt: skip
    else:
        _rope_block(
            b, s, block - q_blocks, k_ptr, k_out_ptr, k_heads, k_stride_b, k_stride_s,
            k_stride_h, ko_stride_b, ko_stride_s, ko_stride_h, first, second, pair_mask,
            c1, c2, s1, s2, BLOCK_HK,
        )  # fmt: skip
