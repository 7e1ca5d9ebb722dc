"""The ``warpforge`` command line.

Each package contributes its commands through a ``commands`` module with a ``register(app)``
function, so this file stays a table of contents and heavy imports happen only when a command runs.
"""

from __future__ import annotations

import json

import typer

app = typer.Typer(
    name="warpforge",
    help="Fused Triton kernels, a blueprint compiler and a benchmark harness that does not lie.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Fused Triton kernels, a blueprint compiler and a benchmark harness that does not lie."""


@app.command()
def env(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Print Python, torch, Triton, CUDA, driver, GPU, interpreter mode and cache locations."""
    from warpforge.environment import environment_fingerprint

    info = environment_fingerprint()
    if as_json:
        typer.echo(json.dumps(info, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="warpforge environment", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    device = info.pop("device")
    for key, value in info.items():
        table.add_row(key, "-" if value is None else str(value))
    for key, value in device.items():
        table.add_row(f"device.{key}", "-" if value is None else str(value))
    Console().print(table)


def _register_package_commands() -> None:
    """Each package's ``commands.register(app)`` adds its commands (one line per package)."""
    from warpforge.blueprint import commands as blueprint_commands
    from warpforge.cache import commands as cache_commands
    from warpforge.harness import commands as harness_commands
    from warpforge.tune import commands as tune_commands

    harness_commands.register(app, problem_loader="warpforge.catalog:load_builtin_problems")
    blueprint_commands.register(app)
    cache_commands.register(app)
    tune_commands.register(app)


_register_package_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
