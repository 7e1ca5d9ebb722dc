"""Benchmark problems for the losses: cross entropy (forward; backward alone from the saved
forward state; forward+backward) and the fused linear cross entropy (forward+backward).
Importing this module registers them."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from warpforge.harness.problem import Problem, Shape, Tolerance, compile_baseline
from warpforge.harness.registry import register_problem
from warpforge.ops._row_problems import SMALL_VALUE_ATOL, forward_baselines, ulp
from warpforge.ops.liger_baselines import liger_attribute, loss_only

IGNORE_INDEX = -100


def _logits_and_target(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    rows, vocab = shape["M"], shape["V"]
    logits = torch.randn(rows, vocab, generator=generator, device=device, dtype=torch.float32)
    target = torch.randint(0, vocab, (rows,), generator=generator, device=device)
    # every 16th token is padding, as in packed language-model batches
    target[1::16] = IGNORE_INDEX
    return (logits * 2).to(dtype), target


# --- cross_entropy.fwd ----------------------------------------------------------------------


def cross_entropy_reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def cross_entropy_implementation(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    from warpforge.ops import cross_entropy

    return cross_entropy(logits, target)


def _liger_cross_entropy() -> Callable[..., torch.Tensor]:
    function = liger_attribute("liger_kernel.ops.cross_entropy", "LigerCrossEntropyFunction")
    # Liger writes its gradient over the logits it is given; timing is unaffected.
    # weight=None (no class weights): the third positional argument in Liger >= 0.5
    return lambda logits, target: loss_only(function.apply(logits, target, None))


CE_SHAPES = ({"M": 16384, "V": 32000}, {"M": 8192, "V": 128256}, {"M": 4096, "V": 262144})
# one class (V=1) gives a constant loss, which the harness rightly rejects as degenerate; that
# edge case is covered by tests/ops/test_cross_entropy.py instead
CE_SWEEP = ({"M": 32768, "V": 256}, {"M": 4096, "V": 50257}, {"M": 2048, "V": 151936})
"""The issue's sweep ends (32768 x 256) and real vocabularies the default shapes miss: GPT-2's
50257 (rows that start off 16-byte boundaries) and Qwen's 151936 over few rows."""
CE_CPU_SHAPES = ({"M": 5, "V": 37}, {"M": 3, "V": 4099}, {"M": 1, "V": 3})

CE_GRADIENT_TOLERANCE = Tolerance(atol=SMALL_VALUE_ATOL, relative_floor=True)
"""The logits' gradient is ~1/V (divided by the rows for a mean) away from the target: bounds
relative to each value, else PyTorch's error at the target (~1) would cover all the others."""


