"""Rotary position embedding (RoPE) for queries and keys.

Layout: ``q`` is ``[batch, seq, q_heads, head_dim]`` and ``k`` is ``[batch, seq, k_heads,
head_dim]`` (``q_heads`` and ``k_heads`` may differ, as in grouped-query attention); any number
of leading dims in place of ``batch`` (none too), the same for both, are merged into one. Tensors
in ``[batch, heads, seq, head_dim]`` layout can be passed as ``x.transpose(1, 2)`` views: the
kernel reads any strides (the last one must be 1, else a copy is made).

``cos`` and ``sin`` are ``[seq, D]`` or ``[*lead, seq, D]`` whose leading dims are 1 or those of
``q`` (right-aligned), with ``D = head_dim`` (the Hugging Face convention, e.g.
``cat([freqs, freqs])`` for half rotation) or ``D = head_dim // 2`` (one angle per rotated pair).
They are constants: gradients flow to ``q`` and ``k`` only.
"""

from __future__ import annotations

import functools
import math

import torch

from warpforge.dispatch import dispatched_op
from warpforge.ops._rows import cdiv, kernel_device, next_power_of_2
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import FLOAT_DTYPES, check_same_device, check_tensor, describe

RopeLaunch = tuple[int, int, int, bool]
"""(BLOCK_HQ, BLOCK_HK, num_warps, PAIRED): see ``warpforge.ops._kernels.rope.rope_kernel``."""

_BLOCK_BYTES = 4096
"""Bytes of q a program rotates at most: 8 heads of 128 in float32, 16 in bf16 / fp16."""

_ELEMENTS_PER_THREAD = 16
"""Elements of the larger tile (q's, under grouped-query attention) a thread holds: the
launch's warps follow from it."""


