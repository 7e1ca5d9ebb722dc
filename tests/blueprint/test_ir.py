"""The IR: validation, topological order, inference errors, canonical hashing, JSON round trips."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from warpforge.blueprint import (
    BlueprintBuilder,
    BlueprintCycleError,
    BlueprintError,
    BlueprintIR,
    IRNode,
    OperatorRegistry,
    TensorSchema,
    default_registry,
)
from warpforge.blueprint.registry import broadcast_shapes

UNARY = ("exp", "neg", "sigmoid", "tanh", "abs")
BINARY = ("add", "sub", "mul", "div")


# ------------------------------------------------------------------------------- validation
def test_tensor_schema_validates_shape_and_dtype() -> None:
    assert TensorSchema(["B", 4], "float16").shape == ("B", 4)
    with pytest.raises(ValueError, match=r"shape\[1\]: expected a size >= 0, got -2"):
        TensorSchema((3, -2), "float32")
    with pytest.raises(ValueError, match=r"shape\[0\]: expected a dim name like 'B', got '2x'"):
        TensorSchema(("2x",), "float32")
    with pytest.raises(TypeError, match=r"shape\[0\]: expected an int or a dim name, got float"):
        TensorSchema((1.5,), "float32")
    with pytest.raises(ValueError, match=r"dtype: expected one of .* got 'float8'"):
        TensorSchema((1,), "float8")
    with pytest.raises(TypeError, match="shape: expected a tuple"):
        TensorSchema("B", "float32")  # type: ignore[arg-type]


def test_node_attrs_must_be_json() -> None:
    with pytest.raises(TypeError, match="node 'n0': attrs must be JSON values"):
        IRNode("n0", "add", ("x",), {"scalar": object()})
    with pytest.raises(TypeError, match="node 'n0': attrs must be JSON values"):
        IRNode("n0", "add", ("x",), {"scalar": float("nan")})
    node = IRNode("n0", "reshape", ("x",), {"shape": (2, 3)})
    assert node.attrs == {"shape": [2, 3]}  # tuples become lists, so equal attrs compare equal


def test_graph_validation_names_the_problem() -> None:
    x = ("x", TensorSchema((4,), "float32"))
    with pytest.raises(BlueprintError, match="node 'n1': input 'y' is not a known value"):
        BlueprintIR("g", [x], [IRNode("n1", "exp", ("y",))], [("out", "n1")])
    with pytest.raises(BlueprintError, match="node 'x': the name is already used"):
        BlueprintIR("g", [x], [IRNode("x", "exp", ("x",))], [("out", "x")])
    with pytest.raises(BlueprintError, match="output 'out': value 'zz' is not a known value"):
        BlueprintIR("g", [x], [], [("out", "zz")])
    with pytest.raises(BlueprintError, match="expected at least one output"):
        BlueprintIR("g", [x], [], [])
    with pytest.raises(ValueError, match="input name: expected an identifier"):
        BlueprintIR("g", [("x y", TensorSchema((4,), "float32"))], [], [("o", "x y")])


def test_unknown_operator_is_named() -> None:
    b = BlueprintBuilder("g")
    x = b.input("x", (4,), "float32")
    b.output("y", b.op("frobnicate", x, name="f"))
    with pytest.raises(ValueError, match="node 'f': unknown operator 'frobnicate'"):
        b.build()


def test_cycle_error_names_the_nodes_on_the_cycle() -> None:
    x = ("x", TensorSchema((4,), "float32"))
    nodes = [
        IRNode("a", "add", ("x", "c")),
        IRNode("b", "exp", ("a",)),
        IRNode("c", "neg", ("b",)),
        IRNode("d", "exp", ("x",)),
    ]
    ir = BlueprintIR("cyclic", [x], nodes, [("out", "d")])
    with pytest.raises(BlueprintCycleError) as info:
        ir.topological_order()
    assert set(info.value.nodes) == {"a", "b", "c"}
    for name in ("'a'", "'b'", "'c'"):
        assert name in str(info.value)
    assert "'d'" not in str(info.value)


def test_topological_order_respects_dependencies_and_insertion_order() -> None:
    x = ("x", TensorSchema((4,), "float32"))
    nodes = [
        IRNode("late", "add", ("early", "other")),
        IRNode("other", "neg", ("x",)),
        IRNode("early", "exp", ("x",)),
    ]
    order = [n.name for n in BlueprintIR("g", [x], nodes, [("o", "late")]).topological_order()]
    assert order == ["other", "early", "late"]


def test_infer_broadcasts_and_promotes() -> None:
    b = BlueprintBuilder("g")
    x = b.input("x", ("B", 1, 8), "float16")
    y = b.input("y", (5, 8), "float32")
    s = b.op("add", x, y, name="s")
    m = b.op("mean", s, keepdim=True, name="m")
    r = b.op("sum", s, name="r")
    b.output("m", m)
    b.output("r", r)
    schemas = b.build().infer()
    assert schemas["s"] == TensorSchema(("B", 5, 8), "float32")
    assert schemas["m"] == TensorSchema(("B", 5, 1), "float32")
    assert schemas["r"] == TensorSchema(("B", 5), "float32")


def test_infer_error_names_the_node_and_its_inputs() -> None:
    b = BlueprintBuilder("g")
    x = b.input("x", ("B", 4), "float32")
    y = b.input("y", ("B", 5), "float32")
    b.output("z", b.op("mul", x, y, name="bad_mul"))
    with pytest.raises(
        BlueprintError, match=r"node 'bad_mul' \(op 'mul'.*x: float32\[B, 4\].*do not broadcast"
    ):
        b.build()
    b = BlueprintBuilder("g")
    x = b.input("x", (3, 4), "float32")
    w = b.input("w", (5, 6), "float32")
    b.output("z", b.op("matmul", x, w, name="mm"))
    with pytest.raises(BlueprintError, match=r"node 'mm'.*inner dims differ: 4 vs 5"):
        b.build()
    b = BlueprintBuilder("g")
    x = b.input("x", (3, 4), "float32")
    b.output("z", b.op("softmax", x, dim=0, name="sm"))
    with pytest.raises(BlueprintError, match=r"node 'sm'.*only the last dimension"):
        b.build()


def test_symbolic_dims_only_broadcast_with_themselves_or_one() -> None:
    b = BlueprintBuilder("g")
    x = b.input("x", ("B", 4), "float32")
    y = b.input("y", ("T", 4), "float32")
    b.output("z", b.op("add", x, y, name="z"))
    with pytest.raises(BlueprintError, match=r"node 'z'.*'B' in one and 'T' in another"):
        b.build()


def test_json_round_trip_is_exact_and_versioned() -> None:
    b = BlueprintBuilder("rt", version="3")
    x = b.input("x", ("B", 7), "float16")
    c = b.input("c", ("B", 7), "bool")
    y = b.op("where", c, b.op("gelu", x, approximate="tanh"), other="-inf")
    b.output("y", b.op("clamp", y, min=-1.5, max=2))
    ir = b.build()
    text = ir.to_json()
    again = BlueprintIR.from_json(text)
    assert again == ir
    assert again.to_json() == text
    assert again.canonical_hash() == ir.canonical_hash()
    assert json.loads(text)["schema_version"] == 1
    data = json.loads(text)
    data["schema_version"] = 99
    with pytest.raises(BlueprintError, match="schema_version 99 is not supported"):
        BlueprintIR.from_json(json.dumps(data))
    with pytest.raises(BlueprintError, match="not valid JSON"):
        BlueprintIR.from_json("{")


def _bias_gelu_json() -> dict:
    b = BlueprintBuilder("bg")
    x = b.input("x", ("B", 8), "float32")
    bias = b.input("bias", (8,), "float32")
    b.output("y", b.op("gelu", b.op("add", x, bias), approximate="tanh"))
    return json.loads(b.build().to_json())


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.update(schema_version=True), "schema_version True is not supported"),
        (lambda d: d.update(schema_version=1.0), "schema_version 1.0 is not supported"),
        (
            lambda d: d["inputs"][1].update(extra=1),
            r"inputs\[1\]: malformed entry: expected exactly the keys \['dtype', 'name', 'shape'\]",
        ),
        (
            lambda d: d["inputs"][1].update(shape="AB"),
            r"inputs\[1\]: malformed entry: shape: expected a list, got str 'AB'",
        ),
        (
            lambda d: d["inputs"][0].update(dtype="float8"),
            r"inputs\[0\]: malformed entry: dtype: expected one of",
        ),
        (
            lambda d: d["nodes"][1].pop("attrs"),
            r"nodes\[1\]: malformed entry: expected exactly the keys",
        ),
        (lambda d: d["nodes"][0].update(inputs="x"), r"nodes\[0\]: malformed entry: inputs"),
        (
            lambda d: d["outputs"].append(3),
            r"outputs\[1\]: malformed entry: expected an object",
        ),
        (lambda d: d.update(nodes={}), "nodes: expected a list, got dict"),
    ],
)
def test_from_json_rejects_malformed_entries_naming_them(damage, message) -> None:  # type: ignore[no-untyped-def]
    data = _bias_gelu_json()
    BlueprintIR.from_json(json.dumps(data))  # intact: accepted
    damage(data)
    with pytest.raises(BlueprintError, match=message):
        BlueprintIR.from_json(json.dumps(data))


# ------------------------------------------------------------------------------- hashing
SCALARS = (0.5, 2.0, -3.0, 1e-3)
CLAMP_BOUNDS = (-2.0, -0.5, 0.0, 1.0, 3.0)
INPUT_DTYPES = ("float32", "float16")
CAST_DTYPES = ("float16", "bfloat16", "float32", "float64")
INPUT_SHAPES = ((4, 8), (1, 8), (8,), ("B", 8))
# (2, 8) only as a mutation: it broadcasts with neither (4, 8) nor ("B", 8)
MUTATED_SHAPES = (*INPUT_SHAPES, (2, 8))
FAMILIES = {
    "unary": UNARY,
    "binary": BINARY,
    "attributed": ("clamp", "gelu", "cast"),
    "reduction": ("sum", "mean", "amax"),
}
FAMILY_OF = {op: family for family, ops in FAMILIES.items() for op in ops}
# Attributes an op mutated into another family member gets (clamp's min/max mean nothing to gelu).
FRESH_ATTRS: dict[str, dict] = {
    "clamp": {"min": 0.0},
    "gelu": {"approximate": "tanh"},
    "cast": {"dtype": "float32"},
}
MUTATION_KINDS = ("op", "attr", "edge", "dtype", "shape")


@dataclasses.dataclass
class RandomGraph:
    """A random DAG of pointwise ops and row reductions, kept as a recipe so it can be renamed,
    reordered and mutated."""

    n_inputs: int
    nodes: list[tuple[str, list[int], dict]]  # (op, input value indices, attrs); value i
    outputs: list[int]
    dtypes: list[str]
    shapes: list[tuple]

    def build(self, names: list[str] | None = None, order: list[int] | None = None) -> BlueprintIR:
        total = self.n_inputs + len(self.nodes)
        names = names or [f"v{i}" for i in range(total)]
        order = order if order is not None else list(range(len(self.nodes)))
        inputs = [
            (names[i], TensorSchema(self.shapes[i], self.dtypes[i])) for i in range(self.n_inputs)
        ]
        nodes = []
        for index in order:
            op, args, attrs = self.nodes[index]
            nodes.append(
                IRNode(names[self.n_inputs + index], op, tuple(names[a] for a in args), attrs)
            )
        outputs = [(f"out_{names[v]}", names[v]) for v in self.outputs]
        return BlueprintIR("random", inputs, nodes, outputs)

    def structure(self) -> tuple:
        """Test oracle: every node as an expression tree over input positions (no names)."""
        memo: dict[int, str] = {}

        def expr(v: int) -> str:
            if v < self.n_inputs:
                return f"in{v}:{self.dtypes[v]}{list(self.shapes[v])}"
            if v not in memo:
                op, args, attrs = self.nodes[v - self.n_inputs]
                memo[v] = (
                    f"{op}{json.dumps(attrs, sort_keys=True)}({','.join(expr(a) for a in args)})"
                )
            return memo[v]

        nodes = sorted(expr(self.n_inputs + i) for i in range(len(self.nodes)))
        inputs = tuple(expr(v) for v in range(self.n_inputs))  # read by a node or not
        return tuple(nodes), tuple(expr(v) for v in self.outputs), inputs


def _broadcasts(a: TensorSchema, b: TensorSchema) -> bool:
    try:
        broadcast_shapes([a.shape, b.shape])
    except ValueError:
        return False
    return True


@st.composite
def _random_node(draw: st.DrawFn, schemas: list[TensorSchema]) -> tuple[str, list[int], dict]:
    """One node over the values so far, with operands and attributes it accepts: every draw is
    a valid graph, so no example is thrown away (or passes without checking anything)."""
    family = draw(st.sampled_from(("binary", "scalar", "unary", "attributed", "reduction")))
    # a 0-d value (a 1-d one reduced) has no last dimension left to reduce
    operands = [v for v, s in enumerate(schemas) if family != "reduction" or s.rank > 0]
    first = draw(st.sampled_from(operands))
    if family == "binary":
        partners = [v for v, s in enumerate(schemas) if _broadcasts(schemas[first], s)]
        return draw(st.sampled_from(BINARY)), [first, draw(st.sampled_from(partners))], {}
    if family == "scalar":
        attrs = {"scalar": draw(st.sampled_from(SCALARS))}
        if draw(st.booleans()):
            attrs["reverse"] = True  # scalar op tensor
        return draw(st.sampled_from(BINARY)), [first], attrs
    if family == "unary":
        return draw(st.sampled_from(UNARY)), [first], {}
    if family == "reduction":
        keepdim = draw(st.sampled_from([{}, {"keepdim": False}, {"keepdim": True}]))
        return draw(st.sampled_from(FAMILIES["reduction"])), [first], keepdim
    op = draw(st.sampled_from(FAMILIES["attributed"]))
    if op == "clamp":
        bounds = draw(st.sampled_from([("min",), ("max",), ("min", "max")]))
        return op, [first], {bound: draw(st.sampled_from(CLAMP_BOUNDS)) for bound in bounds}
    if op == "gelu":
        return op, [first], {"approximate": draw(st.sampled_from(("none", "tanh")))}
    return op, [first], {"dtype": draw(st.sampled_from(CAST_DTYPES))}


@st.composite
def random_graphs(draw: st.DrawFn) -> RandomGraph:
    n_inputs = draw(st.integers(1, 3))
    dtypes = [draw(st.sampled_from(INPUT_DTYPES)) for _ in range(n_inputs)]
    shapes = [draw(st.sampled_from(INPUT_SHAPES)) for _ in range(n_inputs)]
    schemas = [TensorSchema(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    nodes = []
    for _ in range(draw(st.integers(1, 8))):
        op, args, attrs = draw(_random_node(schemas))
        # inferred as we go, so later nodes only pair operands that broadcast
        spec = default_registry().get(op)
        schemas.append(spec.infer_schema([schemas[a] for a in args], attrs))
        nodes.append((op, args, attrs))
    # a prefix of a permutation: distinct outputs without the duplicate draws that a unique
    # list rejects (hypothesis counts those as invalid examples)
    order = draw(st.permutations(range(n_inputs, n_inputs + len(nodes))))
    outputs = order[: draw(st.integers(1, min(3, len(nodes))))]
    return RandomGraph(n_inputs, nodes, outputs, dtypes, shapes)


def _random_topological_order(graph: RandomGraph, rng: random.Random) -> list[int]:
    deps = {
        i: {a - graph.n_inputs for a in args if a >= graph.n_inputs}
        for i, (_, args, _) in enumerate(graph.nodes)
    }
    done: list[int] = []
    while len(done) < len(deps):
        ready = [i for i in deps if i not in done and deps[i] <= set(done)]
        done.append(rng.choice(ready))
    return done


def _valid(graph: RandomGraph) -> bool:
    try:
        graph.build().infer()
    except BlueprintError:
        return False
    return True


@settings(max_examples=60, deadline=None)
@given(random_graphs(), st.randoms(use_true_random=False))
def test_hash_ignores_names_and_independent_insertion_order(
    graph: RandomGraph, rng: random.Random
) -> None:
    graph.build().infer()  # the strategy draws valid graphs only; an invalid one fails here
    total = graph.n_inputs + len(graph.nodes)
    renamed = [f"n{rng.randrange(10**9)}_{i}" for i in range(total)]
    rng.shuffle(renamed)
    base = graph.build()
    other = graph.build(names=renamed, order=_random_topological_order(graph, rng))
    assert other.canonical_hash() == base.canonical_hash()
    # topological_order of the reordered graph is a valid order (every input is ready)
    seen = set(other.input_names)
    for node in other.topological_order():
        assert set(node.inputs) <= seen
        seen.add(node.name)


def _changed_attrs(op: str, attrs: dict) -> list[dict]:
    """Every single change of one attribute's value that ``op`` still accepts."""
    if FAMILY_OF[op] == "binary" and "scalar" in attrs:
        return [
            {**attrs, "scalar": attrs["scalar"] + 0.25},
            {**attrs, "reverse": not attrs.get("reverse", False)},
        ]
    if op == "clamp":
        return [{**attrs, bound: attrs[bound] + 0.5} for bound in ("min", "max") if bound in attrs]
    if op == "gelu":
        return [{"approximate": "tanh" if attrs["approximate"] == "none" else "none"}]
    if op == "cast":
        return [{"dtype": dtype} for dtype in CAST_DTYPES if dtype != attrs["dtype"]]
    if FAMILY_OF[op] == "reduction":  # also changes the shape, which consumers may reject
        return [{"keepdim": not attrs.get("keepdim", False)}]
    return []  # unary ops and two-tensor binary ops take no attributes


