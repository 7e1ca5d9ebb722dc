"""The blueprint IR: a small typed dataflow graph of registry operators.

A :class:`BlueprintIR` has named graph inputs (each a :class:`TensorSchema`), nodes
(:class:`IRNode`, one output value each, named by the node) and named outputs that point at values.
Shapes hold ints or named symbolic dims (``"B"``); symbols are bound when the compiled blueprint
is called. The IR is frozen: builders and tracers produce a new one.

``canonical_hash()`` is a structural (Merkle) hash: each value's hash is derived from its op,
operator version, attributes and the hashes of its inputs in argument order (commutativity is
never assumed), and graph inputs hash by position and schema. Names and the insertion order of
independent nodes therefore never change it, and any change of op, attribute, dtype, shape, edge
or operator version does.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from warpforge.validation import describe

SCHEMA_VERSION = 1
"""Version of the JSON form written by :meth:`BlueprintIR.to_json`."""

DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "bool")
FLOAT_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Dim = int | str


class BlueprintError(ValueError):
    """A blueprint is malformed: the message names the node, value or field at fault."""


class BlueprintCycleError(BlueprintError):
    """The graph has a cycle; ``nodes`` lists the nodes on it."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.nodes = tuple(nodes)
        super().__init__(
            "blueprint graph has a cycle through the nodes " + ", ".join(repr(n) for n in nodes)
        )


def check_identifier(name: str, value: object) -> str:
    """``value`` must be a Python-identifier-like name (values become kernel variable names)."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {describe(value)}")
    if not _NAME.match(value):
        raise ValueError(f"{name}: expected an identifier ([A-Za-z_][A-Za-z0-9_]*), got {value!r}")
    return value


def canonical_json(value: object) -> str:
    """Deterministic JSON (sorted keys, no whitespace, no NaN) used for hashing and storage."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _normalise_attrs(attrs: object, where: str) -> dict[str, Any]:
    if not isinstance(attrs, Mapping):
        raise TypeError(
            f"{where}: attrs must be a mapping of str -> JSON value, got {describe(attrs)}"
        )
    for key in attrs:
        if not isinstance(key, str):
            raise TypeError(f"{where}: attribute names must be str, got {describe(key)}")
    try:
        # A JSON round trip turns tuples into lists so equal attrs compare and hash equal.
        return json.loads(canonical_json(dict(attrs)))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{where}: attrs must be JSON values (finite numbers, str, bool, None, lists, dicts); "
            f"{error}"
        ) from None


@dataclass(frozen=True)
class TensorSchema:
    """Shape (ints >= 0 or symbolic dim names) and dtype name of one tensor."""

    shape: tuple[Dim, ...]
    dtype: str

    def __post_init__(self) -> None:
        if isinstance(self.shape, (str, bytes)) or not isinstance(self.shape, Iterable):
            raise TypeError(
                f"shape: expected a tuple of ints or dim names, got {describe(self.shape)}"
            )
        shape = tuple(self.shape)
        for i, dim in enumerate(shape):
            if isinstance(dim, bool) or not isinstance(dim, (int, str)):
                raise TypeError(f"shape[{i}]: expected an int or a dim name, got {describe(dim)}")
            if isinstance(dim, int) and dim < 0:
                raise ValueError(f"shape[{i}]: expected a size >= 0, got {dim}")
            if isinstance(dim, str) and not _NAME.match(dim):
                raise ValueError(f"shape[{i}]: expected a dim name like 'B', got {dim!r}")
        object.__setattr__(self, "shape", shape)
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {list(DTYPES)}, got {self.dtype!r}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def as_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class IRNode:
    """One operator application: ``name = op(*inputs, **attrs)``."""

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_identifier("node name", self.name)
        if not isinstance(self.op, str) or not self.op:
            raise TypeError(
                f"node {self.name!r}: op must be a non-empty str, got {describe(self.op)}"
            )
        if isinstance(self.inputs, str) or not isinstance(self.inputs, Iterable):
            raise TypeError(
                f"node {self.name!r}: inputs must be a sequence of value names, "
                f"got {describe(self.inputs)}"
            )
        inputs = tuple(self.inputs)
        for value in inputs:
            if not isinstance(value, str):
                raise TypeError(
                    f"node {self.name!r}: input names must be str, got {describe(value)}"
                )
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "attrs", _normalise_attrs(self.attrs, f"node {self.name!r}"))

    __hash__ = None  # type: ignore[assignment]  # attrs is a dict

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "inputs": list(self.inputs), "attrs": self.attrs}


