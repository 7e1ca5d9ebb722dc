"""The generated kernels of the blueprint benchmark suite as ``warpforge.tune`` tunables.

Importing this module registers each generated kernel of each suite problem
(``warpforge.blueprint.problems``) as a :class:`~warpforge.tune.tunable.TunableKernel` named like
its launch lookup (:func:`warpforge.blueprint.launch.tunable_name`), so
``warpforge tune blueprint.bias_gelu.k0_add_gelu`` tunes it. A trial launches that one kernel on
inputs produced by the groups before it (computed once, with the PyTorch references), and is
checked against the PyTorch references of the kernel's own nodes; its features are exactly those
the compiled blueprint looks up at launch.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping

import torch

from warpforge.blueprint.codegen import (
    TEMPLATE_VERSIONS,
    FusionGroup,
    KernelSourceGenerator,
    Plan,
    loaded_inputs,
    template_of,
)
from warpforge.blueprint.ir import BlueprintIR
from warpforge.blueprint.launch import (
    LAUNCH_VERSION,
    graph_identity,
    group_features,
    matmul_default,
    matmul_sizes,
    plan_of,
    rows_default,
    space_of,
    tunable_name,
)
from warpforge.blueprint.program import KernelProgram, bind_inputs, concrete, run_node_reference
from warpforge.blueprint.registry import default_registry
from warpforge.tune.tunable import Shape, TunableKernel, register_tunable, source_hash


def _int(mapping: Mapping[str, object], key: str) -> int:
    return int(mapping[key])  # type: ignore[call-overload]


def _reads(group: FusionGroup) -> list[str]:
    """Every value a group's launcher takes from the environment, in a fixed order."""
    names = list(group.nodes[0].inputs[:2]) if group.kind == "matmul" else []
    return list(dict.fromkeys([*names, *loaded_inputs(group)]))


_PROGRAMS: dict[tuple[str, str], KernelProgram] = {}


def _program(ir: BlueprintIR, device: torch.device) -> KernelProgram:
    """The generated module of ``ir``, loaded once per process (outside the kernel registry)."""
    from warpforge.blueprint.generated_modules import load_source_module

    key = (ir.canonical_hash(), str(device))
    program = _PROGRAMS.get(key)
    if program is None:
        generator = KernelSourceGenerator(ir)
        plan = generator.plan()
        source = generator.source(plan).encode()
        module = load_source_module(source, "tune" + hashlib.sha256(source).hexdigest())
        program = _PROGRAMS[key] = KernelProgram(ir, plan, module, generator.registry)
    return program


def _group_tunable(
    problem_name: str,
    builder: Callable[[str], BlueprintIR],
    group_index: int,
    bind: Callable[[Shape], dict[str, int]],
) -> TunableKernel:
    from warpforge.harness.registry import get_problem

    problem = get_problem(problem_name)
    first_ir = builder(_dtype_name(problem.dtypes[0]))
    group = plan_of(first_ir).groups[group_index]
    name = tunable_name(first_ir, group)
    registry = default_registry()

    def ir_for(dtype: torch.dtype) -> BlueprintIR:
        return builder(_dtype_name(dtype))

    def this_group(ir: BlueprintIR) -> tuple[Plan, FusionGroup]:
        plan = plan_of(ir)
        return plan, plan.groups[group_index]

    def sizes(ir: BlueprintIR, shape: Shape) -> tuple[int, ...]:
        bindings = bind(shape)
        plan, grp = this_group(ir)
        if grp.kind == "rows":
            domain = concrete(grp.domain, bindings) or (1,)
            return math.prod(domain[:-1]), domain[-1]
        mm = grp.nodes[0]
        a, b = (concrete(plan.schemas[v].shape, bindings) for v in mm.inputs[:2])
        return matmul_sizes(mm.op, a, b)

    def features(shape: Shape, dtype: torch.dtype) -> dict[str, object]:
        ir = ir_for(dtype)
        plan, grp = this_group(ir)
        return group_features(
            graph_identity(ir, kind=template_of(grp)), plan, grp, sizes(ir, shape)
        )

    def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, generator):
        ir = ir_for(dtype)
        tensors = problem.make_inputs(shape, dtype, device, generator)
        bindings = bind_inputs(ir, tensors)
        plan, grp = this_group(ir)
        env = dict(zip(ir.input_names, tensors, strict=True))
        for earlier in plan.groups[:group_index]:
            for node in earlier.nodes:
                args = [env[v] for v in node.inputs]
                env[node.name] = run_node_reference(registry, node, args, bindings)
        return (ir, tuple(sorted(bindings.items())), *(env[v] for v in _reads(grp)))

    def run(config: Mapping[str, object], ir: BlueprintIR, bindings, *values: torch.Tensor):
        _, grp = this_group(ir)
        program = _program(ir, values[0].device)
        env = dict(zip(_reads(grp), values, strict=True))
        launch = program._run_rows if grp.kind == "rows" else program._run_matmul
        launch(grp, env, dict(bindings), {k: int(v) for k, v in config.items()})  # type: ignore[call-overload]
        return tuple(env[v] for v in grp.outputs)

    def reference(ir: BlueprintIR, bindings, *values: torch.Tensor):
        _, grp = this_group(ir)
        env = dict(zip(_reads(grp), values, strict=True))
        for node in grp.nodes:
            args = [env[v] for v in node.inputs]
            env[node.name] = run_node_reference(registry, node, args, dict(bindings))
        return tuple(env[v] for v in grp.outputs)

    def default_config(feats: Mapping[str, object]) -> dict[str, object]:
        if group.kind == "rows":
            return dict(rows_default(_int(feats, "M"), _int(feats, "N"), group.has_row_op))
        from warpforge import runtime

        on_gpu = runtime.default_device().type == "cuda"
        return dict(matmul_default(feats, on_gpu, group.has_row_op))

    space, transfer = space_of(group)
    identities: set[str] = set()

    def current_features(features: Mapping[str, object]) -> bool:
        """A config tuned on another graph identity than the code generated now is stale."""
        if not identities:  # built on first use: registering tunables stays cheap
            for dtype in problem.dtypes:
                ir = ir_for(dtype)
                identities.add(graph_identity(ir, kind=template_of(this_group(ir)[1])))
        return features.get("graph") in identities

    return TunableKernel(
        name=name,
        space=space,
        transfer=transfer,
        source_hash=source_hash(
            f"blueprint launch v{LAUNCH_VERSION}",
            f"generator v{TEMPLATE_VERSIONS[template_of(group)]}",
            group.kind,
        ),
        features=features,
        make_inputs=make_inputs,
        run=run,
        reference=reference,
        default_config=default_config,
        shapes=tuple(problem.shapes),
        cpu_shapes=tuple(problem.cpu_shapes),
        sweep=SUITE_SWEEPS.get(problem_name, ()),
        dtypes=tuple(problem.dtypes),
        atol={torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2},
        rtol={torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2},
        description=f"generated kernel {group.kernel_name} of the {problem_name} suite problem",
        current_features=current_features,
    )


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _backward_builder(builder: Callable[[str], BlueprintIR]) -> Callable[[str], BlueprintIR]:
    def build(dtype: str) -> BlueprintIR:
        from warpforge.blueprint.autodiff import backward_blueprint

        built = backward_blueprint(builder(dtype), default_registry())
        if built is None:
            raise ValueError(f"{builder.__name__}: no generated backward")
        return built[0]

    build.__name__ = f"{builder.__name__}_backward"
    return build


