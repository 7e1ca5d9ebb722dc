"""Operators a blueprint may use: shape inference, PyTorch reference, Triton code, gradient.

Every operator is an :class:`OperatorSpec` in an :class:`OperatorRegistry`. ``kind`` tells the
code generator how it fuses:

* ``"pointwise"``: ``triton`` returns one Triton expression over its operands (computed in float32,
  or float64 when the group holds float64); chains of them fuse into one kernel.
* ``"row"``: works along the last dimension (sum/mean/amax, softmax, norms). ``triton`` receives a
  :class:`RowEmitter` and appends statements; the whole row lives in registers, so a row op
  fuses with the pointwise ops around it.
* ``"matmul"``: ``matmul`` and ``linear``; pointwise consumers become the kernel's epilogue.
* ``"layout"``: reshape, permute, transpose, concat; they run as PyTorch ops between kernels.

Users add operators with :func:`operator`::

    @operator("softplus", kind="pointwise", triton=lambda a, attrs: f"tl.log(1.0 + tl.exp({a[0]}))")
    def softplus(x):
        return torch.log1p(torch.exp(x))

``grad`` (optional) is a gradient rule written with :class:`~warpforge.blueprint.ir.BlueprintBuilder`
ops, so backward graphs compile to fused kernels like forward ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from warpforge.blueprint.ir import Dim, TensorSchema
from warpforge.validation import check_choice, describe

KINDS = ("pointwise", "row", "matmul", "layout")

InferFn = Callable[[Sequence[TensorSchema], Mapping[str, Any]], TensorSchema]
PointwiseCode = Callable[[Sequence[str], Mapping[str, Any]], str]


class RowEmitter(Protocol):
    """What a row operator's ``triton`` hook may use (implemented by the code generator)."""

    n_cols: str
    """Name of the runtime row length (number of columns)."""

    def full(self, expr: str) -> str:
        """Bind a [BLOCK_M, BLOCK_N] expression to a fresh variable; returns its name."""

    def row(self, expr: str) -> str:
        """Bind a [BLOCK_M] expression (one value per row) to a fresh variable."""

    def row_sum(self, full_expr: str) -> str:
        """Sum of ``full_expr`` over valid columns, as a [BLOCK_M, 1] expression."""

    def row_max(self, full_expr: str) -> str:
        """Max of ``full_expr`` over valid columns, as a [BLOCK_M, 1] expression."""

    def masked(self, full_expr: str, other: str) -> str:
        """``full_expr`` where the column is valid, ``other`` elsewhere."""


@dataclass(frozen=True)
class OperatorSpec:
    """One operator: how it types, what it means, how it generates code and differentiates."""

    name: str
    kind: str
    infer: InferFn
    reference: Callable[..., torch.Tensor]
    """``reference(*tensors, **attrs)`` in plain PyTorch: the meaning of the op."""
    triton: Callable[..., str] | None = None
    version: int = 1
    grad: Callable[..., Sequence[Any]] | None = None
    """``grad(b, inputs, output, grad_output, attrs) -> [grad or None per input]`` with builder
    values; ``None`` means backward runs through autograd of the reference."""
    arity: tuple[int, int] = (1, 1)
    """Allowed (min, max) number of tensor inputs."""
    doc: str = ""
    shape_attrs: tuple[str, ...] = ()
    """Attributes holding shapes whose entries may name symbolic dims (reshape's ``shape``):
    bound to sizes before the reference runs, and hashed by which dims share a symbol, as input
    shapes are, so renaming a symbol keeps the canonical hash and swapping two changes it."""
    attr_names: tuple[str, ...] | None = None
    """Every attribute the operator takes; others are rejected by :meth:`infer_schema` (a typo
    such as ``approximat`` would otherwise be ignored and the default used). None: unchecked."""

    def infer_schema(
        self, inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]
    ) -> TensorSchema:
        low, high = self.arity
        if not low <= len(inputs) <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise ValueError(f"expected {expected} input(s), got {len(inputs)}")
        if self.attr_names is not None:
            unknown = sorted(set(attrs) - set(self.attr_names))
            if unknown:
                allowed = ", ".join(repr(n) for n in self.attr_names) or "no attributes"
                raise ValueError(
                    f"unknown attribute(s) {', '.join(repr(n) for n in unknown)} for operator "
                    f"{self.name!r}; expected: {allowed}"
                )
        return self.infer(inputs, attrs)


