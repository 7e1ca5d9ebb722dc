"""Merge harness reports (``warpforge bench --out``) from runs done in pieces into one report.

    PYTHONPATH=src python scripts/merge_results.py MERGED.json PART.json [PART.json ...]

A suite too slow for one bounded call (torch.compile max-autotune baselines) is run one
problem per call; this joins the parts. Every part must come from the same machine and software
(device, driver, torch, triton, warpforge commit): rows measured elsewhere are not comparable, so
a mismatch is an error. A row (problem, shape, dtype) present in several parts keeps the last
part's measurement and the merge records which one it replaced. The merged report keeps the
first part's environment and ceilings and lists every part under ``merged_from``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What must agree between parts for their rows to be comparable.
_SAME_ENVIRONMENT = ("device", "driver", "torch", "triton", "cuda_runtime", "git_commit")


def merge_reports(reports: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One report holding every part's rows; ValueError when parts are not comparable."""
    from warpforge.harness.report import result_key

    if not reports:
        raise ValueError("reports: expected at least one report to merge, got none")
    first_path, first = reports[0]
    base_env = first.get("environment") or {}
    rows: dict[str, dict[str, Any]] = {}
    replaced: list[dict[str, str]] = []
    parts = []
    for path, report in reports:
        env = report.get("environment") or {}
        for field in _SAME_ENVIRONMENT:
            if env.get(field) != base_env.get(field):
                raise ValueError(
                    f"{path}: environment field {field!r} is {env.get(field)!r}, but "
                    f"{first_path} has {base_env.get(field)!r}; rows from different machines or "
                    "software are not comparable"
                )
        for row in report["results"]:
            key = result_key(row)
            if key in rows:
                replaced.append({"row": key, "kept_from": path})
            rows[key] = {**row, "merged_from": path}
        parts.append(
            {"path": path, "created": report.get("created"), "rows": len(report["results"])}
        )
    merged = dict(first)
    merged["results"] = [rows[k] for k in sorted(rows)]
    merged["merged_from"] = parts
    merged["merge_replaced_rows"] = replaced
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("merged", type=Path, help="output report path")
    parser.add_argument("parts", type=Path, nargs="+", help="harness reports to merge")
    parser.add_argument("--quiet", action="store_true", help="do not print the merged table")
    args = parser.parse_args(argv)
    from warpforge.harness import report as report_mod

    try:
        loaded = [(str(p), report_mod.load_report(p)) for p in args.parts]
        merged = merge_reports(loaded)
    except ValueError as error:
        print(f"merge_results: {error}", file=sys.stderr)
        return 2
    path = report_mod.write_report(merged, args.merged)
    if not args.quiet:
        report_mod.render_table(merged)
    print(f"merged {len(loaded)} report(s), {len(merged['results'])} row(s): {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
