"""``trace(fn, example_inputs)``: a plain PyTorch function as a :class:`BlueprintIR` via torch.fx.

torch.fx records the function symbolically; each call is mapped to a registry operator (torch
functions, tensor methods and Python operators alike). The example inputs fix shapes and dtypes.
Every call that has no operator is collected, and :class:`UnsupportedOperationError` lists them
all with the fx node and the source line that made the call.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import operator as py_operator
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from warpforge.blueprint.ir import BlueprintBuilder, BlueprintIR, TensorSchema, Value
from warpforge.blueprint.registry import OperatorRegistry, default_registry, dtype_name
from warpforge.validation import describe


class UnsupportedOperationError(ValueError):
    """The traced function calls operations blueprints cannot express; ``problems`` lists them."""

    def __init__(self, function: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"cannot trace {function} into a blueprint: {len(problems)} unsupported "
            f"operation(s):\n{lines}"
        )


class _Unsupported(Exception):
    pass


Handler = Callable[[list[Any], dict[str, Any]], tuple[str, list[Any], dict[str, Any]]]


def _scalar_binary(op: str, commutative: bool) -> Handler:
    def handle(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
        if kwargs.get("alpha", 1) != 1:
            raise _Unsupported("alpha != 1")
        a, b = args[0], args[1]
        tensors = [v for v in (a, b) if isinstance(v, Value)]
        if len(tensors) == 2:
            return op, [a, b], {}
        if isinstance(a, Value) and isinstance(b, (int, float)) and not isinstance(b, bool):
            return op, [a], {"scalar": float(b)}
        if isinstance(b, Value) and isinstance(a, (int, float)) and not isinstance(a, bool):
            return (
                op,
                [b],
                ({"scalar": float(a)} if commutative else {"scalar": float(a), "reverse": True}),
            )
        raise _Unsupported(f"operands {describe(a)}, {describe(b)}")

    return handle


def _unary(op: str) -> Handler:
    def handle(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
        if kwargs.get("inplace"):
            raise _Unsupported("in-place")
        return op, [args[0]], {}

    return handle


def _dim_last(kwargs: dict[str, Any], args: list[Any], position: int) -> int:
    dim = kwargs.get("dim", args[position] if len(args) > position else None)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if dim is None:
        raise _Unsupported("a reduction over all dims (only dim=-1 is supported)")
    return dim


def _reduce(op: str) -> Handler:
    def handle(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
        dim = _dim_last(kwargs, args, 1)
        keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
        return op, [args[0]], {"dim": dim, "keepdim": bool(keepdim)}

    return handle


def _softmax(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    if kwargs.get("dtype") is not None:
        raise _Unsupported("softmax with dtype=")
    return "softmax", [args[0]], {"dim": _dim_last(kwargs, args, 1)}


def _gelu(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    return "gelu", [args[0]], {"approximate": kwargs.get("approximate", "none")}


def _norm_params(args: list[Any], kwargs: dict[str, Any], names: Sequence[str]) -> list[Any]:
    params = []
    for i, name in enumerate(names, start=2):
        value = kwargs.get(name, args[i] if len(args) > i else None)
        params.append(value)
    while params and params[-1] is None:
        params.pop()
    if any(p is None for p in params):
        raise _Unsupported("a bias without a weight")
    return params


def _layer_norm(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    shape = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
    if len(shape) != 1:
        raise _Unsupported("normalized_shape over more than the last dim")
    params = _norm_params(args, kwargs, ("weight", "bias"))
    eps = kwargs.get("eps", args[4] if len(args) > 4 else 1e-5)
    return "layer_norm", [args[0], *params], {"eps": float(eps)}


def _rms_norm(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    shape = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
    if len(shape) != 1:
        raise _Unsupported("normalized_shape over more than the last dim")
    params = _norm_params(args, kwargs, ("weight",))
    eps = kwargs.get("eps", args[3] if len(args) > 3 else None)
    attrs = {} if eps is None else {"eps": float(eps)}
    return "rms_norm", [args[0], *params], attrs


def _linear(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    bias = kwargs.get("bias", args[2] if len(args) > 2 else None)
    return "linear", [args[0], args[1], *([bias] if bias is not None else [])], {}


def _clamp(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    low = kwargs.get("min", args[1] if len(args) > 1 else None)
    high = kwargs.get("max", args[2] if len(args) > 2 else None)
    if isinstance(low, Value) or isinstance(high, Value):
        raise _Unsupported("tensor bounds")
    attrs = {k: float(v) for k, v in (("min", low), ("max", high)) if v is not None}
    return "clamp", [args[0]], attrs


def _where(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    if len(args) != 3:
        raise _Unsupported("torch.where with one argument")
    cond, a, b = args
    if isinstance(b, (int, float)):
        return "where", [cond, a], {"other": _json_float(b)}
    if not isinstance(a, Value):
        raise _Unsupported("a scalar as the second argument")
    return "where", [cond, a, b], {}


def _json_float(value: float) -> Any:
    value = float(value)
    return str(value) if value != value or value in (float("inf"), float("-inf")) else value


def _cast_to(dtype: torch.dtype) -> Handler:
    def handle(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
        return "cast", [args[0]], {"dtype": dtype_name(dtype)}

    return handle


def _to(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
    if not isinstance(dtype, torch.dtype) or len(args) > 2:
        raise _Unsupported(".to() other than .to(dtype)")
    return "cast", [args[0]], {"dtype": dtype_name(dtype)}


def _shape_args(args: list[Any], start: int) -> list[Any]:
    rest = args[start:]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple, torch.Size)):
        rest = list(rest[0])
    if not all(isinstance(d, int) for d in rest):
        raise _Unsupported("a shape computed from tensor sizes")
    return list(rest)


def _reshape(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    return (
        "reshape",
        [args[0]],
        {"shape": _shape_args(args, 1) if len(args) > 1 else list(kwargs["shape"])},
    )


def _permute(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    return (
        "permute",
        [args[0]],
        {"dims": _shape_args(args, 1) if len(args) > 1 else list(kwargs["dims"])},
    )


def _transpose(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    return "transpose", [args[0]], {"dim0": args[1], "dim1": args[2]}


def _concat(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    tensors = list(args[0])
    return "concat", tensors, {"dim": kwargs.get("dim", args[1] if len(args) > 1 else 0)}


def _matmul(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    return "matmul", [args[0], args[1]], {}


_FUNCTIONS: dict[Any, Handler] = {
    py_operator.add: _scalar_binary("add", True),
    py_operator.sub: _scalar_binary("sub", False),
    py_operator.mul: _scalar_binary("mul", True),
    py_operator.truediv: _scalar_binary("div", False),
    py_operator.neg: _unary("neg"),
    py_operator.matmul: _matmul,
    torch.add: _scalar_binary("add", True),
    torch.sub: _scalar_binary("sub", False),
    torch.mul: _scalar_binary("mul", True),
    torch.div: _scalar_binary("div", False),
    torch.neg: _unary("neg"),
    torch.exp: _unary("exp"),
    torch.log: _unary("log"),
    torch.sqrt: _unary("sqrt"),
    torch.rsqrt: _unary("rsqrt"),
    torch.abs: _unary("abs"),
    torch.relu: _unary("relu"),
    F.relu: _unary("relu"),
    torch.sigmoid: _unary("sigmoid"),
    F.sigmoid: _unary("sigmoid"),
    torch.tanh: _unary("tanh"),
    F.tanh: _unary("tanh"),
    F.silu: _unary("silu"),
    F.gelu: _gelu,
    torch.clamp: _clamp,
    torch.where: _where,
    torch.sum: _reduce("sum"),
    torch.mean: _reduce("mean"),
    torch.amax: _reduce("amax"),
    torch.softmax: _softmax,
    F.softmax: _softmax,
    F.layer_norm: _layer_norm,
    F.linear: _linear,
    torch.matmul: _matmul,
    torch.reshape: _reshape,
    torch.permute: _permute,
    torch.transpose: _transpose,
    torch.cat: _concat,
    torch.concat: _concat,
}
if hasattr(F, "rms_norm"):
    _FUNCTIONS[F.rms_norm] = _rms_norm

_METHODS: dict[str, Handler] = {
    "add": _scalar_binary("add", True),
    "sub": _scalar_binary("sub", False),
    "mul": _scalar_binary("mul", True),
    "div": _scalar_binary("div", False),
    "neg": _unary("neg"),
    "exp": _unary("exp"),
    "log": _unary("log"),
    "sqrt": _unary("sqrt"),
    "rsqrt": _unary("rsqrt"),
    "abs": _unary("abs"),
    "relu": _unary("relu"),
    "sigmoid": _unary("sigmoid"),
    "tanh": _unary("tanh"),
    "clamp": _clamp,
    "sum": _reduce("sum"),
    "mean": _reduce("mean"),
    "amax": _reduce("amax"),
    "softmax": _softmax,
    "matmul": _matmul,
    "reshape": _reshape,
    "view": _reshape,
    "permute": _permute,
    "transpose": _transpose,
    "to": _to,
    "float": _cast_to(torch.float32),
    "half": _cast_to(torch.float16),
    "bfloat16": _cast_to(torch.bfloat16),
}


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    if node.op == "call_method":
        return f"Tensor.{target}"
    module = getattr(target, "__module__", None) or ""
    name = (
        getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    )
    if name.startswith("_VariableFunctionsClass."):
        return "torch." + name.split(".", 1)[1]
    module = {"_operator": "operator"}.get(module, module)
    return f"{module}.{name}" if module else str(name)


class _LocatingTracer(torch.fx.Tracer):
    """Records, for every node, the line of the traced function that created it."""

    def __init__(self, code: Any) -> None:
        super().__init__()
        self._code = code

    def create_node(self, *args: Any, **kwargs: Any) -> torch.fx.Node:
        node = super().create_node(*args, **kwargs)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not self._code:
            frame = frame.f_back
        if frame is not None:
            path = frame.f_code.co_filename
            code = linecache.getline(path, frame.f_lineno).strip()
            node.meta["warpforge_location"] = f"{path}:{frame.f_lineno}" + (
                f": {code}" if code else ""
            )
        return node


def _where_called(node: torch.fx.Node) -> str:
    return node.meta.get("warpforge_location", "an unknown source line")


@functools.lru_cache(maxsize=1024)
def _global_names(code: Any) -> tuple[str, ...]:
    """Names ``code`` and the code nested in it (lambdas, comprehensions) load, sorted."""
    out = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            out.update(_global_names(const))
    return tuple(sorted(out))


_BAKED_DEPTH = 3
"""How deep :func:`baked_values` follows the Python functions ``fn`` reads (helpers it calls)."""


def baked_values(fn: Callable[..., Any]) -> tuple[Any, ...]:
    """The values a trace of ``fn`` bakes into the graph as constants: the scalars (numbers,
    strings, None, dtypes and tuples of them) that ``fn`` and the Python functions it reads
    (to :data:`_BAKED_DEPTH`) take from globals, closures and defaults. Equal tuples mean a new
    trace would record the same constants; a cached trace is stale when they differ. (Tensors
    are not among them: a trace refuses tensor constants.)"""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def scalar(value: Any) -> bool:
        if isinstance(value, tuple):
            return all(scalar(v) for v in value)
        return value is None or isinstance(value, (bool, int, float, complex, str, torch.dtype))

    def visit(function: Any, depth: int) -> None:
        code = getattr(function, "__code__", None)
        if code is None or id(function) in seen or depth > _BAKED_DEPTH:
            return
        seen.add(id(function))
        where = f"{getattr(function, '__qualname__', '?')}."
        namespace = getattr(function, "__globals__", {})
        read = {name: namespace[name] for name in _global_names(code) if name in namespace}
        cells = zip(code.co_freevars, function.__closure__ or (), strict=True)
        for name, cell in cells:
            try:
                read[name] = cell.cell_contents
            except ValueError:  # an empty cell: nothing baked
                continue
        for i, value in enumerate(function.__defaults__ or ()):
            read[f"<default {i}>"] = value
        for name, value in (function.__kwdefaults__ or {}).items():
            read[f"<default {name}>"] = value
        for name, value in read.items():
            if scalar(value):
                found.append((where + name, value))
            elif inspect.isfunction(value):
                visit(value, depth + 1)

    visit(fn, 0)
    return tuple(found)


def trace(
    fn: Callable[..., Any],
    example_inputs: Sequence[torch.Tensor],
    *,
    name: str | None = None,
    registry: OperatorRegistry | None = None,
) -> BlueprintIR:
    """Trace ``fn`` (a function of tensors returning a tensor or a tuple of tensors)."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {describe(fn)}")
    if isinstance(fn, torch.nn.Module):
        raise TypeError("fn: expected a plain function; modules with parameters are not supported")
    if isinstance(example_inputs, torch.Tensor) or not isinstance(example_inputs, Sequence):
        raise TypeError(
            f"example_inputs: expected a sequence of tensors, got {describe(example_inputs)}"
        )
    for i, tensor in enumerate(example_inputs):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"example_inputs[{i}]: expected a torch.Tensor, got {describe(tensor)}")
    registry = registry or default_registry()
    fn_name = getattr(fn, "__name__", "function")
    tracer = _LocatingTracer(getattr(fn, "__code__", None))
    try:
        graph = tracer.trace(fn)
    except Exception as error:  # fx raises many kinds (TraceError, TypeError on control flow)
        raise UnsupportedOperationError(
            fn_name, [f"torch.fx could not trace the function: {type(error).__name__}: {error}"]
        ) from error
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise TypeError(
            f"example_inputs: {fn_name} takes {len(placeholders)} tensor argument(s), "
            f"got {len(example_inputs)}"
        )
    builder = BlueprintBuilder(name or fn_name.strip("<>") or "traced")
    env: dict[torch.fx.Node, Any] = {}
    schemas: dict[str, TensorSchema] = {}
    problems: list[str] = []
    for node, tensor in zip(placeholders, example_inputs, strict=True):
        value = builder.input(node.name, tuple(tensor.shape), dtype_name(tensor.dtype))
        env[node] = value
        schemas[value.name] = TensorSchema(tuple(tensor.shape), dtype_name(tensor.dtype))
    outputs: Any = None

    def load(arg: Any) -> Any:
        return torch.fx.node.map_arg(arg, lambda n: env.get(n, _MISSING))

    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            outputs = load(node.args[0])
            continue
        where = f"node {node.name!r} ({_target_name(node)}) at {_where_called(node)}"
        static = _static_value(node, load(list(node.args)), schemas)
        if static is not _MISSING:
            env[node] = static  # sizes read from the example shapes
            continue
        args, kwargs = load(list(node.args)), load(dict(node.kwargs))
        missing_input = _contains_missing(args) or _contains_missing(kwargs)
        if node.op == "call_function":
            handler = _FUNCTIONS.get(node.target)
        elif node.op == "call_method":
            handler = _METHODS.get(node.target)
        else:
            handler = None
        if handler is None and not (
            missing_input and node.target in (getattr, py_operator.getitem)
        ):
            # Reported even when its inputs are unsupported too: the user sees every op at once.
            problems.append(f"{where}: no blueprint operator for {_target_name(node)}")
        if handler is None or missing_input:
            env[node] = _MISSING
            continue
        try:
            op, inputs, attrs = handler(args, kwargs)
            if not all(isinstance(v, Value) for v in inputs):
                raise _Unsupported("non-tensor operands")
            if op == "rms_norm" and "eps" not in attrs:
                # F.rms_norm's default eps is the machine epsilon of the input's dtype
                attrs["eps"] = torch.finfo(getattr(torch, schemas[inputs[0].name].dtype)).eps
            spec = registry.get(op)
            schema = spec.infer_schema([schemas[v.name] for v in inputs], attrs)
        except _Unsupported as reason:
            problems.append(f"{where}: {_target_name(node)} with {reason} is not supported")
            env[node] = _MISSING
            continue
        except (TypeError, ValueError) as error:
            problems.append(f"{where}: {error}")
            env[node] = _MISSING
            continue
        value = builder.op(op, *inputs, name=_unique(builder, node.name), **attrs)
        schemas[value.name] = schema
        env[node] = value
    if problems:
        raise UnsupportedOperationError(f"{fn_name}{_signature_text(fn)}", problems)
    results = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for index, value in enumerate(results):
        if not isinstance(value, Value):
            raise UnsupportedOperationError(
                fn_name,
                [f"output {index} is {describe(value)}, not a tensor computed from the inputs"],
            )
        builder.output("out" if len(results) == 1 else f"out{index}", value)
    return builder.build()


