"""warpforge.ops.swiglu / geglu against plain float64 references."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from warpforge.ops import geglu, swiglu
from warpforge.ops.activations import geglu_backward, swiglu_backward
from warpforge.runtime import ExecutionPath

activations_module = importlib.import_module("warpforge.ops.activations")


def reference_swiglu(gate, up):
    gate, up = gate.double(), up.double()
    return gate / (1 + torch.exp(-gate)) * up


def reference_geglu(gate, up, approximate):
    gate, up = gate.double(), up.double()
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)
        gelu = 0.5 * gate * (1 + torch.tanh(inner))
    else:
        gelu = 0.5 * gate * (1 + torch.erf(gate / math.sqrt(2)))
    return gelu * up


OPS = {
    "swiglu": (swiglu, reference_swiglu),
    "geglu-tanh": (lambda g, u: geglu(g, u, "tanh"), lambda g, u: reference_geglu(g, u, "tanh")),
    "geglu-none": (
        lambda g, u: geglu(g, u, approximate="none"),
        lambda g, u: reference_geglu(g, u, "none"),
    ),
}


@pytest.fixture(params=["triton", "torch-reference"])
def path(request, monkeypatch):
    if request.param == "torch-reference":
        monkeypatch.setattr(
            activations_module, "execution_path", lambda d: ExecutionPath.TORCH_REFERENCE
        )
    return request.param


def check(op_name, gate, up, tol):
    op, reference = OPS[op_name]
    gate, up = gate.clone().requires_grad_(), up.clone().requires_grad_()
    out = op(gate, up)
    grad_out = torch.randn(out.shape, dtype=torch.float64, device=out.device)
    grad_gate, grad_up = torch.autograd.grad(out, (gate, up), grad_out.to(out.dtype))
    g64 = gate.detach().double().requires_grad_()
    u64 = up.detach().double().requires_grad_()
    expected = reference(g64, u64)
    expected_gate, expected_up = torch.autograd.grad(expected, (g64, u64), grad_out)
    assert out.dtype == gate.dtype and out.shape == gate.shape
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)
    # the gelu/silu derivative cancels terms of size |grad_out * up * gate|, so fp32 rounding
    # is absolute at that scale, not at the (possibly tiny) gradient's
    scale = (grad_out * up.detach().double() * gate.detach().double()).abs().clamp(min=1.0)
    error = (grad_gate.double() - expected_gate).abs()
    bound = tol * scale + tol * expected_gate.abs()
    assert bool((error <= bound).all()), f"grad_gate: max error {float(error.max()):.3e}"
    torch.testing.assert_close(grad_up.double(), expected_up, atol=tol, rtol=tol)


@pytest.mark.parametrize("op_name", list(OPS))
# (2048,) and (3, 1024) tile exactly into blocks (the unpredicated path); the others leave a tail
@pytest.mark.parametrize(
    "shape",
    [(1,), (7,), (3, 1013), (2, 3, 257), (2, 3, 2, 11), (4097,), (65537,), (2048,), (3, 1024)],
    ids=str,
)
def test_matches_reference(op_name, shape, path):
    gen = torch.Generator().manual_seed(hash((op_name, shape)) % 2**31)
    gate = torch.randn(shape, generator=gen) * 4
    up = torch.randn(shape, generator=gen)
    check(op_name, gate, up, 1e-5)


@pytest.mark.parametrize("op_name", list(OPS))
def test_float16_and_non_contiguous(op_name, path):
    gen = torch.Generator().manual_seed(2)
    both = torch.randn(6, 2, 130, generator=gen) * 3
    gate, up = both[:, 0, 1:], both[:, 1, :-1]  # strided views of one buffer
    assert not gate.is_contiguous()
    check(op_name, gate, up, 1e-5)
    check(op_name, gate.half(), up.half(), 4e-3)


@pytest.mark.parametrize("op_name", list(OPS))
def test_chunked_gate_up_transposed_and_scalar_inputs(op_name, path):
    gen = torch.Generator().manual_seed(6)
    gate_up = torch.randn(2, 3, 2 * 37, generator=gen) * 3  # one fused projection output
    gate, up = gate_up.chunk(2, dim=-1)  # row-strided views, read in place
    check(op_name, gate, up, 1e-5)
    op, _ = OPS[op_name]
    assert op(gate, up).is_contiguous()
    transposed = torch.randn(2, 5, 7, generator=gen).transpose(0, 2)  # no row view: copied
    check(op_name, transposed, torch.randn(7, 5, 2, generator=gen), 1e-5)
    check(op_name, torch.tensor(1.7), torch.tensor(-0.4), 1e-5)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")  # exp(+big) -> inf is intended
def test_extreme_gates_stay_finite(path):
    gate = torch.tensor([-1e4, -90.0, -20.0, 0.0, 20.0, 90.0, 1e4])
    up = torch.rand(7) + 0.5
    for op_name in OPS:
        op, reference = OPS[op_name]
        out = op(gate, up)
        assert torch.isfinite(out).all(), op_name
        torch.testing.assert_close(out.double(), reference(gate, up), atol=1e-5, rtol=1e-5)


def test_empty_input(path):
    out = swiglu(torch.randn(0, 5), torch.randn(0, 5))
    assert out.shape == (0, 5)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 3000), op_name=st.sampled_from(list(OPS)), seed=st.integers(0, 2**16))
def test_property_matches_reference(n, op_name, seed):
    gen = torch.Generator().manual_seed(seed)
    check(op_name, torch.randn(n, generator=gen) * 3, torch.randn(n, generator=gen), 1e-5)


def test_compiles_fullgraph_with_fake_kernels():
    gen = torch.Generator().manual_seed(3)
    gate = torch.randn(4, 33, generator=gen, requires_grad=True)
    up = torch.randn(4, 33, generator=gen, requires_grad=True)

    def fn(g, u):
        return (swiglu(g, u) + geglu(g, u, approximate="none")).sum()

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    grads = torch.autograd.grad(compiled(gate, up), (gate, up))
    expected = torch.autograd.grad(fn(gate, up), (gate, up))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_custom_ops_pass_opcheck():
    gen = torch.Generator().manual_seed(4)
    gate = torch.randn(3, 17, generator=gen, requires_grad=True)
    up = torch.randn(3, 17, generator=gen, requires_grad=True)
    dy = torch.randn(3, 17, generator=gen)
    ops = torch.ops.warpforge
    torch.library.opcheck(ops.swiglu_fwd.default, (gate, up))
    torch.library.opcheck(ops.swiglu_bwd.default, (dy, gate.detach(), up.detach()))
    torch.library.opcheck(ops.geglu_fwd.default, (gate, up, "tanh"))
    torch.library.opcheck(ops.geglu_bwd.default, (dy, gate.detach(), up.detach(), "none"))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda g, u: swiglu(g, u[:, :3]), ValueError, "up: expected the shape of gate"),
        (lambda g, u: swiglu(g, u.half()), TypeError, "up: expected the dtype of gate"),
        (lambda g, u: swiglu(g.double(), u.double()), TypeError, "gate: expected dtype"),
        (lambda g, u: swiglu(g, u.long()), TypeError, "up: expected dtype"),
        (lambda g, u: geglu(g, u, approximate="erf"), ValueError, "approximate: expected one of"),
        (lambda g, u: geglu(g.tolist(), u), TypeError, "gate: expected a torch.Tensor"),
        (lambda g, u: geglu_backward(g[:1], g, u), ValueError, "grad_out: expected the shape"),
        (lambda g, u: geglu_backward(g.half(), g, u), TypeError, "grad_out: expected dtype"),
        (lambda g, u: geglu_backward(g, g, u, approximate="x"), ValueError, "approximate"),
        (lambda g, u: swiglu_backward(None, g, u), TypeError, "grad_out: expected a torch"),
    ],
)
def test_invalid_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.randn(2, 4), torch.randn(2, 4))


@pytest.mark.parametrize("name", ["swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd"])
def test_problems_match_float64_reference(name, device):
    import warpforge.ops.activation_problems  # noqa: F401  (registers)
    from warpforge.harness import get_problem

    problem = get_problem(name)
    for seed, shape in enumerate(problem.cpu_shapes):
        gen = torch.Generator(device=device).manual_seed(100 + seed)
        inputs = problem.make_inputs(shape, torch.float32, torch.device(device), gen)
        expected = problem.reference(*(t.double() for t in inputs))
        for fn in (problem.implementation, problem.baselines["torch"]()):
            got = fn(*inputs)
            for g, e in zip(
                got if isinstance(got, tuple) else (got,),
                expected if isinstance(expected, tuple) else (expected,),
                strict=True,
            ):
                assert g.dtype == torch.float32
                torch.testing.assert_close(g.double(), e, atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gpu_matches_reference(op_name, dtype):
    gen = torch.Generator().manual_seed(5)
    gate = (torch.randn(3, 2048, 1377, generator=gen) * 3).to("cuda", dtype)
    up = torch.randn(3, 2048, 1377, generator=gen).to("cuda", dtype)
    tol = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    check(op_name, gate, up, tol)


@pytest.mark.gpu
def test_gpu_beyond_2_pow_31_elements():
    n = 2**31 + 4099
    gate = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    up = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = swiglu(gate, up)
    tail = slice(n - 5000, n)
    torch.testing.assert_close(
        out[tail].double(), reference_swiglu(gate[tail], up[tail]), atol=3e-2, rtol=3e-2
    )


@pytest.mark.gpu
@pytest.mark.parametrize("op_name", ["swiglu", "geglu-tanh"])
def test_gpu_strided_rows_beyond_2_pow_31_elements(op_name):
    # gate and up are halves of one [rows, 2 * cols] tensor: rows far apart, offsets past 2**31
    cols, rows = 8192, 2**31 // 16384 + 3
    gate_up = torch.randn(rows, 2 * cols, device="cuda", dtype=torch.bfloat16)
    gate, up = gate_up.chunk(2, dim=-1)
    out = OPS[op_name][0](gate, up)
    tail = slice(rows - 3, rows)
    want = OPS[op_name][1](gate[tail].double(), up[tail].double())
    torch.testing.assert_close(out[tail].double(), want, atol=3e-2, rtol=3e-2)


@pytest.mark.gpu
def test_gpu_torch_compile_fullgraph_and_cuda_graph():
    gate = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    up = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step(g, u):
        out = geglu(g, u) + swiglu(g, u)
        return (out, *torch.autograd.grad(out, (g, u), torch.ones_like(out)))

    compiled = torch.compile(lambda g, u: geglu(g, u) + swiglu(g, u), fullgraph=True)
    torch.testing.assert_close(compiled(gate, up), step(gate, up)[0])

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(gate, up)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(gate, up)
    with torch.no_grad():
        gate.copy_(torch.randn_like(gate))
    graph.replay()
    for got, want in zip(captured, step(gate, up), strict=True):
        torch.testing.assert_close(got, want)
