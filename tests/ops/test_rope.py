"""warpforge.ops.rope against a plain float64 rotate_half / GPT-J reference."""

from __future__ import annotations

import importlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from warpforge.ops import rope
from warpforge.runtime import ExecutionPath

rope_module = importlib.import_module("warpforge.ops.rope")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotate_pairs(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def reference_rope(x, cos, sin, interleaved):
    """x [b, s, h, d]; cos/sin full-width [s, d] or [b|1, s, d], float64."""
    if cos.dim() == 2:
        cos, sin = cos[None], sin[None]
    cos, sin = cos[:, :, None, :].double(), sin[:, :, None, :].double()
    rotated = rotate_pairs(x) if interleaved else rotate_half(x)
    return x.double() * cos + rotated.double() * sin


def tables(seq, head_dim, interleaved, gen, *, batch=None, half=False):
    """Angles for each pair; returns (cos, sin) as passed to rope and their full-width forms."""
    shape = (seq, head_dim // 2) if batch is None else (batch, seq, head_dim // 2)
    angles = torch.rand(shape, generator=gen, dtype=torch.float64) * 20 - 10
    if interleaved:
        full = angles.repeat_interleave(2, dim=-1)
    else:
        full = torch.cat([angles, angles], dim=-1)
    given_angles = angles if half else full
    return (given_angles.cos().float(), given_angles.sin().float()), (full.cos(), full.sin())


@pytest.fixture(params=["triton", "torch-reference"])
def path(request, monkeypatch):
    if request.param == "torch-reference":
        monkeypatch.setattr(rope_module, "execution_path", lambda d: ExecutionPath.TORCH_REFERENCE)
    return request.param


def check(q, k, given_tables, full_tables, interleaved, tol):
    q, k = q.clone().requires_grad_(), k.clone().requires_grad_()
    q_rot, k_rot = rope(q, k, *given_tables, interleaved=interleaved)
    grad_q_out = torch.randn(q_rot.shape, dtype=torch.float64, device=q_rot.device)
    grad_k_out = torch.randn(k_rot.shape, dtype=torch.float64, device=k_rot.device)
    grad_q, grad_k = torch.autograd.grad(
        (q_rot, k_rot), (q, k), (grad_q_out.to(q.dtype), grad_k_out.to(k.dtype))
    )
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    expected_q = reference_rope(q64, *full_tables, interleaved)
    expected_k = reference_rope(k64, *full_tables, interleaved)
    expected_grads = torch.autograd.grad(
        (expected_q, expected_k), (q64, k64), (grad_q_out, grad_k_out)
    )
    assert q_rot.shape == q.shape and q_rot.dtype == q.dtype and k_rot.shape == k.shape
    torch.testing.assert_close(q_rot.double(), expected_q, atol=tol, rtol=tol)
    torch.testing.assert_close(k_rot.double(), expected_k, atol=tol, rtol=tol)
    torch.testing.assert_close(grad_q.double(), expected_grads[0], atol=tol, rtol=tol)
    torch.testing.assert_close(grad_k.double(), expected_grads[1], atol=tol, rtol=tol)


@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize("half_table", [False, True], ids=["table-D", "table-D/2"])
@pytest.mark.parametrize(
    ("batch", "seq", "q_heads", "k_heads", "head_dim"),
    [(1, 1, 1, 1, 2), (2, 5, 4, 2, 8), (1, 7, 3, 1, 64), (3, 2, 5, 5, 6)],
)
def test_matches_reference(interleaved, half_table, batch, seq, q_heads, k_heads, head_dim, path):
    gen = torch.Generator().manual_seed(batch * 1000 + seq * 10 + head_dim)
    q = torch.randn(batch, seq, q_heads, head_dim, generator=gen)
    k = torch.randn(batch, seq, k_heads, head_dim, generator=gen)
    given_tables, full_tables = tables(seq, head_dim, interleaved, gen, half=half_table)
    check(q, k, given_tables, full_tables, interleaved, 1e-5)


@pytest.mark.parametrize("interleaved", [False, True])
def test_per_batch_tables_and_heads_first_views(interleaved, path):
    gen = torch.Generator().manual_seed(11)
    # [batch, heads, seq, dim] storage passed as [batch, seq, heads, dim] views
    q = torch.randn(2, 6, 9, 16, generator=gen).transpose(1, 2)
    k = torch.randn(2, 2, 9, 16, generator=gen).transpose(1, 2)
    assert not q.is_contiguous()
    given_tables, full_tables = tables(9, 16, interleaved, gen, batch=2)
    check(q, k, given_tables, full_tables, interleaved, 1e-5)
    one_tables, one_full = tables(9, 16, interleaved, gen, batch=1, half=True)
    check(q, k, one_tables, one_full, interleaved, 1e-5)


def reference_any_lead(x, cos, sin, interleaved):
    """reference_rope over any leading dims: x [*lead, s, h, d], full tables [s, d] or
    [*table_lead, s, d] broadcasting against lead."""
    lead = x.shape[:-3]
    cos = cos.expand(*lead, *cos.shape[-2:]).reshape(-1, *cos.shape[-2:])
    sin = sin.expand(*lead, *sin.shape[-2:]).reshape(-1, *sin.shape[-2:])
    flat = x.reshape(-1, *x.shape[-3:]) if lead else x[None]
    return reference_rope(flat, cos, sin, interleaved).reshape(x.shape)


@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize(
    ("lead", "table_lead"),
    [((), ()), ((3, 2), ()), ((3, 2), (1, 1)), ((3, 2), (2,)), ((3, 2), (3, 1)), ((2, 1, 2), (2,))],
)
def test_any_leading_dims_with_broadcast_tables(lead, table_lead, interleaved, path):
    """q and k with no, two or three leading dims (one merged batch for the kernel); tables
    broadcast over some, all or none of them; the outputs keep the inputs' shapes."""
    gen = torch.Generator().manual_seed(15 + len(lead) * 7 + len(table_lead))
    seq, head_dim = 5, 8
    q = torch.randn(*lead, seq, 3, head_dim, generator=gen)
    k = torch.randn(*lead, seq, 1, head_dim, generator=gen)
    angles = torch.rand(*table_lead, seq, head_dim // 2, generator=gen, dtype=torch.float64) * 6
    full = angles.repeat_interleave(2, -1) if interleaved else torch.cat([angles, angles], -1)
    q_, k_ = q.clone().requires_grad_(), k.clone().requires_grad_()
    q_rot, k_rot = rope(q_, k_, angles.cos().float(), angles.sin().float(), interleaved=interleaved)
    assert q_rot.shape == q.shape and k_rot.shape == k.shape
    grads_out = torch.randn(q.shape, generator=gen), torch.randn(k.shape, generator=gen)
    grad_q, grad_k = torch.autograd.grad((q_rot, k_rot), (q_, k_), grads_out)
    q64, k64 = q.double().requires_grad_(), k.double().requires_grad_()
    want_q = reference_any_lead(q64, full.cos(), full.sin(), interleaved)
    want_k = reference_any_lead(k64, full.cos(), full.sin(), interleaved)
    want = torch.autograd.grad((want_q, want_k), (q64, k64), [g.double() for g in grads_out])
    for got, expected in zip((q_rot, k_rot, grad_q, grad_k), (want_q, want_k, *want), strict=True):
        torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_leading_dims_that_cannot_merge_are_copied_not_misread(path):
    """Leading dims permuted in memory have no merged stride: they are copied, then rotated."""
    gen = torch.Generator().manual_seed(16)
    q = torch.randn(2, 3, 4, 2, 8, generator=gen).permute(1, 0, 2, 3, 4)  # [3, 2, seq 4, 2, 8]
    k = torch.randn(3, 2, 4, 1, 8, generator=gen)
    (cos, sin), (full_cos, full_sin) = tables(4, 8, False, gen, batch=2)
    q_rot, k_rot = rope(q, k, cos, sin)
    torch.testing.assert_close(
        q_rot.double(), reference_any_lead(q, full_cos, full_sin, False), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        k_rot.double(), reference_any_lead(k, full_cos, full_sin, False), atol=1e-5, rtol=1e-5
    )


def test_float16_and_strided_last_dim(path):
    gen = torch.Generator().manual_seed(12)
    q = torch.randn(1, 4, 3, 32, generator=gen)[..., ::2]  # last stride 2 -> copied
    k = torch.randn(1, 4, 1, 16, generator=gen)
    given_tables, full_tables = tables(4, 16, False, gen)
    check(q, k, given_tables, full_tables, False, 1e-5)
    check(q.half(), k.half(), given_tables, full_tables, False, 4e-3)


def test_unshared_full_tables_backward_is_the_transpose(path):
    """With a full-width table whose halves differ, backward is the exact transpose of forward."""
    gen = torch.Generator().manual_seed(13)
    q = torch.randn(1, 3, 2, 8, generator=gen)
    cos, sin = torch.randn(3, 8, generator=gen), torch.randn(3, 8, generator=gen)
    check(q, q.clone(), (cos, sin), (cos.double(), sin.double()), False, 1e-5)


@pytest.mark.parametrize(
    ("q_heads", "k_heads", "launch"),
    [
        (5, 3, (2, 2, 1, True)),  # paired: q blocks 0-2, k blocks 0-1
        (5, 3, (2, 2, 1, False)),  # one block each: 3 of q, then 2 of k
        (2, 7, (4, 2, 2, True)),  # more k blocks than q blocks
        (2, 7, (4, 2, 2, False)),
        (0, 3, None),
        (3, 0, None),
        (9, 1, (8, 1, 1, True)),
    ],
)
def test_one_launch_for_q_and_k_with_partial_head_blocks(q_heads, k_heads, launch):
    """q's and k's head blocks share one grid: blocks that overhang the heads, more k heads than
    q heads, no heads at all on one side, q and k in different layouts."""
    gen = torch.Generator().manual_seed(17 + q_heads * 10 + k_heads)
    q = torch.randn(2, q_heads, 4, 12, generator=gen).transpose(1, 2)  # heads-first storage
    k = torch.randn(2, 4, k_heads, 12, generator=gen)
    (cos, sin), full = tables(4, 12, False, gen)
    q_rot, k_rot = rope_module._rotate(q, k, cos, sin, False, False, launch=launch)
    torch.testing.assert_close(q_rot.double(), reference_rope(q, *full, False))
    torch.testing.assert_close(k_rot.double(), reference_rope(k, *full, False))
    dq, dk = rope_module._rotate(q_rot, k_rot, cos, sin, False, True, launch=launch)
    torch.testing.assert_close(dq, q, atol=1e-5, rtol=1e-5)  # a rotation's transpose undoes it
    torch.testing.assert_close(dk, k, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("used", ["q", "k"])
def test_gradient_when_only_one_output_reaches_the_loss(used):
    gen = torch.Generator().manual_seed(18)
    q = torch.randn(1, 3, 4, 8, generator=gen, requires_grad=True)
    k = torch.randn(1, 3, 2, 8, generator=gen, requires_grad=True)
    (cos, sin), full = tables(3, 8, True, gen)
    q_rot, k_rot = rope(q, k, cos, sin, interleaved=True)
    out = q_rot if used == "q" else k_rot
    seed = torch.randn(out.shape, generator=gen)
    grads = torch.autograd.grad(out, (q, k), seed, allow_unused=True)
    leaf = (q if used == "q" else k).detach().double().requires_grad_()
    (want,) = torch.autograd.grad(reference_rope(leaf, *full, True), leaf, seed.double())
    got, other = grads if used == "q" else grads[::-1]
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    assert other is None or not other.any()


@settings(max_examples=10, deadline=None)
@given(
    seq=st.integers(1, 6),
    heads=st.integers(1, 9),
    half_dim=st.integers(1, 24),
    interleaved=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_matches_reference(seq, heads, half_dim, interleaved, seed):
    gen = torch.Generator().manual_seed(seed)
    head_dim = 2 * half_dim
    q = torch.randn(2, seq, heads, head_dim, generator=gen)
    k = torch.randn(2, seq, 1, head_dim, generator=gen)
    given_tables, full_tables = tables(seq, head_dim, interleaved, gen, half=seed % 2 == 0)
    check(q, k, given_tables, full_tables, interleaved, 1e-5)


def test_compiles_fullgraph_and_passes_opcheck():
    gen = torch.Generator().manual_seed(14)
    q = torch.randn(1, 3, 2, 8, generator=gen, requires_grad=True)
    k = torch.randn(1, 3, 1, 8, generator=gen, requires_grad=True)
    (cos, sin), _ = tables(3, 8, False, gen)

    def fn(q, k):
        q_rot, k_rot = rope(q, k, cos, sin)
        return q_rot.square().sum() + k_rot.sum()

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(q, k), (q, k))
    want = torch.autograd.grad(fn(q, k), (q, k))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    torch.library.opcheck(torch.ops.warpforge.rope_fwd.default, (q, k, cos, sin, True))
    torch.library.opcheck(
        torch.ops.warpforge.rope_bwd.default, (q.detach(), k.detach(), cos, sin, False)
    )


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda q, k, c, s: rope(q[0, 0], k, c, s), ValueError, "q: expected at least 3 dim"),
        (
            lambda q, k, c, s: rope(q[0], k, c, s),
            ValueError,
            r"k: expected shape \[3, k_heads, 8\] \(the leading dims",
        ),
        (
            lambda q, k, c, s: rope(q, k, c.expand(3, 3, 8), s.expand(3, 3, 8)),
            ValueError,
            r"cos: expected shape \[seq=3, D\] or \[2, seq=3, D\]",
        ),
        (
            lambda q, k, c, s: rope(q, k, c.expand(1, 2, 3, 8), s.expand(1, 2, 3, 8)),
            ValueError,
            "cos: expected shape",
        ),
        (lambda q, k, c, s: rope(q, k.half(), c, s), TypeError, "k: expected the dtype of q"),
        (
            lambda q, k, c, s: rope(q, k[:, :2], c, s),
            ValueError,
            r"k: expected shape \[2, 3, k_heads, 8\]",
        ),
        (lambda q, k, c, s: rope(q[..., :7], k[..., :7], c, s), ValueError, "even head_dim"),
        (lambda q, k, c, s: rope(q, k, c[:2], s), ValueError, "cos: expected shape"),
        (lambda q, k, c, s: rope(q, k, c[:, :3], s[:, :3]), ValueError, "cos: expected shape"),
        (lambda q, k, c, s: rope(q, k, c, s[:, :4]), ValueError, "sin: expected the shape of cos"),
        (
            lambda q, k, c, s: rope(q, k, c, s, interleaved=1),
            TypeError,
            "interleaved: expected a bool",
        ),
        (lambda q, k, c, s: rope(q.double(), k.double(), c, s), TypeError, "q: expected dtype"),
    ],
)
def test_invalid_arguments_raise_naming_the_argument(call, error, match):
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 2, 8)
    cos, sin = torch.randn(3, 8), torch.randn(3, 8)
    with pytest.raises(error, match=match):
        call(q, k, cos, sin)