@dataclass(frozen=True, eq=False)
class BlueprintIR:
    """A validated graph: inputs (in call order), nodes, outputs (in return order), metadata."""

    name: str
    inputs: tuple[tuple[str, TensorSchema], ...]
    nodes: tuple[IRNode, ...]
    outputs: tuple[tuple[str, str], ...]
    """(output name, value name) pairs in return order."""
    version: str = "1"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name: expected a non-empty str, got {describe(self.name)}")
        if not isinstance(self.version, str):
            raise TypeError(f"version: expected a str, got {describe(self.version)}")
        inputs = tuple((n, s) for n, s in self.inputs)
        nodes = tuple(self.nodes)
        outputs = tuple((n, v) for n, v in self.outputs)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "outputs", outputs)
        seen: set[str] = set()
        for name, schema in inputs:
            check_identifier("input name", name)
            if not isinstance(schema, TensorSchema):
                raise TypeError(f"input {name!r}: expected a TensorSchema, got {describe(schema)}")
            if name in seen:
                raise BlueprintError(f"input {name!r}: the name is used twice")
            seen.add(name)
        for node in nodes:
            if not isinstance(node, IRNode):
                raise TypeError(f"nodes: expected IRNode objects, got {describe(node)}")
            if node.name in seen:
                raise BlueprintError(
                    f"node {node.name!r}: the name is already used by another value"
                )
            seen.add(node.name)
        for node in nodes:
            for value in node.inputs:
                if value not in seen:
                    raise BlueprintError(
                        f"node {node.name!r}: input {value!r} is not a known value"
                    )
        if not outputs:
            raise BlueprintError(f"blueprint {self.name!r}: expected at least one output")
        out_names: set[str] = set()
        for out_name, value in outputs:
            check_identifier("output name", out_name)
            if out_name in out_names:
                raise BlueprintError(f"output {out_name!r}: the name is used twice")
            out_names.add(out_name)
            if value not in seen:
                raise BlueprintError(f"output {out_name!r}: value {value!r} is not a known value")

    # ----------------------------------------------------------------------------- structure
    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.inputs)

    def node(self, name: str) -> IRNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"blueprint {self.name!r} has no node {name!r}")

    def topological_order(self) -> list[IRNode]:
        """Nodes in dependency order (Kahn's algorithm, ties by insertion order).

        Raises :class:`BlueprintCycleError` naming the nodes on a cycle.
        """
        produced = {node.name for node in self.nodes}
        indegree = {node.name: 0 for node in self.nodes}
        users: dict[str, list[IRNode]] = {node.name: [] for node in self.nodes}
        for node in self.nodes:
            for value in node.inputs:
                if value in produced:
                    indegree[node.name] += 1
                    users[value].append(node)
        position = {node.name: i for i, node in enumerate(self.nodes)}
        ready = [node for node in self.nodes if indegree[node.name] == 0]
        order: list[IRNode] = []
        while ready:
            ready.sort(key=lambda n: position[n.name])
            node = ready.pop(0)
            order.append(node)
            for user in users[node.name]:
                indegree[user.name] -= 1
                if indegree[user.name] == 0:
                    ready.append(user)
        if len(order) != len(self.nodes):
            raise BlueprintCycleError(self._cycle({n.name for n in order}))
        return order

    def _cycle(self, done: set[str]) -> list[str]:
        """One cycle among the nodes Kahn could not order (their inputs loop back)."""
        by_name = {n.name: n for n in self.nodes if n.name not in done}
        start = next(iter(by_name))
        path: list[str] = []
        current = start
        while current not in path:
            path.append(current)
            current = next(v for v in by_name[current].inputs if v in by_name)
        return path[path.index(current) :]

    # ----------------------------------------------------------------------------- inference
    def infer(self, registry: Any = None) -> dict[str, TensorSchema]:
        """Schema of every value (inputs and nodes); errors name the node that failed."""
        from warpforge.blueprint.registry import default_registry

        registry = registry or default_registry()
        schemas: dict[str, TensorSchema] = dict(self.inputs)
        for node in self.topological_order():
            spec = registry.get(node.op, where=f"node {node.name!r}")
            args = [schemas[v] for v in node.inputs]
            try:
                schemas[node.name] = spec.infer_schema(args, node.attrs)
            except (TypeError, ValueError) as error:
                raise BlueprintError(
                    f"node {node.name!r} (op {node.op!r}, inputs "
                    f"{', '.join(f'{v}: {schemas[v]}' for v in node.inputs)}): {error}"
                ) from None
        return schemas

    # ----------------------------------------------------------------------------- hashing
    def canonical_hash(self, registry: Any = None) -> str:
        """SHA-256 (hex) of the graph's structure, independent of names and insertion order."""
        cache_key = "_canonical_hash"
        if registry is None and cache_key in self.__dict__:
            return self.__dict__[cache_key]
        from warpforge.blueprint.registry import default_registry

        reg = registry or default_registry()
        symbols: dict[str, str] = {}

        def dim_text(dim: Dim) -> Any:
            if isinstance(dim, int):
                return dim
            # Symbol names are arbitrary; only which dims share a symbol matters. Inputs bind
            # every symbol a valid graph uses, in input order, before any attribute is read.
            return symbols.setdefault(dim, f"${len(symbols)}")

        def attrs_text(spec: Any, attrs: dict[str, Any]) -> dict[str, Any]:
            shapes = {
                key: [dim_text(d) if isinstance(d, str) else d for d in attrs[key]]
                for key in spec.shape_attrs
                if isinstance(attrs.get(key), list)
            }
            return {**attrs, **shapes}

        value_hash: dict[str, str] = {}
        for position, (name, schema) in enumerate(self.inputs):
            payload = ["input", position, [dim_text(d) for d in schema.shape], schema.dtype]
            value_hash[name] = _sha(canonical_json(payload))
        node_hashes = []
        for node in self.topological_order():
            spec = reg.get(node.op, where=f"node {node.name!r}")
            payload = [
                "node",
                node.op,
                spec.version,
                attrs_text(spec, node.attrs),
                [value_hash[v] for v in node.inputs],
            ]
            value_hash[node.name] = _sha(canonical_json(payload))
            node_hashes.append(value_hash[node.name])
        # Nodes form a multiset (duplicates count); outputs keep their return order.
        graph = [
            "blueprint",
            SCHEMA_VERSION,
            sorted(node_hashes),
            [value_hash[v] for _, v in self.outputs],
            # every input by position, shape and dtype, those no node reads too: the compiled
            # module checks them all
            [value_hash[name] for name, _ in self.inputs],
        ]
        digest = _sha(canonical_json(graph))
        if registry is None:
            self.__dict__[cache_key] = digest
        return digest

    # ----------------------------------------------------------------------------- JSON
    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "version": self.version,
            "inputs": [{"name": n, **s.as_dict()} for n, s in self.inputs],
            "nodes": [node.as_dict() for node in self.nodes],
            "outputs": [{"name": n, "value": v} for n, v in self.outputs],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """JSON text with ``schema_version``; :meth:`from_json` reads it back exactly."""
        return json.dumps(self.as_dict(), indent=indent, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: object) -> BlueprintIR:
        if not isinstance(data, Mapping):
            raise TypeError(f"blueprint JSON: expected an object, got {describe(data)}")
        version = data.get("schema_version")
        # type(...) is int: True and 1.0 compare equal to 1 but are not what to_json writes
        if type(version) is not int or version != SCHEMA_VERSION:
            raise BlueprintError(
                f"blueprint JSON: schema_version {version!r} is not supported "
                f"(this warpforge reads the integer {SCHEMA_VERSION})"
            )
        expected = {"schema_version", "name", "version", "inputs", "nodes", "outputs"}
        if set(data) != expected:
            raise BlueprintError(
                f"blueprint JSON: expected exactly the keys {sorted(expected)}, got {sorted(data)}"
            )
        inputs = _json_entries(
            data,
            "inputs",
            ("name", "shape", "dtype"),
            ("shape",),
            lambda item: (
                check_identifier("name", item["name"]),
                TensorSchema(tuple(item["shape"]), item["dtype"]),
            ),
        )
        nodes = _json_entries(
            data,
            "nodes",
            ("name", "op", "inputs", "attrs"),
            ("inputs",),
            lambda item: IRNode(item["name"], item["op"], tuple(item["inputs"]), item["attrs"]),
        )
        outputs = _json_entries(
            data,
            "outputs",
            ("name", "value"),
            (),
            lambda item: (check_identifier("name", item["name"]), item["value"]),
        )
        return cls(data["name"], inputs, nodes, outputs, data["version"])

    @classmethod
    def from_json(cls, text: str | bytes) -> BlueprintIR:
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"text: expected JSON str or bytes, got {describe(text)}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise BlueprintError(f"blueprint JSON: not valid JSON ({error})") from None
        return cls.from_dict(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlueprintIR):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(canonical_json(self.as_dict()))

    def __repr__(self) -> str:
        return (
            f"BlueprintIR({self.name!r}, inputs={len(self.inputs)}, nodes={len(self.nodes)}, "
            f"outputs={len(self.outputs)})"
        )


