"""warpforge.ops.fused_linear_cross_entropy against the unfused float64 computation."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from device_assert import assert_stops_on_bad_target
from hypothesis import given, settings
from hypothesis import strategies as st

from warpforge.ops import fused_linear_cross_entropy
from warpforge.runtime import ExecutionPath

IGNORE = -100
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # hypothesis tests cannot take fixtures
ce_module = importlib.import_module("warpforge.ops.cross_entropy")
flce_module = importlib.import_module("warpforge.ops.fused_linear_cross_entropy")


def reference_linear_cross_entropy(hidden, weight, target, bias, *, reduction="mean",
                                   label_smoothing=0.0, ignore_index=IGNORE):  # fmt: skip
    """Unfused, float64: logits = hidden @ weight.T + bias, then torch's cross entropy."""
    logits = hidden.double() @ weight.double().t()
    if bias is not None:
        logits = logits + bias.double()
    loss = F.cross_entropy(
        logits.reshape(-1, weight.shape[0]),
        target.reshape(-1),
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
    return loss.reshape(target.shape) if reduction == "none" else loss


@pytest.fixture(params=["triton", "torch-reference"])
def path(request, monkeypatch):
    if request.param == "torch-reference":
        for module in (ce_module, flce_module):
            monkeypatch.setattr(module, "execution_path", lambda d: ExecutionPath.TORCH_REFERENCE)
    return request.param


def make_inputs(lead, width, vocab, *, with_bias, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(*lead, width, generator=gen).to(dtype)
    weight = (torch.randn(vocab, width, generator=gen) / math.sqrt(width) * 3).to(dtype)
    bias = torch.randn(vocab, generator=gen).to(dtype) if with_bias else None
    target = torch.randint(0, vocab, lead, generator=gen)
    target = torch.where(torch.rand(lead, generator=gen) < 0.2, IGNORE, target)
    return hidden, weight, target, bias


def check(hidden, weight, target, bias, tol, **options):
    params = [
        t.clone().requires_grad_() for t in (hidden, weight) + ((bias,) if bias is not None else ())
    ]
    bias_param = params[2] if bias is not None else None
    loss = fused_linear_cross_entropy(params[0], params[1], target, bias_param, **options)
    grad_out = torch.rand(loss.shape, dtype=torch.float64, device=loss.device) + 0.5
    grads = torch.autograd.grad(loss, params, grad_out.to(loss.dtype))

    params64 = [p.detach().double().requires_grad_() for p in params]
    bias64 = params64[2] if bias is not None else None
    options.pop("chunk_size", None)
    expected = reference_linear_cross_entropy(params64[0], params64[1], target, bias64, **options)
    expected_grads = torch.autograd.grad(expected, params64, grad_out)
    assert loss.dtype == hidden.dtype and loss.shape == expected.shape
    torch.testing.assert_close(loss.double(), expected, atol=tol, rtol=tol)
    for name, got, want in zip(("hidden", "weight", "bias"), grads, expected_grads, strict=False):
        assert got.dtype == hidden.dtype, name
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol, msg=name)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("chunk_size", [1, 3, None, 1000])
def test_matches_unfused_reference(reduction, with_bias, chunk_size, path):
    inputs = make_inputs(
        (11,), 16, 37, with_bias=with_bias, seed=hash((reduction, chunk_size)) % 999
    )
    check(*inputs, 2e-5, reduction=reduction, chunk_size=chunk_size, label_smoothing=0.1)


def test_three_d_hidden_prime_sizes(path):
    hidden, weight, target, bias = make_inputs((3, 5), 13, 101, with_bias=True, seed=4)
    check(hidden, weight, target, bias, 2e-5, reduction="none", chunk_size=4)
    target = torch.where(target == IGNORE, 5, target)  # class 5 is the ignored one now
    check(hidden, weight, target, bias, 2e-5, reduction="mean", chunk_size=7, ignore_index=5)


def test_vocab_of_one_and_single_token(path):
    check(*make_inputs((1,), 8, 1, with_bias=False, seed=5), 2e-5)
    check(*make_inputs((4,), 8, 1, with_bias=True, seed=6), 2e-5, reduction="sum")


def test_float16(path):
    inputs = make_inputs((9,), 32, 61, with_bias=True, dtype=torch.float16, seed=7)
    check(*inputs, 1e-2, reduction="sum", chunk_size=4)


def test_non_contiguous_hidden_and_weight(path):
    hidden, weight, target, bias = make_inputs((6,), 24, 29, with_bias=False, seed=8)
    hidden = torch.cat([hidden, hidden], dim=1)[:, ::2]
    weight = weight.t().contiguous().t()
    assert not hidden.is_contiguous() and not weight.is_contiguous()
    check(hidden, weight, target, bias, 2e-5, chunk_size=4)


def test_strided_target_like_shifted_labels(path):
    hidden, weight, _, bias = make_inputs((2, 6), 16, 23, with_bias=True, seed=15)
    tokens = torch.randint(0, 23, (2, 7), generator=torch.Generator().manual_seed(16))
    check(hidden, weight, tokens[:, 1:], bias, 2e-5, chunk_size=5)  # labels = inputs shifted
    every_other = torch.randint(0, 23, (24,), generator=torch.Generator().manual_seed(17))[::2]
    assert every_other.stride(0) == 2
    check(hidden.reshape(12, 16), weight, every_other, None, 2e-5, chunk_size=5)


def test_all_rows_ignored(path):
    hidden, weight, _, bias = make_inputs((5,), 8, 13, with_bias=True, seed=9)
    target = torch.full((5,), IGNORE)
    hidden.requires_grad_()
    loss = fused_linear_cross_entropy(hidden, weight, target, bias, chunk_size=2)
    assert math.isnan(loss.item())
    (grad,) = torch.autograd.grad(loss, hidden)
    assert torch.equal(grad, torch.zeros_like(grad))
    assert fused_linear_cross_entropy(hidden, weight, target, reduction="sum").item() == 0.0


@settings(max_examples=12, deadline=None)
@given(
    tokens=st.sampled_from([1, 2, 3, 5, 7, 11, 13, 16]),
    batched=st.booleans(),
    width=st.sampled_from([1, 3, 8, 17]),
    vocab=st.sampled_from([1, 2, 3, 7, 13, 31, 37, 64]),
    with_bias=st.booleans(),
    ignored_share=st.sampled_from([0.0, 0.3, 0.7]),
    ignore_class=st.booleans(),
    reduction=st.sampled_from(["mean", "sum", "none"]),
    label_smoothing=st.sampled_from([0.0, 0.1, 0.7]),
    chunk_size=st.one_of(st.none(), st.integers(1, 20)),
    dtype=st.sampled_from([torch.float32, torch.float16]),
    seed=st.integers(0, 2**16),
)
def test_property_matches_unfused_reference(tokens, batched, width, vocab, with_bias,
                                            ignored_share, ignore_class, reduction,
                                            label_smoothing, chunk_size, dtype, seed):  # fmt: skip
    """Loss and gradients (hidden, weight, bias; a random output gradient) against the unfused
    float64 reference: token, width and vocabulary sizes of 1 and primes, random rows ignored
    (ignore_index -100 or class 0; the first row never, so a mean has a row), label smoothing,
    every reduction, chunk sizes below, at and above the token count."""
    torch.manual_seed(seed)
    lead = (2, tokens) if batched else (tokens,)
    hidden, weight, target, bias = make_inputs(lead, width, vocab, with_bias=with_bias,
                                               dtype=dtype, seed=seed)  # fmt: skip
    ignore_index = 0 if ignore_class and vocab > 1 else IGNORE
    target = torch.where(target == IGNORE, vocab - 1, target)  # the share ignored is ours
    ignored = torch.rand(lead) < ignored_share
    target = torch.where(ignored, ignore_index, target)
    if target.view(-1)[0] == ignore_index:
        target.view(-1)[0] = vocab - 1
    tensors = [t.to(DEVICE) if t is not None else None for t in (hidden, weight, target, bias)]
    check(*tensors, 2e-5 if dtype == torch.float32 else 1e-2, reduction=reduction,
          label_smoothing=label_smoothing, chunk_size=chunk_size, ignore_index=ignore_index)  # fmt: skip


def test_no_grad_and_frozen_hidden(path):
    hidden, weight, target, _ = make_inputs((7,), 8, 19, with_bias=False, seed=10)
    with torch.no_grad():
        loss = fused_linear_cross_entropy(hidden, weight, target)
    torch.testing.assert_close(
        loss.double(),
        reference_linear_cross_entropy(hidden, weight, target, None),
        atol=1e-5,
        rtol=1e-5,
    )
    weight = weight.requires_grad_()
    (grad_weight,) = torch.autograd.grad(fused_linear_cross_entropy(hidden, weight, target), weight)
    w64 = weight.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(
        reference_linear_cross_entropy(hidden, w64, target, None), w64
    )
    torch.testing.assert_close(grad_weight.double(), expected, atol=1e-5, rtol=1e-5)


def test_default_chunk_size_bounds_chunk_logits():
    assert flce_module.default_chunk_size(16384, 128256, 2) == 8192  # 2 GiB of logits
    assert flce_module.default_chunk_size(16384, 128256, 4) == 4096
    assert flce_module.default_chunk_size(100, 128256, 2) == 50  # half the tokens
    assert flce_module.default_chunk_size(4096, 65536, 2) == 2048
    assert flce_module.default_chunk_size(10**6, 2**31, 4) == 1


def test_compiles_fullgraph_and_passes_opcheck():
    hidden, weight, target, bias = make_inputs((6,), 8, 11, with_bias=True, seed=11)
    hidden.requires_grad_()
    weight.requires_grad_()

    def fn(h, w):
        return fused_linear_cross_entropy(h, w, target, bias, chunk_size=4) * 3

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(hidden, weight), (hidden, weight))
    want = torch.autograd.grad(fn(hidden, weight), (hidden, weight))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    op = torch.ops.warpforge.fused_linear_cross_entropy_fwd.default
    torch.library.opcheck(op, (hidden, weight, target, bias, IGNORE, 0.1, "mean", 4, True))
    torch.library.opcheck(op, (hidden, weight, target, None, IGNORE, 0.0, "none", 5, True))
    scaled_round = torch.ops.warpforge.fused_linear_cross_entropy_scaled_round.default
    torch.library.opcheck(scaled_round, (weight.detach(), torch.tensor(0.75), torch.float16))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h[:, :5], w, t),
            ValueError,
            "hidden: expected last dimension 8",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w.half(), t),
            TypeError,
            "weight: expected the dtype of hidden",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w[0], t),
            ValueError,
            "weight: expected a 2-D tensor",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t, b[:3]),
            ValueError,
            r"bias: expected shape \(11,\)",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t, b.half()),
            TypeError,
            "bias: expected the dtype",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t[:2]),
            ValueError,
            "target: expected shape",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t + 11),
            ValueError,
            r"target: expected class indices in \[0, 11\)",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t, reduction="max"),
            ValueError,
            "reduction",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t, label_smoothing=2.0),
            ValueError,
            "label_smoothing",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t, chunk_size=0),
            ValueError,
            "chunk_size: expected a positive int",
        ),
        (
            lambda h, w, t, b: fused_linear_cross_entropy(h, w, t.float()),
            TypeError,
            "target: expected dtype",
        ),
    ],
)
def test_invalid_arguments_raise_naming_the_argument(call, error, match):
    gen = torch.Generator().manual_seed(12)
    hidden, weight = torch.randn(4, 8, generator=gen), torch.randn(11, 8, generator=gen)
    target, bias = torch.randint(0, 11, (4,), generator=gen), torch.randn(11, generator=gen)
    with pytest.raises(error, match=match):
        call(hidden, weight, target, bias)


