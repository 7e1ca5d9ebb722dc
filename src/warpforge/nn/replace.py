"""Swap a model's normalisation layers for warpforge's fused ones, in place, keeping weights.

Recognised: ``torch.nn.LayerNorm``, ``torch.nn.RMSNorm`` and RMSNorm classes from other
libraries that are *structurally* the same (e.g. Hugging Face's ``LlamaRMSNorm``): a class named
``...RMSNorm`` with a 1-D ``weight`` parameter, a float ``variance_epsilon`` or ``eps``, and a
forward that computes ``x * rsqrt(mean(x**2) + eps) * weight`` (or Gemma's ``(1 + weight)``).
Nothing is imported from those libraries; the forward's source is read to confirm the formula.
The new modules hold the *same* ``Parameter`` objects, so optimisers and tied weights still work.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from warpforge.nn.modules import LayerNorm, RMSNorm
from warpforge.validation import FLOAT_DTYPES, describe

__all__ = ["ReplacementReport", "SkippedModule", "SwappedModule", "replace_modules"]


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


_RSQRT = re.compile(r"\brsqrt\b|\bsqrt\b")
_GEMMA_SCALE = re.compile(r"\(\s*1(?:\.0*)?\s*\+\s*self\.weight")


def _from_structural_rms_norm(module: nn.Module) -> nn.Module:
    weight = getattr(module, "weight", None)
    if not isinstance(weight, nn.Parameter) or weight.dim() != 1:
        raise _Unsupported("has no 1-D `weight` parameter")
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise _Unsupported(f"has no positive `variance_epsilon`/`eps` attribute (got {eps!r})")
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        raise _Unsupported("forward's source is unavailable to confirm the formula") from None
    if not _RSQRT.search(source) or "self.weight" not in source:
        raise _Unsupported("forward does not look like x * rsqrt(mean(x^2) + eps) * weight")
    offset = 1.0 if _GEMMA_SCALE.search(source) else 0.0
    new = RMSNorm(weight.shape[0], eps=float(eps), elementwise_affine=False, offset=offset)
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
