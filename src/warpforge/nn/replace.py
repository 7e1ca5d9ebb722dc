"""Swap a model's normalisation layers for warpforge's fused ones, in place, keeping weights.

Recognised: ``torch.nn.LayerNorm``, ``torch.nn.RMSNorm`` and RMSNorm classes from other
libraries that compute the same thing (e.g. Hugging Face's ``LlamaRMSNorm`` and
``GemmaRMSNorm``): a class named ``...RMSNorm`` with a 1-D ``weight`` parameter and a float
``variance_epsilon`` or ``eps``, whose forward is *probed*: a copy of the module, on the CPU with
every floating parameter and buffer randomised, must give ``x * rsqrt(mean(x**2) + eps) *
(offset + weight)`` with ``offset`` 0 or 1 (Gemma) on rows where eps matters and rows where it
does not, and its output dtype for an input of another float dtype than the weight's must be
the input's or the two promoted (Llama's ``weight * x.to(input_dtype)``). Anything else, an
extra bias say, is skipped with the reason. Nothing is imported from those libraries. The new
modules hold the *same* ``Parameter`` objects, so optimisers and tied weights still work.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from warpforge.nn.modules import LayerNorm, RMSNorm
from warpforge.validation import FLOAT_DTYPES, describe

__all__ = [
    "PromotedRMSNorm",
    "ReplacementReport",
    "SkippedModule",
    "SwappedModule",
    "replace_modules",
]


@dataclass(frozen=True)
class SwappedModule:
    path: str
    from_class: str
    to_class: str


@dataclass(frozen=True)
class SkippedModule:
    path: str
    class_name: str
    reason: str


@dataclass
class ReplacementReport:
    """What :func:`replace_modules` swapped and what it left alone (with the reason)."""

    swapped: list[SwappedModule] = field(default_factory=list)
    skipped: list[SkippedModule] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} module(s), skipped {len(self.skipped)}"]
        lines += [f"  {s.path}: {s.from_class} -> {s.to_class}" for s in self.swapped]
        lines += [f"  skipped {s.path} ({s.class_name}): {s.reason}" for s in self.skipped]
        return "\n".join(lines)


class _Unsupported(Exception):
    """A recognised norm that warpforge cannot replace exactly; the message is the reason."""


def _single_dim(module: nn.Module) -> None:
    if len(tuple(module.normalized_shape)) != 1:
        raise _Unsupported(
            f"normalizes over {len(tuple(module.normalized_shape))} trailing dimensions; "
            "warpforge normalizes the last dimension only"
        )


def _from_layer_norm(module: nn.LayerNorm) -> nn.Module:
    _single_dim(module)
    new = LayerNorm(module.normalized_shape, eps=module.eps, elementwise_affine=False)
    new.weight = module.weight
    new.bias = module.bias
    return new


def _from_torch_rms_norm(module: nn.Module) -> nn.Module:
    _single_dim(module)
    new = RMSNorm(module.normalized_shape, eps=module.eps, elementwise_affine=False)
    new.weight = module.weight
    return new


class PromotedRMSNorm(RMSNorm):
    """:class:`~warpforge.nn.RMSNorm` whose output takes ``torch.promote_types(x.dtype,
    weight.dtype)``, as a norm written ``weight * normed_x.to(input_dtype)`` (Hugging Face's
    Llama) returns float32 for a bfloat16 input with a float32 weight."""

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        out = super().forward(x, residual)
        dtype = x.dtype if self.weight is None else torch.promote_types(x.dtype, self.weight.dtype)
        if residual is None:
            return out.to(dtype)
        y, h = out
        return y.to(dtype), h


def _probe_copy(module: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """A CPU copy of ``module`` (also of one on the meta device), every floating parameter and
    buffer random, in ``dtype`` (None: the module's own dtypes)."""
    probe = copy.deepcopy(module).to_empty(device="cpu")
    if dtype is not None:
        probe = probe.to(dtype)
    gen = torch.Generator().manual_seed(20261125)
    with torch.no_grad():
        for t in [*probe.parameters(), *probe.buffers()]:
            if t.is_floating_point():
                t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32))
    return probe


def _probe_input(n: int, eps: float, dtype: torch.dtype) -> torch.Tensor:
    """Rows at unit and large scale, and rows near sqrt(eps), where eps moves the result."""
    gen = torch.Generator().manual_seed(7)
    scales = torch.tensor([1.0, 20.0, 0.5 * eps**0.5, 2.0 * eps**0.5], dtype=torch.float64)
    x = torch.randn(len(scales), n, generator=gen, dtype=torch.float64) * scales[:, None]
    return x.to(dtype)


