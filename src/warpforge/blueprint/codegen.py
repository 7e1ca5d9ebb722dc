"""From a BlueprintIR to fused Triton source: partition into fusion groups, then emit kernels.

Fusion rules (see docs/compiler.md):

* A **row group** iterates a 2-D view ``[rows, n_cols]`` of one *domain* shape (the last dim is
  the row). Pointwise ops whose output has the domain shape, and row ops (sum/mean/amax with
  ``keepdim``, softmax, layer_norm, rms_norm) whose input has it, join the group, so a chain like
  residual add -> rms_norm -> silu * mul reads each input once and writes each output once.
  Values of shape ``domain[:-1] + (1,)`` (keepdim reductions and pointwise ops on them) live as
  one value per row. With a row op in the group a program holds whole rows (``BLOCK_N >= n_cols``);
  without one, the group tiles both dimensions.
* A **matmul group** is a tiled ``tl.dot`` matmul (``matmul``/``linear``) whose pointwise
  consumers of the output's shape form the epilogue, applied to the fp32 accumulator before the
  single store.
* A matmul group also takes **streaming row ops** over its output's last dim (the matmul's N):
  softmax and sum/mean/amax of values computed from the accumulator (no row op feeding another),
  and the pointwise ops after them. Its kernel gives each program ``BLOCK_M`` whole rows and walks
  the N tiles twice: pass 1 keeps running statistics (an online max and rescaled sum for softmax),
  pass 2 recomputes each tile (cheap when the inner dim K is small, as for attention scores) and
  stores the results. When one tile spans the row (``ONE_TILE``: ``BLOCK_N >= N``) the tile is
  computed once and its statistics and outputs come from registers. Only the outputs reach
  memory, never the matmul's product. A softmax of ``where(mask, x, other=-inf)`` whose mask is
  loaded from memory first scans the mask for the N tiles from the first to the last with a
  true element: only those are computed, and pass 2 stores ``0 * scale`` in the others without
  their product (a causal mask leaves out about half the tiles; the results are those of
  computing them, NaN rows included). A graph whose K is a fixed size above
  :data:`ROW_FUSION_MAX_K` keeps the product in memory instead.
* Everything else (layout ops, integer arithmetic, float64 matmul, a reduction without keepdim
  feeding more ops) runs as a PyTorch op between kernels.

Every tensor is addressed through its own strides over the domain (broadcast dims have stride 0),
so broadcasting, transposed views and other non-contiguous inputs need no copies. Offsets are
computed in int64 when the launcher sets ``INDEX_64`` (any tensor spans more than 2**31 - 1
elements of offset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from warpforge.blueprint.ir import BlueprintIR, IRNode, TensorSchema
from warpforge.blueprint.registry import OperatorRegistry, default_registry, scalar_attr
from warpforge.runtime import env_flag

GENERATOR_VERSION = 8
"""Bumped when generated code changes; part of every cache key of the generated source."""

TEMPLATE_VERSIONS = {"rows": 1, "matmul": 2, "matmul_rows": 3}
"""Bumped when one kernel template changes what a launch config means: part of the key of its
tuned configs (a change to the matmul template leaves the row kernels' tuned configs valid).
``matmul_rows`` is a matmul group with streaming row ops (:func:`template_of`)."""

PERSISTENT_SUFFIX = "_tma"
"""Name suffix of a plain matmul group's persistent TMA kernel (beside the pointer kernel)."""

STREAMING_ROW_OPS = ("softmax", "sum", "mean", "amax")
"""Row ops a matmul group computes over its N tiles (statistics that stream)."""

ROW_FUSION_MAX_K = 512
"""A matmul with a fixed inner dim above this keeps its product in memory before row ops: the
fused kernel computes every tile twice, which pays off only while K is small."""

COLUMN_SUMS = env_flag("WARPFORGE_COLUMN_SUMS")
"""Fold a ``sum_to`` over the leading dims of a value a row group computes (a broadcast
input's gradient, such as a norm weight's in a generated backward) into that group's kernel:
each program walks a strided set of row blocks and keeps one float32 partial row, and a PyTorch
step adds the few partial rows. Without it the value is stored whole ([rows, N]) and read back
by the ``sum_to`` step: for residual_rmsnorm_swiglu's backward at 16384 x 4096 in bf16 that is
256 MB of about 1.15 GB moved. Off (``WARPFORGE_COLUMN_SUMS=1`` at import turns it on): on the
H200 that backward took 492.9 µs with it and 483.2 µs without, in the same call at the same
commit (session23-h200-2026-11-29/blueprint-bwd-column-sums-call1.json and
blueprint-bwd-call1.json): the traffic saved did not pay for programs that each walk many row
blocks (4 per SM) where the plain kernel spreads one row block per program. Accumulating a
[BLOCK_M, BLOCK_N] tile in registers, reduced once a program, instead of a reduction every row
block (commit ``008e44df`` only) measured the same: 493.5 against 483.0 µs at the untuned 8-warp
launch (session38-h200-2026-11-30/blueprint-bwd-column-sums-call7.json and
blueprint-bwd-call7.json), and 595.8 against 476.1 with the 16-warp launch tuned since
(blueprint-bwd-column-sums-call8.json, blueprint-tuned-call8.json). Part of the generated
source's cache key when on. Read when a blueprint is planned."""

NEG_INF = 'float("-inf")'
LOG2E = "1.4426950408889634"
"""exp(x - shift) is emitted as exp2(fma(x, LOG2E, -shift * LOG2E)): one fused multiply-add
before the hardware's exp2 where exp would cost a subtraction and a multiplication."""
FULL = "full"
ROW = "row"


class CodegenError(RuntimeError):
    """Code generation could not handle the blueprint (the compiler falls back to PyTorch)."""


@dataclass
class FusionGroup:
    """Nodes that become one kernel (``kind`` "rows" or "matmul"), or one PyTorch op ("torch")."""

    kind: str
    domain: tuple[Any, ...]
    nodes: list[IRNode] = field(default_factory=list)
    space: dict[str, str] = field(default_factory=dict)
    """value name -> FULL or ROW, for values computed in the group."""
    inputs: list[str] = field(default_factory=list)
    """External values the kernel loads, in first-use order."""
    outputs: list[str] = field(default_factory=list)
    """Group values stored for later groups or as graph outputs, in node order."""
    has_row_op: bool = False
    index: int = 0
    column_sums: dict[str, str] = field(default_factory=dict)
    """``sum_to`` node name -> the group value it sums over the leading dims (COLUMN_SUMS)."""

    @property
    def kernel_name(self) -> str:
        ops = "_".join(dict.fromkeys(n.op for n in self.nodes))[:48]
        return f"k{self.index}_{ops}"

    @property
    def produced(self) -> set[str]:
        return {n.name for n in self.nodes} | set(self.column_sums)


def template_of(group: FusionGroup) -> str:
    """The kernel template ``group`` is generated from (a key of :data:`TEMPLATE_VERSIONS`)."""
    return "matmul_rows" if group.kind == "matmul" and group.has_row_op else group.kind


@dataclass(frozen=True)
class Plan:
    """Steps in execution order plus every value's schema."""

    groups: tuple[FusionGroup, ...]
    schemas: Mapping[str, TensorSchema]

    @property
    def kernel_count(self) -> int:
        return sum(1 for g in self.groups if g.kind != "torch")


_COMPUTE_DTYPES = ("float16", "bfloat16", "float32")


class KernelSourceGenerator:
    """Partitions ``ir`` into fusion groups and writes one Triton module for all its kernels."""

    def __init__(self, ir: BlueprintIR, registry: OperatorRegistry | None = None) -> None:
        if not isinstance(ir, BlueprintIR):
            raise TypeError(f"ir: expected a BlueprintIR, got {type(ir).__name__}")
        self.ir = ir
        self.registry = registry or default_registry()
        self.schemas = ir.infer(self.registry)

    # ----------------------------------------------------------------------- partitioning
    def plan(self) -> Plan:
        groups: list[FusionGroup] = []
        current: FusionGroup | None = None
        for node in self.ir.topological_order():
            spec = self.registry.get(node.op)
            out = self.schemas[node.name]
            owner = self._column_sum_owner(groups, node) if COLUMN_SUMS else None
            if owner is not None:
                owner.column_sums[node.name] = node.inputs[0]
                current = None  # the sum exists only once that kernel has run
                continue
            if current is not None and self._joins(current, node, spec.kind):
                self._add(current, node, spec.kind)
                continue
            current = None
            fusible = spec.kind in ("pointwise", "row") and spec.triton is not None
            if fusible and self._row_capable(node, spec.kind):
                domain = self.schemas[node.inputs[0]].shape if spec.kind == "row" else out.shape
                current = FusionGroup("rows", tuple(domain))
                self._add(current, node, spec.kind)
                groups.append(current)
            elif spec.kind == "matmul" and self._matmul_capable(node):
                current = FusionGroup("matmul", tuple(out.shape))
                self._add(current, node, spec.kind)
                groups.append(current)
            else:
                groups.append(FusionGroup("torch", tuple(out.shape), [node]))
        self._wire(groups)
        return Plan(tuple(groups), self.schemas)

    def _column_sum_owner(self, groups: list[FusionGroup], node: IRNode) -> FusionGroup | None:
        """The row group that can compute ``node``, a ``sum_to`` over every leading dim of a
        value it holds whole, as a column sum; None otherwise."""
        if node.op != "sum_to" or len(node.inputs) != 1:
            return None
        source = node.inputs[0]
        for group in groups:
            if group.kind != "rows" or group.space.get(source) != FULL:
                continue
            domain = tuple(group.domain)
            schema, out = self.schemas[source], self.schemas[node.name]
            if (
                len(domain) >= 2
                and tuple(schema.shape) == domain
                and tuple(out.shape) == (domain[-1],)
                and schema.dtype == out.dtype
                and self._float_ok([source])
            ):
                return group
        return None

    def _float_ok(self, names: Sequence[str], allow_bool: bool = False) -> bool:
        for name in names:
            dtype = self.schemas[name].dtype
            if dtype in _COMPUTE_DTYPES or (allow_bool and dtype == "bool"):
                continue
            return False
        return True

    def _row_capable(self, node: IRNode, kind: str) -> bool:
        # float16/bfloat16/float32 values only (bool conditions of where too); others -> PyTorch.
        return self._float_ok([node.name]) and self._float_ok(
            node.inputs, allow_bool=node.op == "where"
        )

    def _matmul_capable(self, node: IRNode) -> bool:
        return self._float_ok([node.name, *node.inputs])

    def _operand_space(self, group: FusionGroup, value: str) -> str | None:
        """Space of ``value`` as an operand in ``group``; None if it cannot be used there."""
        if value in group.space:
            return group.space[value]
        shape = self.schemas[value].shape
        domain = group.domain
        if group.kind == "matmul":
            return FULL if _broadcastable(shape, domain) else None
        if not _broadcastable(shape, domain):
            return None
        if domain and shape and shape[-1] == domain[-1] and domain[-1] != 1:
            return FULL
        return ROW if domain else FULL

    def _joins(self, group: FusionGroup, node: IRNode, kind: str) -> bool:
        """Whether ``node`` can be computed inside ``group`` (may widen a pointwise domain)."""
        if group.kind == "torch" or not self._row_capable(node, kind):
            return False
        if kind not in ("pointwise", "row") or self.registry.get(node.op).triton is None:
            return False
        out = tuple(self.schemas[node.name].shape)
        # A reduction without keepdim changes rank: later users would broadcast it differently.
        if any(self._dropped_dim(group, v) for v in node.inputs):
            return False
        original, spaces = group.domain, dict(group.space)
        if (
            group.kind == "rows"
            and kind == "pointwise"
            and not group.has_row_op
            and original
            and out != original
            and len(out) >= len(original)
            and (out[-1] == original[-1] or original[-1] == 1)
            and _broadcastable(original, out)
        ):
            # The group so far broadcasts into this node's larger shape: iterate that instead
            # (kept only if the node joins). Values of a [..., 1] domain become per-row values.
            group.domain = out
            if original[-1] == 1 and out[-1] != 1:
                group.space = dict.fromkeys(group.space, ROW)
        if self._fits(group, node, kind, out):
            return True
        group.domain, group.space = original, spaces
        return False

    def _fits(self, group: FusionGroup, node: IRNode, kind: str, out: tuple[Any, ...]) -> bool:
        domain = group.domain
        spaces = [self._operand_space(group, v) for v in node.inputs]
        if None in spaces:
            return False
        if group.kind == "matmul":
            return self._fits_matmul(group, node, kind, out, spaces)
        if kind == "row":
            shape = tuple(self.schemas[node.inputs[0]].shape)
            return shape == domain and spaces[0] == FULL and len(domain) > 0
        # A pointwise value smaller than the domain is recomputed per tile (cheap math) instead
        # of costing its own kernel and a round trip through memory.
        return _broadcastable(out, domain)

    def _fits_matmul(
        self,
        group: FusionGroup,
        node: IRNode,
        kind: str,
        out: tuple[Any, ...],
        spaces: list[str | None],
    ) -> bool:
        """Epilogue pointwise ops over the output (or over per-row values), and streaming row
        ops over the output's last dim whose input no row op of the group feeds."""
        domain = group.domain
        if kind == "pointwise":
            if out == domain:
                return True
            per_row = (*domain[:-1], 1)
            return bool(domain) and out == per_row and all(s == ROW for s in spaces)
        if node.op not in STREAMING_ROW_OPS or not domain or not self._small_inner_dim(group):
            return False
        source = node.inputs[0]
        return (
            tuple(self.schemas[source].shape) == domain
            and spaces[0] == FULL
            and source not in self._after_row_ops(group)
        )

    def _small_inner_dim(self, group: FusionGroup) -> bool:
        mm = group.nodes[0]
        inner = self.schemas[mm.inputs[0]].shape[-1]
        return not isinstance(inner, int) or inner <= ROW_FUSION_MAX_K

    def _after_row_ops(self, group: FusionGroup) -> set[str]:
        """Values of ``group`` computed from a row op's result (or the row op's own)."""
        after: set[str] = set()
        for n in group.nodes:
            if self.registry.get(n.op).kind == "row" or any(v in after for v in n.inputs):
                after.add(n.name)
        return after

    def _dropped_dim(self, group: FusionGroup, value: str) -> bool:
        if value not in group.space:
            return False
        node = next(n for n in group.nodes if n.name == value)
        return (
            self.registry.get(node.op).kind == "row"
            and node.op in ("sum", "mean", "amax")
            and (not node.attrs.get("keepdim", False))
        )

    def _add(self, group: FusionGroup, node: IRNode, kind: str) -> None:
        group.nodes.append(node)
        if kind == "row":
            group.has_row_op = True
            reducing = node.op in ("sum", "mean", "amax")
            group.space[node.name] = ROW if reducing else FULL
        elif kind == "matmul":
            group.space[node.name] = FULL
        else:
            out = tuple(self.schemas[node.name].shape)
            spaces = [self._operand_space(group, v) for v in node.inputs]
            full = FULL in spaces or not group.domain or out[-1:] == group.domain[-1:]
            group.space[node.name] = FULL if full else ROW

    def _wire(self, groups: list[FusionGroup]) -> None:
        graph_outputs = {v for _, v in self.ir.outputs}
        used_later: dict[str, int] = {}
        for index, group in enumerate(groups):
            group.index = index
            for node in group.nodes:
                for v in node.inputs:
                    used_later[v] = max(used_later.get(v, -1), index)
        for group in groups:
            produced = group.produced
            seen: dict[str, None] = {}
            for node in group.nodes:
                for v in node.inputs:
                    if v not in produced:
                        seen.setdefault(v)
            group.inputs = list(seen)
            group.outputs = [
                n.name
                for n in group.nodes
                if n.name in graph_outputs or used_later.get(n.name, -1) > group.index
            ]

    # ----------------------------------------------------------------------- source
    def source(self, plan: Plan | None = None) -> str:
        """The Triton module (deterministic text for equal IR)."""
        plan = plan or self.plan()
        lines = [
            f'"""Generated by warpforge blueprint codegen v{GENERATOR_VERSION} from blueprint '
            f"{self.ir.name!r} (version {self.ir.version}).",
            "",
            f"canonical hash: {self.ir.canonical_hash(self.registry)}",
            "Each kernel's comments name the IR nodes it computes. Do not edit: regenerated on a",
            'cache miss."""',
            "",
            "import triton",
            "import triton.language as tl",
            "",
        ]
        for group in plan.groups:
            if group.kind == "rows":
                lines += ["", *_RowKernelWriter(self, group).write()]
            elif group.kind == "matmul":
                lines += ["", *_MatmulKernelWriter(self, group).write()]
        return "\n".join(lines) + "\n"


def loaded_inputs(group: FusionGroup) -> list[str]:
    """External values a kernel loads through domain strides (in its argument order).

    A matmul's two operands are passed separately as 3-D views; its epilogue inputs (and a
    linear's bias) are addressed over the output domain like a row group's inputs.
    """
    if group.kind != "matmul":
        return list(group.inputs)
    mm = group.nodes[0]
    produced = group.produced
    seen: dict[str, None] = {}
    if mm.op == "linear" and len(mm.inputs) == 3:
        seen.setdefault(mm.inputs[2])
    for node in group.nodes[1:]:
        for v in node.inputs:
            if v not in produced:
                seen.setdefault(v)
    return list(seen)


def _broadcastable(shape: Sequence[Any], domain: Sequence[Any]) -> bool:
    if len(shape) > len(domain):
        return False
    for dim, target in zip(reversed(shape), reversed(domain), strict=False):
        if dim != 1 and dim != target:
            return False
    return True


def _describe_node(node: IRNode, schema: TensorSchema) -> str:
    attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(node.attrs.items()))
    args = ", ".join(node.inputs) + (", " + attrs if attrs else "")
    return f"{node.name} = {node.op}({args})  -> {schema}"