def _mutations(graph: RandomGraph, kind: str) -> list[RandomGraph]:
    """Every graph one change of ``kind`` away from ``graph``, valid or not."""

    def with_node(index: int, op: str, args: list[int], attrs: dict) -> RandomGraph:
        nodes = list(graph.nodes)
        nodes[index] = (op, args, attrs)
        return dataclasses.replace(graph, nodes=nodes)

    def with_input(index: int, dtype: str, shape: tuple) -> RandomGraph:
        dtypes, shapes = list(graph.dtypes), list(graph.shapes)
        dtypes[index], shapes[index] = dtype, shape
        return dataclasses.replace(graph, dtypes=dtypes, shapes=shapes)

    found = []
    for i in range(graph.n_inputs):
        dtype, shape = graph.dtypes[i], graph.shapes[i]
        if kind == "dtype":
            found += [with_input(i, d, shape) for d in INPUT_DTYPES if d != dtype]
        elif kind == "shape":
            found += [with_input(i, dtype, s) for s in MUTATED_SHAPES if s != shape]
    for index, (op, args, attrs) in enumerate(graph.nodes):
        if kind == "op":
            family = FAMILY_OF[op]
            for other in FAMILIES[family]:
                if other != op:
                    fresh = FRESH_ATTRS[other] if family == "attributed" else attrs
                    found.append(with_node(index, other, args, dict(fresh)))
        elif kind == "attr":
            found += [with_node(index, op, args, new) for new in _changed_attrs(op, attrs)]
        elif kind == "edge":
            for slot, current in enumerate(args):
                for value in range(graph.n_inputs + index):
                    if value != current:
                        rewired = [*args[:slot], value, *args[slot + 1 :]]
                        found.append(with_node(index, op, rewired, attrs))
    return found


