"""rms_norm (with residual and offset) and layer_norm against float64 references, forward and
backward, on the Triton interpreter (CPU) or the GPU; bf16/compile/graphs/huge inputs on GPU."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import warpforge.ops._kernels.split_rows as split_kernels  # decorate kernels while the interpreter is on
from warpforge.ops import layer_norm, rms_norm
from warpforge.ops import norm as norm_module

FWD_TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # hypothesis tests cannot take fixtures
BWD_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}


# --------------------------------------------------------------------------- references (fp64)


def rms_norm_ref(x, weight=None, eps=1e-6, residual=None, offset=0.0):
    """h = x + residual rounded to the input dtype (the op's documented semantics), then fp64."""
    h = (x + residual) if residual is not None else x
    h64 = h.double()
    y = h64 / torch.sqrt(h64.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * (offset + weight.double())
    return y, h64


def layer_norm_ref(x, weight=None, bias=None, eps=1e-5):
    x64 = x.double()
    mean = x64.mean(dim=-1, keepdim=True)
    var = (x64 - mean).pow(2).mean(dim=-1, keepdim=True)
    y = (x64 - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() if t is not None else None for t in tensors]


def close(actual, expected, tol, what):
    torch.testing.assert_close(actual.double(), expected, atol=tol, rtol=tol, msg=what)


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, device=device).to(dtype)


def grads_of(outputs, inputs, grad_outputs):
    """Gradients for the inputs that are tensors (None entries skipped)."""
    present = [t for t in inputs if t is not None]
    return torch.autograd.grad(outputs, present, grad_outputs)


# --------------------------------------------------------------------------- rms_norm


SHAPES = [(1, 1), (1, 67), (5, 300), (3, 7, 33), (2, 3, 4, 17)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_forward_backward(shape, with_weight, device, cpu_float_dtypes, poison_outputs):
    for dtype in cpu_float_dtypes:
        x = randn(*shape, dtype=dtype, device=device)
        w = randn(shape[-1], dtype=dtype, device=device) if with_weight else None
        dy = randn(*shape, dtype=dtype, device=device)
        xs, ws = leaves(x, w)
        y = rms_norm(xs, ws, 1e-6)
        assert y.shape == x.shape and y.dtype == dtype
        x64, w64 = leaves(x.double(), w.double() if w is not None else None)
        y64, _ = rms_norm_ref(x64, w64)
        close(y, y64, FWD_TOL[dtype], f"y {dtype}")
        got = grads_of(y, [xs, ws], dy)
        want = grads_of(y64, [x64, w64], dy.double())
        for g, e, name in zip(got, want, ["dx", "dweight"][: len(got)], strict=True):
            assert g.dtype == dtype
            close(g, e, BWD_TOL[dtype], f"{name} {dtype}")


@pytest.mark.parametrize("n", [67, 65537], ids=["one-block", "chunked"])
def test_add_rms_norm_with_offset(n, device, poison_outputs):
    """Residual and Gemma offset; the loss uses both y and h, so dh flows into dx too."""
    m = 3 if n < 1000 else 1
    x, r = randn(m, n, device=device), randn(m, n, device=device)
    w = randn(n, device=device)
    dy, dh = randn(m, n, device=device), randn(m, n, device=device)
    xs, rs, ws = leaves(x, r, w)
    y, h = rms_norm(xs, ws, 1e-5, residual=rs, offset=1.0)
    x64, r64, w64 = leaves(x.double(), r.double(), w.double())
    y64, h64 = rms_norm_ref(x64, w64, 1e-5, residual=r64, offset=1.0)
    close(y, y64, 1e-5, "y")
    close(h, h64, 1e-6, "h")
    got = torch.autograd.grad((y, h), (xs, rs, ws), (dy, dh))
    want = torch.autograd.grad((y64, h64), (x64, r64, w64), (dy.double(), dh.double()))
    for g, e, name in zip(got, want, ["dx", "dresidual", "dweight"], strict=True):
        close(g, e, 1e-4, name)


def test_residual_grad_without_using_h(device):
    """Only y feeds the loss: dresidual equals dx (h's gradient is absent, not garbage)."""
    x, r, w, dy = (
        randn(4, 40, device=device),
        randn(4, 40, device=device),
        randn(40, device=device),
        randn(4, 40, device=device),
    )
    xs, rs, ws = leaves(x, r, w)
    y, _ = rms_norm(xs, ws, residual=rs)
    dx, dr = torch.autograd.grad(y, (xs, rs), dy)
    x64, r64, w64 = leaves(x.double(), r.double(), w.double())
    y64, _ = rms_norm_ref(x64, w64, residual=r64)
    dx64, dr64 = torch.autograd.grad(y64, (x64, r64), dy.double())
    close(dx, dx64, 1e-4, "dx")
    close(dr, dr64, 1e-4, "dresidual")


@pytest.mark.parametrize("layout", ["transposed", "column-stride-2", "row-slice", "expanded-rows"])
def test_rms_norm_non_contiguous(layout, device):
    base = randn(12, 40, device=device)
    x = {
        "transposed": base.t(),  # (40, 12), last dim has stride 40
        "column-stride-2": base[:, ::2],
        "row-slice": base[::3],
        "expanded-rows": base[:1].expand(5, 40),
    }[layout]
    w = randn(x.shape[-1], device=device)
    dy = randn(*x.shape, device=device)
    xs, ws = leaves(x, w)
    xs = xs if layout != "expanded-rows" else base[:1].clone().requires_grad_()
    inp = xs if layout != "expanded-rows" else xs.expand(5, 40)
    y = rms_norm(inp, ws)
    x64, w64 = leaves(xs.detach().double(), w.double())
    inp64 = x64 if layout != "expanded-rows" else x64.expand(5, 40)
    y64, _ = rms_norm_ref(inp64, w64)
    close(y, y64, 1e-5, "y")
    for g, e in zip(
        torch.autograd.grad(y, (xs, ws), dy),
        torch.autograd.grad(y64, (x64, w64), dy.double()),
        strict=True,
    ):
        close(g, e, 1e-4, "grad")


def test_rms_norm_zero_rows(device):
    x = randn(0, 8, device=device).requires_grad_()
    w = randn(8, device=device).requires_grad_()
    y = rms_norm(x, w)
    assert y.shape == (0, 8)
    dx, dw = torch.autograd.grad(y.sum(), (x, w))
    assert dx.shape == (0, 8)
    assert torch.equal(dw, torch.zeros(8, device=device))


def test_weight_gradients_are_deterministic(device):
    """Partial sums then a fixed-order reduction: repeated backward passes match bitwise."""
    for n, m in ((300, 37), (16385, 5)):
        x, w, dy = randn(m, n, device=device), randn(n, device=device), randn(m, n, device=device)
        runs = []
        for _ in range(2):
            xs, ws = leaves(x, w)
            runs.append(torch.autograd.grad(layer_norm(xs, ws, ws * 0 + 1), ws, dy)[0])
        assert torch.equal(runs[0], runs[1])


def test_mixed_weight_dtype(device):
    x, w = randn(3, 20, dtype=torch.float16, device=device), randn(20, device=device)
    xs, ws = leaves(x, w)
    y = rms_norm(xs, ws)
    assert y.dtype == torch.float16
    (dw,) = torch.autograd.grad(y.float().sum(), ws)
    assert dw.dtype == torch.float32
    x64, w64 = leaves(x.double(), w.double())
    y64, _ = rms_norm_ref(x64, w64)
    close(y, y64, FWD_TOL[torch.float16], "y")
    close(dw, torch.autograd.grad(y64.sum(), w64)[0], 1e-2, "dweight")


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 4),
    n=st.integers(1, 70),
    offset=st.sampled_from([0.0, 1.0]),
    eps=st.sampled_from([1e-6, 1e-2]),
    use_residual=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float16]),
    seed=st.integers(0, 2**16),
)
def test_rms_norm_property(m, n, offset, eps, use_residual, dtype, seed):
    """Forward and backward (dx, dweight, dresidual; with a residual both y and h carry random
    gradients) against float64."""
    torch.manual_seed(seed)
    x, w = randn(m, n, dtype=dtype, device=DEVICE), randn(n, dtype=dtype, device=DEVICE)
    r = randn(m, n, dtype=dtype, device=DEVICE) if use_residual else None
    dy, dh = randn(m, n, dtype=dtype, device=DEVICE), randn(m, n, dtype=dtype, device=DEVICE)
    xs, ws, rs = leaves(x, w, r)
    out = rms_norm(xs, ws, eps, residual=rs, offset=offset)
    y = out[0] if use_residual else out
    assert y.dtype == dtype and y.shape == x.shape
    x64, w64, r64 = leaves(x.double(), w.double(), r.double() if use_residual else None)
    y64, h64 = rms_norm_ref(x64, w64, eps, residual=r64, offset=offset)
    close(y, y64, FWD_TOL[dtype], "y")
    if use_residual:
        close(out[1], (x + r).double(), 0.0, "h")  # x + residual rounded to the input dtype
        got = torch.autograd.grad(out, (xs, ws, rs), (dy, dh))
        want = torch.autograd.grad((y64, h64), (x64, w64, r64), (dy.double(), dh.double()))
    else:
        got = torch.autograd.grad(y, (xs, ws), dy)
        want = torch.autograd.grad(y64, (x64, w64), dy.double())
    for g, e, name in zip(got, want, ("dx", "dweight", "dresidual"), strict=False):
        assert g.dtype == dtype, name
        close(g, e, BWD_TOL[dtype], f"{name} {dtype}")


# --------------------------------------------------------------------------- layer_norm