def _static_value(node: torch.fx.Node, args: list[Any], schemas: Mapping[str, TensorSchema]) -> Any:
    """``x.shape``, ``x.size(d)``, ``x.dim()`` and indexing into them: Python values, not ops."""
    target = node.target
    if (
        node.op == "call_function"
        and target is getattr
        and isinstance(args[0], Value)
        and args[1] in ("shape", "ndim")
    ):
        shape = torch.Size(schemas[args[0].name].shape)
        return shape if args[1] == "shape" else len(shape)
    if (
        node.op == "call_function"
        and target is py_operator.getitem
        and isinstance(args[0], (tuple, list, torch.Size))
    ):
        return args[0][args[1]]
    if node.op == "call_method" and target in ("size", "dim") and isinstance(args[0], Value):
        shape = torch.Size(schemas[args[0].name].shape)
        if target == "dim":
            return len(shape)
        return shape if len(args) == 1 else shape[args[1]]
    return _MISSING


class _MissingType:
    def __repr__(self) -> str:
        return "<unsupported>"


_MISSING = _MissingType()


def _contains_missing(value: Any) -> bool:
    if value is _MISSING:
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_missing(v) for v in value)
    if isinstance(value, Mapping):
        return any(_contains_missing(v) for v in value.values())
    return False


def _unique(builder: BlueprintBuilder, name: str) -> str:
    used = builder._used
    candidate, index = name, 0
    while candidate in used:
        index += 1
        candidate = f"{name}_{index}"
    return candidate


def _signature_text(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return ""
