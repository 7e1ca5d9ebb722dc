"""Render harness reports (JSON written by `warpforge bench`) as a Markdown table.

Docs paste this output unchanged, so every number in them traces to a committed results file:
    python scripts/results_table.py benchmarks/results/ops-2026-11-21-h100.json [--problem GLOB]
With several reports, one table of the latest row of each (problem, shape, dtype): a later file
replaces an earlier file's row, and each row names its file (a report holds one commit's rows).
Reports from different GPU models never share a table: each model gets its own table and summary,
so an H200 row never stands in for an H100 one. ``--by-date`` orders the reports by the time the
harness wrote them (``created``) rather than as given, so a folder's glob, whose names sort
call 10 before call 9, still lets the newer row win; files that are not harness reports (tuning
exports, sweeps) are skipped with a line on stderr; ``--exclude GLOB`` (repeatable) leaves out
problems, e.g. every H200 row of issue 4 so far:
    python scripts/results_table.py --by-date --exclude 'blueprint.*' --exclude 'resample*' \
        --exclude 'align*' --exclude 'voxelize*' benchmarks/results/session*-h200-*/*.json
``--by-problem`` sums those latest rows up per (problem, dtype) instead of listing them.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
import sys
from pathlib import Path

from warpforge.harness.report import SCHEMA

HARNESS_SCHEMA_FAMILY = SCHEMA.split("/")[0] + "/"
"""A harness report's ``schema`` starts so (any version); sweeps' JSON also hold ``results``."""


def _shape(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


_HEADER = (
    "| problem | shape | dtype | status | warpforge µs | best baseline | µs | speedup [95% CI] "
    "| GB/s | % of ceiling |"
)
_ALIGN = "| --- | --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: |"


def _device(report: dict) -> str:
    return report.get("environment", {}).get("device", {}).get("name", "?")


def _source(report: dict) -> str:
    env = report.get("environment", {})
    device = _device(report)
    copy = (report.get("ceilings") or {}).get("copy_bytes_per_s")
    if not copy:
        return f"Device {device}."
    return (
        f"Device {device}, torch {env.get('torch')}, Triton {env.get('triton')}, commit "
        f"`{str(env.get('git_commit'))[:12]}`, {env.get('date')}; measured copy ceiling "
        f"{copy / 1e12:.2f} TB/s."
    )


def _cells(row: dict) -> str:
    """One table row: the median times, the speedup over the best baseline and the ceiling."""
    times = row.get("times") or {}
    cand = times.get("candidate")
    if cand is None:
        reason = row["verification"].get("error") or "; ".join(
            f["reason"] for f in row["verification"].get("findings", [])
        )
        return (
            f"| {row['problem']} | {_shape(row['shape'])} | {row['dtype']} | "
            f"{row['status']} ({reason[:60]}) | | | | | | |"
        )
    best = row["speedup"]["vs_best"]
    base = times[best["baseline"]]
    lo, hi = best["ci95"]
    share = row.get("percent_of_ceiling")
    if share is None:
        share_text = "- (no ceilings measured)"
    else:  # the harness places a compute-bound row against the matmul ceiling, not the copy
        share_text = f"{share:.0f}%" + (" of matmul" if row.get("regime") == "compute" else "")
    return (
        f"| {row['problem']} | {_shape(row['shape'])} | {row['dtype']} | {row['status']} | "
        f"{_us(cand['median_s'])} | {best['baseline']} | {_us(base['median_s'])} | "
        f"{best['value']:.2f}x [{lo:.2f}, {hi:.2f}] | {row['achieved']['gb_per_s']:,.0f} | "
        f"{share_text} |"
    )


def _selected(report: dict, pattern: str | None) -> list[dict]:
    return [
        row
        for row in report["results"]
        if not pattern or fnmatch.fnmatchcase(row["problem"], pattern)
    ]


def render(report: dict, pattern: str | None) -> str:
    rows = _selected(report, pattern)
    lines = [_source(report), "", _HEADER, _ALIGN, *map(_cells, rows)]
    return "\n".join([*lines, "", *summary(rows)])


def render_latest(reports: list[tuple[str, dict]], pattern: str | None) -> str:
    """One table of the latest row of each (problem, shape, dtype) over ``reports`` (name,
    report) in order, each row numbered by the file it comes from; one such table per GPU model
    when the reports come from several, under a heading naming it."""
    devices = _per_device(reports)
    if len(devices) == 1:
        return _render_latest_of_one_device(reports, pattern)
    return "\n\n".join(
        f"#### {device}\n\n" + _render_latest_of_one_device(of_device, pattern)
        for device, of_device in devices.items()
    )


def _per_device(reports: list[tuple[str, dict]]) -> dict[str, list[tuple[str, dict]]]:
    """``reports`` split by GPU model, in order of first appearance, each keeping its order."""
    devices: dict[str, list[tuple[str, dict]]] = {}
    for item in reports:
        devices.setdefault(_device(item[1]), []).append(item)
    return devices


def _latest_rows(
    reports: list[tuple[str, dict]], pattern: str | None
) -> dict[tuple[str, str, str], tuple[int, dict]]:
    """(problem, shape, dtype) -> (file number, row) of the last report holding that row."""
    latest: dict[tuple[str, str, str], tuple[int, dict]] = {}
    for index, (_, report) in enumerate(reports, 1):
        for row in _selected(report, pattern):
            key = (row["problem"], json.dumps(row["shape"], sort_keys=True), row["dtype"])
            latest[key] = (index, row)
    return latest


def render_by_problem(reports: list[tuple[str, dict]], pattern: str | None) -> str:
    """:func:`render_latest`'s rows summed up per (problem, dtype), one table per GPU model:
    how many rows, how many at or above the best baseline, the geometric-mean speedup over
    torch.compile, and of the memory-bound rows moving >= 256 MB how many reach 90% of copy
    and the lowest share."""
    parts = []
    for device, of_device in _per_device(reports).items():
        rows = _timed([row for _, row in _latest_rows(of_device, pattern).values()])
        groups: dict[tuple[str, str], list[dict]] = {}
        for row in rows:
            groups.setdefault((row["problem"], row["dtype"]), []).append(row)
        lines = [
            f"#### {device}",
            "",
            "| problem | dtype | rows | at or above best | vs torch.compile (geomean) "
            "| >= 256 MB, memory-bound | at >= 90% of copy | lowest % of copy |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for (problem, dtype), group in sorted(groups.items()):
            vs = _vs_compile(group)
            big = [r["percent_of_ceiling"] for r in group if _held_to_copy(r)]
            lines.append(
                f"| {problem} | {dtype} | {len(group)} | {_at_best(group)} | "
                + (f"{statistics.geometric_mean(vs):.2f}x" if vs else "-")
                + f" | {len(big)} | {sum(share >= 90 for share in big)} | "
                + (f"{min(big):.0f}%" if big else "-")
                + " |"
            )
        parts.append("\n".join([*lines, "", *summary(rows)]))
    return "\n\n".join(parts)


def _render_latest_of_one_device(reports: list[tuple[str, dict]], pattern: str | None) -> str:
    latest = _latest_rows(reports, pattern)
    lines = ["Files (a later file's row replaces an earlier one's):", ""]
    lines += [f"{i}. `{name}`: {_source(report)}" for i, (name, report) in enumerate(reports, 1)]
    lines += ["", _HEADER[:-1] + "| file |", _ALIGN + " ---: |"]
    ordered = sorted(
        latest.values(),
        key=lambda item: (
            item[1]["problem"],
            item[1]["dtype"],
            sorted(item[1]["shape"].items(), reverse=True),
        ),
    )
    lines += [f"{_cells(row)} {index} |" for index, row in ordered]
    return "\n".join([*lines, "", *summary([row for _, row in ordered])])


def _held_to_copy(row: dict) -> bool:
    """Whether the issue's 90%-of-copy target applies: a memory-bound row moving >= 256 MB
    with its share of the ceiling measured."""
    return (
        row["bytes_moved"] >= 256e6
        and row.get("percent_of_ceiling") is not None
        and row.get("regime") != "compute"
    )


def _timed(rows: list[dict]) -> list[dict]:
    """The rows whose candidate ran and was timed."""
    return [r for r in rows if r["status"] == "ok" and (r.get("times") or {}).get("candidate")]


def _at_best(rows: list[dict]) -> int:
    """How many of ``rows`` are at or above their best baseline (median)."""
    return sum(r["speedup"]["vs_best"]["value"] >= 1.0 for r in rows)


def _vs_compile(rows: list[dict]) -> list[float]:
    """The speedups over torch.compile of the rows that timed it."""
    return [r["speedup"]["vs"]["torch.compile"]["value"] for r in rows
            if "torch.compile" in r["speedup"]["vs"]]  # fmt: skip


def summary(rows: list[dict]) -> list[str]:
    """The issue targets' view of some rows: speed against baselines and the copy ceiling."""
    rows = _timed(rows)
    if not rows:
        return []
    vs_compile = _vs_compile(rows)
    big = [r for r in rows if _held_to_copy(r)]
    out = [
        f"- rows timed: {len(rows)}; at or above the best baseline (median): {_at_best(rows)}",
    ]
    if vs_compile:
        geomean = statistics.geometric_mean(vs_compile)
        out.append(f"- geometric-mean speedup over torch.compile: {geomean:.2f}x")
    if big:
        out.append(
            f"- memory-bound rows moving >= 256 MB: {len(big)}; at >= 90% of the copy ceiling: "
            f"{sum(r['percent_of_ceiling'] >= 90 for r in big)}"
        )
    return out