class _KernelWriter:
    """Shared pieces of both kernel templates: addressing, loads, node bodies, stores."""

    def __init__(self, gen: KernelSourceGenerator, group: FusionGroup) -> None:
        self.gen = gen
        self.group = group
        self.rank = max(len(group.domain), 1)
        self.body: list[str] = []
        self.loaded: dict[tuple[str, str], str] = {}
        self.temp = 0
        self.compute = "tl.float32"
        self.n_cols = "n_cols"
        self._current = ""
        self.depth = 1
        """Indentation level of emitted statements (loops nest deeper)."""

    # names
    @staticmethod
    def var(value: str) -> str:
        return f"v_{value}"

    def tensor_args(self, name: str) -> list[str]:
        return [f"p_{name}", *(f"p_{name}_s{d}" for d in range(self.rank))]

    def emit(self, line: str) -> None:
        self.body.append("    " * self.depth + line)

    def row_coordinates(self) -> None:
        """Split the flat row index into the domain's leading coordinates (row-major)."""
        lead = self.rank - 1
        if lead == 0:
            return
        self.emit("# row index -> coordinates of the leading dims (broadcast dims have stride 0)")
        self.emit("rem = rows")
        for d in reversed(range(1, lead)):
            self.emit(f"i{d} = rem % size{d}")
            self.emit(f"rem = rem // size{d}")
        self.emit("i0 = rem")

    def row_offset(self, name: str) -> str:
        terms = [f"i{d} * p_{name}_s{d}" for d in range(self.rank - 1)]
        return " + ".join(terms) if terms else "0"

    def load(self, value: str, space: str) -> str:
        """Load an external value once per space: a [BLOCK_M, BLOCK_N] tile or one per row."""
        key = (value, space)
        if key in self.loaded:
            return self.loaded[key]
        schema = self.gen.schemas[value]
        var = f"in_{value}" if space == FULL else f"in_{value}_row"
        row_off = self.row_offset(value)
        base = f"({row_off})[:, None]" if row_off != "0" else "rows[:, None] * 0"
        self.emit(f"# load {value}: {schema}")
        if space == FULL:
            addr = f"p_{value} + {base} + (cols * p_{value}_s{self.rank - 1})[None, :]"
            mask = "mask"
        else:
            addr = f"p_{value} + {base}"
            mask = "row_mask[:, None]"
        convert = "" if schema.dtype == "bool" else f".to({self.compute})"
        other = "0" if schema.dtype == "bool" else "0.0"
        self.emit(f"{var} = tl.load({addr}, mask={mask}, other={other}){convert}")
        self.loaded[key] = var
        return var

    def operand(self, value: str) -> str:
        if value in self.group.space:
            return self.var(value)
        return self.load(value, self.gen._operand_space(self.group, value) or FULL)

    # RowEmitter protocol for row operators
    def _fresh(self, stem: str) -> str:
        self.temp += 1
        return f"t{self.temp}_{stem}"

    def full(self, expr: str) -> str:
        name = self._fresh(self._current)
        self.emit(f"{name} = {expr}")
        return name

    def row(self, expr: str) -> str:
        return self.full(expr)

    def masked(self, full_expr: str, other: str) -> str:
        return f"tl.where(col_mask[None, :], {full_expr}, {other})"

    def row_sum(self, full_expr: str) -> str:
        name = self._fresh(self._current + "_sum")
        self.emit(f"{name} = tl.sum({self.masked(full_expr, '0.0')}, axis=1)[:, None]")
        return name

    def row_max(self, full_expr: str) -> str:
        name = self._fresh(self._current + "_max")
        masked = self.masked(full_expr, NEG_INF)
        self.emit(f"{name} = tl.max({masked}, axis=1)[:, None]")
        return name

    def node_body(self, node: IRNode) -> None:
        spec = self.gen.registry.get(node.op)
        schema = self.gen.schemas[node.name]
        self.emit(f"# {_describe_node(node, schema)}")
        self._current = node.name
        args = [self.operand(v) for v in node.inputs]
        if spec.kind == "pointwise":
            expr = spec.triton(args, node.attrs)  # type: ignore[misc]
        else:
            expr = spec.triton(self, args, node.attrs)  # type: ignore[misc]
        convert = "" if schema.dtype == "bool" else f".to({self.compute})"
        self.emit(f"{self.var(node.name)} = ({expr}){convert}")

    def store(self, value: str, extra_mask: str = "") -> None:
        space = self.group.space[value]
        row_off = self.row_offset(value)
        base = f"({row_off})[:, None]" if row_off != "0" else "rows[:, None] * 0"
        self.emit(f"# store {value}: {self.gen.schemas[value]}")
        if space == FULL:
            addr = f"p_{value} + {base} + (cols * p_{value}_s{self.rank - 1})[None, :]"
            mask = "mask"
        else:
            addr = f"p_{value} + {base}"
            mask = "row_mask[:, None]" + extra_mask
        self.emit(
            f"tl.store({addr}, {self.var(value)}.to(p_{value}.dtype.element_ty), mask={mask})"
        )

    def signature(
        self, head: list[str], sizes: list[str], constexprs: list[str], suffix: str = ""
    ) -> list[str]:
        args = list(head)
        for value in loaded_inputs(self.group):
            args += self.tensor_args(value)
        for value in self.group.outputs:
            args += self.tensor_args(value)
        args += [f"p_{name}_partial" for name in self.group.column_sums]
        args += sizes
        args += [f"{c}: tl.constexpr" for c in constexprs]
        lines = ["@triton.jit", f"def {self.group.kernel_name}{suffix}("]
        lines += [f"    {a}," for a in args]
        lines.append("):")
        return lines

    def header_comment(self) -> list[str]:
        group = self.group
        return [
            f"# kernel {group.index}: {group.kind} group over domain "
            f"[{', '.join(map(str, group.domain))}], nodes: {', '.join(n.name for n in group.nodes)}",
            f"# loads: {', '.join(group.inputs) or '-'}; stores: {', '.join(group.outputs) or '-'}",
        ]


