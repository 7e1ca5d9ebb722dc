"""``warpforge tune OP`` and ``warpforge db show|export|import``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NoReturn

import typer

from warpforge.tune import DEFAULT_TRIAL_TIMEOUT_S, STOPPED_EXIT_CODE

db_app = typer.Typer(
    name="db",
    help="Inspect, export and import the performance database.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)
    app.add_typer(db_app, name="db")


def _fail(message: str) -> NoReturn:
    from rich.console import Console

    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(1)


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def _fmt_config(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


# options `tune` and `db lookup` share (typer reads them, never changes them)
_SHAPE_OPTION = typer.Option(
    None, "--shape", "-s", help="Problem size, e.g. M=4096,N=1024 (repeatable)."
)
_DTYPE_OPTION = typer.Option(
    None, "--dtype", "-d", help="float32, float16 or bfloat16 (repeatable)."
)
_DB_OPTION = typer.Option(
    None, "--db", help="Database URL (default: WARPFORGE_DB_URL or ~/.cache/warpforge/perf.db)."
)


def tune_command(
    op: str = typer.Argument(None, help="Tunable kernel name; omit to list them."),
    shape: list[str] = _SHAPE_OPTION,
    dtype: list[str] = _DTYPE_OPTION,
    sweep: bool = typer.Option(False, "--sweep", help="Also tune the kernel's sweep shapes."),
    budget: float = typer.Option(
        None, "--budget", help="Seconds per problem: random + local search."
    ),
    exhaustive: bool = typer.Option(False, "--exhaustive", help="Try every valid config."),
    refine: int = typer.Option(
        None,
        "--refine",
        help="At most this many trials: a short descent from the nearest tuned shapes' consensus "
        "config and their bests (for a shape near tuned ones).",
    ),
    db: str = _DB_OPTION,
    seed: int = typer.Option(0, "--seed", help="Seed for inputs and random sampling."),
    trial_timeout: float = typer.Option(
        DEFAULT_TRIAL_TIMEOUT_S,
        "--trial-timeout",
        help="Seconds one trial may take; past it the trial is recorded as timed out and the "
        f"process exits with status {STOPPED_EXIT_CODE} (a hung launch cannot be "
        "interrupted), as it does after a config that leaves the GPU unusable. Running the "
        "command again skips that config.",
    ),
) -> None:
    """Tune a kernel's launch config for some shapes; every trial goes to the database.

    Runs on one GPU, or on N under ``torchrun --nproc-per-node=N -m warpforge tune OP``.
    """
    from warpforge.tune.tunable import registered_tunables

    if op is None:
        _list_tunables(registered_tunables())
        return
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        _fail(f"--budget: expected a finite number of seconds > 0, got {budget}")
    if budget is not None and exhaustive:
        _fail("--budget and --exhaustive exclude each other")
    if refine is not None and refine < 1:
        _fail(f"--refine: expected a number of trials >= 1, got {refine}")
    if refine is not None and (budget is not None or exhaustive):
        _fail("--refine excludes --budget and --exhaustive")
    if not (math.isfinite(trial_timeout) and trial_timeout > 0):
        _fail(f"--trial-timeout: expected a finite number of seconds > 0, got {trial_timeout}")
    kernel, problems, _ = _kernel_problems(op, shape, dtype, sweep)
    _note_bypassed(kernel, problems)
    _tune_problems(
        kernel,
        problems,
        budget=budget,
        exhaustive=exhaustive,
        refine=refine,
        db_url=db,
        seed=seed,
        trial_timeout_s=trial_timeout,
    )


def _kernel_problems(
    op: str, shape: list[str] | None, dtype: list[str] | None, sweep: bool
) -> tuple[Any, list[tuple[dict[str, int], Any]], Any]:
    """The tunable named ``op``, its (shape, dtype) problems from the command line and the device
    they run on; with no ``--shape`` the kernel's own shapes (its CPU ones without a GPU), with
    no ``--dtype`` its first dtype this machine runs. Without a GPU, kernels run under Triton's
    interpreter."""
    import torch

    from warpforge import runtime

    device = runtime.command_device()  # before get_tunable imports the kernels
    on_gpu = device.type == "cuda"
    if not on_gpu and not runtime.interpreter_enabled():
        _fail(
            "no CUDA device, and Triton's interpreter is switched off (TRITON_INTERPRET / "
            "WARPFORGE_INTERPRET): the kernels cannot run here; unset them or set them to 1"
        )
    from warpforge.tune.tunable import get_tunable, parse_dtype
    from warpforge.validation import parse_shape

    try:
        kernel = get_tunable(op)
        shapes = [parse_shape(s) for s in shape or ()]
        dtypes = [parse_dtype(d) for d in dtype or ()]
    except (KeyError, ValueError) as exc:
        _fail(str(exc.args[0]) if exc.args else str(exc))
    if not shapes:
        shapes = [dict(s) for s in (kernel.shapes if on_gpu else kernel.cpu_shapes)]
    if sweep:
        shapes += [dict(s) for s in kernel.sweep if dict(s) not in shapes]
    if not dtypes:
        usable = [d for d in kernel.dtypes if on_gpu or d != torch.bfloat16]
        dtypes = usable[:1] or [torch.float32]
    if not shapes:
        _fail(f"{op}: no shapes given and the kernel declares none; pass --shape")
    try:
        shapes = [kernel.check_shape(s) for s in shapes]
    except ValueError as exc:
        _fail(str(exc))
    return kernel, [(s, d) for s in shapes for d in dtypes], device


def _note_bypassed(kernel: Any, problems: list[tuple[dict[str, int], Any]]) -> None:
    """Say which problems the op runs on another kernel whatever is tuned (they are tuned all
    the same: the trials still go to the database)."""
    if kernel.bypassed is None:
        return
    from rich.console import Console

    from warpforge.tune.tunable import dtype_name

    for shape, dtype in problems:
        other = kernel.bypassed(shape, dtype)
        if other is not None:
            sizes = ",".join(f"{k}={v}" for k, v in shape.items())
            Console(stderr=True).print(
                f"note: {kernel.name} {sizes} {dtype_name(dtype)}: the op runs {other} there, "
                "whatever is tuned",
                soft_wrap=True,
            )


def _list_tunables(kernels: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tunable kernels")
    for column in ("name", "parameters", "configs", "description"):
        table.add_column(column)
    for k in kernels:
        table.add_row(k.name, ", ".join(k.space.names), str(k.space.size), k.description)
    Console().print(table)


def _tune_problems(
    kernel: Any,
    problems: list[tuple[dict[str, int], Any]],
    *,
    budget: float | None,
    exhaustive: bool,
    db_url: str | None,
    seed: int,
    refine: int | None = None,
    trial_timeout_s: float | None = None,
) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from warpforge.tune import distributed
    from warpforge.tune.database import DatabaseUnavailable, PerfDatabase
    from warpforge.tune.lookup import ConfigLookup
    from warpforge.tune.search import (
        DeviceBroken,
        budgeted_search,
        exhaustive_search,
        refine_search,
    )
    from warpforge.tune.tunable import dtype_name

    rank = distributed.init_from_environment()
    device = rank.device()
    console = Console()
    try:
        database = PerfDatabase(db_url)
    except (DatabaseUnavailable, ValueError, ImportError) as exc:
        distributed.finish(rank)
        _fail(str(exc))
        return
    plan = distributed.plan_work(len(problems), rank)
    seeds_from = ConfigLookup(database_url=database.url)
    unrun = 0  # problems whose search could not start (their inputs could not be made, say)
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not rank.is_leader,
            transient=False,
        ) as progress:
            for index in plan.problems:
                shape, dtype = problems[index]
                features = kernel.features(shape, dtype)
                valid = kernel.space.valid_configs(features)
                label = f"{kernel.name} {_shape_text(shape)} {dtype_name(dtype)}"
                use_budget = budget is not None or (
                    not exhaustive and refine is None and len(valid) > 256
                )
                total = None if use_budget else min(refine or len(valid), len(valid))
                task = progress.add_task(label, total=total)
                common: dict[str, Any] = {
                    "database": database,
                    "on_trial": lambda _t, task=task: progress.advance(task),
                    "seed": seed + (rank.rank if plan.config_shard else 0),
                    "trial_timeout_s": trial_timeout_s,
                }
                try:
                    if refine is None and not use_budget:
                        configs = distributed.shard(valid, rank) if plan.config_shard else valid
                        exhaustive_search(kernel, shape, dtype, device, configs=configs, **common)
                    else:
                        # the neighbours' configs carried over first, the built-in heuristic last
                        initial = seeds_from.starting_configs(kernel.name, features, device=device)
                        initial.append(kernel.default_config(features))
                        if refine is not None:
                            refine_search(kernel, shape, dtype, device, initial=initial,
                                          max_trials=refine, **common)  # fmt: skip
                        else:
                            budgeted_search(kernel, shape, dtype, device, budget_s=budget or 60.0,
                                            initial=initial, **common)  # fmt: skip
                except DeviceBroken as exc:  # nothing more can run in this process
                    console.print(f"{label}: stopped: {exc}", style="red", markup=False)
                    raise typer.Exit(STOPPED_EXIT_CODE) from None
                except RuntimeError as exc:  # inputs that cannot be made (out of memory, say)
                    message = f"{label}: not tuned: {type(exc).__name__}: {exc}"
                    console.print(message[:400], style="red", markup=False)
                    unrun += 1
        distributed.barrier(rank)
        if rank.is_leader:
            failures = _print_summary(console, database, kernel, problems, device) + unrun
        else:
            failures = unrun
    finally:
        seeds_from.clear()
        database.close()
        distributed.finish(rank)
    if failures:
        raise typer.Exit(1)


def _shape_text(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def _print_summary(
    console: Any, database: Any, kernel: Any, problems: list[Any], device: Any
) -> int:
    """One row per problem, read back from the database (so other ranks' trials count too)."""
    from rich.table import Table

    from warpforge.tune.database import canonical_json
    from warpforge.tune.tunable import device_fingerprint, dtype_name

    fingerprint = device_fingerprint(device)
    table = Table(title=f"{kernel.name} on {fingerprint}")
    for column in (
        "shape",
        "dtype",
        "best config",
        "median",
        "95% CI",
        "default",
        "speedup",
        "trials ok/incorrect/error",
    ):
        table.add_column(column)
    trials = database.trials(kernel=kernel.name, source_hash=kernel.source_hash, device=fingerprint)
    failures = 0
    for shape, dtype in problems:
        features = kernel.features(shape, dtype)
        key = canonical_json(features)
        mine = [t for t in trials if canonical_json(t.features) == key]
        counts = {s: sum(t.status == s for t in mine) for s in ("ok", "incorrect", "error")}
        best = database.best(kernel.name, kernel.source_hash, fingerprint, features)
        default = kernel.default_config(features)
        default_times = [t.median_s for t in mine if t.status == "ok" and t.config == default]
        default_s = min(default_times) if default_times else None
        if best is None:
            failures += 1
        speedup = f"{default_s / best.median_s:.2f}x" if best and default_s else "-"
        table.add_row(
            _shape_text(shape),
            dtype_name(dtype),
            _fmt_config(best.config) if best else "[red]no correct config[/red]",
            _fmt_time(best.median_s if best else None),
            f"{_fmt_time(best.ci_low_s)} - {_fmt_time(best.ci_high_s)}" if best else "-",
            _fmt_time(default_s),
            speedup,
            f"{counts['ok']}/{counts['incorrect']}/{counts['error']}",
        )
    console.print(table)
    console.print(f"database: {database.url}")
    return failures


def _open_existing(db: str | None) -> Any:
    from warpforge.tune.database import DatabaseUnavailable, PerfDatabase

    try:
        return PerfDatabase(db, create=False)
    except (DatabaseUnavailable, ValueError, ImportError) as exc:
        _fail(str(exc))


@db_app.command("show")
def db_show(
    kernel: str = typer.Option(None, "--kernel", "-k", help="Only this kernel."),
    device: str = typer.Option(None, "--device", help="Only this device fingerprint."),
    trials: bool = typer.Option(
        False, "--trials", help="Show individual trials, not best configs."
    ),
    status: str = typer.Option(None, "--status", help="With --trials: ok, incorrect or error."),
    limit: int = typer.Option(50, "--limit", help="Most rows to show."),
    db: str = typer.Option(None, "--db", help="Database URL."),
) -> None:
    """Show the best config per problem (or the trials) stored in the database."""
    from rich.console import Console
    from rich.table import Table

    if limit < 1:
        _fail(f"--limit: expected >= 1, got {limit}")
    if status is not None and status not in ("ok", "incorrect", "error"):
        _fail(f"--status: expected ok, incorrect or error, got {status!r}")
    database = _open_existing(db)
    console = Console()
    try:
        if trials:
            rows = database.trials(kernel=kernel, device=device, status=status)[-limit:]
            table = Table(title=f"trials ({len(rows)} shown) in {database.url}")
            for column in (
                "id",
                "kernel",
                "device",
                "features",
                "config",
                "status",
                "median",
                "error",
            ):
                table.add_column(column)
            for t in rows:
                table.add_row(
                    str(t.id),
                    t.kernel,
                    t.device,
                    _fmt_config(t.features),
                    _fmt_config(t.config),
                    t.status,
                    _fmt_time(t.median_s),
                    (t.error or "")[:80],
                )
        else:
            best = database.best_configs(kernel=kernel, device=device)[:limit]
            table = Table(title=f"best configs ({len(best)} shown) in {database.url}")
            for column in ("kernel", "device", "features", "config", "median", "95% CI", "source"):
                table.add_column(column)
            for b in best:
                table.add_row(
                    b.kernel,
                    b.device,
                    _fmt_config(b.features),
                    _fmt_config(b.config),
                    _fmt_time(b.median_s),
                    f"{_fmt_time(b.ci_low_s)} - {_fmt_time(b.ci_high_s)}",
                    b.source_hash,
                )
        console.print(table)
    finally:
        database.close()


@db_app.command("lookup")
def db_lookup(
    op: str = typer.Argument(..., help="Tunable kernel name."),
    shape: list[str] = _SHAPE_OPTION,
    dtype: list[str] = _DTYPE_OPTION,
    sweep: bool = typer.Option(False, "--sweep", help="Also the kernel's sweep shapes."),
    db: str = _DB_OPTION,
) -> None:
    """The config an op launches with on this machine's device for some shapes, and where it
    comes from (database, shipped JSON, another GPU model's shipped table, the default)."""
    from rich.console import Console
    from rich.table import Table

    from warpforge.tune.lookup import ConfigLookup
    from warpforge.tune.tunable import device_fingerprint, dtype_name

    kernel, problems, device = _kernel_problems(op, shape, dtype, sweep)
    lookup = ConfigLookup(database_url=db)
    table = Table(title=f"{kernel.name} on {device_fingerprint(device)}")
    for column in ("shape", "dtype", "config", "from", "default config"):
        table.add_column(column, overflow="fold")
    try:
        for shape_of, dtype_of in problems:
            features = kernel.features(shape_of, dtype_of)
            default = kernel.default_config(features)
            config = lookup.config_for(kernel.name, features, default, device=device)
            table.add_row(
                _shape_text(shape_of),
                dtype_name(dtype_of),
                _fmt_config(config),
                lookup.origin(kernel.name, features, device=device) or "-",
                _fmt_config(default),
            )
    finally:
        lookup.clear()
    Console().print(table)


@db_app.command("export")
def db_export(
    file: Path = typer.Argument(..., help="JSON file to write."),
    kernel: list[str] = typer.Option(
        None, "--kernel", "-k", help="Only these kernels (repeatable)."
    ),
    device: str = typer.Option(None, "--device", help="Only this device fingerprint."),
    trials: bool = typer.Option(
        False, "--trials", help="Export every trial instead of best configs."
    ),
    db: str = typer.Option(None, "--db", help="Database URL."),
) -> None:
    """Write best configs in the shipped JSON format (or all trials with --trials)."""
    from warpforge.tune.shipped import export_shipped, export_trials

    database = _open_existing(db)
    try:
        if trials:
            if kernel and len(kernel) > 1:
                _fail("--trials exports one --kernel or all of them")
            count = export_trials(file, database=database, kernel=kernel[0] if kernel else None)
            what = "trials"
        else:
            count = export_shipped(kernel or None, file, database=database, device=device)
            what = "best configs"
    finally:
        database.close()
    typer.echo(f"wrote {count} {what} to {file}")


@db_app.command("stale")
def db_stale(
    file: list[Path] = typer.Argument(
        None, help="Shipped-configs files (default: every file the package ships)."
    ),
    as_args: bool = typer.Option(
        False, "--args", help="Print 'KERNEL DTYPE SHAPE' lines for a re-tuning script."
    ),
) -> None:
    """List shipped configs tuned on an earlier source of their kernel (lookups skip them)."""
    from warpforge.tune.lookup import shipped_directory
    from warpforge.tune.shipped import stale_entries

    paths = file or sorted(shipped_directory().glob("*.json"))
    rows = []
    for path in paths:
        try:
            stale = stale_entries(path)
        except (OSError, ValueError) as exc:
            _fail(str(exc))
            return
        rows.extend(
            (kernel, str(e.features.get("dtype", "")),
             ",".join(f"{k}={v}" for k, v in sorted(e.features.items()) if k != "dtype"),
             e.device, path.name)
            for kernel, e in stale
        )  # fmt: skip
    rows.sort()
    if as_args:
        for row in rows:
            typer.echo(" ".join(row[:3]))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} stale shipped config(s)")
    for column in ("kernel", "dtype", "shape", "device", "file"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


@db_app.command("import")
def db_import(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSON file to read."),
    db: str = typer.Option(None, "--db", help="Database URL."),
) -> None:
    """Store the trials or shipped configs of a JSON file in the database."""
    from warpforge.tune.database import DatabaseUnavailable, PerfDatabase
    from warpforge.tune.shipped import import_file

    try:
        database = PerfDatabase(db)
    except (DatabaseUnavailable, ValueError, ImportError) as exc:
        _fail(str(exc))
        return
    try:
        count = import_file(file, database=database)
    except ValueError as exc:
        _fail(str(exc))
        return
    finally:
        database.close()
    typer.echo(f"imported {count} trials from {file} into {database.url}")
