"""The blueprint benchmark suite: eight fused blueprints as harness problems.

Each problem's implementation is a compiled blueprint (built with symbolic dims, so one compiled
module serves every shape); the reference is the same math written plainly in PyTorch; the
baselines are eager PyTorch and ``torch.compile(mode="max-autotune-no-cudagraphs")``. Importing
this module registers the problems (``warpforge.harness.registered_problems()``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from warpforge.blueprint.ir import BlueprintBuilder, BlueprintIR
from warpforge.harness.problem import BaselineUnavailable, Problem, Shape, compile_baseline
from warpforge.harness.registry import register_problem

DTYPES = (torch.float32, torch.bfloat16)
SOFTMAX_SCALE = 0.125


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _randn(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    g: torch.Generator,
    scale: float = 1.0,
) -> torch.Tensor:
    # Drawn on the generator's device, then moved: works whatever device the harness seeds.
    x = torch.randn(shape, generator=g, device=g.device, dtype=torch.float32) * scale
    return x.to(device=device, dtype=dtype)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ------------------------------------------------------------------------------ blueprints
def bias_gelu_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("bias_gelu")
    x = b.input("x", ("T", "H"), dtype)
    bias = b.input("bias", ("H",), dtype)
    b.output("y", b.op("gelu", b.op("add", x, bias), approximate="tanh"))
    return b.build()


def bias_gelu_reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias, approximate="tanh")


def residual_rmsnorm_swiglu_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("residual_rmsnorm_swiglu")
    x = b.input("x", ("T", "H"), dtype)
    residual = b.input("residual", ("T", "H"), dtype)
    weight = b.input("weight", ("H",), dtype)
    up = b.input("up", ("T", "H"), dtype)
    hidden = b.op("add", x, residual, name="hidden")
    normed = b.op("rms_norm", hidden, weight, eps=1e-6, name="normed")
    b.output("out", b.op("mul", b.op("silu", normed), up, name="gated"))
    b.output("hidden", hidden)
    return b.build()


def residual_rmsnorm_swiglu_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x + residual
    hf = hidden.to(torch.promote_types(hidden.dtype, torch.float32))
    normed = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(hidden.dtype) * weight
    return F.silu(normed) * up, hidden


def masked_softmax_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("scaled_masked_softmax")
    x = b.input("x", ("B", "NH", "T", "S"), dtype)
    mask = b.input("mask", ("T", "S"), dtype)
    scores = b.op("add", b.op("mul", x, scalar=SOFTMAX_SCALE), mask)
    b.output("p", b.op("softmax", scores))
    return b.build()


def masked_softmax_reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * SOFTMAX_SCALE + mask, dim=-1)


def layernorm_linear_gelu_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("layernorm_linear_gelu")
    x = b.input("x", ("T", "D"), dtype)
    gamma = b.input("gamma", ("D",), dtype)
    beta = b.input("beta", ("D",), dtype)
    w = b.input("w", ("N", "D"), dtype)
    bias = b.input("bias", ("N",), dtype)
    normed = b.op("layer_norm", x, gamma, beta, eps=1e-5)
    b.output("y", b.op("gelu", b.op("linear", normed, w, bias), approximate="tanh"))
    return b.build()


def layernorm_linear_gelu_reference(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, w: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    normed = F.layer_norm(x, (x.shape[-1],), gamma, beta, 1e-5)
    return F.gelu(F.linear(normed, w, bias), approximate="tanh")


def attention_scores_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("causal_attention_scores")
    q = b.input("q", ("B", "NH", "T", "DH"), dtype)
    k = b.input("k", ("B", "NH", "T", "DH"), dtype)
    causal = b.input("causal", ("T", "T"), "bool")
    scores = b.op("matmul", q, b.op("transpose", k, dim0=-2, dim1=-1))
    scores = b.op("mul", scores, scalar=SOFTMAX_SCALE)
    b.output("p", b.op("softmax", b.op("where", causal, scores, other="-inf")))
    return b.build()


def attention_scores_reference(
    q: torch.Tensor, k: torch.Tensor, causal: torch.Tensor
) -> torch.Tensor:
    scores = (q @ k.transpose(-2, -1)) * SOFTMAX_SCALE
    return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)


def mlp_block_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("mlp_block")
    x = b.input("x", ("T", "D"), dtype)
    w1 = b.input("w1", ("F", "D"), dtype)
    b1 = b.input("b1", ("F",), dtype)
    w2 = b.input("w2", ("D", "F"), dtype)
    b2 = b.input("b2", ("D",), dtype)
    hidden = b.op("gelu", b.op("linear", x, w1, b1), approximate="tanh")
    b.output("y", b.op("add", b.op("linear", hidden, w2, b2), x))
    return b.build()


def mlp_block_reference(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2) + x


def reduction_chain_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("reduction_chain")
    x = b.input("x", ("T", "V"), dtype)
    peak = b.op("amax", x, keepdim=True, name="peak")
    total = b.op("sum", b.op("exp", b.op("sub", x, peak)), keepdim=True)
    b.output("logsumexp", b.op("add", b.op("log", total), peak))
    b.output("mean_abs", b.op("mean", b.op("abs", x), keepdim=True))
    return b.build()


def reduction_chain_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    peak = x.amax(-1, keepdim=True)
    return torch.log(torch.exp(x - peak).sum(-1, keepdim=True)) + peak, x.abs().mean(
        -1, keepdim=True
    )


def mixed_precision_blueprint(dtype: str) -> BlueprintIR:
    b = BlueprintBuilder("mixed_precision_chain")
    x = b.input("x", ("T", "H"), dtype)
    scale = b.input("scale", ("H",), "float32")
    shift = b.input("shift", ("H",), "float32")
    wide = b.op("cast", x, dtype="float32")
    y = b.op("tanh", b.op("add", b.op("mul", wide, scale), shift))
    narrow = b.op("cast", b.op("mul", y, scalar=4.0), dtype=dtype)
    b.output("y", b.op("cast", b.op("sigmoid", b.op("cast", narrow, dtype="float32")), dtype=dtype))
    return b.build()


def mixed_precision_reference(
    x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor
) -> torch.Tensor:
    wide = torch.promote_types(x.dtype, torch.float32)  # float64 stays float64 for the truth
    y = torch.tanh(x.to(wide) * scale + shift)
    narrow = (y * 4.0).to(x.dtype)
    return torch.sigmoid(narrow.to(wide)).to(x.dtype)


def _gradients(
    forward: Callable[..., Any], tensors: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    leaves = [t.detach().requires_grad_() for t in tensors]
    with torch.enable_grad():
        outputs = forward(*leaves)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return tuple(torch.autograd.grad(outputs, leaves, tuple(grads)))


def residual_rmsnorm_swiglu_backward_reference(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Gradients of (out, hidden) w.r.t. (x, residual, weight, up), by PyTorch autograd."""
    return _gradients(residual_rmsnorm_swiglu_reference, tensors[:4], tensors[4:])