@pytest.mark.parametrize(
    "shape", [(1, 1), (1, 67), (4, 257), (2, 3, 31), (2, 3, 4, 17), (2, 4099)], ids=str
)
@pytest.mark.parametrize("affine", ["none", "weight", "weight+bias", "bias"])
def test_layer_norm_forward_backward(shape, affine, device, cpu_float_dtypes, poison_outputs):
    for dtype in cpu_float_dtypes:
        n = shape[-1]
        x = randn(*shape, dtype=dtype, device=device) * 3 + 2  # a mean far from zero
        w = randn(n, dtype=dtype, device=device) if "weight" in affine else None
        b = randn(n, dtype=dtype, device=device) if "bias" in affine else None
        dy = randn(*shape, dtype=dtype, device=device)
        xs, ws, bs = leaves(x, w, b)
        y = layer_norm(xs, ws, bs)
        x64, w64, b64 = leaves(x.double(), *(t.double() if t is not None else None for t in (w, b)))
        y64 = layer_norm_ref(x64, w64, b64)
        close(y, y64, FWD_TOL[dtype] * 2, f"y {dtype}")
        got = grads_of(y, [xs, ws, bs], dy)
        want = grads_of(y64, [x64, w64, b64], dy.double())
        for g, e in zip(got, want, strict=True):
            close(g, e, BWD_TOL[dtype], f"grad {dtype} {affine}")


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 4),
    n=st.integers(1, 70),
    affine=st.sampled_from(["none", "weight", "weight+bias", "bias"]),
    eps=st.sampled_from([1e-5, 1e-2]),
    shift=st.sampled_from([0.0, 2.0]),
    dtype=st.sampled_from([torch.float32, torch.float16]),
    seed=st.integers(0, 2**16),
)
def test_layer_norm_property(m, n, affine, eps, shift, dtype, seed):
    """Forward and backward (dx, dweight, dbias) against float64, rows with a mean far from
    zero among them."""
    torch.manual_seed(seed)
    x = (torch.randn(m, n, device=DEVICE) * 3 + shift).to(dtype)
    w = randn(n, dtype=dtype, device=DEVICE) if "weight" in affine else None
    b = randn(n, dtype=dtype, device=DEVICE) if "bias" in affine else None
    dy = randn(m, n, dtype=dtype, device=DEVICE)
    xs, ws, bs = leaves(x, w, b)
    y = layer_norm(xs, ws, bs, eps)
    assert y.dtype == dtype and y.shape == x.shape
    x64, w64, b64 = leaves(x.double(), *(t.double() if t is not None else None for t in (w, b)))
    y64 = layer_norm_ref(x64, w64, b64, eps)
    close(y, y64, FWD_TOL[dtype] * 2, f"y {dtype}")
    got = grads_of(y, [xs, ws, bs], dy)
    want = grads_of(y64, [x64, w64, b64], dy.double())
    assert len(got) == 1 + affine.count("weight") + affine.count("bias")
    for g, e in zip(got, want, strict=True):
        assert g.dtype == dtype
        close(g, e, BWD_TOL[dtype], f"grad {dtype} {affine}")


def test_layer_norm_chunked(device, poison_outputs):
    n = 65537
    x, w, b, dy = (
        randn(1, n, device=device) + 5,
        randn(n, device=device),
        randn(n, device=device),
        randn(1, n, device=device),
    )
    xs, ws, bs = leaves(x, w, b)
    y = layer_norm(xs, ws, bs)
    x64, w64, b64 = leaves(x.double(), w.double(), b.double())
    y64 = layer_norm_ref(x64, w64, b64)
    close(y, y64, 1e-5, "y")
    got = torch.autograd.grad(y, (xs, ws, bs), dy)
    want = torch.autograd.grad(y64, (x64, w64, b64), dy.double())
    for g, e in zip(got, want, strict=True):
        close(g, e, 1e-4, "grad")


def test_layer_norm_bias_only_keeps_bias_dtype(device):
    x, b = randn(3, 9, device=device), randn(9, dtype=torch.float16, device=device)
    xs, bs = leaves(x, b)
    (db,) = torch.autograd.grad(layer_norm(xs, None, bs).sum(), bs)
    assert db.dtype == torch.float16
    torch.testing.assert_close(db, torch.full((9,), 3.0, dtype=torch.float16, device=device))


# --------------------------------------------------------------------------- reference path


@pytest.fixture
def reference_path(monkeypatch):
    """CPU without the interpreter: ops take their PyTorch reference path."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("WARPFORGE_INTERPRET", "0")


def test_reference_path_matches_float64(reference_path):
    x, r, w, dy = randn(5, 33), randn(5, 33), randn(33), randn(5, 33)
    xs, rs, ws = leaves(x, r, w)
    y, _h = rms_norm(xs, ws, residual=rs, offset=0.5)
    x64, r64, w64 = leaves(x.double(), r.double(), w.double())
    y64, _h64 = rms_norm_ref(x64, w64, residual=r64, offset=0.5)
    close(y, y64, 1e-5, "y")
    for g, e in zip(
        torch.autograd.grad(y, (xs, rs, ws), dy),
        torch.autograd.grad(y64, (x64, r64, w64), dy.double()),
        strict=True,
    ):
        close(g, e, 1e-4, "grad")
    b = randn(33)
    close(layer_norm(x, w, b), layer_norm_ref(x, w, b), 1e-5, "layer_norm")


def test_gradcheck_reference_path(reference_path):
    """The autograd wiring (residual, dh, offset, bias) in float64 on the reference path."""
    g = dict(dtype=torch.float64, requires_grad=True)
    x, r, w, b = (
        torch.randn(3, 6, **g),
        torch.randn(3, 6, **g),
        torch.randn(6, **g),
        torch.randn(6, **g),
    )
    assert torch.autograd.gradcheck(
        lambda x, r, w: norm_module._rms_norm_fwd(x, w, r, 1e-6, 0.5)[:2], (x, r, w)
    )
    assert torch.autograd.gradcheck(
        lambda x, w, b: norm_module._layer_norm_fwd(x, w, b, 1e-5)[0], (x, w, b)
    )


def test_custom_ops_pass_opcheck():
    """Schemas, fake (meta) implementations and autograd registrations are consistent."""
    x, r, w, b = randn(3, 20), randn(3, 20), randn(20), randn(20)
    for args in ((x, w, r, 1e-6, 1.0), (x, None, None, 1e-6, 0.0)):
        torch.library.opcheck(torch.ops.warpforge.rms_norm_fwd.default, args)
    torch.library.opcheck(torch.ops.warpforge.layer_norm_fwd.default, (x, w, b, 1e-5))
    rstd = torch.rand(3) + 0.5
    torch.library.opcheck(
        torch.ops.warpforge.rms_norm_bwd.default, (randn(3, 20), x, w, rstd, r, 0.0, True)
    )
    torch.library.opcheck(
        torch.ops.warpforge.layer_norm_bwd.default, (randn(3, 20), x, w, randn(3), rstd, True, True)
    )


class _Fills(TorchDispatchMode):
    """Records the shapes of the zero/fill/full tensors made while active (a backward asking
    autograd for materialized zero gradients shows up as one per statistic)."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if "zero" in func.__name__ or "fill" in func.__name__ or "full" in func.__name__:
            self.shapes.append((func.__name__, tuple(out.shape)))
        return out


