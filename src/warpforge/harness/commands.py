"""The harness' commands: verify, bench, suite, ceilings, roofline, compare.

Exit codes: 0 success; 1 rejected candidate, failed check or performance regression; 2 usage or
load error. Heavy imports (torch, Triton, the problem modules) happen inside each command.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

ProblemLoader = Callable[[], list[Any]]

_DTYPES = {
    "float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
}  # fmt: skip


def _resolve_loader(loader: str | ProblemLoader) -> ProblemLoader:
    """``"module:function"`` (imported when called) or a zero-argument callable."""
    if callable(loader):
        return loader
    module, _, attr = loader.partition(":")
    if not module or not attr:
        raise ValueError(
            f"problem_loader: expected 'module:function' or a callable, got {loader!r}"
        )

    def load() -> list[Any]:
        return getattr(importlib.import_module(module), attr)()

    return load


def _positive_seconds(value: float) -> float:
    """A typer callback: seconds must be a finite number > 0 (NaN passes a plain range check)."""
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"expected a finite number of seconds > 0, got {value!r}")
    return value


def _fail_usage(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _prepare_device() -> Any:
    """Without CUDA, Triton kernels run under the interpreter: set it before any kernel import."""
    from warpforge import runtime

    return runtime.command_device()


def _policy(
    allow_torch: bool, allow_vendor: bool, allow_fallback: bool, allow_streams: bool
) -> Any:
    from warpforge.harness.audit import AuditPolicy

    return AuditPolicy(
        allow_torch=allow_torch, allow_vendor=allow_vendor,
        allow_fallback=allow_fallback, allow_streams=allow_streams,
    )  # fmt: skip


def _dtype(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    key = _DTYPES.get(name.lower())
    if key is None:
        _fail_usage(f"--dtype: expected one of {sorted(set(_DTYPES))}, got {name!r}")
    return getattr(torch, key)


def _ceilings(device: Any, enabled: bool) -> Any:
    if not enabled:
        return None
    from warpforge.harness import ceilings

    if device.type == "cuda":
        return ceilings.load_or_measure(device)[0]
    return ceilings.cached_ceilings(device)  # CPU: only if `warpforge ceilings` measured them


def _progress() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), transient=False,
    )  # fmt: skip


ALLOW_TORCH = typer.Option(
    False, "--allow-torch", help="Allow PyTorch compute ops and ATen kernels."
)
ALLOW_VENDOR = typer.Option(False, "--allow-vendor", help="Allow cuBLAS/cuDNN/CUTLASS.")
ALLOW_FALLBACK = typer.Option(False, "--allow-fallback", help="Allow try/except blocks.")
ALLOW_STREAMS = typer.Option(False, "--allow-streams", help="Allow creating/switching streams.")


def register(
    app: typer.Typer,
    problem_loader: str | ProblemLoader = "warpforge.catalog:load_builtin_problems",
) -> None:
    """Add the harness commands to ``app``; ``problem_loader`` lists the built-in problems."""
    load_problems = _resolve_loader(problem_loader)

    @app.command()
    def verify(
        reference: Path = typer.Argument(
            ..., help="KernelBench reference file (Model, get_inputs)."
        ),
        candidate: Path = typer.Argument(..., help="Candidate file (ModelNew)."),
        trials: int = typer.Option(5, "--trials", min=5, help="Correctness trials (fresh seeds)."),
        timeout: float = typer.Option(
            300.0, "--timeout", help="Seconds per candidate call.", callback=_positive_seconds
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        allow_torch: bool = ALLOW_TORCH,
        allow_vendor: bool = ALLOW_VENDOR,
        allow_fallback: bool = ALLOW_FALLBACK,
        allow_streams: bool = ALLOW_STREAMS,
    ) -> None:
        """Verify CANDIDATE against REFERENCE: exit 0 correct, 1 rejected, 2 usage/load error."""
        _prepare_device()
        from warpforge.harness.kernelbench import LoadError
        from warpforge.harness.verify import VerifyOptions, verify_pair

        try:
            options = VerifyOptions(
                trials=trials, timeout_s=timeout,
                policy=_policy(allow_torch, allow_vendor, allow_fallback, allow_streams),
            )  # fmt: skip
            result = verify_pair(reference, candidate, options=options)
        except (LoadError, ValueError) as exc:
            _fail_usage(str(exc))
        if as_json:
            typer.echo(json.dumps(result.as_dict(), indent=2))
        else:
            for finding in result.findings:
                typer.echo(f"FAIL {finding}")
            for skipped in result.skipped_checks:
                typer.echo(f"skipped (GPU only): {skipped}")
            verdict = "correct" if result.passed else "rejected"
            typer.echo(f"{candidate}: {verdict} after {result.trials} trial(s) on {result.device}")
        raise typer.Exit(0 if result.passed else 1)

    @app.command()
    def bench(
        reference: Path | None = typer.Argument(
            None, help="KernelBench reference (omit for the built-in suite)."
        ),
        candidate: Path | None = typer.Argument(None, help="Candidate file (ModelNew)."),
        baseline: list[Path] = typer.Option([], "--baseline", help="Baseline file(s) to time too."),
        problem: str | None = typer.Option(
            None,
            "--problem",
            help="Built-in problems matching this glob (comma-separated globs: any).",
        ),
        dtype: str | None = typer.Option(
            None, "--dtype", help="Only this dtype (fp32, fp16, bf16)."
        ),
        sweep: bool = typer.Option(
            False, "--sweep", help="Also run each problem's shape sweep (GPU)."
        ),
        shape: list[str] = typer.Option(
            [],
            "--shape",
            help="Only rows whose shape has these sizes, e.g. N=256 or M=32768,N=256 "
            "(repeatable: any).",
        ),
        out: Path | None = typer.Option(
            None, "--out", help="JSON report path (default ./warpforge-results/)."
        ),
        max_time: float = typer.Option(
            2.0, "--max-time", help="Timing budget per row, seconds.", callback=_positive_seconds
        ),
        warm: bool = typer.Option(
            False, "--warm", help="Do not flush L2 before each call (says so)."
        ),
        cuda_graph: bool = typer.Option(False, "--cuda-graph", help="Time CUDA-graph replays."),
        verify_only: bool = typer.Option(
            False,
            "--verify-only",
            help="Built-in problems: every correctness check, no timing (no baselines built).",
        ),
        trials: int = typer.Option(5, "--trials", min=5, help="Correctness trials per row."),
        timeout: float = typer.Option(
            300.0,
            "--timeout",
            help="A pair: seconds per candidate call, and for the whole timing step.",
            callback=_positive_seconds,
        ),
        no_ceilings: bool = typer.Option(
            False, "--no-ceilings", help="Skip the speed-of-light check."
        ),
        allow_torch: bool = ALLOW_TORCH,
        allow_vendor: bool = ALLOW_VENDOR,
        allow_fallback: bool = ALLOW_FALLBACK,
        allow_streams: bool = ALLOW_STREAMS,
    ) -> None:
        """Verify then time: a KernelBench pair, or (no files) every built-in problem."""
        device = _prepare_device()
        from warpforge.harness import bench as bench_mod
        from warpforge.harness import report
        from warpforge.harness.kernelbench import LoadError
        from warpforge.harness.verify import GPU_ONLY_CHECKS, VerifyOptions
        from warpforge.validation import parse_shape

        if (reference is None) != (candidate is None):
            _fail_usage(
                "bench: give both REFERENCE and CANDIDATE, or neither for the built-in suite"
            )
        if cuda_graph and device.type != "cuda":
            _fail_usage("--cuda-graph: needs a CUDA device")
        ceil = _ceilings(device, not no_ceilings)
        if reference is not None:
            if verify_only:
                _fail_usage("--verify-only: applies to the built-in suite, not to a pair")
            if problem or sweep or dtype or shape:
                _fail_usage(
                    "--problem/--sweep/--dtype/--shape apply to the built-in suite, not to a pair"
                )
            try:
                options = VerifyOptions(
                    trials=trials,
                    timeout_s=timeout,
                    policy=_policy(allow_torch, allow_vendor, allow_fallback, allow_streams),
                )
                row = bench_mod.bench_pair(
                    reference, candidate, baseline_paths=baseline, options=options,
                    ceilings=ceil, max_time_s=max_time, cold=not warm, cuda_graph=cuda_graph,
                )  # fmt: skip
            except LoadError as exc:
                _fail_usage(str(exc))
            rows, kind = [row], "pair"
        else:
            if baseline:
                _fail_usage("--baseline applies to a KernelBench pair")
            try:
                problems = bench_mod.select_problems(load_problems(), problem)
            except ValueError as exc:
                _fail_usage(str(exc))
            if not problems:
                _fail_usage("bench: no built-in problems are registered")
            if sweep and device.type != "cuda":
                typer.echo("note: --sweep shapes are GPU sizes; on CPU only cpu_shapes run")
            try:
                filters = [parse_shape(s) for s in shape] or None
            except ValueError as exc:
                _fail_usage(f"--shape: {exc}")
            tasks = bench_mod.suite_tasks(
                problems, device, dtype=_dtype(dtype), sweep=sweep, shapes=filters
            )
            if not tasks:
                _fail_usage(f"bench: no row of the selected problems has a shape matching {shape}")
            with _progress() as progress:
                task = progress.add_task("bench", total=len(tasks))

                def advance(label: str) -> None:
                    progress.update(task, description=label)
                    progress.advance(task)

                rows = bench_mod.run_builtin_suite(
                    tasks, device, ceilings=ceil, trials=trials, max_time_s=max_time,
                    cold=not warm, cuda_graph=cuda_graph, progress=advance,
                    verify_only=verify_only,
                )  # fmt: skip
            kind = "builtin-suite"
        extra: dict[str, Any] = {"device_kind": device.type}
        if verify_only:
            extra["verify_only"] = True
        if device.type != "cuda":
            extra["skipped_gpu_checks"] = list(GPU_ONLY_CHECKS)
            extra["note"] = "CPU run: times are host wall-clock under Triton's interpreter"
        rep = report.new_report(kind, rows, ceilings=ceil, extra=extra)
        path = report.write_report(rep, out or report.default_output_path(kind))
        report.render_table(rep)
        if device.type != "cuda":
            typer.echo("CPU times (host wall-clock), not GPU performance. GPU-only checks skipped:")
            for skipped in GPU_ONLY_CHECKS:
                typer.echo(f"  - {skipped}")
        typer.echo(f"report: {path}")
        failed = [r for r in rows if r["status"] in ("rejected", "error")]
        raise typer.Exit(1 if failed else 0)

    @app.command()
    def suite(
        directory: Path = typer.Argument(
            ..., help="Directory of pairs: NAME.py + NAME_new.py, or ref/ + cand/."
        ),
        out: Path | None = typer.Option(
            None, "--out", help="JSON report path (default ./warpforge-results/)."
        ),
        max_time: float = typer.Option(
            2.0, "--max-time", help="Timing budget per pair, seconds.", callback=_positive_seconds
        ),
        trials: int = typer.Option(5, "--trials", min=5, help="Correctness trials per pair."),
        no_ceilings: bool = typer.Option(
            False, "--no-ceilings", help="Skip the speed-of-light check."
        ),
    ) -> None:
        """Verify and time every pair in DIRECTORY (strict policy); fast_p and geomean speedup."""
        device = _prepare_device()
        from warpforge.harness import bench as bench_mod
        from warpforge.harness import report
        from warpforge.harness import suite as suite_mod

        try:
            pairs = suite_mod.discover_pairs(directory)
        except ValueError as exc:
            _fail_usage(str(exc))
        shard = suite_mod.distributed_shard()
        mine = shard.take(pairs)
        ceil = _ceilings(device, not no_ceilings)

        def run_pair(pair: suite_mod.Pair) -> dict[str, Any]:
            return bench_mod.bench_pair(
                pair.reference, pair.candidate, ceilings=ceil, max_time_s=max_time,
                name=pair.name, options=bench_mod.VerifyOptions(trials=trials),
            )  # fmt: skip

        with _progress() as progress:
            label = f"suite (rank {shard.rank}/{shard.world})" if shard.world > 1 else "suite"
            task = progress.add_task(label, total=len(mine))
            rows = suite_mod.run_suite(
                mine, run_pair,
                on_done=lambda pair, row: progress.update(task, advance=1, description=f"{pair.name}: {row['status']}"),
            )  # fmt: skip
        merged = suite_mod.gather_rows(rows, shard)
        if merged is None:
            raise typer.Exit(0)  # rank 0 writes the report
        summary = suite_mod.summarize(merged)
        rep = report.new_report(
            "kernelbench-suite", merged, ceilings=ceil,
            extra={"summary": summary, "directory": str(directory), "world_size": shard.world},
        )  # fmt: skip
        path = report.write_report(rep, out or report.default_output_path("suite"))
        report.render_table(rep)
        typer.echo(
            "  ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()
            )
        )
        typer.echo(f"report: {path}")
        raise typer.Exit(0 if summary["correct"] == summary["pairs"] else 1)

    @app.command()
    def ceilings(
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        refresh: bool = typer.Option(
            False, "--refresh", help="Measure again instead of using the cache."
        ),
        quick: bool = typer.Option(
            False, "--quick", help="Small sizes (a smoke test, not a ceiling)."
        ),
    ) -> None:
        """Measure (or show cached) copy bandwidth and matmul peak per dtype of this device."""
        device = _prepare_device()
        from warpforge.harness import ceilings as ceilings_mod

        result, cached = ceilings_mod.load_or_measure(device, refresh=refresh, quick=quick)
        if as_json:
            typer.echo(json.dumps(result.as_dict() | {"from_cache": cached}, indent=2))
            return
        from rich.console import Console
        from rich.table import Table

        where = "GPU" if result.is_gpu else "CPU"
        source = "cached" if cached else "measured now"
        table = Table(title=f"ceilings of {result.device} ({where}, {source} {result.measured_at})")
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("copy bandwidth (read + write)", f"{result.copy_bytes_per_s / 1e9:.1f} GB/s")
        for key, rate in result.matmul_flops_per_s.items():
            table.add_row(f"matmul {key}", f"{rate / 1e12:.2f} TFLOP/s")
        Console().print(table)

    @app.command()
    def roofline(
        results: Path = typer.Argument(..., help="A report written by bench or suite."),
        output: Path | None = typer.Option(
            None, "-o", "--output", help="PNG path (default: beside RESULTS)."
        ),
    ) -> None:
        """Draw a roofline PNG with every kernel placed against the measured ceilings."""
        from warpforge.harness import report
        from warpforge.harness import roofline as roofline_mod

        try:
            data = report.load_report(results)
            path = roofline_mod.plot_roofline(data, output or results.with_suffix(".png"))
        except ValueError as exc:
            _fail_usage(str(exc))
        typer.echo(f"roofline: {path}")

    @app.command()
    def compare(
        old: Path = typer.Argument(..., help="Baseline report."),
        new: Path = typer.Argument(..., help="New report."),
        threshold: float = typer.Option(
            0.03, "--threshold", help="Slowdown that fails (0.03 = 3%)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        across_devices: bool = typer.Option(
            False,
            "--across-devices",
            help="Compare reports of different devices (refused by default: the ratio would "
            "measure the hardware).",
        ),
    ) -> None:
        """Per-problem time ratios with intervals; exit 1 on a regression beyond noise."""
        from warpforge.harness import compare as compare_mod
        from warpforge.harness import report

        try:
            rows = compare_mod.compare_reports(
                report.load_report(old),
                report.load_report(new),
                threshold=threshold,
                across_devices=across_devices,
            )
        except ValueError as exc:
            _fail_usage(str(exc))
        if as_json:
            typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        else:
            compare_mod.render_comparison(rows)
        raise typer.Exit(1 if compare_mod.has_regression(rows) else 0)