class _RowKernelWriter(_KernelWriter):
    def write(self) -> list[str]:
        group = self.group
        sizes = [f"size{d}" for d in range(1, self.rank - 1)] + ["n_rows", "n_cols"]
        self.emit("pid_m = tl.program_id(0)")
        self.emit("pid_n = tl.program_id(1)")
        self.emit("if INDEX_64:")
        self.emit("    pid_m = pid_m.to(tl.int64)")
        self.emit("    pid_n = pid_n.to(tl.int64)")
        if group.column_sums:
            self.emit("cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
            self.emit("col_mask = cols < n_cols")
            self._row_blocks_with_column_sums()
        else:
            self.emit("rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
            self.emit("cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
            self.emit("row_mask = rows < n_rows")
            self.emit("col_mask = cols < n_cols")
            self.emit("mask = row_mask[:, None] & col_mask[None, :]")
            self._row_block()
        doc = [
            '    """Rows kernel: one program per BLOCK_M rows'
            + (" (whole rows: BLOCK_N >= n_cols)" if group.has_row_op else " x BLOCK_N columns")
            + ("; with column sums, a strided set of row blocks" if group.column_sums else "")
            + '."""'
        ]
        return [
            *self.header_comment(),
            *self.signature([], sizes, ["BLOCK_M", "BLOCK_N", "INDEX_64"]),
            *doc,
            *self.body,
        ]

    def _row_block(self) -> None:
        """The group's nodes and stores over the rows ``rows`` (masks already emitted)."""
        group = self.group
        self.row_coordinates()
        for node in group.nodes:
            self.node_body(node)
        for value in group.outputs:
            # Without a row op the grid also spans columns: one column program writes per-row values.
            once = "" if group.has_row_op else " & ((rows * 0 + pid_n) == 0)[:, None]"
            self.store(value, extra_mask=once)

    def _row_blocks_with_column_sums(self) -> None:
        """Program (pid_m, pid_n) walks row blocks pid_m, pid_m + programs, ... and adds each
        summed value's columns into a float32 accumulator, stored as partial row pid_m."""
        sums = self.group.column_sums
        for name, value in sums.items():
            self.emit(f"# {name}: sum of {value} over the leading dims, one partial row a program")
            self.emit(f"acc_{name} = tl.zeros([BLOCK_N], dtype=tl.float32)")
        self.emit(
            "for row_block in range(tl.program_id(0), tl.cdiv(n_rows, BLOCK_M), tl.num_programs(0)):"
        )
        self.depth += 1
        self.emit("if INDEX_64:")
        self.emit("    rows = row_block.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)")
        self.emit("else:")
        self.emit("    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)")
        self.emit("row_mask = rows < n_rows")
        self.emit("mask = row_mask[:, None] & col_mask[None, :]")
        self._row_block()
        for name, value in sums.items():
            self.emit(f"acc_{name} += tl.sum(tl.where(mask, {self.var(value)}, 0.0), axis=0)")
        self.depth -= 1
        for name in sums:
            self.emit(
                f"tl.store(p_{name}_partial + pid_m * n_cols + cols, acc_{name}, mask=col_mask)"
            )


class _MatmulKernelWriter(_KernelWriter):
    """A tiled ``tl.dot`` matmul with its epilogue; with streaming row ops, the two-pass kernel."""

    def write(self) -> list[str]:
        group = self.group
        mm = group.nodes[0]
        # The matmul operands are passed as 3-D [batch, rows, inner] views by the launcher.
        head = ["a_ptr", "a_sb", "a_sm", "a_sk", "b_ptr", "b_sb", "b_sk", "b_sn"]
        sizes = [f"size{d}" for d in range(1, self.rank - 1)] + ["M", "N", "K"]
        constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "INDEX_64"]
        if group.has_row_op:
            self.n_cols = "N"
            self._write_row_passes(mm)
            constexprs[-1:-1] = [
                "SINGLE_K", "ONE_TILE", "EVEN_M", "EVEN_N", "LAST_ROWS_FIRST",
            ]  # fmt: skip
            doc = (
                '    """Matmul + streaming row ops: each program owns BLOCK_M whole rows and walks '
                "the N tiles twice\n    (statistics, then recomputed tiles and stores), or once "
                'when one tile spans the row (ONE_TILE)."""'
            )
        else:
            self._write_tiles(mm)
            doc = '    """Tiled tl.dot matmul (fp32 accumulator) with the fused pointwise epilogue."""'
        signature = self.signature(head, sizes, constexprs)
        lines = [*self.header_comment(), *signature, doc, *self.body]
        if not group.has_row_op:
            lines += ["", "", *self._write_persistent(mm, sizes)]
        return lines

    # ------------------------------------------------------------------ shared pieces
    def _precision(self) -> str:
        fp32 = self.gen.schemas[self.group.nodes[0].inputs[0]].dtype == "float32"
        return ', input_precision="ieee"' if fp32 else ""

    def _load_operands(self, a_mask: str, b_mask: str) -> None:
        """``a``/``b`` tiles at ``a_ptrs``/``b_ptrs``: unmasked when EVEN_K (no K tail), so the
        loop pipelines without predicates. Rows past M and columns past N wrap around
        (``% M``/``% N`` in the pointers) and are never stored, so they need no mask."""
        e = self.emit
        e("if EVEN_K:")
        e("    a = tl.load(a_ptrs)")
        e("    b = tl.load(b_ptrs)")
        e("else:")
        e(f"    a = tl.load(a_ptrs, mask={a_mask}, other=0.0)")
        e(f"    b = tl.load(b_ptrs, mask={b_mask}, other=0.0)")

    def _k_loop(self) -> None:
        """``acc`` = the [BLOCK_M, BLOCK_N] product at ``a_ptrs``/``b_ptrs`` (advanced over K)."""
        e = self.emit
        e("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        e("for k in range(0, tl.cdiv(K, BLOCK_K)):")
        self.depth += 1
        self._load_operands(
            "offs_k[None, :] < K - k * BLOCK_K", "offs_k[:, None] < K - k * BLOCK_K"
        )
        e(f"acc += tl.dot(a, b{self._precision()})")
        e("a_ptrs += BLOCK_K * a_sk")
        e("b_ptrs += BLOCK_K * b_sk")
        self.depth -= 1

    def _matmul_value(self, mm: IRNode) -> None:
        """The matmul node's value (plus a linear's bias) from ``acc``."""
        self._current = mm.name
        result = "acc"
        if mm.op == "linear" and len(mm.inputs) == 3:
            result = f"acc + {self.load(mm.inputs[2], FULL)}"
        self.emit(f"{self.var(mm.name)} = {result}")

    def _grouped_tile(self, index: str) -> None:
        """``pid_m``/``pid_n`` of tile ``index`` in GROUP_M order (``group_size`` bound before)."""
        e = self.emit
        e(f"first_m = ({index} // group_size) * GROUP_M")
        e("rows_in_group = tl.minimum(num_m - first_m, GROUP_M)")
        e(f"pid_m = first_m + ({index} % group_size) % rows_in_group")
        e(f"pid_n = ({index} % group_size) // rows_in_group")

    def _tile_masks(self, even_n: bool = False) -> None:
        """``cols``, ``col_mask`` and the tile's ``mask``; with ``even_n`` the kernel's EVEN_N
        (N a multiple of BLOCK_N) makes the column mask a constant the compiler folds away."""
        e = self.emit
        e("cols = offs_n")
        if even_n:
            e("if EVEN_N:  # no column tail: a constant mask, folded out of loads and selects")
            e("    col_mask = tl.full((BLOCK_N,), 1, tl.int1)")
            e("else:")
            e("    col_mask = offs_n < N")
        else:
            e("col_mask = offs_n < N")
        e("mask = row_mask[:, None] & col_mask[None, :]")

    # ------------------------------------------------------------------ plain tiled matmul
    def _write_tiles(self, mm: IRNode) -> None:
        group = self.group
        e = self.emit
        e("# one 1-D grid over batch x tiles (grid dims 1 and 2 are limited to 65535)")
        e("pid = tl.program_id(0)")
        e("num_m = tl.cdiv(M, BLOCK_M)")
        e("num_n = tl.cdiv(N, BLOCK_N)")
        e("pid_b = pid // (num_m * num_n)")
        e("pid = pid % (num_m * num_n)")
        e("if INDEX_64:")
        e("    pid_b = pid_b.to(tl.int64)")
        e("# grouped ordering: GROUP_M row-blocks share B column tiles while they sit in L2")
        e("group_size = GROUP_M * num_n")
        self._grouped_tile("pid")
        e("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
        e("offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        e("offs_k = tl.arange(0, BLOCK_K)")
        e("if INDEX_64:")
        e("    offs_m = offs_m.to(tl.int64)")
        e("    offs_n = offs_n.to(tl.int64)")
        e(f"# {_describe_node(mm, self.gen.schemas[mm.name])}")
        e("a_ptrs = a_ptr + pid_b * a_sb + (offs_m % M)[:, None] * a_sm + offs_k[None, :] * a_sk")
        e("b_ptrs = b_ptr + pid_b * b_sb + offs_k[:, None] * b_sk + (offs_n % N)[None, :] * b_sn")
        self._k_loop()
        e("# epilogue over the output domain: row = batch index * M + m")
        e("rows = pid_b * M + offs_m")
        e("row_mask = offs_m < M")
        self._tile_masks()
        self.row_coordinates()
        self._matmul_value(mm)
        for node in group.nodes[1:]:
            self.node_body(node)
        for value in group.outputs:
            self.store(value)

    # ------------------------------------------------------------------ persistent TMA matmul
    def _write_persistent(self, mm: IRNode, sizes: list[str]) -> list[str]:
        """The same matmul and epilogue for one 2-D problem (batch 1), reading A and B through
        TMA tensor descriptors (out-of-range rows, columns and the K tail read as zeros) in a
        persistent loop: program p takes tiles p, p + NUM_PROGRAMS, ... in GROUP_M order
        (NUM_PROGRAMS is one per SM; fewer tiles than that launch one program per tile)."""
        self.body, self.loaded, self.depth = [], {}, 1
        e = self.emit
        e("num_m = tl.cdiv(M, BLOCK_M)")
        e("num_n = tl.cdiv(N, BLOCK_N)")
        e("group_size = GROUP_M * num_n")
        e(f"# {_describe_node(mm, self.gen.schemas[mm.name])}")
        e("# flatten: the K loops of consecutive tiles form one software pipeline, so the next")
        e("# tile's loads are in flight while this one's epilogue runs")
        e("for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=True):")
        self.depth += 1
        self._grouped_tile("tile")
        e("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        e("for k in range(0, tl.cdiv(K, BLOCK_K)):")
        e("    a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])")
        e("    if B_NK:  # B stored [N, K] (a linear's weight)")
        e("        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T")
        e("    else:")
        e("        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])")
        e(f"    acc += tl.dot(a, b{self._precision()})")
        e("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
        e("offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        e("if INDEX_64:")
        e("    offs_m = offs_m.to(tl.int64)")
        e("    offs_n = offs_n.to(tl.int64)")
        e("# epilogue over the output domain (one batch entry: row = m)")
        e("rows = offs_m")
        e("row_mask = offs_m < M")
        self._tile_masks()
        self.row_coordinates()
        self._matmul_value(mm)
        for node in self.group.nodes[1:]:
            self.node_body(node)
        for value in self.group.outputs:
            self.store(value)
        constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "B_NK", "NUM_PROGRAMS"]
        signature = self.signature(
            ["a_desc", "b_desc"], sizes, [*constexprs, "INDEX_64"], suffix=PERSISTENT_SUFFIX
        )
        doc = (
            '    """Persistent TMA matmul (batch 1, Hopper tensor descriptors) with the same '
            'epilogue."""'
        )
        return [f"# kernel {self.group.index}, persistent TMA variant", *signature, doc, *self.body]

    # ------------------------------------------------------------------ matmul + row ops
    def _write_row_passes(self, mm: IRNode) -> None:
        group = self.group
        e = self.emit
        after = self.gen._after_row_ops(group)
        row_ops = [n for n in group.nodes if self.gen.registry.get(n.op).kind == "row"]
        e(
            "# one program per BLOCK_M whole rows of one batch entry (a 1-D grid: batch x row blocks)"
        )
        e("pid = tl.program_id(0)")
        e("num_m = tl.cdiv(M, BLOCK_M)")
        e("if LAST_ROWS_FIRST:  # every batch entry's last row block first, then the ones before")
        e("    n_batch = tl.num_programs(0) // num_m")
        e("    pid_b = pid % n_batch")
        e("    pid_m = num_m - 1 - pid // n_batch")
        e("else:")
        e("    pid_b = pid // num_m")
        e("    pid_m = pid % num_m")
        e("if INDEX_64:")
        e("    pid_b = pid_b.to(tl.int64)")
        e("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
        e("offs_k = tl.arange(0, BLOCK_K)")
        e("if INDEX_64:")
        e("    offs_m = offs_m.to(tl.int64)")
        e(f"# {_describe_node(mm, self.gen.schemas[mm.name])}")
        e("a_start = a_ptr + pid_b * a_sb + (offs_m % M)[:, None] * a_sm + offs_k[None, :] * a_sk")
        e("b_start = b_ptr + pid_b * b_sb + offs_k[:, None] * b_sk")
        e("if SINGLE_K:")
        e("    # the whole inner dim fits one block: the A tile is loaded once for every N tile")
        e("    if EVEN_K:")
        e("        a_whole = tl.load(a_start)")
        e("    else:")
        e("        a_whole = tl.load(a_start, mask=offs_k[None, :] < K, other=0.0)")
        e("rows = pid_b * M + offs_m")
        e("if EVEN_M:  # no row tail: a constant mask, folded out of loads and stores")
        e("    row_mask = tl.full((BLOCK_M,), 1, tl.int1)")
        e("else:")
        e("    row_mask = offs_m < M")
        self.row_coordinates()
        e("if ONE_TILE:")
        self.depth += 1
        self._write_one_tile(mm, row_ops, after)
        self.depth -= 1
        e("else:")
        self.depth += 1
        self._write_two_passes(mm, row_ops, after)
        self.depth -= 1

    def _write_one_tile(self, mm: IRNode, row_ops: list[IRNode], after: set[str]) -> None:
        """The row in one N tile: the product once, statistics from registers, then the stores."""
        e = self.emit
        e("# one tile spans the row: its product is computed once and never recomputed")
        self._tile(mm, None)
        for node in self.group.nodes[1:]:
            if node.name not in after:
                self.node_body(node)
        for node in row_ops:
            stat, x = self._stat(node), self.operand(node.inputs[0])
            e(f"# {_describe_node(node, self.gen.schemas[node.name])}: statistics of the row")
            if node.op in ("softmax", "amax"):
                e(f"{stat}_max = tl.max({self.masked(x, NEG_INF)}, axis=1)[:, None]")
            if node.op in ("sum", "mean"):
                e(f"{stat}_sum = tl.sum({self.masked(x, '0.0')}, axis=1)[:, None]")
            if node.op == "softmax":
                e("# a row of only -inf keeps a 0 shift (torch gives NaN there, so do we: 0 / 0)")
                e(f"{stat}_shift = tl.where({stat}_max == {NEG_INF}, 0.0, {stat}_max)")
                e(f"{stat}_shift2 = {stat}_shift * {LOG2E}")
                e(f"{stat}_exp = {self.masked(self._exp_shifted(x, stat + '_shift2'), '0.0')}")
                e(f"{stat}_scale = 1.0 / tl.sum({stat}_exp, axis=1)[:, None]")
        self._results_and_stores(row_ops, after, one_tile=True)

    def _write_two_passes(self, mm: IRNode, row_ops: list[IRNode], after: set[str]) -> None:
        """Pass 1 over the N tiles for the statistics, pass 2 recomputing each tile to store;
        with a softmax mask (:meth:`_masked_softmax`) only the tiles from the first to the last
        one it leaves any element of are computed."""
        e = self.emit
        where = self._masked_softmax(row_ops)
        e("# pass 1: running statistics of the row ops over the N tiles")
        if where is not None:
            self._scan_kept_tiles(where.inputs[0])
        for node in row_ops:
            stat = self._stat(node)
            if node.op in ("softmax", "amax"):
                e(f"{stat}_max = tl.full((BLOCK_M, 1), {NEG_INF}, tl.float32)")
            if node.op != "amax":
                e(f"{stat}_sum = tl.zeros((BLOCK_M, 1), dtype=tl.float32)")
        span = "0, N" if where is None else "first_tile, end_tile"  # with a mask: the kept range
        self._tile(mm, span)
        for node in self.group.nodes[1:]:
            if node.name not in after:
                self.node_body(node)
        for node in row_ops:
            self._update_stat(node)
        self.depth -= 1
        e("# pass 2: the tiles again (recomputed: only the outputs reach memory)")
        for node in row_ops:
            if node.op == "softmax":
                stat = self._stat(node)
                e("# a row of only -inf keeps a 0 shift (torch gives NaN there, so do we: 0 / 0)")
                e(f"{stat}_shift = tl.where({stat}_max == {NEG_INF}, 0.0, {stat}_max)")
                e(f"{stat}_shift2 = {stat}_shift * {LOG2E}")
                e(f"{stat}_scale = 1.0 / {stat}_sum  # one division per row, not per element")
        if where is not None:
            self._store_hidden_tiles(row_ops[0], "0, first_tile")
        self._tile(mm, span)
        self._results_and_stores(row_ops, after, one_tile=False)
        self.depth -= 1
        if where is not None:
            self._store_hidden_tiles(row_ops[0], "end_tile, N")

    def _scan_kept_tiles(self, mask: str) -> None:
        """``first_tile``/``end_tile``: the N range from the first tile with a true ``mask``
        element to past the last (empty when there is none), found before the passes so their
        loops keep plain bounds the compiler pipelines."""
        e = self.emit
        e(f"# the N tiles {mask} leaves an element of: the others add nothing to the softmax")
        e("first_tile = tl.full((), 0, tl.int32) + N")
        e("end_tile = first_tile * 0")
        self._tile_start("0, N")
        kept = self.operand(mask)
        e(f"kept = tl.max({kept}.to(tl.int32)) != 0")
        e("first_tile = tl.where(kept, tl.minimum(first_tile, n_start), first_tile)")
        e("end_tile = tl.where(kept, n_start + BLOCK_N, end_tile)")
        self.depth -= 1
        e("end_tile = tl.maximum(end_tile, first_tile)  # no kept tile: an empty range at N")

    def _store_hidden_tiles(self, softmax: IRNode, span: str) -> None:
        """Pass 2 over the tiles of ``span`` the mask hides throughout: exp(-inf - shift) *
        scale = 0 * scale without the product (NaN where the whole row is masked, as computing
        the tile gives)."""
        self._tile_start(span)
        self.emit("# every score of the tile is masked")
        self.emit(
            f"{self.var(softmax.name)} = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"
            f" + 0.0 * {self._stat(softmax)}_scale"
        )
        self.store(softmax.name)
        self.depth -= 1

    def _masked_softmax(self, row_ops: list[IRNode]) -> IRNode | None:
        """The ``where`` whose mask's all-false N tiles the two passes skip, or None. Only where
        the group is ``softmax(where(mask, x, other=-inf))`` with ``mask`` read from memory and
        nothing else reaching memory: a tile with no true mask element then adds nothing to the
        row's statistics and stores exactly ``0 * scale``, whatever its product holds (NaN and
        inf included)."""
        group = self.group
        if len(row_ops) != 1 or row_ops[0].op != "softmax" or group.nodes[-1] is not row_ops[0]:
            return None
        softmax = row_ops[0]
        if group.outputs != [softmax.name]:
            return None
        where = next((n for n in group.nodes if n.name == softmax.inputs[0]), None)
        if where is None or where.op != "where" or len(where.inputs) != 2:
            return None
        if scalar_attr(where.attrs, "other") != float("-inf"):
            return None
        users = sum(n.inputs.count(where.name) for n in group.nodes)
        if where.inputs[0] in group.space or users != 1:
            return None  # a mask computed in the kernel, or the masked scores used elsewhere
        return where

    def _results_and_stores(
        self, row_ops: list[IRNode], after: set[str], *, one_tile: bool
    ) -> None:
        """The row ops' results, the nodes after them (``after``; the others too when each tile
        is recomputed), and the group's stores."""
        group = self.group
        row_names = {n.name for n in row_ops}
        for node in group.nodes[1:]:
            if node.name in row_names:
                self._row_result(node, one_tile=one_tile)
            elif one_tile and node.name not in after:
                continue  # computed before the statistics
            else:
                self.node_body(node)
        for value in group.outputs:
            # per-row values: stored by the first tile only
            once = " & ((rows * 0 + n_start) == 0)[:, None]" if group.space[value] == ROW else ""
            self.store(value, extra_mask=once)

    @staticmethod
    def _stat(node: IRNode) -> str:
        return f"s_{node.name}"

    @staticmethod
    def _exp_shifted(x: str, shift2: str) -> str:
        """exp(x - shift) given ``shift2`` = shift * log2(e): see :data:`LOG2E`."""
        return f"tl.exp2(tl.fma({x}, {LOG2E}, -{shift2}))"

    def _tile_start(self, span: str | None) -> None:
        """Open an N tile: a loop over ``range(span, BLOCK_N)`` (body one level deeper), or the
        one tile at column 0 when ``span`` is None; then its offsets and masks."""
        e = self.emit
        if span is not None:
            e(f"for n_start in range({span}, BLOCK_N):")
            self.depth += 1
        else:
            e("n_start = 0")
        self.loaded = {}  # loads are per tile
        e("offs_n = n_start + tl.arange(0, BLOCK_N)")
        e("if INDEX_64:")
        e("    offs_n = offs_n.to(tl.int64)")
        self._tile_masks(even_n=True)

    def _tile(self, mm: IRNode, span: str | None) -> None:
        """An N tile (:meth:`_tile_start`) whose body begins with the tile's matmul value."""
        e = self.emit
        self._tile_start(span)
        e("b_ptrs = b_start + (offs_n % N)[None, :] * b_sn")
        e("if SINGLE_K:")
        self.depth += 1
        e("if EVEN_K:")
        e("    b = tl.load(b_ptrs)")
        e("else:")
        e("    b = tl.load(b_ptrs, mask=offs_k[:, None] < K, other=0.0)")
        e(f"acc = tl.dot(a_whole, b{self._precision()})")
        self.depth -= 1
        e("else:")
        self.depth += 1
        e("a_ptrs = a_start")
        self._k_loop()
        self.depth -= 1
        self._matmul_value(mm)

    def _update_stat(self, node: IRNode) -> None:
        e = self.emit
        stat, x = self._stat(node), self.operand(node.inputs[0])
        e(f"# {_describe_node(node, self.gen.schemas[node.name])}: running statistics")
        if node.op in ("sum", "mean"):
            e(f"{stat}_sum += tl.sum({self.masked(x, '0.0')}, axis=1)[:, None]")
            return
        e(f"tile_max = tl.max({self.masked(x, NEG_INF)}, axis=1)[:, None]")
        if node.op == "amax":
            e(f"{stat}_max = tl.maximum({stat}_max, tile_max)")
            return
        # online softmax: rescale the running sum to the new max
        e(f"new_max = tl.maximum({stat}_max, tile_max)")
        e(f"shift2 = tl.where(new_max == {NEG_INF}, 0.0, new_max) * {LOG2E}")
        e(
            f"{stat}_sum = {stat}_sum * tl.exp2({stat}_max * {LOG2E} - shift2) + "
            f"tl.sum({self.masked(self._exp_shifted(x, 'shift2'), '0.0')}, axis=1)[:, None]"
        )
        e(f"{stat}_max = new_max")

    def _row_result(self, node: IRNode, *, one_tile: bool = False) -> None:
        schema = self.gen.schemas[node.name]
        stat = self._stat(node)
        self.emit(f"# {_describe_node(node, schema)}")
        if node.op == "softmax" and one_tile:
            expr = f"{stat}_exp * {stat}_scale"
        elif node.op == "softmax":
            x = self.operand(node.inputs[0])
            expr = f"{self._exp_shifted(x, stat + '_shift2')} * {stat}_scale"
        elif node.op == "sum":
            expr = f"{stat}_sum"
        elif node.op == "mean":
            expr = f"{stat}_sum / N"
        else:
            expr = f"{stat}_max"
        self.emit(f"{self.var(node.name)} = ({expr}).to({self.compute})")