def test_compiled_cpu_call_still_rejects_out_of_range_targets(path):
    """The value check runs in the op's body, which a compiled graph runs eagerly."""
    gen = torch.Generator().manual_seed(13)
    hidden = torch.randn(4, 8, generator=gen, requires_grad=True)
    weight = torch.randn(11, 8, generator=gen, requires_grad=True)
    target = torch.tensor([3, 0, 11, 7])
    compiled = torch.compile(fused_linear_cross_entropy, backend="aot_eager", fullgraph=True)
    with pytest.raises(ValueError, match=r"target: expected class indices in \[0, 11\).*got 11"):
        compiled(hidden, weight, target)


def test_grad_weight_accumulates_in_float32_where_chunk_sums_cancel():
    """Two chunks whose products nearly cancel: a float16 running sum would round the first
    chunk's large partial (ulp 0.25 near 500) and lose the small remainder. The accumulator
    starts as NaN: the first chunk must overwrite it, never read it."""
    gen = torch.Generator().manual_seed(21)
    hidden = (torch.rand(2, 8, generator=gen) + 0.5).half()
    large = (torch.rand(1, 5, generator=gen) * 100 + 400).half()
    remainder = (torch.rand(1, 5, generator=gen) * 0.01).half()
    grad_logits = torch.cat([large, remainder - large])  # [2 tokens, 5 classes]
    hidden[1] = hidden[0]
    weight = torch.randn(5, 8, generator=gen).half()
    grad_weight = torch.full(weight.shape, float("nan"), dtype=torch.float32)
    for row in range(2):  # one token per chunk
        flce_module._fold_chunk_grads(
            grad_logits[row : row + 1], hidden[row : row + 1], weight,
            torch.empty(1, 8, dtype=torch.float16), grad_weight, None, first=row == 0,
        )  # fmt: skip
    want = grad_logits.double().t() @ hidden.double()
    assert grad_weight.dtype == torch.float32
    torch.testing.assert_close(grad_weight.double(), want, atol=1e-3, rtol=0)
    assert (want - want.half().double()).abs().max() < 1e-3  # the float16 result is near too