def harness_reports(
    paths: list[Path], *, by_date: bool = False, exclude: tuple[str, ...] = ()
) -> list[tuple[str, dict]]:
    """(name, report) of the harness reports among ``paths``, in the order given or, with
    ``by_date``, by their ``created`` time; other JSON files are skipped with a line on stderr,
    and rows of problems matching an ``exclude`` glob are left out (with the reports left with
    none)."""
    reports = []
    for path in paths:
        report = json.loads(path.read_text())
        if (
            not isinstance(report, dict)
            or not str(report.get("schema", "")).startswith(HARNESS_SCHEMA_FAMILY)
            or not isinstance(report.get("results"), list)
        ):
            print(f"skipped {path}: not a harness report", file=sys.stderr)
            continue
        if by_date and not report.get("created"):
            raise SystemExit(f"{path}: no 'created' time to order it by (--by-date)")
        rows = [
            row
            for row in report["results"]
            if not any(fnmatch.fnmatchcase(row["problem"], glob) for glob in exclude)
        ]
        if rows or not exclude:  # a report whose every row is excluded is left out
            reports.append((str(path), {**report, "results": rows}))
    if by_date:
        # ISO-8601 times of one zone (the harness writes UTC) sort as text
        reports.sort(key=lambda item: item[1]["created"])
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, nargs="+", help="one report, or several in order")
    parser.add_argument("--problem", help="only problems matching this glob")
    parser.add_argument("--exclude", action="append", default=[], help="leave out these problems")
    parser.add_argument("--by-date", action="store_true", help="order reports by creation time")
    parser.add_argument(
        "--by-problem", action="store_true", help="the latest rows summed up per problem and dtype"
    )
    args = parser.parse_args()
    reports = harness_reports(args.reports, by_date=args.by_date, exclude=tuple(args.exclude))
    if not reports:
        raise SystemExit("reports: none of the files given is a harness report")
    if args.by_problem:
        print(render_by_problem(reports, args.problem))
    elif len(reports) == 1:
        print(render(reports[0][1], args.problem))
    else:
        print(render_latest(reports, args.problem))


if __name__ == "__main__":
    main()