def _float32_rounding(
    logits: torch.Tensor, target: torch.Tensor, scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a correct cross entropy computed in float32 (as warpforge's is, for every input
    dtype) may be off by, per row of the loss and per element of the gradient, before each row's
    ``scale`` (float64 inputs). p = exp(x - lse) carries the rounding of lse and of x, relative
    ulp(lse) + ulp(x), and its own ulp; the loss lse - x[target] and the target's p - 1 cancel,
    so where the loss or 1 - p is small that rounding, not the value, sets the scale of the
    error, and PyTorch's own error (the bound's other floor) is small on some inputs by luck:
    in 400 random 1 x 3 rows, 3 correct results exceeded the bound without this. Twice the
    estimate; ignored rows get none."""
    valid = target != IGNORE_INDEX
    lse = torch.logsumexp(logits, dim=-1)
    p = torch.exp(logits - lse[:, None])
    unit_lse = ulp(lse, torch.float32)
    grad = 2 * (p * (unit_lse[:, None] + ulp(logits, torch.float32)) + ulp(p, torch.float32))
    picked = logits.gather(1, torch.where(valid, target, 0)[:, None]).squeeze(1)
    loss = 2 * (unit_lse + ulp(picked, torch.float32))
    weight = torch.where(valid, scale, 0.0)
    return loss * weight, grad * weight[:, None]


def _mean_loss_and_grad_rounding(
    inputs: list[torch.Tensor], dtype: torch.dtype
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """:func:`_float32_rounding` of the mean loss and its gradient (every counted row 1/n)."""
    logits, target = inputs
    counted = int((target != IGNORE_INDEX).sum())
    if counted == 0:  # the mean is NaN: nothing to bound
        return None, None
    scale = torch.full(target.shape, 1.0 / counted, dtype=logits.dtype, device=logits.device)
    loss, grad = _float32_rounding(logits, target, scale)
    return loss.sum().reshape(()), grad


CROSS_ENTROPY_FWD = register_problem(
    Problem(
        name="cross_entropy.fwd",
        reference=cross_entropy_reference,
        implementation=cross_entropy_implementation,
        make_inputs=_logits_and_target,
        flops=lambda s, d: 4.0 * s["M"] * s["V"],
        bytes_moved=lambda s, d: s["M"] * s["V"] * d.itemsize + s["M"] * 8,
        shapes=CE_SHAPES,
        cpu_shapes=CE_CPU_SHAPES,
        baselines=forward_baselines(cross_entropy_reference, _liger_cross_entropy),
        sweep=CE_SWEEP,
        description="mean cross entropy over the last dim, 1 in 16 targets ignored",
    )
)


# --- cross_entropy.fwd_bwd ------------------------------------------------------------------


def _loss_and_grad(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., tuple[torch.Tensor, ...]]:
    def run(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = logits.detach().requires_grad_()
        loss = loss_fn(x, target)
        (grad,) = torch.autograd.grad(loss, x)
        return loss.detach(), grad

    return run


def _liger_cross_entropy_fwd_bwd() -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    return _loss_and_grad(_liger_cross_entropy())


CROSS_ENTROPY_FWD_BWD = register_problem(
    Problem(
        name="cross_entropy.fwd_bwd",
        reference=_loss_and_grad(cross_entropy_reference),
        implementation=_loss_and_grad(cross_entropy_implementation),
        make_inputs=_logits_and_target,
        flops=lambda s, d: 8.0 * s["M"] * s["V"],
        # the minimum: read the logits once, write their gradient once
        bytes_moved=lambda s, d: 2 * s["M"] * s["V"] * d.itemsize + s["M"] * 8,
        shapes=CE_SHAPES,
        cpu_shapes=CE_CPU_SHAPES,
        sweep=CE_SWEEP,
        baselines={
            "torch": lambda: _loss_and_grad(cross_entropy_reference),
            "torch.compile": lambda: _loss_and_grad(compile_baseline(cross_entropy_reference)),
            "liger": _liger_cross_entropy_fwd_bwd,
        },
        tolerance=CE_GRADIENT_TOLERANCE,
        saved_rounding=_mean_loss_and_grad_rounding,
        description="mean cross entropy and its gradient w.r.t. the logits (grad_output 1)",
    )
)


# --- cross_entropy.bwd ----------------------------------------------------------------------


def _backward_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a backward starts from: the logits and targets, the forward's saved fp32 logsumexp
    and a per-row grad_output (reduction="none": the general case, every row scaled)."""
    logits, target = _logits_and_target(shape, dtype, device, generator)
    lse = torch.logsumexp(logits.float(), dim=-1)
    grad_output = torch.rand(shape["M"], generator=generator, device=device) + 0.5
    return logits, target, lse, grad_output


def cross_entropy_grad_reference(
    logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, grad_output: torch.Tensor
) -> torch.Tensor:
    """d(sum_rows grad_output * loss_row)/d(logits) from the logits alone (lse is ignored, so the
    ground truth does not depend on the state the implementation is given)."""
    x = logits.float() if logits.dtype != torch.float64 else logits
    valid = target != IGNORE_INDEX
    one_hot = F.one_hot(torch.where(valid, target, 0), x.shape[-1]).to(x.dtype)
    scale = torch.where(valid, grad_output.to(x.dtype), 0.0)
    return ((torch.softmax(x, dim=-1) - one_hot) * scale[:, None]).to(logits.dtype)


def _grad_from_lse(
    logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, grad_output: torch.Tensor
) -> torch.Tensor:
    """The same gradient from the saved lse, in eager PyTorch: what a hand-written backward
    does (torch.compile fuses it into one read-logits, write-gradient kernel)."""
    x = logits.float()
    valid = target != IGNORE_INDEX
    scale = torch.where(valid, grad_output.float(), 0.0)
    grad = torch.exp(x - lse[:, None]) * scale[:, None]
    rows = torch.arange(x.shape[0], device=x.device)
    grad[rows, torch.where(valid, target, 0)] -= scale
    return grad.to(logits.dtype)