def _json_entries(
    data: Mapping[str, Any],
    section: str,
    keys: tuple[str, ...],
    lists: tuple[str, ...],
    build: Callable[[Mapping[str, Any]], Any],
) -> tuple[Any, ...]:
    """``build(entry)`` for each entry of ``data[section]``, each checked to hold exactly
    ``keys`` (those in ``lists`` being lists); every error names the section and the index."""
    items = data[section]
    if not isinstance(items, list):
        raise BlueprintError(f"blueprint JSON: {section}: expected a list, got {describe(items)}")
    built = []
    for index, item in enumerate(items):
        where = f"blueprint JSON: {section}[{index}]: malformed entry"
        if not isinstance(item, Mapping):
            raise BlueprintError(
                f"{where}: expected an object with the keys {list(keys)}, got {describe(item)}"
            )
        if set(item) != set(keys):
            raise BlueprintError(
                f"{where}: expected exactly the keys {sorted(keys)}, got {sorted(item)}"
            )
        for key in lists:  # tuple() would take a str apart letter by letter
            if not isinstance(item[key], list):
                raise BlueprintError(f"{where}: {key}: expected a list, got {describe(item[key])}")
        try:
            built.append(build(item))
        except (TypeError, ValueError) as error:
            raise BlueprintError(f"{where}: {error}") from None
    return tuple(built)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Value:
    """A handle to a value while building; pass it to :meth:`BlueprintBuilder.op`."""

    __slots__ = ("builder", "name")

    def __init__(self, builder: BlueprintBuilder, name: str) -> None:
        self.builder = builder
        self.name = name

    def __repr__(self) -> str:
        return f"Value({self.name!r})"