class OperatorRegistry:
    """Name -> :class:`OperatorSpec`. The default registry holds the built-in operators."""

    def __init__(self) -> None:
        self._ops: dict[str, OperatorSpec] = {}

    def register(self, spec: OperatorSpec, *, replace: bool = False) -> OperatorSpec:
        if not isinstance(spec, OperatorSpec):
            raise TypeError(f"spec: expected an OperatorSpec, got {describe(spec)}")
        check_choice("kind", spec.kind, KINDS)
        if spec.kind == "pointwise" and spec.triton is None:
            raise ValueError(f"operator {spec.name!r}: a pointwise operator needs triton code")
        if spec.name in self._ops and not replace:
            raise ValueError(
                f"operator {spec.name!r} is already registered; pass replace=True (and bump "
                "version so cached kernels are not reused) to redefine it"
            )
        self._ops[spec.name] = spec
        return spec

    def get(self, name: str, *, where: str = "op") -> OperatorSpec:
        try:
            return self._ops[name]
        except KeyError:
            raise ValueError(
                f"{where}: unknown operator {name!r}; registered: {', '.join(sorted(self._ops))}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def names(self) -> list[str]:
        return sorted(self._ops)


_DEFAULT = OperatorRegistry()


def default_registry() -> OperatorRegistry:
    """The process-wide registry that blueprints, the tracer and the compiler use."""
    return _DEFAULT


def operator(
    name: str,
    *,
    kind: str,
    triton: Callable[..., str] | None = None,
    infer: InferFn | None = None,
    version: int = 1,
    grad: Callable[..., Sequence[Any]] | None = None,
    arity: tuple[int, int] = (1, 1),
    registry: OperatorRegistry | None = None,
    replace: bool = False,
) -> Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]:
    """Decorator: register the decorated PyTorch function as the reference of a new operator.

    ``infer`` defaults to broadcasting for pointwise operators; other kinds must give one.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected an identifier, got {name!r}")
    check_choice("kind", kind, KINDS)
    if infer is None:
        if kind != "pointwise":
            raise ValueError(f"infer: operators of kind {kind!r} need an infer function")
        infer = infer_broadcast

    def decorate(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        (registry or _DEFAULT).register(
            OperatorSpec(
                name=name,
                kind=kind,
                infer=infer,
                reference=fn,
                triton=triton,
                version=version,
                grad=grad,
                arity=arity,
                doc=(fn.__doc__ or "").strip(),
            ),
            replace=replace,
        )
        return fn

    return decorate


# ------------------------------------------------------------------------------------ typing
def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _category(dtype: str) -> int:
    return 0 if dtype == "bool" else 1 if dtype.startswith("int") else 2


def promote(schemas: Sequence[TensorSchema]) -> str:
    """PyTorch's result dtype: 0-d tensors only count when they raise the category."""
    dims = [s.dtype for s in schemas if s.rank > 0]
    zero = [s.dtype for s in schemas if s.rank == 0]
    top = max((_category(d) for d in dims), default=-1)
    chosen = dims + [d for d in zero if _category(d) > top] if dims else zero
    result = torch_dtype(chosen[0])
    for name in chosen[1:]:
        result = torch.promote_types(result, torch_dtype(name))
    return dtype_name(result)