def test_layer_norm_backward_fills_no_statistics_gradients(device):
    """The LayerNorm backward asks for no zero gradients of mean and rstd (they take none, and
    each would be a fill launch on the GPU); a backward reached through mean alone gives zero
    gradients, as before."""
    m, n = 3, 40
    x, w, b = leaves(randn(m, n, device=device), randn(n, device=device), randn(n, device=device))
    dy = randn(m, n, device=device)

    y = layer_norm(x, w, b)
    with _Fills() as fills:
        got = torch.autograd.grad(y, (x, w, b), dy)
    assert not [f for f in fills.shapes if f[1] == (m,)], fills.shapes
    want = _layer_norm_grads64(x.detach(), w.detach(), b.detach(), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        close(g, e, BWD_TOL[torch.float32], name)
    _, mean, _ = torch.ops.warpforge.layer_norm_fwd(x, w, b, 1e-5)
    got = torch.autograd.grad(mean.sum(), (x, w, b))
    for name, g in zip(("dx", "dweight", "dbias"), got, strict=True):
        assert torch.equal(g, torch.zeros_like(g)), name


@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_backward_fills_no_statistics_gradients(residual, device):
    """rms_norm's backward asks for no zero gradient of rstd (nor of h without a residual);
    a backward reached through y alone, or h alone, still gives the right gradients."""
    m, n = 3, 40
    x, w, r = leaves(
        randn(m, n, device=device), randn(n, device=device), randn(m, n, device=device)
    )
    dy, dh = randn(m, n, device=device), randn(m, n, device=device)

    inputs = (x, w, r) if residual else (x, w)
    for with_y, with_h in (
        ((True, True), (True, False), (False, True)) if residual else ((True, False),)
    ):
        out = rms_norm(x, w, residual=r) if residual else (rms_norm(x, w), None)
        y, h = out
        outs, grads = [], []
        if with_y:
            outs.append(y), grads.append(dy)
        if with_h:
            outs.append(h), grads.append(dh)
        with _Fills() as fills:
            got = torch.autograd.grad(outs, inputs, grads)
        assert not [f for f in fills.shapes if f[1] == (m,)], fills.shapes
        x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        r64 = r.detach().double().requires_grad_()
        h64 = x64 + r64 if residual else x64
        y64 = h64 / torch.sqrt(h64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
        outs64 = ([y64] if with_y else []) + ([h64] if with_h else [])
        grads64 = [g.double() for g in grads]
        want = torch.autograd.grad(outs64, (x64, w64, r64) if residual else (x64, w64), grads64,
                                   allow_unused=True)  # fmt: skip
        for name, g, e in zip(("dx", "dweight", "dresidual")[: len(got)], got, want, strict=True):
            e = torch.zeros_like(g, dtype=torch.float64) if e is None else e
            close(g, e, BWD_TOL[torch.float32], f"{name} (y {with_y}, h {with_h})")


def test_compiles_with_fullgraph():
    """Dynamo traces the public function through the custom ops without graph breaks."""
    x, w, r = leaves(randn(4, 24), randn(24), randn(4, 24))
    fn = torch.compile(
        lambda x, w, r: rms_norm(x, w, residual=r, offset=1.0), backend="aot_eager", fullgraph=True
    )
    y, h = fn(x, w, r)
    y64, _h64 = rms_norm_ref(x.detach(), w.detach(), residual=r.detach(), offset=1.0)
    close(y, y64, 1e-5, "y")
    (y.sum() + h.sum()).backward()
    assert x.grad is not None and w.grad is not None and r.grad is not None


# --------------------------------------------------------------------------- errors


def test_errors_name_the_argument():
    x = randn(2, 8)
    with pytest.raises(TypeError, match=r"x: expected a torch.Tensor, got list"):
        rms_norm([1.0, 2.0])
    with pytest.raises(TypeError, match=r"x: expected dtype in .*got tensor .* dtype int64"):
        rms_norm(torch.ones(2, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"x: expected dtype in .*float64"):
        layer_norm(x.double())
    with pytest.raises(
        ValueError, match=r"weight: expected shape \(8,\).*got tensor of shape \(7,\)"
    ):
        rms_norm(x, randn(7))
    with pytest.raises(ValueError, match=r"bias: expected shape \(8,\)"):
        layer_norm(x, randn(8), randn(9))
    with pytest.raises(ValueError, match=r"weight: expected a 1-D tensor"):
        layer_norm(x, randn(1, 8))
    with pytest.raises(ValueError, match=r"residual: expected shape \(2, 8\)"):
        rms_norm(x, randn(8), residual=randn(2, 9))
    with pytest.raises(TypeError, match=r"residual: expected dtype in \(float32\)"):
        rms_norm(x, randn(8), residual=randn(2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"eps: expected a finite number > 0, got 0"):
        rms_norm(x, eps=0)
    with pytest.raises(ValueError, match=r"eps: expected a finite number > 0, got -1"):
        layer_norm(x, eps=-1e-5)
    with pytest.raises(TypeError, match=r"eps: expected a number"):
        rms_norm(x, eps="small")
    with pytest.raises(ValueError, match=r"offset: expected 0.0 when weight is None"):
        rms_norm(x, offset=1.0)
    with pytest.raises(
        ValueError, match=r"expected all tensors on one device, got x on cpu, weight on meta"
    ):
        rms_norm(x, torch.empty(8, device="meta"))
    with pytest.raises(
        ValueError, match=r"x: expected a last \(normalised\) dimension of size >= 1"
    ):
        rms_norm(randn(3, 0))


# --------------------------------------------------------------------------- GPU only


@pytest.mark.gpu
@pytest.mark.parametrize("n", [256, 4096, 16384, 65537])
def test_bf16_forward_backward_gpu(n):
    x, r, w, dy = (
        randn(*s, dtype=torch.bfloat16, device="cuda") for s in ((64, n), (64, n), (n,), (64, n))
    )
    xs, rs, ws = leaves(x, r, w)
    y, h = rms_norm(xs, ws, residual=rs)
    assert torch.equal(h, x + r)
    # the op normalises h rounded to bf16 (documented), so the float64 reference starts from
    # that h; its gradient reaches x and residual unchanged (dh/dx = dh/dr = 1)
    h64, w64 = leaves(h.double(), w.double())
    y64, _ = rms_norm_ref(h64, w64)
    close(y, y64, 1.6e-2, "y")
    dx, dr, dw = torch.autograd.grad(y, (xs, rs, ws), dy)
    dh64, dw64 = torch.autograd.grad(y64, (h64, w64), dy.double())
    torch.testing.assert_close(dx.double(), dh64, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(dr.double(), dh64, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(dw.double(), dw64, atol=5e-2, rtol=2e-2)
    b = randn(n, dtype=torch.bfloat16, device="cuda")
    close(layer_norm(x, w, b), layer_norm_ref(x, w, b), 3e-2, "layer_norm")


@pytest.mark.gpu
def test_torch_compile_inductor_fullgraph_gpu():
    x, w, r = leaves(
        *(
            randn(*s, dtype=torch.bfloat16, device="cuda")
            for s in ((128, 4096), (4096,), (128, 4096))
        )
    )

    def block(x, w, r):
        y, h = rms_norm(x, w, residual=r)
        return layer_norm(y * 2, w) + h

    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x, w, r)
    ref = block(x, w, r)
    torch.testing.assert_close(out, ref)
    out.float().sum().backward()
    assert all(t.grad is not None for t in (x, w, r))


@pytest.mark.gpu
def test_cuda_graph_capture_gpu():
    x = randn(256, 1024, dtype=torch.bfloat16, device="cuda")
    w = randn(1024, dtype=torch.bfloat16, device="cuda")
    r = randn(256, 1024, dtype=torch.bfloat16, device="cuda")
    rms_norm(x, w, residual=r)  # warm-up compiles the kernels outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        rms_norm(x, w, residual=r)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, h = rms_norm(x, w, residual=r)
    x.copy_(randn(256, 1024, dtype=torch.bfloat16, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    y_eager, h_eager = rms_norm(x, w, residual=r)
    assert torch.equal(y, y_eager) and torch.equal(h, h_eager)


@pytest.mark.gpu
def test_more_than_2_to_31_elements_gpu():
    """Row offsets in int64: the last rows of a 2**31 + 16384 element input are right."""
    n = 16384
    m = 2**31 // n + 1
    x = torch.empty(m, n, dtype=torch.bfloat16, device="cuda").normal_()
    w = randn(n, dtype=torch.bfloat16, device="cuda")
    y = rms_norm(x, w)
    tail = slice(m - 3, m)
    close(y[tail], rms_norm_ref(x[tail], w)[0], 1.6e-2, "y tail")
    dy = torch.empty_like(x).normal_()
    xs = x.requires_grad_()
    (dx,) = torch.autograd.grad(rms_norm(xs, w), xs, dy)
    x64 = x[tail].detach().double().requires_grad_()
    (dx64,) = torch.autograd.grad(rms_norm_ref(x64, w)[0], x64, dy[tail].double())
    torch.testing.assert_close(dx[tail].double(), dx64, atol=5e-2, rtol=2e-2)


@pytest.mark.gpu
def test_layer_norm_more_than_2_to_31_elements_gpu():
    """The public layer_norm, forward and autograd backward, on more than 2**31 elements: its
    last rows, dx and the bias gradient (a column sum over every row) against float64."""
    n = 16384
    m = 2**31 // n + 1
    x = torch.empty(m, n, dtype=torch.bfloat16, device="cuda").normal_()
    w, b = (
        randn(n, dtype=torch.bfloat16, device="cuda"),
        randn(n, dtype=torch.bfloat16, device="cuda"),
    )
    dy = torch.empty_like(x).normal_()
    dy[-1] *= 64  # the one row past 2**31 elements then moves each bias gradient by ~64
    xs, ws, bs = x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
    y = layer_norm(xs, ws, bs)
    dx, _dw, db = torch.autograd.grad(y, (xs, ws, bs), dy)
    tail = slice(m - 3, m)
    x64 = x[tail].detach().double().requires_grad_()
    y64 = layer_norm_ref(x64, w.detach(), b.detach())
    close(y[tail], y64, 1.6e-2, "y tail")
    (dx64,) = torch.autograd.grad(y64, x64, dy[tail].double())
    torch.testing.assert_close(dx[tail].double(), dx64, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(db.double(), dy.double().sum(0), atol=2.0, rtol=1e-2)


def test_chunked_persistent_rows(device, poison_outputs, monkeypatch):
    """More rows than persistent programs: each program loops over several long rows."""
    monkeypatch.setenv("WARPFORGE_WIDE_ROWS", "0")  # the chunked kernel, not the whole-row one
    m, n = 6, 16385  # one column past the single-pass limit
    x, w, dy = (randn(*s, device=device) for s in ((m, n), (n,), (m, n)))
    xs, ws = leaves(x, w)
    y = rms_norm(xs, ws)
    x64, w64 = leaves(x.double(), w.double())
    y64, _ = rms_norm_ref(x64, w64)
    close(y, y64, 1e-5, "y")
    got = torch.autograd.grad(y, (xs, ws), dy)
    want = torch.autograd.grad(y64, (x64, w64), dy.double())
    for g, e in zip(got, want, strict=True):
        close(g, e, 1e-4, "grad")


def test_leaf_gradients_do_not_alias(device):
    """x and residual share one gradient value, but two leaves must not share its storage."""
    x, r, w = leaves(
        randn(3, 8, device=device), randn(3, 8, device=device), randn(8, device=device)
    )
    y, _ = rms_norm(x, w, residual=r)
    y.sum().backward()
    assert x.grad.data_ptr() != r.grad.data_ptr()
    torch.testing.assert_close(x.grad, r.grad)


def test_strided_weight_and_bias(device):
    """Parameters that are views with a stride (e.g. slices of a packed buffer) are read right."""
    (packed,) = leaves(randn(3, 40, device=device))
    x, dy = randn(4, 20, device=device), randn(4, 20, device=device)
    w, b = packed[0, ::2], packed[1, ::2]
    close(layer_norm(x, w, b), layer_norm_ref(x, w.detach(), b.detach()), 1e-5, "layer_norm")
    (xs,) = leaves(x)
    y = rms_norm(xs, w)
    (x64, packed64) = leaves(x.double(), packed.detach().double())
    y64, _ = rms_norm_ref(x64, packed64[0, ::2])
    close(y, y64, 1e-5, "rms_norm")
    got = torch.autograd.grad(y, (xs, packed), dy)
    want = torch.autograd.grad(y64, (x64, packed64), dy.double())
    for g, e in zip(got, want, strict=True):
        close(g, e, 1e-4, "grad")


@pytest.mark.parametrize("center", [False, True], ids=["rms", "layer"])
@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize(
    "in_memory, prefetch, reload",
    [
        (False, False, False),
        (True, False, False),
        (False, True, False),
        (True, True, False),
        (False, False, True),
        (True, True, True),
    ],
)
def test_backward_partials_in_registers_or_in_memory(
    center, rows, in_memory, prefetch, reload, device
):
    """The rows kernel's partial dweight/dbias kept in registers or in its rows of the partial
    buffers (wide LayerNorm rows), with or without loading the next tile ahead, with or without
    reading each tile a second time after the row reductions, over a persistent grid with
    several tiles per program (the last one ragged); the one partial-sum launch reduces both."""
    from warpforge.ops._rows import RowLaunchConfig

    m, n = 11, 37
    x, w, dy = (randn(*s, device=device) for s in ((m, n), (n,), (m, n)))
    x64, w64 = x.double(), w.double()
    mean = x64.mean(-1) if center else None
    xc = x64 - mean[:, None] if center else x64
    rstd = torch.rsqrt(xc.pow(2).mean(-1) + 1e-5)
    config = RowLaunchConfig(64, rows, True, 1, num_programs=2)  # 2 programs, tiles of `rows`
    dx, dw, db = norm_module._norm_backward(
        dy, x, w, mean.float() if center else None, rstd.float(), None, 0.0, center,
        True, center, launch=config, in_memory=in_memory, prefetch=prefetch,
        knobs=norm_module.BwdKnobs(reload=reload),
    )  # fmt: skip
    xs, ws = leaves(x64, w64)
    bs = leaves(torch.zeros(n, dtype=torch.float64, device=device))[0]
    y = layer_norm_ref(xs, ws, bs) if center else rms_norm_ref(xs, ws, eps=1e-5)[0]
    want = torch.autograd.grad(y, (xs, ws, bs) if center else (xs, ws), dy.double())
    close(dx, want[0], 1e-4, "dx")
    close(dw, want[1], 1e-4, "dweight")
    if center:
        close(db, want[2], 1e-4, "dbias")


def test_wide_layer_norm_rows_keep_partials_in_memory_and_grids_fit_the_sms():
    """Launch policy (no kernel run): LayerNorm's 4 live rows at 16 elements a thread go to
    memory, RMSNorm's 3 stay in registers; persistent grids never exceed the resident slots."""
    from warpforge.ops._rows import RowLaunchConfig

    wide = RowLaunchConfig(16384, 1, True, 32, 132)
    assert norm_module.partials_in_memory(wide, norm_module._bwd_row_operands(True, True, True))
    assert not norm_module.partials_in_memory(
        wide, norm_module._bwd_row_operands(False, True, False)
    )
    narrow = RowLaunchConfig(256, 8, True, 8, 528)  # N=256: 8 rows a program, 8 warps
    assert norm_module.prefetch_tiles(narrow) and not norm_module.prefetch_tiles(wide)
    assert norm_module._bwd_resident_programs(narrow, 3, False, False) == 3  # 76 registers
    assert norm_module._bwd_resident_programs(narrow, 3, False, True) == 2  # 87 (ptxas)
    assert norm_module._bwd_resident_programs(narrow, 4, False, True) == 2  # 127
    assert norm_module._bwd_resident_programs(wide, 4, True, False) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("n", [256, 4096, 16384])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_backward_kernel_paths(n, dtype):
    """The backward launch shapes of the benchmark widths on the GPU: prefetching tiles of short
    rows over a persistent grid of several tiles a program, and LayerNorm's in-memory partials
    at 16384 columns; dx, dweight and dbias against float64."""
    m = 4096 if n < 16384 else 600
    x, w, b, dy = (randn(*s, dtype=dtype, device="cuda") for s in ((m, n), (n,), (n,), (m, n)))
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    for center in (False, True):
        xs, ws, bs = leaves(x, w, b)
        y = layer_norm(xs, ws, bs) if center else rms_norm(xs, ws)
        got = torch.autograd.grad(y, (xs, ws, bs) if center else (xs, ws), dy)
        x64, w64, b64 = leaves(x.double(), w.double(), b.double())
        y64 = layer_norm_ref(x64, w64, b64) if center else rms_norm_ref(x64, w64)[0]
        want = torch.autograd.grad(y64, (x64, w64, b64) if center else (x64, w64), dy.double())
        for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=False):
            scale = e.abs().max().item()  # dweight sums m rows: compare relative to its size
            torch.testing.assert_close(
                g.double() / scale, e / scale, atol=tol, rtol=tol, msg=f"{center} {name}"
            )


# --------------------------------------------------------------------------- LayerNorm split rows


def _layer_norm_grads64(x, w, b, dy):
    """float64 (dx, dweight, dbias) of LayerNorm (weight/bias None: left out)."""
    x64, w64, b64 = leaves(x.double(), *(t.double() if t is not None else None for t in (w, b)))
    y64 = layer_norm_ref(x64, w64, b64)
    return grads_of(y64, [x64, w64, b64], dy.double())


def _asked_grads(dx, dw, db, w, b):
    """{name: gradient} of a LayerNorm backward, without the weight/bias gradients it was not
    asked for (those must come back empty)."""
    got = {"dx": dx, "dweight": dw, "dbias": db}
    if w is None:
        assert dw.numel() == 0
        del got["dweight"]
    if b is None:
        assert db.numel() == 0
        del got["dbias"]
    return got


def _check_forced_split_backward(
    m, n, block, affine, device, dtypes, plan_options, backward_options, label
):  # fmt: skip
    """``layer_norm_backward`` through a forced split plan of ``block``-column chunks against
    float64, for every dtype: dx, and dweight/dbias when the layer has them (empty otherwise)."""
    from warpforge.ops._split_rows import split_row_plan

    for dtype in dtypes:
        x = randn(m, n, dtype=dtype, device=device) * 3 + 2
        w = randn(n, dtype=dtype, device=device) if "weight" in affine else None
        b = randn(n, dtype=dtype, device=device) if "bias" in affine else None
        dy = randn(m, n, dtype=dtype, device=device)
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, device, block=block, num_warps=4, **plan_options)
        assert plan is not None and plan.chunks == -(-n // block)
        dx, dw, db = norm_module.layer_norm_backward(
            dy, x, w, mean, rstd, w is not None, b is not None, split=plan, **backward_options
        )
        want = _layer_norm_grads64(x, w, b, dy)
        got = _asked_grads(dx, dw, db, w, b)
        for (name, g), e in zip(got.items(), want, strict=True):
            close(g, e, BWD_TOL[dtype] * 4, f"{name} {dtype} {label}")


def _forward_stats(x):
    xf = x.float()
    return xf.mean(-1), torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)


@pytest.mark.parametrize(
    ("m", "n", "block", "prefetch"),
    [(1, 1, 16, False), (7, 257, 64, False), (7, 257, 64, True), (5, 4099, 1024, True),
     (2, 31, 16, True)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("affine", ["weight+bias", "weight", "bias", "none"])
def test_layer_norm_split_backward(m, n, block, prefetch, affine, device, cpu_float_dtypes,
                                   poison_outputs):  # fmt: skip
    """The split-row backward (forced plans of several chunks a row, more rows than the plan's
    slots, the last chunk ragged) against float64: dx, dweight, dbias, every element written."""
    _check_forced_split_backward(
        m, n, block, affine, device, cpu_float_dtypes, {"prefetch": prefetch}, {}, affine
    )


def test_layer_norm_split_backward_strided_rows(device, poison_outputs):
    """Rows that are slices of wider rows (row stride > N), through the split kernel."""
    from warpforge.ops._split_rows import split_row_plan

    m, n = 9, 300
    x = (randn(m, 2 * n, device=device) * 2 - 1)[:, 3 : n + 3]
    dy = randn(m, n + 5, device=device)[:, :n]
    w = randn(n, device=device)
    assert x.stride(0) != n and dy.stride(0) != n
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(m, n, device, block=128, num_warps=4)
    dx, dw, db = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, split=plan)
    want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), (dx, dw, db), want, strict=True):
        close(g, e, 1e-4, name)


def test_wide_layer_norm_backward_takes_the_split(device, monkeypatch, poison_outputs):
    """The public op at >= LAYER_NORM_BWD_SPLIT_MIN_N columns (a 3-D input, a prime width past
    it) runs the split kernel, and matches float64 (NORM_BWD_NARROW emptied: its float32
    entries send these rows to the flag-word kernel, tested in test_norm_bwd_narrow.py)."""
    from warpforge.ops._kernels import norm as kernels

    monkeypatch.delenv(norm_module.NORM_BWD_NARROW_ENV, raising=False)
    monkeypatch.setattr(norm_module, "NORM_BWD_NARROW", {})
    norm_module.norm_bwd_narrow_plan.cache_clear()

    launched = []
    for name in (
        "_layer_norm_split_backward",
        "_layer_norm_lag_backward",
        "_layer_norm_held_backward",
    ):
        real = getattr(norm_module, name)
        monkeypatch.setattr(norm_module, name,
                            lambda *a, real=real: launched.append(a[7]) or real(*a))  # fmt: skip
    n = 16411
    assert n >= norm_module.LAYER_NORM_BWD_SPLIT_MIN_N
    x, dy = randn(2, 2, n, device=device) + 1, randn(2, 2, n, device=device)
    w, b = randn(n, device=device), randn(n, device=device)
    xs, ws, bs = leaves(x, w, b)
    got = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
    assert launched and launched[0].chunks == -(-n // launched[0].block) > 1
    assert kernels.layer_norm_bwd_split_kernel is not None
    want = _layer_norm_grads64(x, w, b, dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        close(g, e, 1e-4, name)


def test_wide_layer_norm_chunked_backward_still_matches(device, poison_outputs):
    """The one-program-per-row chunked backward (what wide rows fall back to when the split
    cannot run: too few SMs, MPS, ``WARPFORGE_SPLIT_ROWS=0``) against float64."""
    m, n = 3, 16411
    x, dy = randn(m, n, device=device) + 3, randn(m, n, device=device)
    w = randn(n, device=device)
    mean, rstd = _forward_stats(x)
    dx, dw, db = norm_module._norm_backward(dy, x, w, mean, rstd, None, 0.0, True, True, True)
    want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), (dx, dw, db), want, strict=True):
        close(g, e, 1e-4, name)


def test_layer_norm_split_plan_policy(monkeypatch):
    """Launch policy (no kernel run): rows narrower than the threshold never split; on an H100
    the 16384-column benchmark rows take the held kernel's launch (2-byte rows) or the lagged
    kernel's (4-byte rows) in whole resident groups of at most LAYER_NORM_BWD_LAG_MAX_CHUNKS
    chunks; wider rows the split kernel's; the switch and a row needing more programs than the
    GPU holds fall back (None)."""
    from warpforge.ops import _split_rows
    from warpforge.runtime import DeviceCapabilities

    h100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
    monkeypatch.setattr(_split_rows, "device_capabilities", lambda device: h100)
    norm_module._default_split.cache_clear()
    try:
        for elt in (2, 4):
            assert norm_module.layer_norm_bwd_split_plan(16384, 4096, elt, "cuda") is None
            held = norm_module.layer_norm_bwd_held_launch(elt)
            assert (held is not None) == (elt == 2)
            launch = held or norm_module.layer_norm_bwd_lag_launch(elt)
            plan, lag, rows, hold = norm_module._default_split(4096, 16384, elt, "cuda")
            assert plan is not None and plan.synchronized and plan.chunks * plan.block == 16384
            assert plan.block == launch["block"] and plan.prefetch == launch["prefetch"]
            if held is not None:
                assert (lag, rows, hold) == (1, 1, norm_module.LAYER_NORM_BWD_HOLD)
            else:
                assert (lag, rows, hold) == (*norm_module.layer_norm_bwd_lag(elt), None)
            assert plan.chunks <= norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS
            assert plan.programs % plan.chunks == 0
            assert plan.programs <= 132 * launch["programs_per_sm"]
            assert plan.num_warps * launch["programs_per_sm"] <= _split_rows.MAX_RESIDENT_WARPS
            assert plan == norm_module.layer_norm_bwd_split_plan(4096, 16384, elt, "cuda")
            # one chunk more than the held and lagged kernels take: the split kernel's launch
            lag_launch = norm_module.layer_norm_bwd_lag_launch(elt)
            wider = norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS * max(
                launch["block"], lag_launch["block"]) + 1  # fmt: skip
            plan, lag, _, hold = norm_module._default_split(64, wider, elt, "cuda")
            split_launch = norm_module.layer_norm_bwd_split_launch(elt)
            assert lag is None and hold is None and plan.block == split_launch["block"]
            per_sm = split_launch["programs_per_sm"]
            too_wide = 132 * per_sm * plan.block + 1  # one chunk more than the GPU holds
            assert norm_module.layer_norm_bwd_split_plan(8, too_wide, elt, "cuda") is None
        # 2-byte rows: the pairs kernel's launch, whole resident groups of at most 64 chunks
        pairs = norm_module.layer_norm_bwd_pairs_launch(2)
        assert norm_module.layer_norm_bwd_pairs_launch(4) is None
        norm_module._default_pairs_plan.cache_clear()
        plan = norm_module._default_pairs_plan(4096, 16384, 2, "cuda")
        assert plan is not None and plan.synchronized and plan.block == pairs["block"]
        assert plan.chunks * plan.block == 16384
        assert plan.chunks <= norm_module.LAYER_NORM_BWD_PAIRS_MAX_CHUNKS
        assert plan.programs % plan.chunks == 0
        assert plan.programs <= 132 * pairs["programs_per_sm"]
        assert plan.num_warps * pairs["programs_per_sm"] <= _split_rows.MAX_RESIDENT_WARPS
        assert norm_module._default_pairs_plan(16384, 4096, 2, "cuda") is None
        assert norm_module._default_pairs_plan(4096, 16384, 4, "cuda") is None
        norm_module._default_split.cache_clear()
        norm_module._default_pairs_plan.cache_clear()
        monkeypatch.setenv(_split_rows.SWITCH, "0")
        assert norm_module.layer_norm_bwd_split_plan(4096, 16384, 2, "cuda") is None
        assert norm_module._default_pairs_plan(4096, 16384, 2, "cuda") is None
    finally:
        norm_module._default_split.cache_clear()
        norm_module._default_pairs_plan.cache_clear()


def test_wide_pairs_launch_policy(monkeypatch):
    """On the H200, 2-byte LayerNorm rows past the 256-column launch's 64 chunks and up to
    32768 columns have the pairs kernel's wide launch (LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL);
    wider rows, 4-byte rows and other GPUs do not. The narrow-row table, asked first, takes
    32768 columns itself (the lagged kernel on the H200, the flag-word kernel elsewhere)."""
    from warpforge.ops import _split_rows
    from warpforge.runtime import DeviceCapabilities

    caps = {name: DeviceCapabilities(name, (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
            for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3")}  # fmt: skip
    widest, wide = norm_module.LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL["NVIDIA H200"]
    assert widest == 32768
    try:
        for name, cap in caps.items():
            monkeypatch.setattr(_split_rows, "device_capabilities", lambda device, cap=cap: cap)
            norm_module._default_pairs_plan.cache_clear()
            norm_module.norm_bwd_narrow_plan.cache_clear()
            h200 = name == "NVIDIA H200"
            assert norm_module._default_pairs_plan(4096, 16384, 2, "cuda").block == 256
            for n in (16386, 20002, 32768):
                plan = norm_module._default_pairs_plan(4096, n, 2, "cuda")
                if h200:
                    assert (plan.block, plan.num_warps) == (wide["block"], wide["num_warps"])
                    assert plan.programs <= 132 * wide["programs_per_sm"] and plan.prefetch
                else:
                    assert plan is None, (name, n)
                assert norm_module._default_pairs_plan(4096, n, 4, "cuda") is None
            assert norm_module._default_pairs_plan(4096, 32770, 2, "cuda") is None
            assert norm_module.norm_bwd_narrow_plan("layer_norm", 4096, 32767, 2, "cuda") is None
            kernel, narrow = norm_module.norm_bwd_narrow_plan("layer_norm", 4096, 32768, 2, "cuda")
            assert (kernel, narrow.block) == (("lag", 1024) if h200 else ("flags", 4096))
            assert norm_module.norm_bwd_narrow_plan("layer_norm", 4096, 32770, 2, "cuda")
    finally:
        norm_module._default_pairs_plan.cache_clear()
        norm_module.norm_bwd_narrow_plan.cache_clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n"), [(257, 32768), (33, 20002), (1, 16386)])
def test_gpu_default_layer_norm_backward_past_16384_columns(m, n, dtype, monkeypatch):
    """The public op's 2-byte LayerNorm backward of 16385-32768 columns (the pairs kernel's
    wide launch on the H200 under 32768 columns, the lagged kernel at 32768) against float64,
    bitwise the same on a second run."""
    launched = []
    real = norm_module._layer_norm_pairs_backward
    monkeypatch.setattr(norm_module, "_layer_norm_pairs_backward",
                        lambda *a, **k: launched.append(a[7]) or real(*a, **k))  # fmt: skip
    x = randn(m, n, dtype=dtype, device="cuda") * 3 + 2
    w, b, dy = (randn(*s, dtype=dtype, device="cuda") for s in ((n,), (n,), (m, n)))
    xs, ws, bs = leaves(x, w, b)
    got = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
    again = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
    if torch.cuda.get_device_name() in norm_module.LAYER_NORM_BWD_PAIRS_WIDE_BY_MODEL:
        assert (launched and launched[0].block == 1024) if n < 32768 else not launched, launched
    want = _layer_norm_grads64(x, w, b, dy)
    scale = _pairs_scales(x, w, dy)
    for name, g, g2, e in zip(("dx", "dweight", "dbias"), got, again, want, strict=True):
        assert torch.equal(g, g2), f"{name} differs between runs"
        _close_pairs(g, e, dtype, f"{name} m={m} n={n}", scale.get(name))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("m", "n"), [(1, 16384), (600, 16384), (257, 16411), (64, 65536)])
def test_gpu_layer_norm_split_backward(m, n, dtype):
    """The synchronized split launch on the GPU (one launch, rows meeting through the counter):
    dx, dweight, dbias against float64, bitwise-identical on a second run (no atomics in the
    sums), and the same as the chunked fallback within rounding."""
    x, w, b, dy = (randn(*s, dtype=dtype, device="cuda") for s in ((m, n), (n,), (n,), (m, n)))
    x = x * 3 + 2
    plan = norm_module.layer_norm_bwd_split_plan(m, n, x.element_size(), x.device)
    assert plan is not None and plan.synchronized
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    xs, ws, bs = leaves(x, w, b)
    got = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
    again = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
    want = _layer_norm_grads64(x, w, b, dy)
    for name, g, g2, e in zip(("dx", "dweight", "dbias"), got, again, want, strict=True):
        assert torch.equal(g, g2), f"{name} differs between runs"
        scale = e.abs().max().item()
        torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol, msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("block", "warps", "per_sm", "prefetch"),
    [(2048, 4, 4, True), (2048, 4, 4, False), (1024, 2, 8, True), (4096, 8, 2, False)],
    ids=str,
)  # fmt: skip
def test_gpu_layer_norm_split_backward_launches(block, warps, per_sm, prefetch, dtype):
    """Launches of the split kernel the sweep times (chunk widths, several programs an SM under
    a register cap, prefetch) against float64, on ragged shapes: one row, rows not a multiple
    of the slots, a width not a multiple of the chunk."""
    from warpforge.ops._split_rows import split_row_plan

    tol = 1e-4 if dtype == torch.float32 else 5e-2
    for m, n in ((1, 16384), (257, 16411), (2000, 8192)):
        x = randn(m, n, dtype=dtype, device="cuda") * 3 + 2
        w, dy = randn(n, dtype=dtype, device="cuda"), randn(m, n, dtype=dtype, device="cuda")
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, "cuda", block=block, num_warps=warps,
                              programs_per_sm=per_sm, prefetch=prefetch)  # fmt: skip
        got = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan)
        want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
        for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
            scale = e.abs().max().item()
            torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol,
                                       msg=f"{name} m={m} n={n}")  # fmt: skip


def test_layer_norm_split_plan_for_more_rows_is_rejected(device):
    """A forced plan with more slots than the input has rows would leave partial rows unwritten:
    refused with a message naming the argument."""
    from warpforge.ops._split_rows import split_row_plan

    x, dy = randn(2, 40, device=device), randn(2, 40, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(8, 40, device, block=16, num_warps=4)
    assert plan.programs // plan.chunks > 2
    with pytest.raises(ValueError, match="split: expected a plan of at most 2 slots"):
        norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan)


# --------------------------------------------------------------------------- LayerNorm lagged split


@pytest.mark.parametrize(
    ("m", "n", "block", "lag", "rows", "affine"),
    # every affine form at three plans (a lag of one row, of two over groups of 4 rows, one
    # row in groups of 2), the others with weight and bias
    [(*plan, affine) for plan in [(7, 257, 64, 1, 1), (13, 97, 32, 2, 4), (1, 1, 16, 1, 2)]
     for affine in ("weight+bias", "weight", "bias", "none")]
    + [(*plan, "weight+bias") for plan in
       [(1, 1, 16, 1, 1), (7, 257, 64, 0, 1), (7, 257, 64, 2, 1), (5, 4099, 1024, 1, 1),
        (2, 31, 16, 3, 1), (11, 97, 32, 1, 1), (7, 257, 64, 1, 2), (5, 300, 128, 0, 2)]],
    ids=str,
)  # fmt: skip
def test_layer_norm_lag_backward(m, n, block, lag, rows, affine, device, cpu_float_dtypes,
                                 poison_outputs):  # fmt: skip
    """``layer_norm_bwd_lag_kernel`` (forced plans: several chunks a row, more rows than slots,
    a ragged last chunk, lags longer than a slot's groups, groups of several rows with the last
    ragged, more slots than groups) against float64: dx, dweight, dbias, every element written
    (poisoned outputs)."""
    _check_forced_split_backward(
        m, n, block, affine, device, cpu_float_dtypes, {}, {"lag": lag, "lag_rows": rows},
        f"{affine} lag={lag} rows={rows}",
    )  # fmt: skip


def test_layer_norm_lag_backward_strided_rows(device, poison_outputs):
    """Rows that are slices of wider rows (row stride > N), through the lagged kernel."""
    from warpforge.ops._split_rows import split_row_plan

    m, n = 9, 300
    x = (randn(m, 2 * n, device=device) * 2 - 1)[:, 3 : n + 3]
    dy = randn(m, n + 5, device=device)[:, :n]
    w = randn(n, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(m, n, device, block=128, num_warps=4)
    dx, dw, db = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, 1)
    want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), (dx, dw, db), want, strict=True):
        close(g, e, 1e-4, name)


def test_layer_norm_lag_argument_is_checked(device):
    """A lag without a split plan, a negative one, one with a plan of more chunks a row than
    the lagged kernel takes, and groups of rows that are not a power of 2 are refused naming
    the argument."""
    from warpforge.ops._split_rows import split_row_plan

    x, dy = randn(2, 40, device=device), randn(2, 40, device=device)
    mean, rstd = _forward_stats(x)
    with pytest.raises(ValueError, match="lag: expected"):
        norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, None, 1)
    plan = split_row_plan(2, 40, device, block=16, num_warps=4)
    with pytest.raises(ValueError, match="lag: expected"):
        norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan, -1)
    with pytest.raises(ValueError, match="lag_rows: expected a power of 2"):
        norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan, 1, 3)
    chunks = norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS + 1
    wide = randn(2, 16 * chunks, device=device)
    mean, rstd = _forward_stats(wide)
    plan = split_row_plan(2, 16 * chunks, device, block=16, num_warps=4)
    with pytest.raises(ValueError, match=f"lag: expected a plan of at most {chunks - 1} chunks"):
        norm_module.layer_norm_backward(wide, wide, None, mean, rstd, False, True, plan, 1)


