"""``warpforge compile``: generate (and show) the fused kernels of a blueprint, and with
``--warm`` build them into the kernel registry, so that later processes (or, through Redis, a
fleet) find them there."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

import typer

# Errors while loading a target are ValueErrors; the command prints them without a traceback.


def _import_from_cwd(module_name: str) -> Any:
    """Import ``module_name`` with the current directory first on the path, as ``python -m``
    has it: the installed console script starts with only its own directory there. It stays
    there for the command's life, as under ``python -m``: the target's functions may import
    neighbouring modules lazily while they are traced."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(module_name)


def _load_target(target: str) -> tuple[Any, list[Any] | None]:
    """A BlueprintIR from ``FILE.json`` or ``module:attribute``, and the example inputs it was
    traced with (None unless traced).

    The attribute may be a BlueprintIR, a zero-argument function returning one, or a function
    with an ``example_inputs`` attribute (tensors, or a function returning them) to trace.
    """
    from warpforge.blueprint import BlueprintIR, trace

    if ":" not in target or target.endswith(".json"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"{target!r} is not a file (expected FILE.json or module:function)")
        return BlueprintIR.from_json(path.read_text()), None
    module_name, _, attribute = target.partition(":")
    try:
        module = _import_from_cwd(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import module {module_name!r}: {error}") from None
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if isinstance(obj, BlueprintIR):
        return obj, None
    if not callable(obj):
        raise ValueError(f"{target!r} is neither a BlueprintIR nor a function")
    examples = getattr(obj, "example_inputs", None)
    if examples is not None:
        inputs = list(examples() if callable(examples) else examples)
        return trace(obj, inputs), inputs
    try:
        takes_nothing = not inspect.signature(obj).parameters
    except (TypeError, ValueError):
        takes_nothing = False
    if takes_nothing:
        built = obj()
        if isinstance(built, BlueprintIR):
            return built, None
    raise ValueError(
        f"{target!r}: expected a BlueprintIR, a zero-argument function returning one, or a "
        "function with an `example_inputs` attribute to trace"
    )


def _parse_dims(dims: list[str]) -> dict[str, int]:
    """``["B=8", "T=128"]`` as ``{"B": 8, "T": 128}`` (``validation.parse_shape``'s rules)."""
    from warpforge.validation import parse_shape

    if not dims:
        return {}
    try:
        return parse_shape(",".join(dims))
    except ValueError as error:
        raise ValueError(f"--dim: {str(error).removeprefix('shape: ')}") from None


def random_inputs(ir: Any, sizes: dict[str, int], device: Any) -> list[Any]:
    """Fresh random tensors for the blueprint's inputs: floats normal, integers in [0, 8),
    bools fair; symbolic dims from ``sizes`` (a missing one raises ``ValueError`` naming it)."""
    import torch

    from warpforge.blueprint.program import concrete
    from warpforge.blueprint.registry import torch_dtype

    tensors = []
    for name, schema in ir.inputs:
        for dim in schema.shape:
            if isinstance(dim, str) and dim not in sizes:
                raise ValueError(
                    f"--dim: input {name!r} has the symbolic dim {dim!r}; give its size "
                    f"as --dim {dim}=SIZE (sizes given: {sizes or 'none'})"
                )
        shape = concrete(schema.shape, sizes)
        dtype = torch_dtype(schema.dtype)
        if dtype.is_floating_point:
            tensor = torch.randn(shape, device=device).to(dtype)
        elif dtype == torch.bool:
            tensor = torch.rand(shape, device=device) < 0.5
        else:
            tensor = torch.randint(0, 8, shape, device=device, dtype=dtype)
        tensors.append(tensor)
    return tensors


def warm(ir: Any, inputs: list[Any]) -> dict[str, Any]:
    """Build ``ir``'s kernels for ``inputs`` into the kernel registry (strict: a failure
    raises) and report what the registry did: builds, hits and misses per tier."""
    import time

    import torch

    from warpforge.blueprint import compile as compile_blueprint
    from warpforge.cache import metrics
    from warpforge.runtime import uses_triton

    device = inputs[0].device if inputs else torch.device("cpu")
    if not uses_triton(device):
        raise ValueError(
            f"--warm: nothing to build on {device}: the CPU runs the PyTorch reference unless "
            "TRITON_INTERPRET=1 (then Triton's interpreter, whose kernels are cached too)"
        )
    before = metrics.snapshot()
    start = time.perf_counter()
    compile_blueprint(ir, strict=True)(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    after = metrics.snapshot()

    def grown(key: str) -> dict[str, int]:
        return {tier: count - before[key].get(tier, 0) for tier, count in after[key].items()
                if count != before[key].get(tier, 0)}  # fmt: skip

    return {
        "device": str(device),
        "inputs": [f"{str(t.dtype)[6:]}{list(t.shape)}" for t in inputs],
        "seconds": round(time.perf_counter() - start, 3),
        # code generated, then the kernels Triton compiled and loaded at their first launch
        "builds": after["builds"]["count"] - before["builds"]["count"],
        "first_launches": after["first_launches"]["count"] - before["first_launches"]["count"],
        "hits": grown("hits"),
        "misses": grown("misses"),
    }


def register(app: typer.Typer) -> None:
    @app.command("compile")
    def compile_command(
        target: str = typer.Argument(
            ..., help="FILE.json (BlueprintIR.to_json) or module:function."
        ),
        show: bool = typer.Option(False, "--show", help="Print the generated Triton source."),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        warm_cache: bool = typer.Option(
            False,
            "--warm",
            help="Also build the kernels into the kernel registry (memory, disk, Redis when "
            "WARPFORGE_REDIS_URL is set) for the function's example inputs, or random inputs "
            "of the blueprint's schemas.",
        ),
        dims: list[str] = typer.Option(
            [], "--dim", help="With --warm: NAME=SIZE of a symbolic dim (repeatable)."
        ),
        device: str = typer.Option(
            "",
            "--device",
            help="With --warm: where to build (default cuda when present, else cpu).",
        ),
    ) -> None:
        """Generate the fused Triton kernels of a blueprint and report its fusion plan; with
        --warm, build them into the kernel registry for later processes."""
        from rich.console import Console
        from rich.syntax import Syntax
        from rich.table import Table

        from warpforge.blueprint import BlueprintError, KernelSourceGenerator

        try:
            ir, examples = _load_target(target)
            generator = KernelSourceGenerator(ir)
            plan = generator.plan()
            source = generator.source(plan)
            warmed = _warm_for(ir, examples, dims, device) if warm_cache else None
        except (BlueprintError, ValueError, TypeError) as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        from warpforge.blueprint.cublas_epilogue import match as cublas_match

        groups = []
        for g in plan.groups:
            lowering = cublas_match(g, plan)
            groups.append(
                {
                    "kind": g.kind,
                    "kernel": g.kernel_name if g.kind != "torch" else None,
                    "nodes": [n.name for n in g.nodes],
                    "domain": list(g.domain),
                    # sum_to nodes the kernel computes as column sums (codegen.COLUMN_SUMS)
                    "column_sums": list(g.column_sums),
                    # on CUDA (one batch entry, cublas_epilogue.ENABLED) the group runs as this
                    "cuda_lowering": f"cuBLASLt {lowering.activation}+bias epilogue"
                    if lowering
                    else None,
                }
            )
        if as_json:
            summary = {
                "name": ir.name,
                "canonical_hash": ir.canonical_hash(),
                "kernels": plan.kernel_count,
                "groups": groups,
            }
            if show:
                summary["source"] = source
            if warmed is not None:
                summary["warm"] = warmed
            typer.echo(json.dumps(summary, indent=2))
            return
        console = Console()
        table = Table(title=f"blueprint {ir.name!r}  hash {ir.canonical_hash()[:16]}")
        for column in ("step", "runs as", "nodes", "domain"):
            table.add_column(column)
        for index, group in enumerate(groups):
            runs_as = group["kernel"] or f"PyTorch {plan.groups[index].nodes[0].op}"
            if group["cuda_lowering"]:
                runs_as += f" (on CUDA: {group['cuda_lowering']})"
            nodes = [*group["nodes"], *(f"{name} (column sum)" for name in group["column_sums"])]
            table.add_row(str(index), runs_as, ", ".join(nodes), str(group["domain"]))
        console.print(table)
        console.print(f"{plan.kernel_count} fused kernel(s) for {len(ir.nodes)} node(s)")
        if warmed is not None:
            console.print(
                f"warmed on {warmed['device']} for {', '.join(warmed['inputs'])} in "
                f"{warmed['seconds']} s: {warmed['builds']} build(s), "
                f"{warmed['first_launches']} first launch(es), hits {warmed['hits']}, "
                f"misses {warmed['misses']}"
            )
        if show:
            if console.is_terminal:
                console.print(Syntax(source, "python", line_numbers=True, word_wrap=False))
            else:  # piped or redirected: rich would crop lines to its default 80 columns
                typer.echo(source)


def _warm_for(ir: Any, examples: list[Any] | None, dims: list[str], device: str) -> dict[str, Any]:
    """``warm`` with the traced function's example inputs, else random inputs of the schemas."""
    import torch

    from warpforge.blueprint.compiler import BlueprintCompileError

    if device and (device != "cpu" and not device.startswith("cuda")):
        raise ValueError(f"--device: expected cpu, cuda or cuda:N, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device: {device} asked for, but this machine has no CUDA device")
    if examples is not None:
        if dims:
            raise ValueError("--dim: the target's example inputs fix every size; drop --dim")
        inputs = [t.to(device) for t in examples] if device else examples
    else:
        where = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        inputs = random_inputs(ir, _parse_dims(dims), where)
    try:
        return warm(ir, inputs)
    except BlueprintCompileError as error:  # a build that failed: no fallback here
        raise ValueError(f"--warm: {error}") from None
