"""Benchmark reports: one JSON artifact per run, and the rich table printed on the terminal.

A report holds the environment fingerprint (with the clocks seen while timing), the ceilings it
was judged against, and one entry per problem, shape and dtype: verification, times (median,
95% interval, samples) of the candidate and every baseline, speedups with intervals, achieved
GB/s and TFLOP/s, percent of ceiling and the regime (memory- or compute-bound).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from warpforge.atomic_write import write_atomically
from warpforge.harness.ceilings import Ceilings

SCHEMA = "warpforge-bench/1"
CANDIDATE = "candidate"


def speedup(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """baseline median / candidate median, with a conservative interval from the two intervals."""
    base_lo, base_hi = baseline["ci95_s"]
    cand_lo, cand_hi = candidate["ci95_s"]
    return {
        "value": baseline["median_s"] / candidate["median_s"],
        "ci95": [base_lo / cand_hi, base_hi / max(cand_lo, 1e-30)],
    }


def regime(flops: float | None, bytes_moved: float | None, ceilings: Ceilings | None,
           dtype: torch.dtype) -> str | None:  # fmt: skip
    """``memory`` or ``compute``: arithmetic intensity against the ridge point."""
    if ceilings is None or not bytes_moved:
        return None
    ridge = ceilings.ridge_point(dtype)
    if not flops or ridge is None:
        return "memory"
    return "compute" if flops / bytes_moved >= ridge else "memory"


def result_entry(
    *,
    problem: str,
    shape: Mapping[str, Any] | None,
    dtype: torch.dtype,
    verification: Mapping[str, Any],
    times: Mapping[str, Mapping[str, Any]],
    flops: float | None,
    bytes_moved: float | None,
    ceilings: Ceilings | None,
    skipped_baselines: Mapping[str, str] | None = None,
    findings: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """One row of a report. ``times`` maps contender name -> Measurement.as_dict()."""
    entry: dict[str, Any] = {
        "problem": problem,
        "shape": dict(shape) if shape is not None else None,
        "dtype": str(dtype).removeprefix("torch."),
        "verification": dict(verification),
        "times": {k: dict(v) for k, v in times.items()},
        "skipped_baselines": dict(skipped_baselines or {}),
        "flops": flops,
        "bytes_moved": bytes_moved,
        "findings": list(findings),
    }
    passed = bool(verification.get("passed")) and not findings
    entry["status"] = "ok" if passed else "rejected"
    cand = times.get(CANDIDATE)
    baselines = {k: v for k, v in times.items() if k != CANDIDATE}
    entry["speedup"] = None
    entry["achieved"] = None
    entry["percent_of_ceiling"] = None
    entry["regime"] = regime(flops, bytes_moved, ceilings, dtype)
    if cand is None:
        return entry
    per_baseline = {name: speedup(t, cand) for name, t in baselines.items()}
    if per_baseline:
        best = min(baselines, key=lambda k: baselines[k]["median_s"])
        entry["speedup"] = {"vs_best": {"baseline": best, **per_baseline[best]}, "vs": per_baseline}
    median = cand["median_s"]
    entry["achieved"] = {
        "gb_per_s": bytes_moved / median / 1e9 if bytes_moved else None,
        "tflop_per_s": flops / median / 1e12 if flops else None,
    }
    if ceilings is not None and entry["regime"] is not None:
        if entry["regime"] == "compute" and flops:
            peak = ceilings.matmul_peak(dtype)
            entry["percent_of_ceiling"] = 100.0 * flops / median / peak if peak else None
        elif bytes_moved:
            entry["percent_of_ceiling"] = 100.0 * bytes_moved / median / ceilings.copy_bytes_per_s
    return entry


def _clocks(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    lows, highs, throttled = [], [], 0
    for result in results:
        for t in result.get("times", {}).values():
            clock = t.get("clock_mhz")
            if clock:
                lows.append(clock["min"])
                highs.append(clock["max"])
            throttled += int(t.get("throttled_samples", 0))
    return {
        "sm_mhz_min": min(lows) if lows else None,
        "sm_mhz_max": max(highs) if highs else None,
        "throttled_samples": throttled,
    }


def new_report(
    kind: str,
    results: Sequence[Mapping[str, Any]],
    *,
    ceilings: Ceilings | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A complete report for ``results`` (environment fingerprint included)."""
    from warpforge.environment import environment_fingerprint

    environment = environment_fingerprint()
    environment["clocks"] = _clocks(results)
    report = {
        "schema": SCHEMA,
        "kind": kind,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment,
        "ceilings": ceilings.as_dict() if ceilings is not None else None,
        "time_unit": "s",
        "results": [dict(r) for r in results],
    }
    report.update(extra or {})
    return report


