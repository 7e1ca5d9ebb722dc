"""Every operator's generated Triton code against a float64 PyTorch reference."""

from __future__ import annotations

import pytest
import torch

import warpforge
from warpforge.blueprint import BlueprintBuilder, OperatorRegistry, default_registry, operator
from warpforge.blueprint.registry import OperatorSpec, infer_broadcast

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3)}

# op -> (attrs, input maker(dtype) -> tensors, positive inputs?)
UNARY_OPS = {
    "neg": {},
    "exp": {},
    "log": {},
    "sqrt": {},
    "rsqrt": {},
    "abs": {},
    "relu": {},
    "silu": {},
    "sigmoid": {},
    "tanh": {},
    "gelu": {"approximate": "none"},
    "clamp": {"min": -0.5, "max": 0.75},
}
POSITIVE = {"log", "sqrt", "rsqrt"}


@pytest.fixture
def check(reference64, device):  # type: ignore[no-untyped-def]
    def run(ir, inputs: list[torch.Tensor], dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def]
        inputs = [t.to(device) for t in inputs]  # kernels run where the tier runs them
        got = warpforge.compile(ir, strict=True)(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        atol, rtol = TOL[dtype]
        for g, w in zip(got, reference64(ir, inputs), strict=True):
            torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol, equal_nan=True)

    return run


