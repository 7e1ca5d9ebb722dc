"""Render a tuning benchmark result (``tune_bench.json``, from benchmarks/tune_bench.py) as Markdown.

Docs paste this output unchanged, so every number in them traces to a committed results file:
    python scripts/tune_table.py benchmarks/results/tune-2026-11-22-h100.json [--kernel GLOB]

Quality = exhaustive best time / the config's time, all re-timed interleaved in one run: 1.000 is
the exhaustive best; targets are >= 0.95 for the nearest match and >= 0.97 for the budget.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
from pathlib import Path
from typing import Any


def _shape(shape: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def _quality(value: float | None, target: float | None = None) -> str:
    if value is None:
        return "—"
    mark = "" if target is None or value >= target else " ✗"
    return f"{value:.3f}{mark}"


def _budget_cell(entry: dict[str, Any]) -> str:
    budget = entry.get("budgeted")
    if budget is None:
        return "—"
    scope = "whole space" if budget["covered_space"] else f"of {budget['valid_configs']}"
    return (
        f"{_quality(entry.get('budget_quality'), 0.97)} "
        f"({budget['trials']} trials {scope}, {budget['elapsed_s']:.0f} s)"
    )


def _rows(document: dict[str, Any], pattern: str | None) -> list[tuple[dict, dict]]:
    return [
        (result, entry)
        for result in document["results"]
        if not pattern or fnmatch.fnmatchcase(result["kernel"], pattern)
        for entry in result["heldout"]
    ]


def render(document: dict[str, Any], pattern: str | None = None) -> str:
    env = document.get("environment_fingerprint", {})
    arguments = document.get("arguments", {})
    lines = [
        f"Device {document.get('device_fingerprint', '?')}, torch {env.get('torch')}, Triton "
        f"{env.get('triton')}, commit `{str(env.get('git_commit'))[:12]}`, {env.get('date')}; "
        f"budget {arguments.get('budget', '?'):g} s per (kernel, shape), cold; "
        f"run took {document.get('wall_s', 0):.0f} s.",
        "",
        "| kernel | dtype | held-out shape | valid configs | nearest match | "
        f"budgeted search ({arguments.get('budget', '?'):g} s) | built-in heuristic |",
        "| --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    for result, entry in _rows(document, pattern):
        lines.append(
            f"| {result['kernel']} | {result['dtype']} | {_shape(entry['shape'])} | "
            f"{entry['exhaustive']['valid_configs']} | "
            f"{_quality(entry.get('nearest_quality'), 0.95)} | {_budget_cell(entry)} | "
            f"{_quality(entry.get('default_quality'))} |"
        )
    lines += ["", *summary(document, pattern)]
    return "\n".join(lines)


def summary(document: dict[str, Any], pattern: str | None = None) -> list[str]:
    """The issue's targets over the held-out shapes, and what the wall-time bound skipped."""
    rows = [entry for _, entry in _rows(document, pattern)]
    out = []
    for key, target, what in (
        ("nearest_quality", 0.95, "nearest match >= 0.95 of exhaustive"),
        ("budget_quality", 0.97, "budgeted search within 3% of exhaustive"),
        ("default_quality", None, "built-in heuristic"),
    ):
        values = [e[key] for e in rows if key in e]
        if not values:
            continue
        geomean = math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values))
        met = "" if target is None else f"{sum(v >= target for v in values)}/{len(values)} shapes; "
        out.append(f"- {what}: {met}min {min(values):.3f}, geometric mean {geomean:.3f}")
    skipped = document.get("skipped") or []
    if skipped:
        names = sorted({s.get("kernel", "?") for s in skipped})
        out.append(
            f"- skipped by the {document.get('max_wall_s')} s wall-time bound: {len(skipped)} "
            f"step(s) of {', '.join(names)}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--kernel", help="only kernels matching this glob")
    args = parser.parse_args()
    print(render(json.loads(args.report.read_text()), args.kernel))


if __name__ == "__main__":
    main()