@functools.lru_cache(maxsize=256)
def _launch_config(q_heads: int, k_heads: int, head_dim: int, element_size: int) -> RopeLaunch:
    """Paired programs (a block of q's heads and the same-numbered block of k's, both loaded
    before either is stored), at most 4 KB of q and of k each, 16 elements of the larger tile
    a thread.

    On the H200 (``benchmarks/flce_rope_sweep.py``, session26-h200-2026-11-29/
    rope-sweep-call5.json; Llama-3 8B and 70B shapes) the fastest of ten launches or within 1%
    of it in each row: bf16 (16, 8, 4, paired) at 45.5 / 42.0 us against 48.4 / 44.2 for the
    previous default (32, 8, 4, unpaired), float32 (8, 8, 2, paired) at 87.0 / 78.1 against
    89.8 / 81.4."""
    cap = max(1, _BLOCK_BYTES // (head_dim * element_size))
    block_hq = min(next_power_of_2(q_heads), cap)
    block_hk = min(next_power_of_2(k_heads), cap)
    threads = max(block_hq, block_hk) * next_power_of_2(head_dim) // _ELEMENTS_PER_THREAD
    num_warps = max(1, min(8, threads // 32))
    return block_hq, block_hk, num_warps, True


def _table_strides(table: torch.Tensor) -> tuple[int, int]:
    """(batch stride, seq stride) of a [seq, D] or [batch|1, seq, D] table; 0 broadcasts."""
    if table.dim() == 2:
        return 0, table.stride(0)
    return (table.stride(0) if table.shape[0] > 1 else 0), table.stride(1)


def _full_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool):
    """Tables expanded to one float32 value per element of ``x``: [batch|1, seq, 1, head_dim]."""
    cos, sin = cos.float(), sin.float()
    if cos.shape[-1] != x.shape[-1]:
        repeat = (
            (lambda t: t.repeat_interleave(2, dim=-1))
            if interleaved
            else (lambda t: torch.cat([t, t], dim=-1))
        )
        cos, sin = repeat(cos), repeat(sin)
    if cos.dim() == 2:
        cos, sin = cos[None], sin[None]
    return cos[:, :, None, :], sin[:, :, None, :]


def _pair_halves(t: torch.Tensor, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The first and the second elements of each rotated pair along the last dim."""
    if interleaved:
        return t[..., 0::2], t[..., 1::2]
    half = t.shape[-1] // 2
    return t[..., :half], t[..., half:]


def _join_pairs(first: torch.Tensor, second: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """The inverse of :func:`_pair_halves`."""
    if interleaved:
        return torch.stack([first, second], dim=-1).flatten(-2)
    return torch.cat([first, second], dim=-1)


def _reference_rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, backward: bool
) -> torch.Tensor:
    c, s = _full_tables(x, cos, sin, interleaved)
    (x1, x2), (c1, c2), (s1, s2) = (_pair_halves(t, interleaved) for t in (x.float(), c, s))
    if backward:
        s1, s2 = -s2, -s1
    return _join_pairs(x1 * c1 - x2 * s1, x2 * c2 + x1 * s2, interleaved).to(x.dtype)


def _rotate(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    interleaved: bool,
    backward: bool,
    launch: RopeLaunch | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, k) rotated (or, ``backward``, their gradients mapped back) in one launch.
    ``launch`` overrides :func:`_launch_config` (benchmark sweeps)."""
    if execution_path(q.device) is ExecutionPath.TORCH_REFERENCE:
        return (
            _reference_rotate(q, cos, sin, interleaved, backward),
            _reference_rotate(k, cos, sin, interleaved, backward),
        )
    from warpforge.ops._kernels.rope import rope_kernel

    q = q if q.stride(-1) == 1 else q.contiguous()
    k = k if k.stride(-1) == 1 else k.contiguous()
    q_out = torch.empty(q.shape, device=q.device, dtype=q.dtype)
    k_out = torch.empty(k.shape, device=k.device, dtype=k.dtype)
    batch, seq, q_heads, head_dim = q.shape
    k_heads = k.shape[2]
    if batch * seq * head_dim == 0 or q_heads + k_heads == 0:
        return q_out, k_out
    block_hq, block_hk, num_warps, paired = launch or _launch_config(
        q_heads, k_heads, head_dim, q.element_size()
    )
    q_blocks, k_blocks = cdiv(q_heads, block_hq), cdiv(k_heads, block_hk)
    blocks = max(q_blocks, k_blocks) if paired else q_blocks + k_blocks
    with kernel_device(q):
        rope_kernel[(batch * seq * blocks,)](
            q, q_out, k, k_out, cos, sin, seq, q_heads, k_heads,
            *q.stride()[:3], *q_out.stride()[:3], *k.stride()[:3], *k_out.stride()[:3],
            *_table_strides(cos), blocks,
            HEAD_DIM=head_dim,
            HALF_TABLE=cos.shape[-1] != head_dim,
            INTERLEAVED=interleaved,
            BACKWARD=backward,
            BLOCK_HQ=block_hq,
            BLOCK_HK=block_hk,
            BLOCK_D=next_power_of_2(head_dim // 2),
            PAIRED=paired,
            num_warps=num_warps,
        )  # fmt: skip
    return q_out, k_out


@dispatched_op("warpforge::rope_fwd", mutates_args=())
def _rope_fwd(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    return _rotate(q, k, cos, sin, interleaved, backward=False)


@_rope_fwd.register_fake
def _(q, k, cos, sin, interleaved):
    return q.new_empty(q.shape), k.new_empty(k.shape)


@dispatched_op("warpforge::rope_bwd", mutates_args=())
def _rope_bwd(
    grad_q: torch.Tensor,
    grad_k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    interleaved: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _rotate(grad_q, grad_k, cos, sin, interleaved, backward=True)


@_rope_bwd.register_fake
def _(grad_q, grad_k, cos, sin, interleaved):
    return grad_q.new_empty(grad_q.shape), grad_k.new_empty(grad_k.shape)


def _setup_context(ctx, inputs, output):
    q, k, cos, sin, interleaved = inputs
    # q and k are kept only for the tables' gradients (rotary tables are usually constants)
    tables_need_grad = cos.requires_grad or sin.requires_grad
    ctx.save_for_backward(cos, sin, *((q, k) if tables_need_grad else ()))
    ctx.shapes = (q.shape, k.shape)
    ctx.interleaved = interleaved


def _table_grads(pairs, cos: torch.Tensor, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of the kernel-layout tables (``[seq, D]`` or ``[batch, seq, D]``, D the head
    dim or half of it) from ``(x, grad_out)`` pairs: the forward is ``x * cos + rot(x) * sin``
    element by element, so they are ``grad_out * x`` and ``grad_out * rot(x)`` summed over the
    heads (and the batch for a table shared by every batch), a half-width table taking both
    elements of each pair. Plain PyTorch, in float32: a learned table is small and rare."""
    grad_cos = grad_sin = 0
    for x, grad_out in pairs:
        x, g = x.float(), grad_out.float()
        x1, x2 = _pair_halves(x, interleaved)
        rotated = _join_pairs(-x2, x1, interleaved)
        grad_cos = grad_cos + (g * x).sum(dim=2)  # over the heads: [batch, seq, D]
        grad_sin = grad_sin + (g * rotated).sum(dim=2)
    if cos.dim() == 2:
        grad_cos, grad_sin = grad_cos.sum(0), grad_sin.sum(0)
    if cos.shape[-1] != grad_cos.shape[-1]:  # one angle per pair
        grad_cos, grad_sin = (sum(_pair_halves(t, interleaved)) for t in (grad_cos, grad_sin))
    return grad_cos, grad_sin


def _backward(ctx, grad_q, grad_k):
    cos, sin, *q_k = ctx.saved_tensors
    # an output that did not reach the loss has no gradient: rotate zeros in its place
    if grad_q is None:
        grad_q = cos.new_zeros(ctx.shapes[0], dtype=grad_k.dtype)
    if grad_k is None:
        grad_k = cos.new_zeros(ctx.shapes[1], dtype=grad_q.dtype)
    dq, dk = _rope_bwd(grad_q, grad_k, cos, sin, ctx.interleaved)
    grad_cos = grad_sin = None
    if q_k:
        pairs = zip(q_k, (grad_q, grad_k), strict=True)
        grad_cos, grad_sin = _table_grads(pairs, cos, ctx.interleaved)
        grad_cos, grad_sin = grad_cos.to(cos.dtype), grad_sin.to(sin.dtype)
    return dq, dk, grad_cos, grad_sin, None


_rope_fwd.register_autograd(_backward, setup_context=_setup_context)


def _validate_table(name: str, table: object, q: torch.Tensor) -> torch.Tensor:
    """``table`` as the kernel takes it, ``[seq, D]`` or ``[1 or batch, seq, D]`` for the 4-D
    (batch, seq, heads, head_dim) view of ``q``: given ``[seq, D]`` or ``[*lead, seq, D]`` whose
    leading dims broadcast (right-aligned) against ``q``'s; flattened (a copy where a table
    varies over some leading dims but not all) to match the flattened batch."""
    table = check_tensor(name, table, dtypes=FLOAT_DTYPES, min_ndim=2, allow_empty=True)
    lead, (seq, _, head_dim) = tuple(q.shape[:-3]), tuple(q.shape[-3:])
    table_lead = tuple(table.shape[:-2])
    broadcasts = len(table_lead) <= len(lead) and all(
        t in (1, n) for t, n in zip(reversed(table_lead), reversed(lead), strict=False)
    )
    if not (broadcasts and table.shape[-2] == seq and table.shape[-1] in (head_dim, head_dim // 2)):
        lead_text = "".join(f"{n}, " for n in lead)
        raise ValueError(
            f"{name}: expected shape [seq={seq}, D] or [{lead_text}seq={seq}, D] (leading dims "
            f"1 or those of q) with D in ({head_dim}, {head_dim // 2}), got {describe(table)}"
        )
    if math.prod(table_lead) == 1 and len(table_lead) != 1:
        table = table.reshape(table.shape[-2:])  # one table for every batch (a view)
    elif len(table_lead) != 1 or len(lead) != 1:
        table = table.expand(*lead, *table.shape[-2:]).reshape(math.prod(lead), *table.shape[-2:])
    if table.stride(-1) != 1:
        table = table.contiguous()
    return table


def _as_batched(x: torch.Tensor) -> torch.Tensor:
    """``x`` [..., seq, heads, head_dim] as [batch, seq, heads, head_dim]: its leading dims merged
    (a view where their strides allow it, else a copy), or a batch of 1 for a 3-D ``x``."""
    if x.dim() == 4:
        return x
    return x.reshape(math.prod(x.shape[:-3]), *x.shape[-3:])


def _validate(q, k, cos, sin, interleaved, q_name="q", k_name="k"):
    """(q, k, cos, sin) in the kernel's 4-D / table layouts, checked."""
    q = check_tensor(q_name, q, dtypes=FLOAT_DTYPES, min_ndim=3, allow_empty=True)
    k = check_tensor(k_name, k, dtypes=FLOAT_DTYPES, min_ndim=3, allow_empty=True)
    if not isinstance(interleaved, bool):
        raise TypeError(f"interleaved: expected a bool, got {describe(interleaved)}")
    if k.dtype != q.dtype:
        raise TypeError(f"{k_name}: expected the dtype of {q_name} ({q.dtype}), got {describe(k)}")
    seq, _, head_dim = q.shape[-3:]
    if head_dim % 2:
        raise ValueError(f"{q_name}: expected an even head_dim (last dimension), got {describe(q)}")
    lead = tuple(q.shape[:-3])
    if k.dim() != q.dim() or (*k.shape[:-3], k.shape[-3], k.shape[-1]) != (*lead, seq, head_dim):
        lead_text = "".join(f"{n}, " for n in lead)
        raise ValueError(
            f"{k_name}: expected shape [{lead_text}{seq}, k_heads, {head_dim}] (the leading dims, "
            f"seq and head_dim of {q_name}), got {describe(k)}"
        )
    cos = _validate_table("cos", cos, q)
    sin = _validate_table("sin", sin, q)
    if sin.shape != cos.shape:
        raise ValueError(f"sin: expected the shape of cos {tuple(cos.shape)}, got {describe(sin)}")
    check_same_device(**{q_name: q, k_name: k, "cos": cos, "sin": sin})
    return _as_batched(q), _as_batched(k), cos, sin


def rope(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``q`` and ``k`` (``[..., seq, heads, head_dim]``: any leading dims, the same for
    both, or none) by the angles in cos/sin.

    ``interleaved=False`` rotates ``(x[d], x[d + head_dim/2])`` pairs (NeoX/Llama
    ``rotate_half``): ``out = x * cos + rotate_half(x) * sin``. ``interleaved=True`` rotates
    ``(x[2i], x[2i+1])`` pairs (GPT-J). Returns new tensors ``(q_rot, k_rot)`` of the input
    shapes and dtypes; math in float32. Differentiable in ``q`` and ``k`` (the backward kernel)
    and in ``cos`` and ``sin`` when they require grad (learned tables; plain PyTorch).
    """
    q_rot, k_rot = _rope_fwd(*_validate(q, k, cos, sin, interleaved), interleaved)
    return q_rot.view(q.shape), k_rot.view(k.shape)


def rope_backward(
    grad_q: torch.Tensor,
    grad_k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`rope` w.r.t. ``q`` and ``k`` for output gradients ``grad_q``,
    ``grad_k``: the backward kernel alone (same layouts and tables as :func:`rope`)."""
    checked = _validate(grad_q, grad_k, cos, sin, interleaved, "grad_q", "grad_k")
    dq, dk = _rope_bwd(*checked, interleaved)
    return dq.view(grad_q.shape), dk.view(grad_k.shape)