def _backward_rounding(inputs: list[torch.Tensor], dtype: torch.dtype) -> tuple[torch.Tensor]:
    """:func:`_float32_rounding` of the gradient, each row scaled by its grad_output (the saved
    lse the op is given is itself float32, within half an ulp of the true one)."""
    logits, target, _, grad_output = inputs
    return (_float32_rounding(logits, target, grad_output.abs())[1],)


def cross_entropy_backward_implementation(
    logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, grad_output: torch.Tensor
) -> torch.Tensor:
    """warpforge's backward op as autograd calls it, from the saved forward state."""
    from warpforge.ops.cross_entropy import _cross_entropy_bwd

    return _cross_entropy_bwd(grad_output, logits, target, lse, IGNORE_INDEX, 0.0, 0.0)


CROSS_ENTROPY_BWD = register_problem(
    Problem(
        name="cross_entropy.bwd",
        reference=cross_entropy_grad_reference,
        implementation=cross_entropy_backward_implementation,
        make_inputs=_backward_inputs,
        flops=lambda s, d: 5.0 * s["M"] * s["V"],
        # read the logits, write their gradient; per row: lse (4), target (8), grad_output (4)
        bytes_moved=lambda s, d: 2 * s["M"] * s["V"] * d.itemsize + s["M"] * 16,
        shapes=CE_SHAPES,
        cpu_shapes=CE_CPU_SHAPES,
        sweep=CE_SWEEP,
        baselines={
            "torch": lambda: _grad_from_lse,
            "torch.compile": lambda: compile_baseline(_grad_from_lse),
        },
        tolerance=CE_GRADIENT_TOLERANCE,
        saved_rounding=_backward_rounding,
        description="cross-entropy backward alone: gradient of the logits from the saved lse, "
        "per-row grad_output, 1 in 16 targets ignored (Liger has no separate backward)",
    )
)


# --- fused_linear_cross_entropy.fwd_bwd -----------------------------------------------------


def _flce_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens, width, vocab = shape["tokens"], shape["hidden"], shape["vocab"]
    hidden = torch.randn(tokens, width, generator=generator, device=device).to(dtype)
    weight = (torch.randn(vocab, width, generator=generator, device=device) * width**-0.5).to(dtype)
    target = torch.randint(0, vocab, (tokens,), generator=generator, device=device)
    target[1::16] = IGNORE_INDEX
    return hidden, weight, target