def broadcast_shapes(shapes: Sequence[Sequence[Dim]]) -> tuple[Dim, ...]:
    """PyTorch broadcasting over ints and dim names (a name only matches itself or 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for axis in range(rank):
        dims = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]
        chosen: Dim = 1
        for dim in dims:
            if dim == 1 or dim == chosen:
                continue
            if chosen == 1:
                chosen = dim
                continue
            raise ValueError(
                f"shapes {[tuple(s) for s in shapes]} do not broadcast: dim {axis - rank} is "
                f"{chosen!r} in one and {dim!r} in another"
            )
        out.append(chosen)
    return tuple(out)


def scalar_attr(attrs: Mapping[str, Any], key: str) -> float | None:
    """Attribute ``key`` as a float (numbers, or "inf", "-inf", "nan"); None when absent."""
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"attribute {key!r}: expected a number or 'inf'/'-inf'/'nan', got {value!r}"
        )
    return float(value)


def _scalar_code(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return f'float("{value}")'
    return repr(float(value))


def infer_broadcast(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    shape = broadcast_shapes([s.shape for s in inputs])
    dtype = promote(inputs)
    if "scalar" in attrs and dtype in ("bool", "int32", "int64"):
        scalar = attrs["scalar"]
        if isinstance(scalar, (float, str)):
            dtype = "float32"
    return TensorSchema(shape, dtype)


def _infer_float_unary(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    return TensorSchema(x.shape, x.dtype if x.is_float else "float32")


def _infer_same(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    return TensorSchema(inputs[0].shape, inputs[0].dtype)


# ------------------------------------------------------------------------------------ pointwise
def _binary(name: str, symbol: str, torch_fn: Callable[..., torch.Tensor]) -> None:
    """add/sub/mul/div: two tensors, or one tensor and a ``scalar`` attr (``reverse`` swaps)."""

    def reference(
        *tensors: torch.Tensor, scalar: Any = None, reverse: bool = False
    ) -> torch.Tensor:
        if len(tensors) == 2:
            return torch_fn(tensors[0], tensors[1])
        value = scalar_attr({"scalar": scalar}, "scalar")
        if value is None:
            raise ValueError(f"{name}: one tensor input needs a 'scalar' attribute")
        return torch_fn(value, tensors[0]) if reverse else torch_fn(tensors[0], value)

    def code(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
        if len(args) == 2:
            return f"({args[0]} {symbol} {args[1]})"
        value = _scalar_code(scalar_attr(attrs, "scalar"))  # type: ignore[arg-type]
        lhs, rhs = (value, args[0]) if attrs.get("reverse") else (args[0], value)
        return f"({lhs} {symbol} {rhs})"

    def infer(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
        if len(inputs) == 1 and scalar_attr(attrs, "scalar") is None:
            raise ValueError(f"{name} with one tensor input needs a numeric 'scalar' attribute")
        if len(inputs) == 2 and "scalar" in attrs:
            raise ValueError(
                f"{name} takes either two tensors or one tensor and 'scalar', not both"
            )
        out = infer_broadcast(inputs, attrs)
        if name == "div" and not out.is_float:
            out = TensorSchema(out.shape, "float32")
        return out

    _DEFAULT.register(
        OperatorSpec(
            name,
            "pointwise",
            infer,
            reference,
            code,
            grad=_GRADS.get(name),
            arity=(1, 2),
            attr_names=("scalar", "reverse"),
        )
    )


def _unary(name: str, torch_fn: Callable[..., torch.Tensor], code_fn: Callable[[str], str]) -> None:
    _DEFAULT.register(
        OperatorSpec(
            name,
            "pointwise",
            _infer_float_unary if name not in ("neg", "abs", "relu") else _infer_same,
            lambda x: torch_fn(x),
            lambda args, attrs: code_fn(args[0]),
            grad=_GRADS.get(name),
            attr_names=(),
        )
    )


def _sigmoid_code(a: str) -> str:
    return f"(1.0 / (1.0 + tl.exp(-({a}))))"


def _gelu_reference(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate=approximate)


def _gelu_code(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    a = args[0]
    if attrs.get("approximate", "none") == "tanh":
        # 0.5 * (1 + tanh(z)) == sigmoid(2z): no cancellation near z = 0.
        z = f"(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))"
        return f"({a} * {_sigmoid_code('2.0 * ' + z)})"
    return f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))"


def _infer_gelu(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    check_choice("approximate", attrs.get("approximate", "none"), ("none", "tanh"))
    return _infer_float_unary(inputs, attrs)


def _clamp_reference(x: torch.Tensor, min: Any = None, max: Any = None) -> torch.Tensor:
    return torch.clamp(x, min=min, max=max)


def _clamp_code(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    expr = args[0]
    low, high = scalar_attr(attrs, "min"), scalar_attr(attrs, "max")
    if low is not None:
        expr = f"tl.maximum({expr}, {_scalar_code(low)})"
    if high is not None:
        expr = f"tl.minimum({expr}, {_scalar_code(high)})"
    return expr


def _infer_clamp(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    if scalar_attr(attrs, "min") is None and scalar_attr(attrs, "max") is None:
        raise ValueError("clamp needs a 'min' or a 'max' attribute")
    return _infer_same(inputs, attrs)


def _where_reference(cond: torch.Tensor, *rest: torch.Tensor, other: Any = None) -> torch.Tensor:
    if len(rest) == 2:
        return torch.where(cond, rest[0], rest[1])
    value = scalar_attr({"other": other}, "other")
    return torch.where(
        cond, rest[0], torch.tensor(value, dtype=rest[0].dtype, device=rest[0].device)
    )


def _where_code(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    other = args[2] if len(args) == 3 else _scalar_code(scalar_attr(attrs, "other"))  # type: ignore[arg-type]
    return f"tl.where({args[0]}, {args[1]}, {other})"


def _infer_where(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    if inputs[0].dtype != "bool":
        raise TypeError(f"where: the condition must be bool, got {inputs[0].dtype}")
    if len(inputs) == 2 and scalar_attr(attrs, "other") is None:
        raise ValueError("where with two inputs needs a numeric 'other' attribute")
    shape = broadcast_shapes([s.shape for s in inputs])
    return TensorSchema(shape, promote(inputs[1:]))


def _cast_reference(x: torch.Tensor, dtype: str) -> torch.Tensor:
    return x.to(torch_dtype(dtype))


def _infer_cast(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    from warpforge.blueprint.ir import DTYPES

    dtype = check_choice("dtype", attrs.get("dtype"), DTYPES)
    return TensorSchema(inputs[0].shape, dtype)


def _cast_code(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    # The generator computes in float32; a cast rounds to the target type and back.
    return f"{args[0]}.to(tl.{attrs['dtype']})"


# Gradient rules in builder ops (b: BlueprintBuilder; x: inputs; y: output; g: grad of output).
def _g_add(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [g] * len(x)


def _g_sub(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    if len(x) == 2:
        return [g, b.op("neg", g)]
    return [b.op("neg", g) if attrs.get("reverse") else g]


def _g_mul(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    if len(x) == 2:
        return [b.op("mul", g, x[1]), b.op("mul", g, x[0])]
    return [b.op("mul", g, scalar=attrs["scalar"])]


def _g_div(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    if len(x) == 2:
        return [b.op("div", g, x[1]), b.op("neg", b.op("div", b.op("mul", g, y), x[1]))]
    if attrs.get("reverse"):  # y = s / x -> dy/dx = -y / x
        return [b.op("neg", b.op("div", b.op("mul", g, y), x[0]))]
    return [b.op("div", g, scalar=attrs["scalar"])]


def _g_neg(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("neg", g)]


def _g_exp(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("mul", g, y)]


def _g_log(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("div", g, x[0])]


def _g_sqrt(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("div", b.op("mul", g, scalar=0.5), y)]


def _g_tanh(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("mul", g, b.op("sub", b.op("mul", y, y), scalar=1.0, reverse=True))]


def _g_sigmoid(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("mul", g, b.op("mul", y, b.op("sub", y, scalar=1.0, reverse=True)))]


def _g_silu(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    s = b.op("sigmoid", x[0])  # d/dx x*s = s * (1 + x * (1 - s))
    inner = b.op("add", b.op("mul", x[0], b.op("sub", s, scalar=1.0, reverse=True)), scalar=1.0)
    return [b.op("mul", g, b.op("mul", s, inner))]


def _g_rsqrt(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    return [b.op("mul", g, b.op("mul", b.op("mul", y, y), b.op("mul", y, scalar=-0.5)))]


_GRADS: dict[str, Callable[..., Sequence[Any]]] = {
    "rsqrt": _g_rsqrt,
    "add": _g_add,
    "sub": _g_sub,
    "mul": _g_mul,
    "div": _g_div,
    "neg": _g_neg,
    "exp": _g_exp,
    "log": _g_log,
    "sqrt": _g_sqrt,
    "tanh": _g_tanh,
    "sigmoid": _g_sigmoid,
    "silu": _g_silu,
}

_binary("add", "+", torch.add)
_binary("sub", "-", torch.sub)
_binary("mul", "*", torch.mul)
_binary("div", "/", torch.div)
_unary("neg", torch.neg, lambda a: f"(-{a})")
_unary("exp", torch.exp, lambda a: f"tl.exp({a})")
_unary("log", torch.log, lambda a: f"tl.log({a})")
_unary("sqrt", torch.sqrt, lambda a: f"tl.sqrt({a})")
_unary("rsqrt", torch.rsqrt, lambda a: f"tl.rsqrt({a})")
_unary("abs", torch.abs, lambda a: f"tl.abs({a})")
_unary("relu", torch.relu, lambda a: f"tl.maximum({a}, 0.0)")
_unary("silu", torch.nn.functional.silu, lambda a: f"({a} * {_sigmoid_code(a)})")
_unary("sigmoid", torch.sigmoid, _sigmoid_code)
# tanh(a) = 2 * sigmoid(2a) - 1 (tl.tanh is not in every Triton release we support).
_unary("tanh", torch.tanh, lambda a: f"(2.0 * {_sigmoid_code('2.0 * ' + a)} - 1.0)")
_DEFAULT.register(
    OperatorSpec(
        "gelu",
        "pointwise",
        _infer_gelu,
        _gelu_reference,
        _gelu_code,
        attr_names=("approximate",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "clamp", "pointwise", _infer_clamp, _clamp_reference, _clamp_code, attr_names=("min", "max")
    )
)
_DEFAULT.register(
    OperatorSpec(
        "where",
        "pointwise",
        _infer_where,
        _where_reference,
        _where_code,
        arity=(2, 3),
        attr_names=("other",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "cast", "pointwise", _infer_cast, _cast_reference, _cast_code, attr_names=("dtype",)
    )
)


# ------------------------------------------------------------------------------------ row ops
def _last_dim(attrs: Mapping[str, Any], rank: int) -> None:
    dim = attrs.get("dim", -1)
    if dim not in (-1, rank - 1):
        raise ValueError(f"only the last dimension is supported (dim=-1), got dim={dim!r}")


def _infer_reduce(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    if x.rank == 0:
        raise ValueError("cannot reduce a 0-d tensor over its last dimension")
    _last_dim(attrs, x.rank)
    if not x.is_float:
        raise TypeError(f"row reductions need a float input, got {x.dtype}")
    keep = bool(attrs.get("keepdim", False))
    return TensorSchema(x.shape[:-1] + ((1,) if keep else ()), x.dtype)


class GradientNotAvailable(NotImplementedError):
    """A gradient rule cannot handle these attributes; backward uses reference autograd."""


def _g_sum(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    if not attrs.get("keepdim", False):
        raise GradientNotAvailable("sum without keepdim")
    return [b.op("expand_like", g, x[0])]


def _reduce(name: str, torch_fn: Callable[..., torch.Tensor], code: Callable[..., str]) -> None:
    def reference(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
        return torch_fn(x, dim=dim, keepdim=keepdim)

    grad = _g_sum if name == "sum" else None
    _DEFAULT.register(
        OperatorSpec(
            name, "row", _infer_reduce, reference, code, grad=grad, attr_names=("dim", "keepdim")
        )
    )


_reduce("sum", torch.sum, lambda e, args, attrs: e.row_sum(args[0]))
_reduce("mean", torch.mean, lambda e, args, attrs: f"({e.row_sum(args[0])} / {e.n_cols})")
_reduce("amax", torch.amax, lambda e, args, attrs: e.row_max(args[0]))


def _infer_row_same(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    x = inputs[0]
    if x.rank == 0:
        raise ValueError("needs at least 1 dimension")
    _last_dim(attrs, x.rank)
    if not x.is_float:
        raise TypeError(f"needs a float input, got {x.dtype}")
    for i, param in enumerate(inputs[1:], start=1):
        if param.shape != (x.shape[-1],):
            raise ValueError(
                f"input {i} (weight/bias) must have shape ({x.shape[-1]!r},), got {param.shape}"
            )
    return TensorSchema(x.shape, x.dtype)


def _softmax_reference(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(x, dim=dim)


def _softmax_code(e: RowEmitter, args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    # row_max/row_sum ignore the masked columns, so padding never reaches the result.
    shifted = e.full(f"{args[0]} - {e.row_max(args[0])}")
    numer = e.full(f"tl.exp({shifted})")
    return f"({numer} / {e.row_sum(numer)})"


def _layer_norm_reference(
    x: torch.Tensor, *params: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    weight = params[0] if params else None
    bias = params[1] if len(params) > 1 else None
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _layer_norm_code(e: RowEmitter, args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    mean = e.row(f"{e.row_sum(args[0])} / {e.n_cols}")
    centered = e.full(f"{args[0]} - {mean}")
    rstd = e.row(
        f"tl.rsqrt({e.row_sum(f'{centered} * {centered}')} / {e.n_cols} + {attrs.get('eps', 1e-5)!r})"
    )
    out = f"{centered} * {rstd}"
    if len(args) > 1:
        out = f"{out} * {args[1]}"
    if len(args) > 2:
        out = f"{out} + {args[2]}"
    return f"({out})"


def _rms_norm_reference(x: torch.Tensor, *params: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    # Written out (torch.nn.functional.rms_norm needs torch >= 2.4).
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(compute)
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if params:
        out = out * params[0].to(compute)
    return out.to(x.dtype)


def _rms_norm_code(e: RowEmitter, args: Sequence[str], attrs: Mapping[str, Any]) -> str:
    square = f"{args[0]} * {args[0]}"
    rstd = e.row(f"tl.rsqrt({e.row_sum(square)} / {e.n_cols} + {attrs.get('eps', 1e-6)!r})")
    out = f"{args[0]} * {rstd}"
    if len(args) > 1:
        out = f"{out} * {args[1]}"
    return f"({out})"


def _eps_checked(infer: InferFn, default: float) -> InferFn:
    def checked(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
        eps = attrs.get("eps", default)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
            raise ValueError(f"eps: expected a number >= 0, got {eps!r}")
        return infer(inputs, attrs)

    return checked


def _g_softmax(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    # dx = y * (g - sum(g * y)) along the row
    dot = b.op("sum", b.op("mul", g, y), keepdim=True)
    return [b.op("mul", y, b.op("sub", g, dot))]


def _g_rms_norm(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    xv = x[0]
    rstd = b.op(
        "rsqrt",
        b.op("add", b.op("mean", b.op("mul", xv, xv), keepdim=True), scalar=attrs.get("eps", 1e-6)),
    )
    gw = b.op("mul", g, x[1]) if len(x) > 1 else g
    # dx = rstd * gw - x * rstd^3 * mean(gw * x)
    proj = b.op("mean", b.op("mul", gw, xv), keepdim=True)
    cube = b.op("mul", b.op("mul", rstd, rstd), rstd)
    dx = b.op("sub", b.op("mul", gw, rstd), b.op("mul", xv, b.op("mul", cube, proj)))
    grads = [dx]
    if len(x) > 1:
        grads.append(b.op("mul", g, b.op("mul", xv, rstd)))  # summed over rows by autodiff
    return grads


def _g_layer_norm(b: Any, x: Sequence[Any], y: Any, g: Any, attrs: Mapping[str, Any]) -> list[Any]:
    centered = b.op("sub", x[0], b.op("mean", x[0], keepdim=True))
    variance = b.op("mean", b.op("mul", centered, centered), keepdim=True)
    rstd = b.op("rsqrt", b.op("add", variance, scalar=attrs.get("eps", 1e-5)))
    xhat = b.op("mul", centered, rstd)
    gw = b.op("mul", g, x[1]) if len(x) > 1 else g
    # dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
    inner = b.op("sub", gw, b.op("mean", gw, keepdim=True))
    inner = b.op("sub", inner, b.op("mul", xhat, b.op("mean", b.op("mul", gw, xhat), keepdim=True)))
    grads = [b.op("mul", rstd, inner)]
    if len(x) > 1:
        grads.append(b.op("mul", g, xhat))
    if len(x) > 2:
        grads.append(g)
    return grads


def _expand_like_reference(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.broadcast_to(x, torch.broadcast_shapes(x.shape, like.shape)).clone()


def _infer_expand_like(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    return TensorSchema(broadcast_shapes([s.shape for s in inputs]), inputs[0].dtype)


# ``x`` broadcast to the shape of ``x`` and ``like`` together; ``like``'s values are never read
# (so an inf or NaN in it cannot leak in). Used by gradient rules.
_DEFAULT.register(
    OperatorSpec(
        "expand_like",
        "pointwise",
        _infer_expand_like,
        _expand_like_reference,
        lambda args, attrs: f"({args[0]} + tl.zeros_like({args[1]}))",
        arity=(2, 2),
        attr_names=(),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "softmax",
        "row",
        _infer_row_same,
        _softmax_reference,
        _softmax_code,
        grad=_g_softmax,
        attr_names=("dim",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "layer_norm",
        "row",
        _eps_checked(_infer_row_same, 1e-5),
        _layer_norm_reference,
        _layer_norm_code,
        grad=_g_layer_norm,
        arity=(1, 3),
        attr_names=("eps",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "rms_norm",
        "row",
        _eps_checked(_infer_row_same, 1e-6),
        _rms_norm_reference,
        _rms_norm_code,
        grad=_g_rms_norm,
        arity=(1, 2),
        attr_names=("eps",),
    )
)


# ------------------------------------------------------------------------------------ matmul
def _infer_matmul(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    a, b = inputs
    if a.rank < 2 or b.rank < 2:
        raise ValueError(f"matmul needs operands of rank >= 2, got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dims differ: {a.shape[-1]!r} vs {b.shape[-2]!r}")
    if a.dtype != b.dtype or not a.is_float:
        raise TypeError(
            f"matmul needs two operands of one float dtype, got {a.dtype} and {b.dtype}"
        )
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]])
    return TensorSchema((*batch, a.shape[-2], b.shape[-1]), a.dtype)


def _infer_linear(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    x, w = inputs[0], inputs[1]
    if x.rank < 1 or w.rank != 2:
        raise ValueError(f"linear needs x of rank >= 1 and a 2-D weight, got {x} and {w}")
    if x.shape[-1] != w.shape[1]:
        raise ValueError(f"x has {x.shape[-1]!r} features, weight expects {w.shape[1]!r}")
    if len(inputs) == 3 and inputs[2].shape != (w.shape[0],):
        raise ValueError(f"bias must have shape ({w.shape[0]!r},), got {inputs[2].shape}")
    if len({s.dtype for s in inputs}) != 1 or not x.is_float:
        raise TypeError(
            f"linear needs operands of one float dtype, got {[s.dtype for s in inputs]}"
        )
    return TensorSchema((*x.shape[:-1], w.shape[0]), x.dtype)


def _linear_reference(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None
) -> torch.Tensor:
    return torch.nn.functional.linear(x, w, b)


_DEFAULT.register(
    OperatorSpec("matmul", "matmul", _infer_matmul, torch.matmul, arity=(2, 2), attr_names=())
)
_DEFAULT.register(
    OperatorSpec("linear", "matmul", _infer_linear, _linear_reference, arity=(2, 3), attr_names=())
)


# ------------------------------------------------------------------------------------ layout
def _concrete(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


def _infer_reshape(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    target = attrs.get("shape")
    if not isinstance(target, list) or not all(
        (isinstance(d, int) and not isinstance(d, bool) and d >= -1) or isinstance(d, str)
        for d in target
    ):
        raise ValueError(
            f"shape: expected a list of ints (-1 allowed) and dim names, got {target!r}"
        )
    if target.count(-1) > 1:
        raise ValueError(f"shape: at most one -1, got {target!r}")
    if -1 in target:
        if not _concrete(x.shape) or not _concrete([d for d in target if d != -1]):
            raise ValueError("shape: -1 needs concrete sizes; name the symbolic dim instead")
        known = math.prod(d for d in target if d != -1)
        numel = math.prod(x.shape)  # type: ignore[arg-type]
        if known == 0 or numel % known:
            raise ValueError(f"cannot reshape {x.shape} to {target}")
        target = [numel // known if d == -1 else d for d in target]
    if _concrete(x.shape) and _concrete(target) and math.prod(x.shape) != math.prod(target):  # type: ignore[arg-type]
        raise ValueError(f"cannot reshape {x.shape} ({math.prod(x.shape)} elements) to {target}")  # type: ignore[arg-type]
    return TensorSchema(tuple(target), x.dtype)


def _reshape_reference(x: torch.Tensor, shape: Sequence[Any]) -> torch.Tensor:
    # Symbolic names are bound by the caller (compiler) before the reference runs.
    return x.reshape([int(d) for d in shape])


def _infer_permute(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    dims = attrs.get("dims")
    if not isinstance(dims, list) or sorted(d % max(x.rank, 1) for d in dims) != list(
        range(x.rank)
    ):
        raise ValueError(f"dims: expected a permutation of range({x.rank}), got {dims!r}")
    return TensorSchema(tuple(x.shape[d] for d in dims), x.dtype)


def _infer_transpose(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    d0, d1 = attrs.get("dim0"), attrs.get("dim1")
    for key, d in (("dim0", d0), ("dim1", d1)):
        if not isinstance(d, int) or not -x.rank <= d < x.rank:
            raise ValueError(f"{key}: expected a dim in [{-x.rank}, {x.rank - 1}], got {d!r}")
    shape = list(x.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]  # type: ignore[index]
    return TensorSchema(tuple(shape), x.dtype)


def _infer_concat(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    first = inputs[0]
    dim = attrs.get("dim", 0)
    if not isinstance(dim, int) or not -first.rank <= dim < first.rank:
        raise ValueError(f"dim: expected a dim in [{-first.rank}, {first.rank - 1}], got {dim!r}")
    dim %= first.rank
    total: Dim = 0
    for i, s in enumerate(inputs):
        if s.rank != first.rank or s.dtype != first.dtype:
            raise ValueError(
                f"input {i} is {s}, expected rank {first.rank} and dtype {first.dtype}"
            )
        for axis in range(first.rank):
            if axis != dim and s.shape[axis] != first.shape[axis]:
                raise ValueError(
                    f"input {i} has shape {s.shape}, differing from {first.shape} off dim {dim}"
                )
        part = s.shape[dim]
        if isinstance(total, int) and isinstance(part, int):
            total += part
        else:
            raise ValueError("concat along a symbolic dim is not supported; give concrete sizes")
    shape = list(first.shape)
    shape[dim] = total
    return TensorSchema(tuple(shape), first.dtype)


_DEFAULT.register(
    OperatorSpec(
        "reshape",
        "layout",
        _infer_reshape,
        _reshape_reference,
        shape_attrs=("shape",),
        attr_names=("shape",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "permute",
        "layout",
        _infer_permute,
        lambda x, dims: x.permute(*dims),
        attr_names=("dims",),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "transpose",
        "layout",
        _infer_transpose,
        lambda x, dim0, dim1: x.transpose(dim0, dim1),
        attr_names=("dim0", "dim1"),
    )
)
_DEFAULT.register(
    OperatorSpec(
        "concat",
        "layout",
        _infer_concat,
        lambda *xs, dim=0: torch.cat(xs, dim=dim),
        arity=(1, 64),
        attr_names=("dim",),
    )
)


def _infer_sum_to(inputs: Sequence[TensorSchema], attrs: Mapping[str, Any]) -> TensorSchema:
    (x,) = inputs
    target = attrs.get("shape")
    if not isinstance(target, list) or broadcast_shapes([x.shape, target]) != tuple(x.shape):
        raise ValueError(f"shape: expected a shape {x.shape} was broadcast from, got {target!r}")
    return TensorSchema(tuple(target), x.dtype)


def _sum_to_reference(x: torch.Tensor, shape: Sequence[Any]) -> torch.Tensor:
    return x.sum_to_size([int(d) for d in shape])


# Used by generated backward graphs to undo broadcasting (runs as a PyTorch op).
_DEFAULT.register(
    OperatorSpec(
        "sum_to",
        "layout",
        _infer_sum_to,
        _sum_to_reference,
        shape_attrs=("shape",),
        attr_names=("shape",),
    )
)