@pytest.mark.parametrize(
    ("shape", "src_dtype", "dst_dtype"),
    [
        ((7, 4099), torch.float32, torch.float16),  # the grad_weight accumulator, prime width
        ((4099,), torch.float32, torch.float16),  # grad_bias
        ((3, 5, 11), torch.float16, torch.float16),  # grad_hidden, in its own dtype
        ((1,), torch.float32, torch.float32),
        ((0, 4), torch.float32, torch.float16),
    ],
)
def test_scaled_rounding_matches_float64(shape, src_dtype, dst_dtype, path):
    """The backward's ``accumulated * grad_output``, rounded once: equal to the float32 product
    rounded to the output dtype, within half a step of the float64 product; the input kept."""
    gen = torch.Generator().manual_seed(sum(shape))
    accumulated = (torch.randn(shape, generator=gen) * 50).to(src_dtype)
    kept = accumulated.clone()
    scale = torch.rand((), generator=gen) + 0.5
    got = flce_module._scaled_to(accumulated, scale, dst_dtype)
    assert got.dtype == dst_dtype and got.shape == accumulated.shape
    torch.testing.assert_close(got, (accumulated.float() * scale).to(dst_dtype), atol=0, rtol=0)
    want = accumulated.double() * scale.double()
    step = torch.finfo(dst_dtype).eps * want.abs().clamp_min(torch.finfo(dst_dtype).tiny)
    assert ((got.double() - want).abs() <= step).all()
    assert torch.equal(accumulated, kept)


