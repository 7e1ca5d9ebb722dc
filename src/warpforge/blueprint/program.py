"""Running a blueprint: bind symbolic dims, then execute its plan with kernels or references.

:func:`run_reference` evaluates every node with its PyTorch reference (the fallback and the
meaning of the graph). :class:`KernelProgram` runs the generated kernels of a :class:`Plan`
group by group, with PyTorch ops for "torch" groups, choosing block sizes per call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from warpforge.blueprint import cublas_epilogue
from warpforge.blueprint.codegen import (
    FULL,
    PERSISTENT_SUFFIX,
    CodegenError,
    FusionGroup,
    Plan,
    loaded_inputs,
)
from warpforge.blueprint.cublas_epilogue import CublasEpilogue
from warpforge.blueprint.generated_modules import generated_kernel
from warpforge.blueprint.ir import BlueprintIR, IRNode, TensorSchema
from warpforge.blueprint.registry import (
    OperatorRegistry,
    OperatorSpec,
    broadcast_shapes,
    torch_dtype,
)
from warpforge.validation import describe

MAX_ROW_BLOCK = 32768
"""Longest row a row group holds in registers; longer rows fall back to PyTorch."""
_INT32_LIMIT = 2**31 - 1
_MAX_GRID_Y = 65535

USE_TMA = True
"""Plain matmul groups launch their persistent TMA kernel where the operands allow it (see
:func:`tma_operands`); tests switch it off to run the pointer kernel."""

LAST_ROWS_FIRST = True
"""Matmul groups with row ops launch every batch entry's last row block first, then the ones
before it (``LAST_ROWS_FIRST``), instead of batch entry by batch entry: under a causal mask the
last rows are the longest, and starting the longest first leaves short ones to fill the end of
the grid. On since the twenty-second session: on the H200 it took causal_attention_scores'
kernel from 114.7 to 98.4 µs at T = 1024 and from 377.4 to 365.4 µs at T = 2048, and left
T = 4096 within noise (1499.3 against 1507.2 µs; ``scripts/gpu/masked_softmax_ab.py``,
``benchmarks/results/session22-h200-2026-11-29/masked-softmax-ab-call6.json``)."""

POISON_OUTPUTS = False
"""Tests set this to fill output buffers with NaN (or True for bool) before kernels write them,
so an element a kernel forgets to store shows up instead of passing by luck."""


def bind_inputs(ir: BlueprintIR, tensors: Sequence[object]) -> dict[str, int]:
    """Check call arguments against the input schemas; returns symbolic dim -> size."""
    if len(tensors) != len(ir.inputs):
        raise TypeError(
            f"blueprint {ir.name!r}: expected {len(ir.inputs)} tensor argument(s) "
            f"({', '.join(ir.input_names)}), got {len(tensors)}"
        )
    bindings: dict[str, int] = {}
    device = None
    for (name, schema), tensor in zip(ir.inputs, tensors, strict=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {describe(tensor)}")
        if device is None:
            device = tensor.device
        elif tensor.device != device:
            raise ValueError(f"{name}: expected a tensor on {device}, got {describe(tensor)}")
        if tensor.dtype != torch_dtype(schema.dtype):
            raise TypeError(f"{name}: expected dtype {schema.dtype}, got {describe(tensor)}")
        if tensor.dim() != schema.rank:
            raise ValueError(f"{name}: expected shape {list(schema.shape)}, got {describe(tensor)}")
        for axis, (dim, size) in enumerate(zip(schema.shape, tensor.shape, strict=True)):
            if isinstance(dim, int):
                if dim != size:
                    raise ValueError(
                        f"{name}: expected size {dim} in dim {axis} (shape {list(schema.shape)}), "
                        f"got {describe(tensor)}"
                    )
            elif bindings.setdefault(dim, size) != size:
                raise ValueError(
                    f"{name}: dim {dim!r} is {bindings[dim]} in an earlier input, "
                    f"got {size} here ({describe(tensor)})"
                )
    return bindings


def concrete(shape: Sequence[Any], bindings: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else bindings[d] for d in shape)


def _bound_attrs(spec: OperatorSpec, node: IRNode, bindings: Mapping[str, int]) -> dict[str, Any]:
    attrs = dict(node.attrs)
    for key in spec.shape_attrs:
        attrs[key] = [bindings[d] if isinstance(d, str) else d for d in attrs[key]]
    return attrs


def run_node_reference(
    registry: OperatorRegistry,
    node: IRNode,
    args: Sequence[torch.Tensor],
    bindings: Mapping[str, int],
) -> torch.Tensor:
    spec = registry.get(node.op)
    return spec.reference(*args, **_bound_attrs(spec, node, bindings))


def run_reference(
    ir: BlueprintIR, tensors: Sequence[torch.Tensor], registry: OperatorRegistry
) -> tuple[torch.Tensor, ...]:
    """The blueprint evaluated node by node with PyTorch references (differentiable)."""
    bindings = bind_inputs(ir, tensors)
    env: dict[str, torch.Tensor] = dict(zip(ir.input_names, tensors, strict=True))
    for node in ir.topological_order():
        env[node.name] = run_node_reference(registry, node, [env[v] for v in node.inputs], bindings)
    return tuple(env[v] for _, v in ir.outputs)


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _tma_ready(tensor: torch.Tensor) -> bool:
    """A 2-D tensor a TMA descriptor can address: unit last stride, 16-byte aligned base and
    row stride."""
    size = tensor.element_size()
    return (
        tensor.stride(-1) == 1
        and tensor.data_ptr() % 16 == 0
        and (tensor.stride(0) * size) % 16 == 0
        and tensor.stride(0) > 0
    )


def tma_operands(
    a3: torch.Tensor, b3: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """(A [M, K], B as stored, whether B is [N, K]) for the persistent TMA kernel, or None when it
    cannot run: a batch, operands without a unit-stride dim, or misaligned strides. TMA needs a
    Hopper GPU (or Triton's interpreter, which emulates it)."""
    if not USE_TMA or a3.shape[0] != 1:
        return None
    device = a3.device
    if device.type == "cuda":
        from warpforge import runtime

        if not runtime.device_capabilities(device).has_tma:
            return None
    a, b = a3[0], b3[0]
    if not _tma_ready(a):
        return None
    if b.stride(-1) == 1 and _tma_ready(b):
        return a, b, False
    if b.stride(0) == 1 and _tma_ready(b.t()):
        return a, b.t(), True
    return None


def _persistent_stride(device: torch.device) -> int:
    """Programs of a persistent matmul when there are enough tiles: one per SM (4 under the
    interpreter). It is the kernel's tile stride (a constexpr), fixed per device, so a new
    problem size never compiles a new kernel; fewer tiles launch fewer programs."""
    if device.type != "cuda":
        return 4
    from warpforge import runtime

    return max(1, runtime.device_capabilities(device).sm_count or 1)


def _column_sum_programs(device: torch.device) -> int:
    """Row-block programs of a row group with column sums: four a multiprocessor on a GPU (each
    adds its rows into registers, so more programs only add partial rows to sum); three under
    the interpreter, so that tests walk several row blocks a program."""
    if device.type != "cuda":
        return 3
    return 4 * _persistent_stride(device)


def _max_offset(tensor: torch.Tensor) -> int:
    return sum(
        (size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride(), strict=True)
    )


MAX_LAUNCH_PLANS = 256
"""Row-group launch plans kept per program (one per input shapes/strides); cleared when full."""


@dataclass(frozen=True)
class _RowLaunch:
    """A row group's launch for one input layout: all but the tensors themselves."""

    outputs: tuple[tuple[str, tuple[int, ...], torch.dtype], ...]  # value, shape, dtype
    input_strides: tuple[tuple[int, ...], ...]  # of each input's broadcast view
    output_strides: tuple[tuple[int, ...], ...]  # of each output's view over the domain
    sizes: tuple[int, ...]  # inner domain sizes, then n_rows, n_cols
    grid: tuple[int, int] | None  # None: an empty domain, nothing to launch
    options: dict[str, Any]
    kernel: Any  # the @triton.jit function of this program's module
    column_sums: tuple[tuple[str, tuple[int, ...], torch.dtype], ...] = ()
    """Per column sum of the group: its value, shape and dtype; the kernel writes grid[0]
    float32 partial rows of n_cols, which are added after the launch."""


def set_up_triton_driver() -> None:
    """Triton's GPU driver (and the utilities it builds on first use) set up in this thread."""
    from triton.runtime import driver

    driver.active.get_current_device()


class KernelProgram:
    """A plan plus its loaded Triton module; ``run`` executes it on validated inputs."""

    def __init__(
        self, ir: BlueprintIR, plan: Plan, module: Any, registry: OperatorRegistry
    ) -> None:
        self.ir = ir
        self.plan = plan
        self.module = module
        self.registry = registry
        # While lists, each JIT launch appends what Triton returns (its CompiledKernel on a GPU)
        # and (kernel, args, options): the compiler sets them for the first run to collect the
        # binaries it stores and the launch records (warpforge.blueprint.triton_direct).
        self.launched: list[Any] | None = None
        self.launch_calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] | None = None
        # Recorded launches of the registry entry this program was loaded from (CUDA only).
        self.direct: Any = None
        self._row_launches: dict[tuple[Any, ...], _RowLaunch] = {}
        self._cublas: dict[int, CublasEpilogue | None] = {}
        """Per matmul group: its cuBLASLt lowering (warpforge.blueprint.cublas_epilogue)."""
        self._input_names = tuple(ir.input_names)
        self._output_values = tuple(v for _, v in ir.outputs)
        self._launches: dict[tuple[Any, ...], dict[str, int]] = {}
        """Launch configs per (group, sizes, device): warpforge.tune is asked once for each."""
        self._dry_run: list[tuple[Any, tuple[int, ...], list[Any], dict[str, Any]]] | None = None
        """While a list, launches are recorded there instead of made (:meth:`compile_ahead`)."""

    def run(
        self, tensors: Sequence[torch.Tensor], bindings: Mapping[str, int] | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Outputs for ``tensors``; ``bindings`` (from :func:`bind_inputs`) skips re-validation."""
        if bindings is None:
            bindings = bind_inputs(self.ir, tensors)
        env: dict[str, torch.Tensor] = dict(zip(self._input_names, tensors, strict=True))
        for group in self.plan.groups:
            if group.kind == "torch":
                node = group.nodes[0]
                env[node.name] = run_node_reference(
                    self.registry, node, [env[v] for v in node.inputs], bindings
                )
            elif group.kind == "rows":
                self._run_rows(group, env, bindings)
            else:
                self._run_matmul(group, env, bindings)
        return tuple([env[v] for v in self._output_values])

    # ------------------------------------------------------------------------ helpers
    def _outputs(
        self,
        group: FusionGroup,
        domain: tuple[int, ...],
        device: torch.device,
        bindings: Mapping[str, int],
    ) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """(value, view the kernel writes through domain strides, tensor handed on).

        A value smaller than the domain is written through a broadcast (stride 0) view: every
        program that computes it writes the same numbers to the same place.
        """
        out = []
        for value in group.outputs:
            schema: TensorSchema = self.plan.schemas[value]
            dtype = torch_dtype(schema.dtype)
            buffer = torch.empty(concrete(schema.shape, bindings), dtype=dtype, device=device)
            if POISON_OUTPUTS:
                buffer.fill_(True if dtype == torch.bool else float("nan"))
            view = buffer
            node = next(n for n in group.nodes if n.name == value)
            if node.op in ("sum", "mean", "amax") and not node.attrs.get("keepdim", False):
                view = buffer.unsqueeze(-1)
            size = domain if group.space[value] == FULL else (*domain[:-1], 1)
            out.append((value, view.expand(size), buffer))
        return out

    def _launch(self, group: FusionGroup, sizes: tuple[Any, ...], device: torch.device) -> dict:
        key = (group.index, sizes, device)
        config = self._launches.get(key)
        if config is None:
            from warpforge.blueprint.launch import launch_config

            config = self._launches[key] = launch_config(
                self.ir, self.plan, group, sizes, device, self.registry
            )
        return config

    def _run_rows(
        self,
        group: FusionGroup,
        env: dict[str, torch.Tensor],
        bindings: Mapping[str, int],
        config: Mapping[str, int] | None = None,
    ) -> None:
        """Launch a row group; ``config`` (BLOCK_M, BLOCK_N, num_warps) overrides the tuned one."""
        inputs = [env[v] for v in group.inputs]
        # Everything but the tensors themselves follows from the bindings and the inputs'
        # shapes and strides: worked out once per such key, then each call only allocates the
        # outputs and launches.
        key = (
            group.index,
            tuple(bindings.values()),
            *[(t.shape, t.stride()) for t in inputs],
            tuple(sorted(config.items())) if config else None,
        )
        launch = self._row_launches.get(key)
        if launch is None:
            launch = self._plan_rows(group, inputs, bindings, config)
            if len(self._row_launches) >= MAX_LAUNCH_PLANS:
                self._row_launches.clear()
            self._row_launches[key] = launch
        device = inputs[0].device if inputs else torch.device("cpu")
        args: list[Any] = []
        for tensor, strides in zip(inputs, launch.input_strides, strict=True):
            args.append(tensor)  # same data pointer as the broadcast view the strides describe
            args += strides
        for (value, shape, dtype), strides in zip(
            launch.outputs, launch.output_strides, strict=True
        ):
            buffer = torch.empty(shape, dtype=dtype, device=device)
            if POISON_OUTPUTS:
                buffer.fill_(True if dtype == torch.bool else float("nan"))
            env[value] = buffer
            args.append(buffer)
            args += strides
        if launch.grid is None:
            for value, shape, dtype in launch.column_sums:  # no rows: a sum of nothing
                env[value] = torch.zeros(shape, dtype=dtype, device=device)
            return
        partials = []
        for _value, _shape, _dtype in launch.column_sums:
            partial = torch.empty(
                (launch.grid[0], launch.sizes[-1]), dtype=torch.float32, device=device
            )
            if POISON_OUTPUTS:
                partial.fill_(float("nan"))
            partials.append(partial)
            args.append(partial)
        args += launch.sizes
        self._launch_kernel(launch.kernel, launch.grid, args, launch.options)
        for (value, shape, dtype), partial in zip(launch.column_sums, partials, strict=True):
            env[value] = partial.sum(0).to(dtype).reshape(shape)

    def compile_ahead(self, tensors: Sequence[torch.Tensor]) -> int:
        """Compile the kernels a first run of ``tensors`` launches, all at once, before it.

        A dry run (outputs allocated, PyTorch steps run, no kernel launched) records each
        launch; then one thread per distinct kernel has Triton compile it for those arguments
        (``warmup``) and load it, building its launcher. Triton spends much of a compile waiting
        on ``ptxas`` and the host compiler in subprocesses, so the kernels' compiles overlap.
        The run that follows finds them compiled. Returns the number of kernels compiled; an
        error propagates (the caller then compiles them one by one as they launch)."""
        distinct = {
            (id(k), tuple(sorted(o.items()))): (k, g, a, o)
            for k, g, a, o in self.record_launches(tensors)
        }
        if len(distinct) < 2:
            return 0  # nothing to overlap: the run compiles it as usual
        import concurrent.futures

        set_up_triton_driver()  # once, in this thread: the workers only compile and load

        def compile_one(kernel: Any, grid: tuple[int, ...], args: list[Any], options: dict) -> None:
            compiled = kernel.warmup(*args, grid=grid, **options)
            init_handles = getattr(compiled, "_init_handles", None)
            if init_handles is not None:  # Triton >= 3.3 loads and builds the launcher lazily
                init_handles()

        workers = min(len(distinct), 8)
        with concurrent.futures.ThreadPoolExecutor(workers, "warpforge-compile") as pool:
            futures = [pool.submit(compile_one, *record) for record in distinct.values()]
            for future in futures:
                future.result()
        return len(distinct)

    def record_launches(
        self, tensors: Sequence[torch.Tensor]
    ) -> list[tuple[Any, tuple[int, ...], list[Any], dict[str, Any]]]:
        """The (kernel, grid, args, options) a run of ``tensors`` launches, in order, from a dry
        run: outputs are allocated and PyTorch steps run, but no kernel is launched."""
        records: list[tuple[Any, tuple[int, ...], list[Any], dict[str, Any]]] = []
        self._dry_run = records
        try:
            self.run(tensors)
        finally:
            self._dry_run = None
        return records

    def _launch_kernel(
        self, kernel: Any, grid: tuple[int, ...], args: list[Any], options: dict[str, Any]
    ) -> None:
        """``kernel[grid](*args, **options)``, through the recorded binary where one applies."""
        if self._dry_run is not None:
            self._dry_run.append((kernel, tuple(grid), list(args), dict(options)))
            return
        direct = self.direct
        if direct is not None and direct.launch(kernel, grid, args, options):
            return
        launched = kernel[grid](*args, **options)
        if self.launched is not None:
            self.launched.append(launched)
        if self.launch_calls is not None:
            self.launch_calls.append((kernel, tuple(args), dict(options)))

    def _plan_rows(
        self,
        group: FusionGroup,
        inputs: Sequence[torch.Tensor],
        bindings: Mapping[str, int],
        config: Mapping[str, int] | None,
    ) -> _RowLaunch:
        """Block sizes, grid, strides and output layouts of a row group for these inputs;
        ``config`` (BLOCK_M, BLOCK_N, num_warps) overrides the tuned one."""
        shape = concrete(group.domain, bindings)
        domain = shape or (1,)
        n_cols = domain[-1]
        n_rows = math.prod(domain[:-1])
        views = [t.expand(domain) if t.dim() else t.reshape(1).expand(domain) for t in inputs]
        # Output layouts from meta tensors: shapes and strides without allocating.
        outputs = self._outputs(group, domain, torch.device("meta"), bindings)
        out_specs = tuple((value, tuple(b.shape), b.dtype) for value, _, b in outputs)
        out_views = [view for _, view, _ in outputs]
        input_strides = tuple(tuple(v.stride()) for v in views)
        output_strides = tuple(tuple(v.stride()) for v in out_views)
        sums = tuple(
            (name, concrete(self.plan.schemas[name].shape, bindings),
             torch_dtype(self.plan.schemas[name].dtype))
            for name in group.column_sums
        )  # fmt: skip
        if n_rows == 0 or n_cols == 0:
            return _RowLaunch(out_specs, input_strides, output_strides, (), None, {}, None, sums)
        if group.has_row_op and _next_pow2(n_cols) > MAX_ROW_BLOCK:
            raise CodegenError(
                f"row group {group.kernel_name}: rows of {n_cols} elements exceed the "
                f"{MAX_ROW_BLOCK}-element register budget of a row kernel"
            )
        device = inputs[0].device if inputs else torch.device("cpu")
        config = config or self._launch(group, (n_rows, n_cols), device)
        block_m, block_n, num_warps = config["BLOCK_M"], config["BLOCK_N"], config["num_warps"]
        index_64 = n_rows + block_m > _INT32_LIMIT or any(
            _max_offset(t) + block_n > _INT32_LIMIT for t in (*views, *out_views)
        )
        sizes = (*(domain[d] for d in range(1, len(domain) - 1)), n_rows, n_cols)
        grid = (math.ceil(n_rows / block_m), math.ceil(n_cols / block_n))
        if sums:  # each program walks a strided set of row blocks: a few partial rows to add
            grid = (min(grid[0], _column_sum_programs(device)), grid[1])
        if grid[1] > _MAX_GRID_Y:
            raise CodegenError(
                f"row group {group.kernel_name}: {n_cols} columns need {grid[1]} column tiles, "
                f"more than the {_MAX_GRID_Y} a CUDA grid allows"
            )
        options = {
            "BLOCK_M": block_m,
            "BLOCK_N": block_n,
            "INDEX_64": index_64,
            "num_warps": num_warps,
        }
        kernel = generated_kernel(self.module, group.kernel_name)
        return _RowLaunch(
            out_specs, input_strides, output_strides, sizes, grid, options, kernel, sums
        )

    def _run_cublas(
        self,
        group: FusionGroup,
        a3: torch.Tensor,
        b3: torch.Tensor,
        env: dict[str, torch.Tensor],
        bindings: Mapping[str, int],
    ) -> bool:
        """Run ``group`` as one cuBLASLt GEMM with its epilogue when it matches and the
        operands allow (one batch entry, a device cublas_epilogue lowers on); False otherwise."""
        if not cublas_epilogue.ENABLED or a3.device.type not in cublas_epilogue.DEVICE_TYPES:
            return False
        if group.index not in self._cublas:
            self._cublas[group.index] = cublas_epilogue.match(group, self.plan)
        lowering = self._cublas[group.index]
        if lowering is None or a3.shape[0] != 1 or min(a3.shape[1:]) == 0 or b3.shape[-1] == 0:
            return False
        bias = env[lowering.bias]
        output = group.outputs[0]
        result = lowering.run(a3[0], b3[0], bias)
        env[output] = result.reshape(concrete(self.plan.schemas[output].shape, bindings))
        return True

    def _run_matmul(
        self,
        group: FusionGroup,
        env: dict[str, torch.Tensor],
        bindings: Mapping[str, int],
        config: Mapping[str, int] | None = None,
    ) -> None:
        """Launch a matmul group; ``config`` (BLOCK_M/N/K, GROUP_M, num_warps, num_stages)
        overrides the tuned one."""
        mm = group.nodes[0]
        a, b = env[mm.inputs[0]], env[mm.inputs[1]]
        if mm.op == "linear":
            a = a.reshape(-1, a.shape[-1])
            b = b.t()
        batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]])
        a3 = a.expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = b.expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        n_batch, m, k = a3.shape
        n = b3.shape[-1]
        if self._run_cublas(group, a3, b3, env, bindings):
            return
        domain = concrete(self.plan.schemas[mm.name].shape, bindings)
        views = [env[v].expand(domain) for v in loaded_inputs(group)]
        outputs = self._outputs(group, domain, a.device, bindings)
        for value, _, handed in outputs:
            env[value] = handed
        if m == 0 or n == 0 or n_batch == 0:
            return
        if k == 0:
            raise CodegenError(f"matmul group {group.kernel_name}: an empty inner dimension")
        config = config or self._launch(group, (n_batch, m, n, k), a.device)
        block_m, block_n, block_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        buffers = [buffer for _, buffer, _ in outputs]
        index_64 = any(_max_offset(t) + block_n > _INT32_LIMIT for t in (a3, b3, *views, *buffers))
        args: list[Any] = [a3, *a3.stride(), b3, *b3.stride()]
        for tensor in views:
            args += [tensor, *tensor.stride()]
        for buffer in buffers:
            args += [buffer, *buffer.stride()]
        args += [domain[d] for d in range(1, len(domain) - 1)]
        args += [m, n, k]
        options: dict[str, Any] = {
            "BLOCK_M": block_m,
            "BLOCK_N": block_n,
            "BLOCK_K": block_k,
            "GROUP_M": config["GROUP_M"],
            "INDEX_64": index_64,
            "num_warps": config["num_warps"],
            "num_stages": config["num_stages"],
        }
        tiles = math.ceil(m / block_m) * math.ceil(n / block_n)
        tma = None if group.has_row_op else tma_operands(a3, b3)
        if tma is not None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            a2, b2, b_nk = tma
            stride = _persistent_stride(a.device)
            # program p takes tiles p, p + stride, ...: with fewer tiles than `stride`, one each
            programs = min(tiles, stride)
            b_block = [block_n, block_k] if b_nk else [block_k, block_n]
            args[: len(a3.stride()) + len(b3.stride()) + 2] = [
                TensorDescriptor.from_tensor(a2, [block_m, block_k]),
                TensorDescriptor.from_tensor(b2, b_block),
            ]
            options.update(B_NK=b_nk, NUM_PROGRAMS=stride)
            grid = (programs,)
            kernel = generated_kernel(self.module, group.kernel_name + PERSISTENT_SUFFIX)
        else:
            options["EVEN_K"] = k % block_k == 0
            if group.has_row_op:  # each program walks whole rows: one per BLOCK_M rows
                grid = (math.ceil(m / block_m) * n_batch,)
                options["SINGLE_K"] = k <= block_k
                options["ONE_TILE"] = n <= block_n  # the product computed once, not twice
                # no row or column tail: the masks become constants the compiler folds away
                options["EVEN_M"] = m % block_m == 0
                options["EVEN_N"] = n % block_n == 0
                options["LAST_ROWS_FIRST"] = LAST_ROWS_FIRST
            else:
                grid = (tiles * n_batch,)
            kernel = generated_kernel(self.module, group.kernel_name)
        self._launch_kernel(kernel, grid, args, options)