@triton.jit
def _pack_roundtrip_kernel(S, P, U, BLOCK: tl.constexpr):
    """Packs the pairs (S[k], S[BLOCK + k]) into P[k] one scalar pair at a time, as the lagged
    kernel does (``split_rows.pack_pair``), and writes the unpacked column sums to U."""
    i = tl.arange(0, BLOCK)
    for k in range(0, BLOCK):
        s1 = tl.sum(tl.where(i == k, tl.load(S + i), 0.0), axis=0)
        s2 = tl.sum(tl.where(i == k, tl.load(S + BLOCK + i), 0.0), axis=0)
        tl.store(P + k, split_kernels.pack_pair(s1, s2))
    lo, hi = split_kernels.unpack_pair(tl.load(P + i)[None, :])
    c1, c2 = tl.sum(lo, axis=1), tl.sum(hi, axis=1)
    one = tl.arange(0, 1)
    tl.store(U + one, c1)
    tl.store(U + 1 + one, c2)


def test_pack_pair_never_writes_the_unpublished_flag(device):
    """The lagged kernel's flag is all bits set; its packed sums must never equal it, NaN sums
    included (they are written as the canonical NaN), and must unpack to the sums."""
    low = [1.5, float("nan"), float("inf"), -2.0, 0.0, 3.0, -0.5, 4.0]
    high = [0.25, 1.0, float("-inf"), 2.0, -1.0, 0.5, 8.0, -8.0]
    s = torch.tensor([*low, *high])
    s[1] = torch.tensor([-1], dtype=torch.int32).view(torch.float32)[0]  # a NaN of all bits set
    s = s.to(device)
    packed = torch.zeros(8, dtype=torch.int64, device=device)
    sums = torch.zeros(2, device=device)
    _pack_roundtrip_kernel[(1,)](s, packed, sums, BLOCK=8)
    assert not (packed == -1).any()
    lo = (packed & 0xFFFFFFFF).to(torch.int32).view(torch.float32).cpu()
    hi = (packed >> 32).to(torch.int32).view(torch.float32).cpu()
    torch.testing.assert_close(lo, s[:8].cpu(), equal_nan=True)
    torch.testing.assert_close(hi, s[8:].cpu(), equal_nan=True)
    assert sums[0].isnan() and sums[1].item() == float("-inf")
    # finite sums come back exactly
    s = torch.tensor(
        [*[float(v) for v in range(1, 9)], *[-0.5 * v for v in range(8)]], device=device
    )
    _pack_roundtrip_kernel[(1,)](s, packed, sums, BLOCK=8)
    assert sums.tolist() == [36.0, -14.0]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("block", "warps", "per_sm", "lag", "rows"),
    [(2048, 4, 4, 0, 1), (2048, 4, 4, 1, 1), (2048, 8, 2, 1, 1), (1024, 4, 8, 1, 1),
     (1024, 4, 8, 2, 1), (2048, 8, 4, 1, 1), (4096, 16, 2, 1, 1), (1024, 4, 4, 1, 2),
     (2048, 8, 2, 1, 2), (512, 2, 16, 1, 1), (512, 2, 16, 2, 1)],
    ids=str,
)  # fmt: skip
def test_gpu_layer_norm_lag_backward_launches(block, warps, per_sm, lag, rows, dtype):
    """Launches of the lagged kernel the sweep times against float64 on ragged shapes (one row,
    rows not a multiple of the slots, a width not a multiple of the chunk, 32 chunks a row,
    groups of two rows whose flag words spread over several warps), bitwise the same on a
    second run (no atomics in any sum; NaN, from a word read before its chunk published it,
    fails)."""
    from warpforge.ops._split_rows import split_row_plan

    tol = 1e-4 if dtype == torch.float32 else 5e-2
    for m, n in ((1, 16384), (257, 16411), (2000, 8192), (4096, 16384), (300, 32768)):
        x = randn(m, n, dtype=dtype, device="cuda") * 3 + 2
        w, dy = randn(n, dtype=dtype, device="cuda"), randn(m, n, dtype=dtype, device="cuda")
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm)
        if plan is None or plan.chunks > norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS:
            continue  # the GPU cannot hold a row's programs at once, or the kernel its words
        got = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, lag, rows)
        again = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, lag, rows)
        want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
        for name, g, g2, e in zip(("dx", "dweight", "dbias"), got, again, want, strict=True):
            assert torch.equal(g, g2), f"{name} differs between runs"
            scale = e.abs().max().item()
            torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol,
                                       msg=f"{name} m={m} n={n}")  # fmt: skip