def unfused_linear_cross_entropy(hidden, weight, target, bias, **options):
    """The unfused PyTorch code a user would otherwise run: logits in the input dtype, then
    float32 cross entropy (as Hugging Face models do)."""
    logits = hidden @ weight.t() if bias is None else hidden @ weight.t() + bias
    loss = F.cross_entropy(
        logits.reshape(-1, weight.shape[0]).float(), target.reshape(-1), ignore_index=IGNORE,
        **options,
    )  # fmt: skip
    return loss.reshape(target.shape if loss.dim() else ()).to(hidden.dtype)


def errors_against_float64(loss_fn, inputs, grad_seed, chunk_size=None, **options):
    """Max |error| of the loss and of each gradient (hidden, weight, bias) of ``loss_fn`` against
    the float64 reference, for one random gradient output in [0.5, 1.5)."""
    hidden, weight, target, bias = inputs
    params = [t.clone().requires_grad_() for t in (hidden, weight, bias)]
    chunking = {} if chunk_size is None else {"chunk_size": chunk_size}
    loss = loss_fn(params[0], params[1], target, params[2], **chunking, **options)
    gen = torch.Generator(device=loss.device).manual_seed(grad_seed)
    grad_out = torch.rand(loss.shape, dtype=torch.float64, device=loss.device, generator=gen) + 0.5
    grads = torch.autograd.grad(loss, params, grad_out.to(loss.dtype))
    params64 = [p.detach().double().requires_grad_() for p in params]
    expected = reference_linear_cross_entropy(params64[0], params64[1], target, params64[2],
                                              **options)  # fmt: skip
    expected_grads = torch.autograd.grad(expected, params64, grad_out)
    errors = {}
    for name, got, want in zip(("loss", "hidden", "weight", "bias"), (loss, *grads),
                               (expected, *expected_grads), strict=True):  # fmt: skip
        assert got.dtype == hidden.dtype, name
        errors[name] = (got.double() - want).abs().max().item()
        errors[name + " scale"] = want.abs().max().item()
    return errors


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gpu_bf16_as_exact_as_the_unfused_bf16_path(reduction, seed):
    """bf16 logits carry rounding errors of up to 1/512 of their size (as in the unfused PyTorch
    code), which move every softmax probability; with per-row gradient outputs
    (``reduction="none"``) that alone exceeds a fixed tolerance against float64. So each gradient
    must be within 1.5x the unfused bf16 path's own error against float64 (plus one bf16 step of
    its largest element; the loss likewise), over 4 chunks and 4 random gradient outputs."""
    tensors = make_inputs((2, 1000), 512, 32000, with_bias=True, seed=13 + seed)
    inputs = [t.cuda().to(torch.bfloat16) if t.is_floating_point() else t.cuda() for t in tensors]
    options = {"reduction": reduction, "label_smoothing": 0.1}
    fused = errors_against_float64(fused_linear_cross_entropy, inputs, seed, chunk_size=512,
                                   **options)  # fmt: skip
    unfused = errors_against_float64(unfused_linear_cross_entropy, inputs, seed, **options)
    for name in ("loss", "hidden", "weight", "bias"):
        allowed = 1.5 * unfused[name] + fused[name + " scale"] / 256
        assert fused[name] <= allowed, (name, fused, unfused)