def _mutate(graph: RandomGraph, rng: random.Random) -> tuple[str, RandomGraph]:
    """A random single change that keeps the graph valid, and its kind. Kinds are tried in a
    random order and the first with a valid change wins, so a kind comes up about as often as
    any other the graph allows (not in proportion to how many edges the graph has)."""
    kinds = list(MUTATION_KINDS)
    rng.shuffle(kinds)
    for kind in kinds:
        candidates = _mutations(graph, kind)
        rng.shuffle(candidates)
        for mutated in candidates:
            if _valid(mutated):
                return kind, mutated
    raise AssertionError("no valid mutation: flipping an input's float dtype always is one")


@settings(max_examples=80, deadline=None)
@given(random_graphs(), st.randoms(use_true_random=False))
def test_hash_changes_with_every_structural_change(graph: RandomGraph, rng: random.Random) -> None:
    graph.build().infer()  # the strategy draws valid graphs only; an invalid one fails here
    kind, mutated = _mutate(graph, rng)
    event(f"mutation: {kind}")
    same_structure = mutated.structure() == graph.structure()
    if kind != "edge":  # rewiring to an equal expression is the only change that is no change
        assert not same_structure
    assert (mutated.build().canonical_hash() == graph.build().canonical_hash()) == same_structure


@pytest.mark.parametrize(
    ("op", "attrs", "changed"),
    [
        ("clamp", {"min": -1.0, "max": 1.0}, {"min": -1.0, "max": 1.5}),
        ("gelu", {"approximate": "none"}, {"approximate": "tanh"}),
        ("cast", {"dtype": "float16"}, {"dtype": "bfloat16"}),
        ("amax", {"keepdim": False}, {"keepdim": True}),
        ("mul", {"scalar": 2.0}, {"scalar": 2.25}),
        ("sub", {"scalar": 2.0, "reverse": False}, {"scalar": 2.0, "reverse": True}),
    ],
)
def test_hash_changes_with_each_attribute_value(op: str, attrs: dict, changed: dict) -> None:
    """Every attribute kind the random graphs draw, changed deterministically (the property
    test above reaches some of them only a few times per run)."""

    def graph(node_attrs: dict) -> BlueprintIR:
        b = BlueprintBuilder("g")
        b.output("y", b.op(op, b.input("x", (4, 8), "float32"), name="n", **node_attrs))
        return b.build()  # infers: both attribute values are valid

    assert graph(attrs).canonical_hash() == graph(dict(attrs)).canonical_hash()  # control
    assert graph(changed).canonical_hash() != graph(attrs).canonical_hash()


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_json_round_trip_of_random_graphs(graph: RandomGraph) -> None:
    ir = graph.build()
    again = BlueprintIR.from_json(ir.to_json())
    assert again == ir
    assert again.to_json() == ir.to_json()
    assert again.canonical_hash() == ir.canonical_hash()