def default_output_path(kind: str) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("warpforge-results") / f"{kind}-{stamp}.json"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``report`` as JSON atomically (a crash leaves any previous file intact)."""
    return write_atomically(path, json.dumps(_json_safe(report), indent=2, sort_keys=False) + "\n")


def experiment_row(measured: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """One row of an experiment: ``fields`` then each contender's median and 95% interval in
    µs, from :func:`warpforge.harness.timing.measure_interleaved`'s measurements."""
    return {
        **fields,
        "median_us": {name: m.median_s * 1e6 for name, m in measured.items()},
        "ci_us": {name: [m.ci_low_s * 1e6, m.ci_high_s * 1e6] for name, m in measured.items()},
    }


def write_experiment(
    path: str | Path, experiment: str, rows: Sequence[Mapping[str, Any]], **fields: Any
) -> Path:
    """Write a kernel-level experiment's rows (an A/B script's, not a harness report) with the
    environment fingerprint, atomically, and say where."""
    from warpforge.environment import environment_fingerprint

    report = {
        "experiment": experiment,
        **fields,
        "environment_fingerprint": environment_fingerprint(),
        "rows": list(rows),
    }
    written = write_report(report, path)
    print(f"wrote {written}")
    return written


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a report written by :func:`write_report`; ValueError naming the problem otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"report: cannot read {str(path)!r}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"report: {str(path)!r} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(
            f"report: {str(path)!r} is not a warpforge report (expected schema {SCHEMA!r}, "
            f"got {data.get('schema') if isinstance(data, dict) else type(data).__name__!r})"
        )
    if not isinstance(data.get("results"), list):
        raise ValueError(f"report: {str(path)!r} has no 'results' list")
    return data


def result_key(result: Mapping[str, Any]) -> str:
    """Identity of a row across runs: problem, shape and dtype."""
    shape = result.get("shape")
    shape_text = ",".join(f"{k}={v}" for k, v in shape.items()) if shape else "-"
    return f"{result['problem']}[{shape_text}]{result.get('dtype', '')}"


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def render_table(report: Mapping[str, Any], console: Any = None) -> None:
    """Print the report as a rich table."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # logs and pipes: keep the table readable
    results = report["results"]
    clock = next((t.get("clock") for r in results for t in r.get("times", {}).values()), None)
    title = f"warpforge {report['kind']}"
    if clock == "cpu-wall":
        title += " (CPU times: host wall-clock, not GPU performance)"
    table = Table(title=title)
    for column in ("problem", "shape", "dtype", "status", "time", "best baseline", "speedup",
                   "GB/s", "TFLOP/s", "% ceiling", "regime"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for r in results:
        cand = r["times"].get(CANDIDATE)
        sp = r.get("speedup")
        best = sp["vs_best"] if sp else None
        achieved = r.get("achieved") or {}
        shape = r.get("shape")
        status = r["status"]
        style = "green" if status == "ok" else "red"
        table.add_row(
            r["problem"],
            ",".join(f"{k}={v}" for k, v in shape.items()) if shape else "-",
            r["dtype"],
            f"[{style}]{status}[/{style}]",
            _fmt_time(cand["median_s"]) if cand else "-",
            best["baseline"] if best else "-",
            f"{best['value']:.2f}x [{best['ci95'][0]:.2f}, {best['ci95'][1]:.2f}]" if best else "-",
            f"{achieved['gb_per_s']:.1f}" if achieved.get("gb_per_s") else "-",
            f"{achieved['tflop_per_s']:.2f}" if achieved.get("tflop_per_s") else "-",
            f"{r['percent_of_ceiling']:.0f}%" if r.get("percent_of_ceiling") else "-",
            r.get("regime") or "-",
        )
    console.print(table)
    for r in results:
        for finding in [*r.get("verification", {}).get("findings", []), *r.get("findings", [])]:
            line = f"{r['problem']} [{finding['reason']}] {finding['message']}"
            console.print(escape(line), style="red")