@pytest.mark.gpu
def test_gpu_peak_memory_below_unfused():
    # tokens > 4 x width: the float32 accumulator (4 bytes x vocab x width) plus a default chunk
    # (half the tokens' logits) then stays under the logits (2 bytes x tokens x vocab)
    tokens, width, vocab = 8192, 1024, 65536
    hidden = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(vocab, width, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, vocab, (tokens,), device="cuda")

    def peak(fn):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        torch.autograd.grad(fn(), (hidden, weight))
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    fused = peak(lambda: fused_linear_cross_entropy(hidden, weight, target))
    unfused = peak(lambda: F.cross_entropy((hidden @ weight.t()).float(), target))
    logits_bytes = tokens * vocab * 2
    assert fused < unfused / 4, (fused, unfused)
    assert fused < logits_bytes, (fused, logits_bytes)
    # What the op must hold: the float32 grad_weight accumulator, the bf16 grad_weight it
    # returns, one chunk of logits and grad_hidden twice (saved, then scaled). No more: a
    # weight-sized temporary (a zero-filled gradient, a staged cast) would show here.
    chunk_rows = flce_module.default_chunk_size(tokens, vocab, 2)
    needed = vocab * width * (4 + 2) + chunk_rows * vocab * 2 + 2 * tokens * width * 2
    assert fused <= 1.05 * needed, (fused, needed)