def test_hash_depends_on_operator_version_and_argument_order() -> None:
    def graph(first: str, second: str) -> BlueprintIR:
        b = BlueprintBuilder("g")
        x = b.input("x", (4,), "float32")
        y = b.input("y", (4,), "float32")
        b.output("o", b.op("sub", x if first == "x" else y, y if second == "y" else x))
        return b.build()

    assert graph("x", "y").canonical_hash() != graph("y", "x").canonical_hash()
    ir = graph("x", "y")
    bumped = OperatorRegistry()
    for name in default_registry().names():
        spec = default_registry().get(name)
        bumped.register(dataclasses.replace(spec, version=spec.version + (name == "sub")))
    assert ir.canonical_hash(bumped) != ir.canonical_hash()


def test_hash_ignores_symbol_names_but_not_symbol_sharing() -> None:
    def graph(a: str, b_dim: str) -> BlueprintIR:
        b = BlueprintBuilder("g")
        x = b.input("x", (a, 4), "float32")
        y = b.input("y", (b_dim, 4), "float32")
        b.output("o", b.op("exp", x))
        b.output("p", b.op("exp", y))
        return b.build()

    assert graph("B", "B").canonical_hash() == graph("T", "T").canonical_hash()
    assert graph("B", "T").canonical_hash() != graph("B", "B").canonical_hash()