def _same(shape: Shape) -> dict[str, int]:
    return {k: int(v) for k, v in shape.items()}


def _sweep(keys: str, *sizes: tuple[int, ...]) -> tuple[dict[str, int], ...]:
    return tuple(dict(zip(keys.split(), size, strict=True)) for size in sizes)


_ROW_SIZES = ((8192, 1024), (4096, 2048), (4096, 4096), (2048, 8192), (8192, 4096), (1024, 16384))
SUITE_SWEEPS: dict[str, tuple[dict[str, int], ...]] = {
    "blueprint.bias_gelu": _sweep("T H", *_ROW_SIZES),
    "blueprint.residual_rmsnorm_swiglu": _sweep("T H", *_ROW_SIZES),
    "blueprint.residual_rmsnorm_swiglu.bwd": _sweep("T H", *_ROW_SIZES),
    "blueprint.reduction_chain": _sweep("T V", *_ROW_SIZES),
    "blueprint.mixed_precision_chain": _sweep("T H", *_ROW_SIZES),
    "blueprint.scaled_masked_softmax": _sweep(
        "B NH T", (8, 16, 512), (2, 16, 1024), (4, 16, 1024), (1, 16, 2048), (4, 8, 2048)
    ),
    "blueprint.layernorm_linear_gelu": _sweep(
        "T D N", (4096, 2048, 2048), (8192, 1024, 4096), (4096, 4096, 4096), (2048, 4096, 8192)
    ),
    "blueprint.mlp_block": _sweep(
        "T D F", (4096, 1024, 4096), (2048, 2048, 8192), (4096, 2048, 8192), (8192, 1024, 2048)
    ),
    "blueprint.causal_attention_scores": _sweep(
        "B NH T DH", (4, 16, 512, 64), (2, 16, 1024, 128), (4, 16, 1024, 64), (1, 16, 2048, 64)
    ),
}
"""Shapes to tune each suite problem's kernels on (``--sweep``, and the tuning benchmark)."""


def _register_suite() -> None:
    from warpforge.blueprint import problems
    from warpforge.harness.registry import get_problem

    suite: list[tuple[str, Callable[[str], BlueprintIR], Callable[[Shape], dict[str, int]]]] = [
        ("blueprint.bias_gelu", problems.bias_gelu_blueprint, _same),
        ("blueprint.residual_rmsnorm_swiglu", problems.residual_rmsnorm_swiglu_blueprint, _same),
        (
            "blueprint.residual_rmsnorm_swiglu.bwd",
            _backward_builder(problems.residual_rmsnorm_swiglu_blueprint),
            _same,
        ),
        (
            "blueprint.scaled_masked_softmax",
            problems.masked_softmax_blueprint,
            lambda s: {**_same(s), "S": int(s["T"])},
        ),
        ("blueprint.layernorm_linear_gelu", problems.layernorm_linear_gelu_blueprint, _same),
        ("blueprint.causal_attention_scores", problems.attention_scores_blueprint, _same),
        ("blueprint.mlp_block", problems.mlp_block_blueprint, _same),
        ("blueprint.reduction_chain", problems.reduction_chain_blueprint, _same),
        ("blueprint.mixed_precision_chain", problems.mixed_precision_blueprint, _same),
    ]
    for problem_name, builder, bind in suite:
        first_dtype = get_problem(problem_name).dtypes[0]
        for index, group in enumerate(plan_of(builder(_dtype_name(first_dtype))).groups):
            if group.kind != "torch":
                register_tunable(_group_tunable(problem_name, builder, index, bind), replace=True)


_register_suite()