def _linear_loss_and_grads(
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[..., tuple[torch.Tensor, ...]]:
    def run(hidden, weight, target):
        h, w = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
        loss = loss_fn(h, w, target)
        grad_hidden, grad_weight = torch.autograd.grad(loss, (h, w))
        return loss.detach(), grad_hidden, grad_weight

    return run


def unfused_linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    """The usual training code (e.g. Hugging Face models): logits, upcast, cross entropy; the
    loss comes back in the inputs' dtype, as warpforge's fused op returns it."""
    logits = hidden @ weight.t()
    loss = F.cross_entropy(logits.float() if logits.dtype != torch.float64 else logits, target)
    return loss.to(hidden.dtype)


unfused_loss_and_grads = _linear_loss_and_grads(unfused_linear_cross_entropy)
"""(loss, d hidden, d weight) through the unfused training code: the eager baseline, and the
reference at the candidate's dtype."""


REFERENCE_CHUNK_ELEMENTS = 2**27
"""Logits per chunk of the reference below: 1 GiB in float64."""


def chunked_linear_cross_entropy_reference(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean loss, d loss/d hidden, d loss/d weight) of ``unfused_linear_cross_entropy`` in
    closed form, a chunk of tokens at a time: the float64 logits of the whole problem (16.8 GB
    at 16384 x 128256) do not fit next to everything else on the device, a chunk does.
    Per chunk: p = softmax(h W^T); p[target] -= 1; ignored rows 0; all / the non-ignored count;
    d hidden = p W, d weight += p^T h."""
    tokens, vocab = hidden.shape[0], weight.shape[0]
    keep = target != IGNORE_INDEX
    count = keep.sum()
    rows = max(1, REFERENCE_CHUNK_ELEMENTS // max(vocab, 1))
    total = hidden.new_zeros((), dtype=torch.float64)
    grad_hidden = torch.empty_like(hidden)
    grad_weight = torch.zeros_like(weight, dtype=total.dtype)
    for start in range(0, tokens, rows):
        h = hidden[start : start + rows].to(total.dtype)
        t, k = target[start : start + rows], keep[start : start + rows]
        logits = h @ weight.to(total.dtype).t()
        lse = torch.logsumexp(logits, dim=-1)
        safe_t = torch.where(k, t, torch.zeros_like(t))
        picked = logits.gather(1, safe_t[:, None]).squeeze(1)
        total += torch.where(k, lse - picked, torch.zeros_like(lse)).sum()
        p = torch.exp(logits - lse[:, None])
        p.scatter_add_(1, safe_t[:, None], -torch.ones_like(lse)[:, None])
        p *= (k.to(p.dtype) / count)[:, None]
        grad_hidden[start : start + rows] = (p @ weight.to(p.dtype)).to(hidden.dtype)
        grad_weight += p.t() @ h
        del logits, p
    return (total / count).to(hidden.dtype), grad_hidden, grad_weight.to(weight.dtype)


def _flce_reference(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """The ground truth (float64) in chunks; at the candidate's dtype, the unfused training code
    itself, so "PyTorch's own error" is that of the code users run."""
    if hidden.dtype == torch.float64:
        return chunked_linear_cross_entropy_reference(hidden, weight, target)
    return unfused_loss_and_grads(hidden, weight, target)


def fused_linear_cross_entropy_implementation(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    from warpforge.ops import fused_linear_cross_entropy

    return fused_linear_cross_entropy(hidden, weight, target)


def _liger_flce() -> Callable[..., tuple[torch.Tensor, ...]]:
    function = liger_attribute(
        "liger_kernel.ops.fused_linear_cross_entropy", "LigerFusedLinearCrossEntropyFunction"
    )
    return _linear_loss_and_grads(lambda h, w, t: loss_only(function.apply(h, w, t)))


def _flce_flops(s: Shape, d: torch.dtype) -> float:
    # logits, grad_hidden and grad_weight: three [tokens x hidden x vocab] matmuls
    return 3 * 2.0 * s["tokens"] * s["hidden"] * s["vocab"]


def _flce_bytes(s: Shape, d: torch.dtype) -> float:
    # read hidden and weight, write their gradients; the logits never need to reach memory
    return 2 * (s["tokens"] + s["vocab"]) * s["hidden"] * d.itemsize + s["tokens"] * 8


FUSED_LINEAR_CROSS_ENTROPY_FWD_BWD = register_problem(
    Problem(
        name="fused_linear_cross_entropy.fwd_bwd",
        reference=_flce_reference,
        implementation=_linear_loss_and_grads(fused_linear_cross_entropy_implementation),
        make_inputs=_flce_inputs,
        flops=_flce_flops,
        bytes_moved=_flce_bytes,
        shapes=({"tokens": 16384, "hidden": 4096, "vocab": 128256},),
        cpu_shapes=(
            {"tokens": 13, "hidden": 16, "vocab": 37},
            {"tokens": 1, "hidden": 8, "vocab": 5},
        ),
        dtypes=(torch.bfloat16, torch.float32),
        baselines={
            "torch": lambda: unfused_loss_and_grads,
            "torch.compile": lambda: _linear_loss_and_grads(
                compile_baseline(unfused_linear_cross_entropy)
            ),
            "liger": _liger_flce,
        },
        # grad_weight accumulates over token chunks in the weight dtype (one rounding per chunk)
        tolerance=Tolerance(
            atol={
                torch.float64: 1e-10,
                torch.float32: 1e-4,
                torch.float16: 1e-2,
                torch.bfloat16: 2e-2,
            },
            rtol={
                torch.float64: 1e-10,
                torch.float32: 1e-4,
                torch.float16: 1e-2,
                torch.bfloat16: 2e-2,
            },
        ),
        sweep=({"tokens": 8192, "hidden": 4096, "vocab": 152064},),
        description="LM head + mean cross entropy, loss and grads of hidden and weight",
    )
)