def test_hash_follows_symbols_into_shape_attributes() -> None:
    """A reshape to ``["B", 8]`` means whichever input dim is named B: renaming the symbols
    everywhere keeps the hash, pointing the attribute at the other input's dim changes it."""

    def graph(x_dim: str, y_dim: str, target: str) -> BlueprintIR:
        b = BlueprintBuilder("g")
        x = b.input("x", (x_dim, 2, 4), "float32")
        y = b.input("y", (y_dim, 8), "float32")
        b.output("o", b.op("reshape", x, shape=[target, 8]))
        b.output("p", b.op("exp", y))
        return b.build()

    assert graph("B", "T", "B").canonical_hash() == graph("S", "U", "S").canonical_hash()
    assert graph("B", "T", "T").canonical_hash() != graph("B", "T", "B").canonical_hash()
    assert graph("B", "T", "B").canonical_hash() != graph("T", "B", "B").canonical_hash()


def test_hash_counts_inputs_no_node_reads() -> None:
    """The compiled module checks every input, so an unused input's shape and dtype count."""

    def graph(shape: tuple[int, ...], dtype: str) -> BlueprintIR:
        b = BlueprintBuilder("g")
        x = b.input("x", (4,), "float32")
        b.input("z", shape, dtype)
        b.output("o", b.op("exp", x))
        return b.build()

    base = graph((4,), "float32").canonical_hash()
    assert graph((5,), "float32").canonical_hash() != base
    assert graph((4,), "float16").canonical_hash() != base
    assert graph((4,), "float32").canonical_hash() == base