@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize("table_shape", ["seq-D", "seq-D/2", "batch-seq-D", "1-seq-D/2"], ids=str)
def test_learned_tables_get_gradients(interleaved, table_shape, device):
    """cos and sin that require grad (learned angles or tables) get the float64 reference's
    gradients, whatever layout they come in: shared by the batch or one per batch row, one
    value per element or per pair; q and k's gradients are unchanged."""
    batch, seq, head_dim = 2, 5, 8
    q = torch.randn(batch, seq, 3, head_dim, device=device, requires_grad=True)
    k = torch.randn(batch, seq, 1, head_dim, device=device, requires_grad=True)
    lead = {"seq-D": (), "seq-D/2": (), "batch-seq-D": (batch,), "1-seq-D/2": (1,)}[table_shape]
    width = head_dim // 2 if table_shape.endswith("/2") else head_dim
    cos = torch.randn(*lead, seq, width, device=device, requires_grad=True)
    sin = torch.randn(*lead, seq, width, device=device, requires_grad=True)
    q_rot, k_rot = rope(q, k, cos, sin, interleaved=interleaved)
    grad_q_out, grad_k_out = torch.randn_like(q_rot), torch.randn_like(k_rot)
    got = torch.autograd.grad((q_rot, k_rot), (q, k, cos, sin), (grad_q_out, grad_k_out))

    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, cos, sin)]
    q64, k64, cos64, sin64 = leaves64

    def full(table):  # the per-element table the reference takes, [b|1, seq, head_dim]
        if width != head_dim:
            table = table.repeat_interleave(2, -1) if interleaved else torch.cat([table] * 2, -1)
        return table if table.dim() == 3 else table[None]

    expected = (
        reference_rope(q64, full(cos64), full(sin64), interleaved),
        reference_rope(k64, full(cos64), full(sin64), interleaved),
    )
    want = torch.autograd.grad(expected, leaves64, (grad_q_out.double(), grad_k_out.double()))
    for name, g, w in zip(("q", "k", "cos", "sin"), got, want, strict=True):
        assert g.shape == w.shape, name
        torch.testing.assert_close(g.double(), w, atol=1e-4, rtol=1e-4, msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_llama_shapes(interleaved, dtype):
    gen = torch.Generator().manual_seed(15)
    q = torch.randn(2, 512, 32, 128, generator=gen).to("cuda", dtype)
    k = torch.randn(2, 512, 8, 128, generator=gen).to("cuda", dtype)
    given_tables, full_tables = tables(512, 128, interleaved, gen, half=interleaved)
    given_tables = tuple(t.cuda() for t in given_tables)
    full_tables = tuple(t.cuda() for t in full_tables)
    check(q, k, given_tables, full_tables, interleaved, 1e-5 if dtype == torch.float32 else 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
def test_gpu_more_than_2_to_31_elements(interleaved):
    """64-bit offsets: q of 2**31 + 4096 elements (bf16, 4.3 GB); its last tokens, forward and
    backward, against float64."""
    seq, q_heads, k_heads, head_dim = 2**31 // (32 * 128) + 1, 32, 8, 128
    assert seq * q_heads * head_dim > 2**31
    gen = torch.Generator(device="cuda").manual_seed(17)
    q = torch.randn(1, seq, q_heads, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(1, seq, k_heads, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
    angles = torch.rand(seq, head_dim // 2, device="cuda", dtype=torch.float64) * 20 - 10
    full = angles.repeat_interleave(2, -1) if interleaved else torch.cat([angles, angles], -1)
    cos, sin = full.cos().float(), full.sin().float()
    q.requires_grad_(), k.requires_grad_()
    q_rot, k_rot = rope(q, k, cos, sin, interleaved=interleaved)
    grad_q_out, grad_k_out = torch.randn_like(q_rot), torch.randn_like(k_rot)
    grad_q, grad_k = torch.autograd.grad((q_rot, k_rot), (q, k), (grad_q_out, grad_k_out))
    tail = slice(seq - 3, seq)
    tables = (full[tail].cos(), full[tail].sin())
    for x, rotated, grad_out, grad in (
        (q, q_rot, grad_q_out, grad_q),
        (k, k_rot, grad_k_out, grad_k),
    ):
        x64 = x.detach()[:, tail].double().requires_grad_()
        expected = reference_rope(x64, *tables, interleaved)
        (expected_grad,) = torch.autograd.grad(expected, x64, grad_out[:, tail].double())
        torch.testing.assert_close(rotated[:, tail].double(), expected, atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(grad[:, tail].double(), expected_grad, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_gpu_torch_compile_fullgraph_and_cuda_graph():
    gen = torch.Generator().manual_seed(16)
    q = torch.randn(2, 256, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 256, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    (cos, sin), _ = tables(256, 64, False, gen)
    cos, sin = cos.cuda(), sin.cuda()

    def step(q0, k0):
        # fresh leaves per call: a leaf whose gradient accumulator was created outside the
        # capture (by the eager calls above) ties the backward to the default stream
        q, k = q0.detach().requires_grad_(), k0.detach().requires_grad_()
        q_rot, k_rot = rope(q, k, cos, sin)
        return (q_rot, k_rot, *torch.autograd.grad((q_rot, k_rot), (q, k), (q_rot, k_rot)))

    compiled = torch.compile(lambda q, k: rope(q, k, cos, sin), fullgraph=True)
    for got, want in zip(compiled(q, k), rope(q, k, cos, sin), strict=True):
        torch.testing.assert_close(got, want)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(q, k)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(q, k)
    with torch.no_grad():
        q.copy_(torch.randn_like(q))
    graph.replay()
    for got, want in zip(captured, step(q, k), strict=True):
        torch.testing.assert_close(got, want)