class BlueprintBuilder:
    """Builds a :class:`BlueprintIR` one op at a time.

    >>> b = BlueprintBuilder("bias_gelu")
    >>> x = b.input("x", ("B", 4096), "float16")
    >>> bias = b.input("bias", (4096,), "float16")
    >>> y = b.op("gelu", b.op("add", x, bias), approximate="tanh")
    >>> b.output("y", y)
    >>> ir = b.build()
    """

    def __init__(self, name: str, *, version: str = "1") -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"name: expected a non-empty str, got {describe(name)}")
        self.name = name
        self.version = version
        self._inputs: list[tuple[str, TensorSchema]] = []
        self._nodes: list[IRNode] = []
        self._outputs: list[tuple[str, str]] = []
        self._used: set[str] = set()
        self._counter: dict[str, int] = {}

    def input(self, name: str, shape: Sequence[Dim], dtype: str) -> Value:
        check_identifier("name", name)
        if name in self._used:
            raise ValueError(f"name: {name!r} is already used in this blueprint")
        self._inputs.append((name, TensorSchema(tuple(shape), dtype)))
        self._used.add(name)
        return Value(self, name)

    def _fresh(self, op: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", op)
        while True:
            index = self._counter.get(base, 0)
            self._counter[base] = index + 1
            candidate = f"{base}_{index}"
            if candidate not in self._used:
                return candidate

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs: Any) -> Value:
        """Append ``op(*inputs, **attrs)``; returns the new value."""
        for i, value in enumerate(inputs):
            if not isinstance(value, Value) or value.builder is not self:
                raise TypeError(
                    f"inputs[{i}] of {op!r}: expected a Value from this builder, got {describe(value)}"
                )
        node_name = check_identifier("name", name) if name is not None else self._fresh(op)
        if node_name in self._used:
            raise ValueError(f"name: {node_name!r} is already used in this blueprint")
        self._nodes.append(IRNode(node_name, op, tuple(v.name for v in inputs), attrs))
        self._used.add(node_name)
        return Value(self, node_name)

    def output(self, name: str, value: Value) -> None:
        if not isinstance(value, Value) or value.builder is not self:
            raise TypeError(f"value: expected a Value from this builder, got {describe(value)}")
        self._outputs.append((check_identifier("name", name), value.name))

    def build(self, registry: Any = None) -> BlueprintIR:
        """The finished IR, validated (names, edges) and shape-checked through :meth:`infer`
        against ``registry`` (default: the process-wide operator registry)."""
        ir = BlueprintIR(self.name, self._inputs, self._nodes, self._outputs, self.version)
        ir.infer(registry)
        return ir
