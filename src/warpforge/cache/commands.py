"""``warpforge cache stats|verify|clear``: inspect and maintain the kernel cache."""

from __future__ import annotations

import json
from typing import Any

import typer

cache_app = typer.Typer(
    name="cache",
    help="Inspect, verify and clear the kernel cache (memory, disk, Redis).",
    no_args_is_help=True,
)


METRICS_SCOPE = (
    "counters (hits, builds, fallbacks) are per process: this CLI process's are empty; a job's "
    "are in its warpforge.cache.metrics.snapshot() or Prometheus endpoint"
)


def _registry() -> Any:
    """The registry the environment configures; a bad setting (an unusable WARPFORGE_REDIS_URL,
    a size that does not parse) is one line on stderr and exit code 2, not a traceback."""
    from warpforge.cache.registry import KernelRegistry

    try:
        # strict: here the operator asked about the cache, so say what is wrong instead of
        # quietly dropping the Redis tier as a training process does
        return KernelRegistry.from_environment(strict=True)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@cache_app.command()
def stats(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Entries and bytes per tier. Hit, build and fallback counters belong to each process
    (warpforge.cache.metrics.snapshot() or Prometheus there), so this command has none to show."""
    info = _registry().stats()
    info["metrics_scope"] = METRICS_SCOPE
    if as_json:
        typer.echo(json.dumps(info, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="warpforge kernel cache", caption=METRICS_SCOPE)
    for column in ("tier", "location", "entries", "size", "limit", "notes"):
        table.add_column(column)
    memory = info["memory"]
    table.add_row(
        "memory",
        "this process",
        str(memory["entries"]),
        _human_bytes(memory["bytes"]),
        f"{memory['max_entries']} entries / {_human_bytes(memory['max_bytes'])}",
        "empty in a fresh CLI process",
    )
    disk = info["disk"]
    if disk is not None:
        table.add_row(
            "disk",
            disk["root"],
            str(disk["entries"]),
            _human_bytes(disk["bytes"]),
            _human_bytes(disk["max_bytes"]),
            f"{disk['quarantined']} quarantined",
        )
    redis = info["redis"]
    if redis is None:
        table.add_row("redis", "-", "-", "-", "-", "off (WARPFORGE_REDIS_URL unset)")
    else:
        reachable = "reachable" if redis["entries"] is not None else "UNREACHABLE"
        entries = "-" if redis["entries"] is None else str(redis["entries"])
        table.add_row("redis", redis["url"], entries, "-", "-", reachable)
    Console().print(table)


@cache_app.command()
def verify() -> None:
    """Check every disk entry against its manifest; quarantine and list corrupted ones."""
    report = _registry().verify()
    if report.root is None:
        typer.echo("no disk tier configured")
        return
    typer.echo(f"checked {report.checked} entries under {report.root}: {report.ok} ok")
    for bad in report.corrupted:
        where = bad.quarantined_to or "could not be moved"
        typer.echo(f"CORRUPTED {bad.digest}: {bad.reason} -> {where}", err=True)
    if report.corrupted:
        typer.echo(f"{len(report.corrupted)} corrupted entries quarantined", err=True)
        raise typer.Exit(code=1)


@cache_app.command()
def clear(
    tier: str = typer.Option("all", "--tier", help="Which tier: memory, disk, redis or all."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete cached kernels (they are rebuilt on next use)."""
    from warpforge.cache.registry import CLEAR_TIERS

    if tier not in CLEAR_TIERS:
        raise typer.BadParameter(
            f"expected one of {list(CLEAR_TIERS)}, got {tier!r}", param_hint="--tier"
        )
    registry = _registry()
    if not yes:
        typer.confirm(f"Delete every cached kernel in tier {tier!r}?", abort=True)
    removed = registry.clear(tier)
    if not removed:
        typer.echo(f"the {tier} tier is not configured; nothing to clear")
    for name, count in removed.items():
        typer.echo(f"{name}: removed {count} entries")
    if "disk" in removed:
        from warpforge.cache import loaded_sources

        # Running processes keep theirs: they may still import from them.
        files = loaded_sources.remove_ended(legacy=True)
        typer.echo(
            f"loaded kernel sources ({loaded_sources.modules_root()}): removed {files} files "
            "of ended processes"
        )


def register(app: typer.Typer) -> None:
    """Add the ``cache`` sub-command group to the ``warpforge`` CLI."""
    app.add_typer(cache_app, name="cache")
