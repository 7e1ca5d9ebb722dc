"""``warpforge compile``: generate (and show) the fused kernels of a blueprint."""

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


def _load_target(target: str) -> Any:
    """A BlueprintIR from ``FILE.json`` or ``module:attribute``.

    The attribute may be a BlueprintIR, a zero-argument function returning one, or a function
    with an ``example_inputs`` attribute (tensors, or a function returning them) to trace.
    """
    from warpforge.blueprint import BlueprintIR, trace

    if ":" not in target or target.endswith(".json"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"{target!r} is not a file (expected FILE.json or module:function)")
        return BlueprintIR.from_json(path.read_text())
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
        return obj
    if not callable(obj):
        raise ValueError(f"{target!r} is neither a BlueprintIR nor a function")
    examples = getattr(obj, "example_inputs", None)
    if examples is not None:
        inputs = examples() if callable(examples) else examples
        return trace(obj, list(inputs))
    try:
        takes_nothing = not inspect.signature(obj).parameters
    except (TypeError, ValueError):
        takes_nothing = False
    if takes_nothing:
        built = obj()
        if isinstance(built, BlueprintIR):
            return built
    raise ValueError(
        f"{target!r}: expected a BlueprintIR, a zero-argument function returning one, or a "
        "function with an `example_inputs` attribute to trace"
    )


def register(app: typer.Typer) -> None:
    @app.command("compile")
    def compile_command(
        target: str = typer.Argument(
            ..., help="FILE.json (BlueprintIR.to_json) or module:function."
        ),
        show: bool = typer.Option(False, "--show", help="Print the generated Triton source."),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Generate the fused Triton kernels of a blueprint and report its fusion plan."""
        from rich.console import Console
        from rich.syntax import Syntax
        from rich.table import Table

        from warpforge.blueprint import BlueprintError, KernelSourceGenerator

        try:
            ir = _load_target(target)
            generator = KernelSourceGenerator(ir)
            plan = generator.plan()
            source = generator.source(plan)
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
        if show:
            if console.is_terminal:
                console.print(Syntax(source, "python", line_numbers=True, word_wrap=False))
            else:  # piped or redirected: rich would crop lines to its default 80 columns
                typer.echo(source)