@pytest.mark.gpu
def test_gpu_torch_compile_fullgraph():
    hidden, weight, target, _ = make_inputs((512,), 256, 5000, with_bias=False, seed=14)
    hidden = hidden.cuda().to(torch.bfloat16).requires_grad_()
    weight = weight.cuda().to(torch.bfloat16).requires_grad_()
    target = target.cuda()

    def fn(h, w):
        return fused_linear_cross_entropy(h, w, target, chunk_size=128)

    compiled = torch.compile(fn, fullgraph=True)
    got = torch.autograd.grad(compiled(hidden, weight), (hidden, weight))
    want = torch.autograd.grad(fn(hidden, weight), (hidden, weight))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_gpu_cuda_graph_capture_and_replay(with_bias):
    """Forward and backward captured in a CUDA graph (no host sync in the op), replayed on
    fresh inputs copied into the captured buffers: the same loss and gradients as eager."""
    hidden, weight, target, bias = make_inputs((384,), 256, 5003, with_bias=with_bias, seed=15)
    to_gpu = lambda t: t.cuda().to(torch.bfloat16) if t is not None else None  # noqa: E731
    hidden, weight, bias, target = to_gpu(hidden), to_gpu(weight), to_gpu(bias), target.cuda()
    params = [p.clone().requires_grad_() for p in (hidden, weight, bias) if p is not None]

    def step(h, w, *b):
        loss = fused_linear_cross_entropy(h, w, target, b[0] if b else None, chunk_size=128)
        return (loss, *torch.autograd.grad(loss, (h, w, *b)))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(*params)  # warm-up compiles the kernels outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(*params)
    fresh = [torch.randn_like(p) * p.detach().std() for p in params]
    with torch.no_grad():
        for p, f in zip(params, fresh, strict=True):
            p.copy_(f)
    graph.replay()
    torch.cuda.synchronize()
    expected = step(*(f.clone().requires_grad_() for f in fresh))
    for got, want in zip(captured, expected, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.gpu
def test_gpu_bad_target_with_checks_asserts():
    """WARPFORGE_CHECKS=1 reaches the chunks' cross-entropy kernels; a subprocess."""
    assert_stops_on_bad_target(
        "import torch, warpforge.ops as ops\n"
        "h = torch.randn(64, 32, device='cuda', requires_grad=True)\n"
        "w = torch.randn(1000, 32, device='cuda', requires_grad=True)\n"
        "t = torch.zeros(64, dtype=torch.long, device='cuda')\n"
        "t[40] = 1000\n"
        "loss = ops.fused_linear_cross_entropy(h, w, t, chunk_size=16)\n"
        "torch.cuda.synchronize()\n"
        "print('no assert, loss', loss.item())\n"
    )


@pytest.mark.gpu
def test_gpu_weight_beyond_2_pow_31_elements():
    """An LM head of more than 2**31 elements (128256 x 16768 in bf16, 4.3 GB): the loss and the
    gradients of a few tokens against float64, the weight's gradient checked on its last rows."""
    vocab, width, tokens = 128256, 16768, 8
    assert vocab * width > 2**31
    gen = torch.Generator(device="cuda").manual_seed(23)
    weight = torch.randn(vocab, width, device="cuda", dtype=torch.bfloat16, generator=gen)
    weight.mul_(width**-0.5).requires_grad_()
    hidden = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16, generator=gen)
    hidden.requires_grad_()
    target = torch.randint(0, vocab, (tokens,), device="cuda", generator=gen)
    target[-1] = vocab - 1  # a target in the weight's last row
    loss = fused_linear_cross_entropy(hidden, weight, target, reduction="sum")
    grad_hidden, grad_weight = torch.autograd.grad(loss, (hidden, weight))
    h64, w64 = hidden.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
    expected = reference_linear_cross_entropy(h64, w64, target, None, reduction="sum")
    expected_hidden, expected_weight = torch.autograd.grad(expected, (h64, w64))
    torch.testing.assert_close(loss.double(), expected, rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(grad_hidden.double(), expected_hidden, rtol=2e-2, atol=5e-4)
    tail = slice(vocab - 4, vocab)
    torch.testing.assert_close(
        grad_weight[tail].double(), expected_weight[tail], rtol=2e-2, atol=2e-3
    )


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_unaligned_vocabulary(dtype):
    """GPT-2's 50257 classes: each chunk's logits rows start off 16-byte boundaries, so the
    gradient written over them comes from the split kernel counting chunks from aligned
    addresses, in place. float32 against float64; bf16 within 1.5x the unfused bf16 path's
    own error (see the test above)."""
    tensors = make_inputs((600,), 256, 50257, with_bias=True, seed=50)
    inputs = [t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in tensors]
    options = {"reduction": "mean", "label_smoothing": 0.1}
    fused = errors_against_float64(fused_linear_cross_entropy, inputs, 3, chunk_size=256,
                                   **options)  # fmt: skip
    if dtype == torch.float32:
        for name in ("loss", "hidden", "weight", "bias"):
            assert fused[name] <= 1e-5 * max(1.0, fused[name + " scale"]), (name, fused)
        return
    unfused = errors_against_float64(unfused_linear_cross_entropy, inputs, 3, **options)
    for name in ("loss", "hidden", "weight", "bias"):
        allowed = 1.5 * unfused[name] + fused[name + " scale"] / 256
        assert fused[name] <= allowed, (name, fused, unfused)