def _rms_formula(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    return normed * (offset + weight.double())


def _probe_forward(probe: nn.Module, x: torch.Tensor, what: str) -> torch.Tensor:
    """``probe(x)``, a tensor of ``x``'s shape, or :class:`_Unsupported` saying what went wrong
    (any failure of foreign code means: do not swap)."""
    try:
        with torch.no_grad():
            got = probe(x)
    except Exception as error:
        raise _Unsupported(f"forward(x) failed on {what}: {error!r}"[:300]) from None
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        raise _Unsupported(
            f"forward(x) returned {describe(got)} for {what} of shape {tuple(x.shape)}"
        )
    return got


def _probe_offset(module: nn.Module, eps: float) -> float:
    """The offset (0 or 1) with which the module's forward computes the RMSNorm formula in
    float32; raises :class:`_Unsupported` when neither matches or the forward fails."""
    probe = _probe_copy(module, torch.float32)
    n = probe.weight.shape[0]
    x = _probe_input(n, eps, torch.float32)
    got = _probe_forward(probe, x, "a probe input")
    errors = {}
    for offset in (0.0, 1.0):
        expected = _rms_formula(x, probe.weight.detach(), eps, offset)
        excess = (got.double() - expected).abs() - (1e-5 + 1e-4 * expected.abs())
        if excess.max() <= 0:
            return offset
        errors[offset] = float((got.double() - expected).abs().max())
    raise _Unsupported(
        "forward does not compute x * rsqrt(mean(x^2) + eps) * (offset + weight) for offset 0 "
        f"or 1 (max error on a probe: {errors[0.0]:.3g} and {errors[1.0]:.3g})"
    )


def _probe_promotes(module: nn.Module, eps: float) -> bool:
    """Whether the module's output dtype is the input's promoted with the weight's (``True``)
    or the input's (``False``), probed with an input of another float dtype than the weight."""
    probe = _probe_copy(module, None)
    weight_dtype = probe.weight.dtype
    x_dtype = torch.bfloat16 if weight_dtype == torch.float32 else torch.float32
    promoted = torch.promote_types(x_dtype, weight_dtype)
    x = _probe_input(probe.weight.shape[0], eps, x_dtype)
    got = _probe_forward(probe, x, f"a {x_dtype} probe input")
    if got.dtype not in (x_dtype, promoted):
        raise _Unsupported(
            f"forward returns {got.dtype} for a {x_dtype} input and a {weight_dtype} weight; "
            f"warpforge returns {x_dtype} or {promoted}"
        )
    return got.dtype != x_dtype


def _from_structural_rms_norm(module: nn.Module) -> nn.Module:
    weight = getattr(module, "weight", None)
    if not isinstance(weight, nn.Parameter) or weight.dim() != 1:
        raise _Unsupported("has no 1-D `weight` parameter")
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise _Unsupported(f"has no positive `variance_epsilon`/`eps` attribute (got {eps!r})")
    offset = _probe_offset(module, float(eps))
    kind = PromotedRMSNorm if _probe_promotes(module, float(eps)) else RMSNorm
    new = kind(weight.shape[0], eps=float(eps), elementwise_affine=False, offset=offset)
    new.weight = weight
    return new


def _check_parameter_dtypes(module: nn.Module) -> None:
    for name, p in module.named_parameters(recurse=False):
        if p.dtype not in FLOAT_DTYPES:
            raise _Unsupported(
                f"parameter {name!r} has dtype {str(p.dtype).removeprefix('torch.')}; warpforge "
                "norms take float32, float16 or bfloat16"
            )


def _converter(module: nn.Module) -> Callable[[nn.Module], nn.Module] | None:
    """The conversion for ``module``, or None when it is not a norm warpforge knows."""
    if isinstance(module, (LayerNorm, RMSNorm)):
        return None
    if type(module) is nn.LayerNorm:
        return _from_layer_norm
    torch_rms = getattr(nn, "RMSNorm", None)  # torch >= 2.4
    if torch_rms is not None and type(module) is torch_rms:
        return _from_torch_rms_norm
    if type(module).__name__.endswith("RMSNorm"):
        return _from_structural_rms_norm
    return None


def replace_modules(model: nn.Module) -> ReplacementReport:
    """Replace every supported norm layer inside ``model`` with its warpforge equivalent.

    Works in place (the same ``model`` object, the same ``Parameter`` objects, training mode
    kept) and returns a report of swapped and skipped modules. A module shared under several
    names is replaced by one shared new module.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {describe(model)}")
    report = ReplacementReport()
    if _converter(model) is not None:
        report.skipped.append(
            SkippedModule("", type(model).__name__, "the root module cannot be swapped in place")
        )
    replaced: dict[int, nn.Module] = {}
    for parent_path, parent in list(model.named_modules(remove_duplicate=False)):
        # _modules, not named_children(): the latter hides the second name of a shared module
        for name, child in list(parent._modules.items()):
            if child is None:
                continue
            path = f"{parent_path}.{name}" if parent_path else name
            convert = _converter(child)
            if convert is None:
                continue
            if id(child) not in replaced:
                try:
                    _check_parameter_dtypes(child)
                    new = convert(child)
                except _Unsupported as why:
                    report.skipped.append(SkippedModule(path, type(child).__name__, str(why)))
                    continue
                new.train(child.training)
                replaced[id(child)] = new
            new = replaced[id(child)]
            setattr(parent, name, new)
            report.swapped.append(SwappedModule(path, type(child).__name__, type(new).__name__))
    return report