@pytest.mark.gpu
def test_gpu_layer_norm_lag_backward_non_finite_rows_terminate():
    """A row whose sums are NaN or infinite still publishes (no program waits forever on it)
    and only that row's dx is non-finite."""
    from warpforge.ops._split_rows import split_row_plan

    m, n = 300, 16384
    x = randn(m, n, device="cuda") + 1
    dy = randn(m, n, device="cuda")
    mean, rstd = _forward_stats(x)
    dy[5, 7] = float("nan")
    dy[9, 100] = float("inf")
    plan = split_row_plan(m, n, "cuda", block=2048, num_warps=4, programs_per_sm=4)
    dx, _, _ = norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan, 1)
    torch.cuda.synchronize()
    finite = dx.isfinite().all(dim=1)
    assert not finite[5] and not finite[9]
    assert finite[[r for r in range(m) if r not in (5, 9)]].all()


# --------------------------------------------------------------------------- LayerNorm held split


@pytest.mark.parametrize(
    ("m", "n", "block", "rows"),
    [(1, 1, 16, 1), (7, 257, 64, 1), (7, 256, 64, 1), (13, 97, 32, 4), (5, 300, 128, 2),
     (11, 128, 32, 2)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize(("hold", "prefetch"), [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("affine", ["weight+bias", "none"])
def test_layer_norm_held_backward(m, n, block, rows, hold, prefetch, affine, device,
                                  cpu_float_dtypes, poison_outputs):  # fmt: skip
    """``layer_norm_bwd_held_kernel`` (forced plans: several chunks a row, more rows than
    slots, ragged and whole last chunks, groups of rows) against float64: dx, dweight, dbias,
    every element written (poisoned outputs). Under the interpreter this runs its two-launch
    form; the test below runs its one-launch pipeline."""
    _check_forced_split_backward(
        m, n, block, affine, device, cpu_float_dtypes, {"prefetch": prefetch},
        {"lag": 1, "lag_rows": rows, "hold": hold}, f"{affine} rows={rows} hold={hold}",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("m", "n", "block", "rows"),
    [(1, 1, 16, 1), (7, 57, 64, 1), (2, 16, 16, 1), (13, 31, 32, 4), (5, 128, 128, 2)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize(("hold", "prefetch"), [(True, True), (True, False), (False, True)])
def test_layer_norm_held_backward_one_launch(m, n, block, rows, hold, prefetch, device,
                                             poison_outputs):  # fmt: skip
    """The one-launch pipeline of ``layer_norm_bwd_held_kernel`` (head, prefetch, held or
    re-read phase B, tail) with one chunk a row, which the interpreter can run too (a program
    then waits only for its own words): against float64, every element written."""
    import dataclasses

    from warpforge.ops._split_rows import split_row_plan

    x = randn(m, n, device=device) * 3 + 2
    w, b, dy = randn(n, device=device), randn(n, device=device), randn(m, n, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(m, n, device, block=block, num_warps=4, prefetch=prefetch)
    assert plan.chunks == 1
    plan = dataclasses.replace(plan, synchronized=True)
    got = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, 1, rows, hold)
    want = _layer_norm_grads64(x, w, b, dy)
    # dx's terms are about rstd * |w dy| each and cancel to dx: a one-column row (variance 0,
    # rstd = eps ** -0.5 = 316) cancels them to exactly 0 in float64, within a few float32 ulps
    # of the terms (1e-4 and more, by the draw) here
    cancelled = 8 * 2.0**-23 * rstd.max().item() * (dy * w).abs().max().item()
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        what = f"{name} rows={rows} hold={hold} prefetch={prefetch}"
        tol = 1e-4 + (cancelled if name == "dx" else 0.0)
        torch.testing.assert_close(g.double(), e, atol=tol, rtol=1e-4, msg=what)


def test_layer_norm_held_argument_is_checked(device):
    """``hold`` without lag 1 is refused naming the argument."""
    from warpforge.ops._split_rows import split_row_plan

    x, dy = randn(2, 40, device=device), randn(2, 40, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(2, 40, device, block=16, num_warps=4)
    for lag in (None, 0, 2):
        with pytest.raises(ValueError, match="hold: expected lag 1"):
            norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan, lag,
                                            1, True)  # fmt: skip


HELD_GPU_LAUNCHES = [
    (512, 2, 8, 1, True, True),
    (512, 2, 10, 1, True, False),
    (512, 2, 12, 1, False, True),
    (1024, 4, 4, 2, True, False),
    (2048, 4, 4, 1, True, False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("block", "warps", "per_sm", "rows", "hold", "prefetch"),
                         HELD_GPU_LAUNCHES, ids=str)  # fmt: skip
def test_gpu_layer_norm_held_backward_launches(block, warps, per_sm, rows, hold, prefetch, dtype):
    """Launches of the held kernel the sweep times against float64 on ragged shapes (one row,
    rows not a multiple of the slots, a width not a multiple of the chunk, 32 chunks a row),
    bitwise the same on a second run (no atomics in any sum; a word read before its chunk
    published it gives NaN, which fails)."""
    from warpforge.ops._split_rows import split_row_plan

    tol = 1e-4 if dtype == torch.float32 else 5e-2
    for m, n in ((1, 16384), (257, 16411), (4096, 16384)):
        x = randn(m, n, dtype=dtype, device="cuda") * 3 + 2
        w, dy = randn(n, dtype=dtype, device="cuda"), randn(m, n, dtype=dtype, device="cuda")
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm,
                              prefetch=prefetch)  # fmt: skip
        if plan is None or plan.chunks > norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS:
            continue
        args = (dy, x, w, mean, rstd, True, True, plan, 1, rows, hold)
        got = norm_module.layer_norm_backward(*args)
        again = norm_module.layer_norm_backward(*args)
        want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
        for name, g, g2, e in zip(("dx", "dweight", "dbias"), got, again, want, strict=True):
            assert torch.equal(g, g2), f"{name} differs between runs"
            scale = e.abs().max().item()
            torch.testing.assert_close(g.double() / scale, e / scale, atol=tol, rtol=tol,
                                       msg=f"{name} m={m} n={n}")  # fmt: skip


# --------------------------------------------------------------------------- LayerNorm pairs


PAIRS_DTYPES = [torch.float16, torch.bfloat16]  # int32 words: no bf16 load in the interpreter
PAIRS_TOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
"""Largest error over the largest value: the kernel computes in fp32 from the exact inputs, so
only the rounding of each output remains (2**-11 of it in float16; in bfloat16 2**-9 on the
GPU, 2**-8 under the interpreter, which truncates): a bit lost unpacking a column shows."""


def _close_pairs(got, want, dtype, what, scale=None):
    """``scale``: the size of the terms that cancel into ``want`` where it can vanish (dx of a
    two-column row is 0: xhat is +-1)."""
    top = want.abs().max().item() if want.numel() else 0.0
    err = (got.double() - want).abs().max().item() / max(top, scale or 0.0, 1e-30)
    assert err < PAIRS_TOL[dtype], f"{what}: error {err:.2e} of the largest value"


def _pairs_scales(x, w, dy):
    """The size of the terms that cancel in dx (the largest rstd * w * dy) and in dweight (the
    largest column sum of |dy| * |x| * rstd: the kernel forms xhat as x * rstd - mean * rstd,
    so a row of equal values, whose xhat is 0, leaves a rounding of x * rstd in it)."""
    _, rstd = _forward_stats(x)
    rstd = rstd.double()[:, None]
    wdy = dy.double() * (w.double() if w is not None else 1.0)
    dweight = (dy.double().abs() * x.double().abs() * rstd).sum(0)
    return {"dx": (rstd * wdy).abs().max().item(), "dweight": dweight.max().item()}


@pytest.mark.parametrize(
    ("m", "n", "block", "affine"),
    [(m, n, block, affine)
     for m, n, block in [(1, 2, 16), (7, 256, 64), (7, 258, 64), (13, 98, 32), (5, 300, 128),
                         (4, 1024, 256)]
     for affine in ("weight+bias", "none", "bias")]
    # 38 chunks a row (two flag words a lane): the interpreter's slowest case, one affine
    + [(3, 600, 16, "weight+bias")],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize(
    "options",
    [{"hold_weight": True, "evict_first": False}, {"hold_weight": False, "evict_first": True}],
    ids=str,
)
def test_layer_norm_pairs_backward(m, n, block, options, affine, device, poison_outputs):
    """``layer_norm_bwd_pairs_kernel`` (forced plans: several chunks a row, up to 38, more
    rows than slots, ragged and whole last chunks) against float64 in float16 and bfloat16 (its
    int32 loads work under the interpreter too): dx, dweight, dbias to their rounding, every
    element written. Under the interpreter this runs its two-launch form; the test below runs
    its one-launch pipeline."""
    from warpforge.ops._split_rows import split_row_plan

    launched = []
    real = norm_module._layer_norm_pairs_backward
    spy = lambda *a, **k: launched.append(1) or real(*a, **k)  # noqa: E731
    import unittest.mock

    for dtype in PAIRS_DTYPES:
        x = randn(m, n, dtype=dtype, device=device) * 3 + 2
        w = randn(n, dtype=dtype, device=device) if "weight" in affine else None
        b = randn(n, dtype=dtype, device=device) if "bias" in affine else None
        dy = randn(m, n, dtype=dtype, device=device)
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, device, block=block, num_warps=4, prefetch=True)
        assert plan is not None and plan.chunks == -(-n // block)
        with unittest.mock.patch.object(norm_module, "_layer_norm_pairs_backward", spy):
            dx, dw, db = norm_module.layer_norm_backward(
                dy, x, w, mean, rstd, w is not None, b is not None, plan, 1, 1, False, options
            )
        want = _layer_norm_grads64(x, w, b, dy)
        got = _asked_grads(dx, dw, db, w, b)
        scale = _pairs_scales(x, w, dy)
        for (name, g), e in zip(got.items(), want, strict=True):
            _close_pairs(g, e, dtype, f"{name} {dtype} {affine} {options}", scale.get(name))
    assert len(launched) == len(PAIRS_DTYPES)


@pytest.mark.parametrize(
    ("m", "n", "block"),
    [(1, 2, 16), (7, 58, 64), (2, 16, 16), (13, 32, 32), (5, 128, 128)],
    ids=str,
)
@pytest.mark.parametrize("dtype", PAIRS_DTYPES, ids=str)
@pytest.mark.parametrize(("hold_weight", "hold_rows", "unroll", "lag", "extra"),
                         [(True, False, 3, 1, {}), (False, False, 1, 1, {"keep_rows": True}),
                          (True, True, 1, 1, {"full_words": False}), (False, True, 3, 1, {}),
                          (True, False, 3, 2, {"keep_rows": True}),
                          (False, False, 1, 2, {"full_words": False})],
                         ids=str)  # fmt: skip
def test_layer_norm_pairs_backward_one_launch(m, n, block, dtype, hold_weight, hold_rows, unroll,
                                              lag, extra, device, poison_outputs):  # fmt: skip
    """The one-launch pipeline of ``layer_norm_bwd_pairs_kernel`` (head, prefetch, held or
    re-read phase B one or two steps late, three steps an iteration and the 0-2 left, tail)
    with one chunk a row, which the interpreter can run too (a program then waits only for its
    own words): against float64, every element written. 1-13 rows over at most 3 slots: 2-7
    steps a slot (``l2_ahead`` is asked for too: a hint the interpreter skips)."""
    import dataclasses

    from warpforge.ops._split_rows import split_row_plan

    x = randn(m, n, dtype=dtype, device=device) * 3 + 2
    w, b = randn(n, dtype=dtype, device=device), randn(n, dtype=dtype, device=device)
    dy = randn(m, n, dtype=dtype, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(m, n, device, block=block, num_warps=4, prefetch=True)
    assert plan.chunks == 1
    plan = dataclasses.replace(plan, synchronized=True)
    got = norm_module._layer_norm_pairs_backward(dy, x, w, mean, rstd, True, True, plan,
                                                 hold_weight=hold_weight, hold_rows=hold_rows,
                                                 unroll=unroll, lag=lag, l2_ahead=lag - 1,
                                                 **extra)  # fmt: skip
    want = _layer_norm_grads64(x, w, b, dy)
    scale = _pairs_scales(x, w, dy)
    label = (f"{dtype} hold_weight={hold_weight} hold_rows={hold_rows} unroll={unroll} "
             f"lag={lag} {extra}")  # fmt: skip
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        _close_pairs(g, e, dtype, f"{name} {label}", scale.get(name))


def test_layer_norm_pairs_backward_declines_and_falls_back(device, poison_outputs):
    """Rows without int32 word views (an odd width, an odd row offset), mixed dtypes or 4-byte
    rows: the pairs path declines (None) and the forced launch runs the held kernel instead,
    still right; a weight at an odd offset is copied, not refused."""
    from warpforge.ops._split_rows import split_row_plan

    dtype = torch.float16
    base = randn(6, 132, dtype=dtype, device=device) * 3 + 2
    cases = {
        "odd width": (base[:, :129], None),
        "odd row stride": (randn(6, 129, dtype=dtype, device=device)[:, :128], None),
        "odd offset": (base[:, 1:129], None),
        "fp32 weight": (base[:, :128], torch.float32),
        "fp32 rows": (base[:, :128].float(), None),
    }
    for label, (x, wdtype) in cases.items():
        n = x.shape[1]
        w = randn(n, dtype=wdtype or x.dtype, device=device)
        dy = randn(6, n, dtype=x.dtype, device=device)
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(6, n, device, block=32, num_warps=4, prefetch=True)
        assert norm_module._layer_norm_pairs_backward(dy, x, w, mean, rstd, True, True,
                                                      plan) is None, label  # fmt: skip
        got = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, 1, 1, False,
                                              True)  # fmt: skip
        want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
        for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
            close(g, e, BWD_TOL[x.dtype] * 4, f"{name} {label}")
    # more chunks than the held kernel takes: the declined forced plan gives way to the default
    x = randn(3, 1001, dtype=dtype, device=device)
    w, dy = randn(1001, dtype=dtype, device=device), randn(3, 1001, dtype=dtype, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(3, 1001, device, block=16, num_warps=4, prefetch=True)
    assert plan.chunks > norm_module.LAYER_NORM_BWD_LAG_MAX_CHUNKS
    got = norm_module.layer_norm_backward(dy, x, w, mean, rstd, True, True, plan, 1, 1, False, True)
    want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        close(g, e, BWD_TOL[dtype] * 4, f"{name} 63 chunks, odd width")
    # a weight at an odd offset in its storage
    x = base[:, :128]
    w = randn(129, dtype=dtype, device=device)[1:]
    dy = randn(6, 128, dtype=dtype, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(6, 128, device, block=32, num_warps=4, prefetch=True)
    got = norm_module._layer_norm_pairs_backward(dy, x, w, mean, rstd, True, True, plan)
    assert got is not None
    want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
    for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
        _close_pairs(g, e, dtype, f"{name} odd weight offset")


def test_layer_norm_pairs_argument_is_checked(device):
    """``pairs`` with a held (not re-read) launch or groups of rows is refused naming it, and
    so are a lag other than 1 or 2 (2 with held rows) and a negative ``l2_ahead``."""
    from warpforge.ops._split_rows import split_row_plan

    x, dy = randn(2, 40, device=device), randn(2, 40, device=device)
    mean, rstd = _forward_stats(x)
    plan = split_row_plan(2, 40, device, block=16, num_warps=4)
    for hold, rows in ((True, 1), (None, 1), (False, 2)):
        with pytest.raises(ValueError, match="pairs: expected hold False"):
            norm_module.layer_norm_backward(dy, x, None, mean, rstd, False, True, plan, 1, rows,
                                            hold, True)  # fmt: skip
    x16, dy16 = x.half(), dy.half()
    for options, match in (({"lag": 3}, "lag: expected 1, or 2"),
                           ({"lag": 2, "hold_rows": True}, "lag: expected 1, or 2"),
                           ({"l2_ahead": -1}, "l2_ahead: expected an int >= 0")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            norm_module.layer_norm_backward(dy16, x16, None, mean, rstd, False, True, plan, 1, 1,
                                            False, options)  # fmt: skip


def test_default_wide_2_byte_layer_norm_backward_takes_the_pairs_kernel(device, monkeypatch,
                                                                         poison_outputs):  # fmt: skip
    """The public op on 16384-column float16 rows runs the pairs kernel at its default launch
    (``layer_norm_bwd_pairs_launch``), and matches float64; with a float32 weight (no pair of
    one dtype) the held kernel runs instead, also right."""
    from warpforge.ops._split_rows import split_row_plan

    launched = []
    for name in ("_layer_norm_pairs_backward", "_layer_norm_held_backward"):
        real = getattr(norm_module, name)
        monkeypatch.setattr(norm_module, name,
                            lambda *a, real=real, name=name, **k: launched.append((name, a[7]))
                            or real(*a, **k))  # fmt: skip
    m, n, dtype = 3, 16384, torch.float16
    plan = split_row_plan(m, n, device, **norm_module.layer_norm_bwd_pairs_launch(2))
    for wdtype in (dtype, torch.float32):
        launched.clear()
        x, dy = randn(m, n, dtype=dtype, device=device) + 1, randn(m, n, dtype=dtype, device=device)
        w, b = randn(n, dtype=wdtype, device=device), randn(n, dtype=wdtype, device=device)
        xs, ws, bs = leaves(x, w, b)
        got = torch.autograd.grad(layer_norm(xs, ws, bs), (xs, ws, bs), dy)
        if wdtype == dtype:
            assert launched == [("_layer_norm_pairs_backward", plan)]
        else:  # declined, then the held kernel's default launch
            assert [name for name, _ in launched] == ["_layer_norm_pairs_backward",
                                                      "_layer_norm_held_backward"]  # fmt: skip
        want = _layer_norm_grads64(x, w, b, dy)
        scale = _pairs_scales(x, w, dy)
        for name, g, e in zip(("dx", "dweight", "dbias"), got, want, strict=True):
            _close_pairs(g, e, dtype, f"{name} weight {wdtype}", scale.get(name))


PAIRS_GPU_LAUNCHES = [
    (256, 1, 28, {"hold_weight": True, "unroll": 3}),  # the default
    (512, 2, 12, {"hold_weight": True, "evict_first": False, "unroll": 1}),
    (512, 2, 12, {"hold_weight": False, "evict_first": True, "unroll": 3}),
    (256, 1, 32, {"hold_weight": True, "unroll": 3}),
    (256, 1, 24, {"hold_weight": False, "hold_rows": True, "unroll": 1}),
    (256, 1, 20, {"hold_weight": True, "hold_rows": True, "unroll": 3}),
    (1024, 2, 8, {"hold_weight": True, "unroll": 1}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "lag": 2, "l2_ahead": 1}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "l2_ahead": 2}),
    (512, 2, 12, {"hold_weight": False, "unroll": 1, "lag": 2}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "full_words": False}),
    (256, 1, 28, {"hold_weight": True, "unroll": 3, "keep_rows": True}),
    (1024, 4, 7, {"hold_weight": True, "unroll": 3}),  # the H200's wide default
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", PAIRS_DTYPES, ids=str)
@pytest.mark.parametrize(("block", "warps", "per_sm", "options"), PAIRS_GPU_LAUNCHES, ids=str)
def test_gpu_layer_norm_pairs_backward_launches(block, warps, per_sm, options, dtype):
    """Launches of the pairs kernel the sweep times against float64 on ragged shapes (one row,
    rows not a multiple of the slots, a width not a multiple of the chunk, up to 64 chunks, a
    count of chunks not a power of 2: masked words), bitwise the same on a second run (a word
    read before its chunk published it gives NaN)."""
    from warpforge.ops._split_rows import split_row_plan

    for m, n in ((1, 16384), (257, 16130), (33, 12000), (4096, 16384)):
        x = randn(m, n, dtype=dtype, device="cuda") * 3 + 2
        w, dy = randn(n, dtype=dtype, device="cuda"), randn(m, n, dtype=dtype, device="cuda")
        mean, rstd = _forward_stats(x)
        plan = split_row_plan(m, n, "cuda", block=block, num_warps=warps, programs_per_sm=per_sm,
                              prefetch=True)  # fmt: skip
        assert plan is not None and plan.chunks <= norm_module.LAYER_NORM_BWD_PAIRS_MAX_CHUNKS
        args = (dy, x, w, mean, rstd, True, True, plan, 1, 1, False, options)
        got = norm_module.layer_norm_backward(*args)
        again = norm_module.layer_norm_backward(*args)
        want = _layer_norm_grads64(x, w, torch.zeros_like(w), dy)
        for name, g, g2, e in zip(("dx", "dweight", "dbias"), got, again, want, strict=True):
            assert torch.equal(g, g2), f"{name} differs between runs"
            _close_pairs(g, e, dtype, f"{name} m={m} n={n}")


@pytest.mark.gpu
def test_gpu_layer_norm_pairs_backward_past_2_to_31_elements():
    """64-bit row offsets (WIDE): the last rows of a bfloat16 input of more than 2**31
    elements, through the default held launch's plan, against float64."""
    n = 16384
    m = 2**31 // n + 2
    x = torch.empty(m, n, dtype=torch.bfloat16, device="cuda").normal_()
    dy = torch.empty_like(x).normal_()
    w = randn(n, dtype=torch.bfloat16, device="cuda")
    mean, rstd = _forward_stats(x)
    plan = norm_module._default_split(m, n, 2, x.device)[0]
    dx, _, _ = norm_module.layer_norm_backward(dy, x, w, mean, rstd, False, False, plan, 1, 1,
                                               False, True)  # fmt: skip
    tail = slice(m - 3, m)
    want = _layer_norm_grads64(x[tail], w, torch.zeros_like(w), dy[tail])[0]
    _close_pairs(dx[tail], want, torch.bfloat16, "dx tail")