def residual_rmsnorm_swiglu_backward(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The same gradients through the compiled blueprint (its generated backward kernels)."""
    module = _compiled(residual_rmsnorm_swiglu_blueprint, _name(tensors[0].dtype))
    return _gradients(module, tensors[:4], tensors[4:])


# ------------------------------------------------------------------------------ wiring
@functools.cache
def _compiled(builder: Callable[[str], BlueprintIR], dtype: str) -> Any:
    from warpforge.blueprint.compiler import compile as compile_blueprint

    return compile_blueprint(builder(dtype))


def _implementation(
    builder: Callable[[str], BlueprintIR], first_float: int = 0
) -> Callable[..., Any]:
    def run(*inputs: torch.Tensor) -> Any:
        return _compiled(builder, _name(inputs[first_float].dtype))(*inputs)

    run.__name__ = f"compiled_{builder.__name__.removesuffix('_blueprint')}"
    return run


def _baselines(reference: Callable[..., Any]) -> dict[str, Callable[[], Callable[..., Any]]]:
    def eager() -> Callable[..., Any]:
        return reference

    def compiled() -> Callable[..., Any]:
        if not hasattr(torch, "compile"):
            raise BaselineUnavailable("torch.compile needs torch >= 2.0")
        return compile_baseline(reference, mode="max-autotune-no-cudagraphs")

    return {"eager": eager, "torch.compile": compiled}


def _rows(shape: Shape, *names: str) -> int:
    return math.prod(shape[n] for n in names)


def _register() -> None:
    def pointwise_bytes(n_full: int, n_vec: int) -> Callable[[Shape, torch.dtype], float]:
        return lambda s, d: (n_full * s["T"] * s["H"] + n_vec * s["H"]) * _size(d)

    register_problem(
        Problem(
            name="blueprint.bias_gelu",
            reference=bias_gelu_reference,
            implementation=_implementation(bias_gelu_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["H"],), d, dev, g),
            ),
            flops=lambda s, d: 12.0 * s["T"] * s["H"],
            bytes_moved=pointwise_bytes(2, 1),
            shapes=({"T": 16384, "H": 4096}, {"T": 4096, "H": 11008}),
            cpu_shapes=({"T": 7, "H": 33},),
            dtypes=DTYPES,
            baselines=_baselines(bias_gelu_reference),
            description="x + bias, then tanh-approximated GELU: one pass.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.residual_rmsnorm_swiglu",
            reference=residual_rmsnorm_swiglu_reference,
            implementation=_implementation(residual_rmsnorm_swiglu_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["H"],), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
            ),
            flops=lambda s, d: 14.0 * s["T"] * s["H"],
            bytes_moved=pointwise_bytes(5, 1),
            shapes=({"T": 16384, "H": 4096}, {"T": 8192, "H": 8192}),
            cpu_shapes=({"T": 5, "H": 48},),
            dtypes=DTYPES,
            baselines=_baselines(residual_rmsnorm_swiglu_reference),
            description="h = x + residual; out = silu(rms_norm(h) * w) * up; returns (out, h).",
        )
    )
    register_problem(
        Problem(
            name="blueprint.residual_rmsnorm_swiglu.bwd",
            reference=residual_rmsnorm_swiglu_backward_reference,
            implementation=residual_rmsnorm_swiglu_backward,
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["H"],), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["T"], s["H"]), d, dev, g),
            ),
            flops=lambda s, d: 30.0 * s["T"] * s["H"],
            # reads x, residual, up, two output gradients; writes dx, dresidual, dup; dweight
            bytes_moved=pointwise_bytes(8, 2),
            shapes=({"T": 16384, "H": 4096},),
            cpu_shapes=({"T": 5, "H": 48},),
            dtypes=DTYPES,
            baselines=_baselines(residual_rmsnorm_swiglu_backward_reference),
            description="Forward + backward of the residual RMSNorm SwiGLU block; returns the "
            "four input gradients (generated backward: one row kernel + a weight reduction).",
        )
    )
    register_problem(
        Problem(
            name="blueprint.scaled_masked_softmax",
            reference=masked_softmax_reference,
            implementation=_implementation(masked_softmax_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["B"], s["NH"], s["T"], s["T"]), d, dev, g, 4.0),
                _randn((s["T"], s["T"]), d, dev, g),
            ),
            flops=lambda s, d: 7.0 * _rows(s, "B", "NH", "T") * s["T"],
            bytes_moved=lambda s, d: (
                (2 * _rows(s, "B", "NH", "T") * s["T"] + s["T"] ** 2) * _size(d)
            ),
            shapes=({"B": 4, "NH": 16, "T": 1024}, {"B": 1, "NH": 32, "T": 2048}),
            cpu_shapes=({"B": 1, "NH": 2, "T": 9},),
            dtypes=DTYPES,
            baselines=_baselines(masked_softmax_reference),
            description="softmax(x * scale + mask) over the last dim, mask broadcast over heads.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.layernorm_linear_gelu",
            reference=layernorm_linear_gelu_reference,
            implementation=_implementation(layernorm_linear_gelu_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["D"]), d, dev, g),
                _randn((s["D"],), d, dev, g),
                _randn((s["D"],), d, dev, g),
                _randn((s["N"], s["D"]), d, dev, g, 1.0 / math.sqrt(s["D"])),
                _randn((s["N"],), d, dev, g),
            ),
            flops=lambda s, d: 2.0 * s["T"] * s["D"] * s["N"],
            bytes_moved=lambda s, d: (
                (s["T"] * s["D"] + s["N"] * s["D"] + s["T"] * s["N"]) * _size(d)
            ),
            shapes=({"T": 8192, "D": 4096, "N": 4096},),
            cpu_shapes=({"T": 6, "D": 24, "N": 20},),
            dtypes=DTYPES,
            baselines=_baselines(layernorm_linear_gelu_reference),
            description="LayerNorm row kernel, then a matmul with bias + GELU epilogue.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.causal_attention_scores",
            reference=attention_scores_reference,
            implementation=_implementation(attention_scores_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["B"], s["NH"], s["T"], s["DH"]), d, dev, g),
                _randn((s["B"], s["NH"], s["T"], s["DH"]), d, dev, g),
                torch.ones(s["T"], s["T"], dtype=torch.bool, device=dev).tril(),
            ),
            flops=lambda s, d: 2.0 * _rows(s, "B", "NH", "T") * s["T"] * s["DH"],
            bytes_moved=lambda s, d: (
                (2 * _rows(s, "B", "NH", "T") * s["DH"] + _rows(s, "B", "NH", "T") * s["T"])
                * _size(d)
            ),
            shapes=({"B": 4, "NH": 16, "T": 1024, "DH": 64},),
            cpu_shapes=({"B": 1, "NH": 2, "T": 17, "DH": 16},),
            dtypes=DTYPES,
            baselines=_baselines(attention_scores_reference),
            description="softmax(causal_mask(q @ k^T * scale)): batched matmul then a row kernel.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.mlp_block",
            reference=mlp_block_reference,
            implementation=_implementation(mlp_block_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["D"]), d, dev, g),
                _randn((s["F"], s["D"]), d, dev, g, 1.0 / math.sqrt(s["D"])),
                _randn((s["F"],), d, dev, g),
                _randn((s["D"], s["F"]), d, dev, g, 1.0 / math.sqrt(s["F"])),
                _randn((s["D"],), d, dev, g),
            ),
            flops=lambda s, d: 4.0 * s["T"] * s["D"] * s["F"],
            bytes_moved=lambda s, d: (2 * s["T"] * s["D"] + 2 * s["D"] * s["F"]) * _size(d),
            shapes=({"T": 8192, "D": 2048, "F": 8192},),
            cpu_shapes=({"T": 5, "D": 16, "F": 32},),
            dtypes=DTYPES,
            baselines=_baselines(mlp_block_reference),
            description="linear + GELU epilogue, linear + bias + residual epilogue.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.reduction_chain",
            reference=reduction_chain_reference,
            implementation=_implementation(reduction_chain_blueprint),
            make_inputs=lambda s, d, dev, g: (_randn((s["T"], s["V"]), d, dev, g, 3.0),),
            flops=lambda s, d: 6.0 * s["T"] * s["V"],
            bytes_moved=lambda s, d: (s["T"] * s["V"] + 2 * s["T"]) * _size(d),
            shapes=({"T": 16384, "V": 4096}, {"T": 4096, "V": 16384}),
            cpu_shapes=({"T": 5, "V": 37},),
            dtypes=DTYPES,
            baselines=_baselines(reduction_chain_reference),
            description="Row max, logsumexp and mean |x| from one read of each row.",
        )
    )
    register_problem(
        Problem(
            name="blueprint.mixed_precision_chain",
            reference=mixed_precision_reference,
            implementation=_implementation(mixed_precision_blueprint),
            make_inputs=lambda s, d, dev, g: (
                _randn((s["T"], s["H"]), d, dev, g),
                _randn((s["H"],), torch.float32, dev, g),
                _randn((s["H"],), torch.float32, dev, g),
            ),
            flops=lambda s, d: 16.0 * s["T"] * s["H"],
            bytes_moved=lambda s, d: 2 * s["T"] * s["H"] * _size(d) + 8 * s["H"],
            shapes=({"T": 16384, "H": 4096},),
            cpu_shapes=({"T": 6, "H": 40},),
            dtypes=(torch.bfloat16, torch.float16),
            baselines=_baselines(mixed_precision_reference),
            description="Casts between the input precision and float32 around pointwise math.",
        )
    )


_register()