def _rand(shape, dtype, positive=False) -> torch.Tensor:
    x = torch.randn(shape, dtype=torch.float32) * 2
    if positive:
        x = x.abs() + 0.1
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("op", sorted(UNARY_OPS))
def test_unary_op_matches_reference(op: str, dtype: torch.dtype, check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder(f"unary_{op}")
    x = b.input("x", (5, 13), str(dtype).removeprefix("torch."))
    b.output("y", b.op(op, x, **UNARY_OPS[op]))
    check(b.build(), [_rand((5, 13), dtype, op in POSITIVE)], dtype)


@pytest.mark.parametrize("source,target", [("float32", "float16"), ("float16", "float32")])
def test_cast_rounds_exactly_like_torch(source: str, target: str) -> None:
    b = BlueprintBuilder("cast")
    x = b.input("x", (6, 10), source)
    y = b.op("cast", x, dtype=target)
    b.output("y", y)
    b.output("z", b.op("mul", y, scalar=3.0))  # computes on the rounded value
    value = _rand((6, 10), getattr(torch, source))
    got_y, got_z = warpforge.compile(b.build(), strict=True)(value)
    want_y = value.to(getattr(torch, target))
    assert got_y.dtype == want_y.dtype
    assert torch.equal(got_y, want_y)
    torch.testing.assert_close(got_z, want_y * 3.0)


def test_gelu_tanh_matches_reference(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("gelu_tanh")
    x = b.input("x", (3, 17), "float32")
    b.output("y", b.op("gelu", x, approximate="tanh"))
    check(b.build(), [_rand((3, 17), torch.float32)], torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_ops_with_broadcast_and_scalars(op: str, dtype: torch.dtype, check) -> None:  # type: ignore[no-untyped-def]
    name = str(dtype).removeprefix("torch.")
    b = BlueprintBuilder(f"binary_{op}")
    x = b.input("x", (2, 3, 11), name)
    y = b.input("y", (3, 1), name)
    z = b.op(op, x, y)
    z = b.op(op, z, scalar=1.5)
    b.output("z", b.op(op, z, scalar=0.75, reverse=True))
    y_val = _rand((3, 1), dtype, positive=True)
    check(b.build(), [_rand((2, 3, 11), dtype, positive=op == "div"), y_val], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_where_with_tensor_and_scalar_branches(dtype: torch.dtype, check) -> None:  # type: ignore[no-untyped-def]
    name = str(dtype).removeprefix("torch.")
    b = BlueprintBuilder("where")
    c = b.input("c", (4, 9), "bool")
    x = b.input("x", (4, 9), name)
    y = b.input("y", (9,), name)
    b.output("a", b.op("where", c, x, y))
    b.output("b", b.op("where", c, x, other=-2.5))
    cond = torch.rand(4, 9) > 0.5
    check(b.build(), [cond, _rand((4, 9), dtype), _rand((9,), dtype)], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(
    "op,attrs,params",
    [
        ("sum", {"keepdim": True}, 0),
        ("sum", {}, 0),
        ("mean", {"keepdim": True}, 0),
        ("amax", {"keepdim": False}, 0),
        ("softmax", {}, 0),
        ("layer_norm", {"eps": 1e-5}, 0),
        ("layer_norm", {"eps": 1e-5}, 2),
        ("rms_norm", {"eps": 1e-6}, 1),
        ("rms_norm", {"eps": 1e-6}, 0),
    ],
)
def test_row_ops_match_reference(
    op: str, attrs: dict, params: int, dtype: torch.dtype, check
) -> None:  # type: ignore[no-untyped-def]
    name = str(dtype).removeprefix("torch.")
    b = BlueprintBuilder(f"row_{op}")
    x = b.input("x", (3, 5, 37), name)  # 37: a ragged row (block of 64, 27 masked columns)
    extra = [b.input(f"p{i}", (37,), name) for i in range(params)]
    b.output("y", b.op(op, x, *extra, **attrs))
    inputs = [_rand((3, 5, 37), dtype)] + [_rand((37,), dtype) for _ in range(params)]
    check(b.build(), inputs, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_and_linear_with_epilogue(dtype: torch.dtype) -> None:
    name = str(dtype).removeprefix("torch.")
    b = BlueprintBuilder("mm")
    x = b.input("x", (2, 19, 24), name)
    w = b.input("w", (24, 21), name)
    wl = b.input("wl", (17, 24), name)
    bias = b.input("bias", (17,), name)
    b.output("a", b.op("relu", b.op("matmul", x, w)))
    b.output("c", b.op("silu", b.op("linear", x, wl, bias)))
    inputs = [
        _rand((2, 19, 24), dtype) / 4,
        _rand((24, 21), dtype) / 4,
        _rand((17, 24), dtype) / 4,
        _rand((17,), dtype),
    ]
    b_ir = b.build()
    compiled = warpforge.compile(b_ir, strict=True)
    assert [g.kind for g in compiled.plan.groups] == ["matmul", "matmul"]
    tol = TOL[dtype] if dtype == torch.float32 else (1e-2, 1e-2)
    got = compiled(*inputs)
    want = (
        torch.relu(inputs[0].double() @ inputs[1].double()),
        torch.nn.functional.silu(
            torch.nn.functional.linear(*(t.double() for t in inputs[:1] + inputs[2:]))
        ),
    )
    for g, w_ in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w_, atol=tol[0], rtol=tol[1])


@pytest.mark.parametrize(
    "op,attrs,shape,expected",
    [
        ("reshape", {"shape": [6, -1]}, (2, 3, 4), (6, 4)),
        ("permute", {"dims": [2, 0, 1]}, (2, 3, 4), (4, 2, 3)),
        ("transpose", {"dim0": 0, "dim1": -1}, (2, 3, 4), (4, 3, 2)),
    ],
)
def test_layout_ops_feed_kernels(
    op: str, attrs: dict, shape: tuple, expected: tuple, check
) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder(f"layout_{op}")
    x = b.input("x", shape, "float32")
    moved = b.op(op, b.op("exp", x), **attrs)
    b.output("y", b.op("mul", moved, scalar=2.0))
    ir = b.build()
    assert ir.infer()[ir.outputs[0][1]].shape == expected
    check(ir, [_rand(shape, torch.float32)], torch.float32)


def test_concat(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("cat")
    x = b.input("x", (2, 3), "float32")
    y = b.input("y", (2, 5), "float32")
    b.output("z", b.op("tanh", b.op("concat", x, y, dim=1)))
    check(b.build(), [_rand((2, 3), torch.float32), _rand((2, 5), torch.float32)], torch.float32)


def test_user_operator_via_decorator() -> None:
    registry = OperatorRegistry()
    for name in default_registry().names():
        registry.register(default_registry().get(name))

    @operator(
        "softplus",
        kind="pointwise",
        triton=lambda args, attrs: f"tl.log(1.0 + tl.exp({args[0]}))",
        registry=registry,
    )
    def softplus(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x)

    assert registry.get("softplus").reference is softplus
    with pytest.raises(ValueError, match="'softplus' is already registered"):
        registry.register(registry.get("softplus"))
    from warpforge.blueprint.compiler import CompiledBlueprint

    b = BlueprintBuilder("custom")
    x = b.input("x", (4, 6), "float32")
    b.output("y", b.op("softplus", x))
    with pytest.raises(ValueError, match="unknown operator 'softplus'"):
        b.build()  # not in the default registry
    ir = b.build(registry)
    compiled = CompiledBlueprint(ir, strict=True, registry=registry)
    assert "tl.log(1.0 + tl.exp(" in compiled.source()
    value = _rand((4, 6), torch.float32)
    torch.testing.assert_close(compiled(value), torch.nn.functional.softplus(value))


def test_registry_rejects_bad_specs() -> None:
    registry = OperatorRegistry()
    with pytest.raises(ValueError, match="needs triton code"):
        registry.register(OperatorSpec("x", "pointwise", infer_broadcast, torch.neg))
    with pytest.raises(ValueError, match="kind: expected one of"):
        registry.register(OperatorSpec("x", "weird", infer_broadcast, torch.neg))
    with pytest.raises(ValueError, match="need an infer function"):
        operator("y", kind="row")
    with pytest.raises(ValueError, match="unknown operator 'nope'"):
        registry.get("nope")


@pytest.mark.parametrize(
    ("op", "attrs", "unknown", "allowed"),
    [
        ("gelu", {"approximat": "tanh"}, "'approximat'", "'approximate'"),
        ("softmax", {"axis": -1}, "'axis'", "'dim'"),
        ("exp", {"scalar": 2.0}, "'scalar'", "no attributes"),
        ("add", {"scalar": 1.0, "revers": True}, "'revers'", "'scalar', 'reverse'"),
    ],
)
def test_unknown_attributes_of_built_in_operators_are_rejected(
    op: str, attrs: dict, unknown: str, allowed: str
) -> None:
    b = BlueprintBuilder("typo")
    x = b.input("x", ("B", 8), "float32")
    b.output("y", b.op(op, x, name="node_with_typo", **attrs))
    with pytest.raises(ValueError) as caught:
        b.build()
    message = str(caught.value)
    assert "node 'node_with_typo'" in message
    assert f"unknown attribute(s) {unknown} for operator '{op}'" in message
    assert f"expected: {allowed}" in message


def test_every_built_in_operator_lists_its_attributes() -> None:
    registry = default_registry()
    unchecked = [n for n in registry.names() if registry.get(n).attr_names is None]
    assert unchecked == []
