"""Render a tuning benchmark result (``tune_bench.json``, from benchmarks/tune_bench.py) as Markdown.

Docs paste this output unchanged, so every number in them traces to a committed results file:
    python scripts/tune_table.py benchmarks/results/tune-2026-11-22-h100.json [--kernel GLOB]
A run done in parts (``tune_check.sh OUT norms`` and ``... blueprints``) renders from the report
``scripts/tune_merge.py runs`` wrote, or from the parts' reports given together (merged the same
way).

Quality = exhaustive best time / the config's time, all re-timed interleaved in one run: 1.000 is
the exhaustive best; targets are >= 0.95 for the nearest match and >= 0.97 for the budget.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
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


def _refined_cell(entry: dict[str, Any]) -> str:
    refined = entry.get("refined")
    if refined is None or "refined_quality" not in entry:
        return "—"
    if refined.get("error"):
        return f"{_quality(entry['refined_quality'], 0.95)} (no valid seed)"
    return (
        f"{_quality(entry['refined_quality'], 0.95)} "
        f"({refined['trials']} trials, {refined['elapsed_s']:.1f} s)"
    )


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def _wall_text(document: dict[str, Any]) -> str:
    parts = document.get("parts")
    if not parts:
        return f"run took {document.get('wall_s', 0):.0f} s"
    walls = " + ".join(f"{p.get('wall_s') or 0:.0f} s" for p in parts)
    return f"run in {len(parts)} parts (one device call each) that took {walls}"


def budget_table(document: dict[str, Any], pattern: str | None = None) -> list[str]:
    """One row per budgeted search: what it tried against the whole space and a cold exhaustive
    search, and the quality it reached (re-timed)."""
    rows = []
    for result, entry in _rows(document, pattern):
        for search in entry.get("budget_evidence") or ():
            cold = search["exhaustive_cold_wall_s"]
            stopped = search.get("exhaustive_cold_stopped_after_s")
            cold_text = (
                _seconds(cold)
                if cold is not None
                else f"> {stopped:.0f} s (stopped)"
                if stopped is not None
                else "not measured"
            )
            budget_s = search.get("budget_s")
            budget_text = "?" if budget_s is None else f"{budget_s:g} s"
            if search.get("failure"):
                budget_text += " (failed: see the JSON)"
            rows.append(
                f"| {result['kernel']} | {_shape(entry['shape'])} | {budget_text}, "
                f"{search['where']} | {search['configs_tried']} of {search['valid_configs']} | "
                f"{_seconds(search['budget_wall_s'])} | {cold_text} | "
                f"{_quality(search['best_over_exhaustive_best'], 0.97)} |"
            )
    if not rows:
        return []
    return [
        "| kernel | held-out shape | budget, where | configs tried | budget wall | "
        "exhaustive wall, cold | best found / exhaustive best |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        *rows,
    ]


def replay_table(document: dict[str, Any], pattern: str | None = None) -> list[str]:
    """The budgeted search replayed on measured times with a trial cap: per held-out shape, the
    worst and median quality over the seeds, and how many seeds came within 3%."""
    rows = []
    for result, entry in _rows(document, pattern):
        replay = entry.get("budget_replay")
        if not replay:
            continue
        cells = [
            f"{r['max_trials']}: {r['quality_min']:.3f} / {r['quality_median']:.3f} / "
            f"{r['runs_within_3pct']} of {r['seeds']}"
            for r in replay
        ]
        rows.append(
            f"| {result['kernel']} | {_shape(entry['shape'])} | {replay[0]['valid_configs']} | "
            + " | ".join(cells)
            + " |"
        )
    if not rows:
        return []
    fractions = [f"{r['fraction']:.0%}" for r in next(
        e["budget_replay"] for _, e in _rows(document, pattern) if e.get("budget_replay")
    )]  # fmt: skip
    return [
        "| kernel | held-out shape | valid configs | "
        + " | ".join(f"cap {f}: trials: min / median / seeds within 3%" for f in fractions)
        + " |",
        "| --- | --- | ---: |" + " ---: |" * len(fractions),
        *rows,
    ]


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
    # runs before the consensus lookup have no single-nearest column
    single = any("nearest_single_quality" in e for _, e in _rows(document, pattern))
    lines = [
        f"Device {document.get('device_fingerprint', '?')}, torch {env.get('torch')}, Triton "
        f"{env.get('triton')}, commit `{str(env.get('git_commit'))[:12]}`, {env.get('date')}; "
        f"budget {arguments.get('budget', '?'):g} s per (kernel, shape), cold; "
        f"{_wall_text(document)}.",
        "",
        "| kernel | dtype | held-out shape | valid configs | nearest match | "
        + ("single nearest (old rule) | " if single else "")
        + "refined match | "
        f"budgeted search ({arguments.get('budget', '?'):g} s) | built-in heuristic |",
        "| --- | --- | --- | ---: | ---: | " + ("---: | " if single else "") + "--- | --- | ---: |",
    ]
    for result, entry in _rows(document, pattern):
        old_rule = f"{_quality(entry.get('nearest_single_quality'), 0.95)} | " if single else ""
        lines.append(
            f"| {result['kernel']} | {result['dtype']} | {_shape(entry['shape'])} | "
            f"{entry['exhaustive']['valid_configs']} | "
            f"{_quality(entry.get('nearest_quality'), 0.95)} | {old_rule}{_refined_cell(entry)} | "
            f"{_budget_cell(entry)} | {_quality(entry.get('default_quality'))} |"
        )
    lines += ["", *summary(document, pattern)]
    budgets = budget_table(document, pattern)
    if budgets:
        lines += ["", "Budgeted searches (cold: each paid for its own compiles):", "", *budgets]
    replays = replay_table(document, pattern)
    if replays:
        lines += [
            "",
            "Budgeted search replayed on the measured exhaustive times with a trial cap (no GPU "
            "time; quality from search medians):",
            "",
            *replays,
        ]
    return "\n".join(lines)


def summary(document: dict[str, Any], pattern: str | None = None) -> list[str]:
    """The issue's targets over the held-out shapes, and what the wall-time bound skipped."""
    rows = [entry for _, entry in _rows(document, pattern)]
    out = []
    for key, target, what in (
        ("nearest_quality", 0.95, "nearest match >= 0.95 of exhaustive"),
        ("nearest_single_quality", 0.95, "single nearest (old rule) >= 0.95 of exhaustive"),
        ("refined_quality", 0.95, "refined match >= 0.95 of exhaustive"),
        ("budget_quality", 0.97, "budgeted search within 3% of exhaustive"),
        ("short_budget_quality", 0.97, "shorter budgeted search within 3% of exhaustive"),
        ("default_quality", None, "built-in heuristic"),
    ):
        values = [e[key] for e in rows if key in e]
        if not values:
            continue
        geomean = statistics.geometric_mean([max(v, 1e-12) for v in values])
        met = "" if target is None else f"{sum(v >= target for v in values)}/{len(values)} shapes; "
        out.append(f"- {what}: {met}min {min(values):.3f}, geometric mean {geomean:.3f}")
    latencies = [e["lookup_latency"] for e in rows if "lookup_latency" in e]
    if latencies:
        out.append(
            "- lookup on the host: cached p99 at most "
            f"{max(x['cached_p99_us'] for x in latencies):.1f} µs over "
            f"{latencies[0]['cached_samples']} calls per shape (target 1 ms); first call (its "
            f"kernel's database query and the consensus) at most "
            f"{max(x['first_us'] for x in latencies) / 1e3:.2f} ms; database queries per lookup "
            f"at most {max(x['db_queries'] for x in latencies)}"
        )
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
    parser.add_argument("reports", type=Path, nargs="+", help="a report, or the parts of one")
    parser.add_argument("--kernel", help="only kernels matching this glob")
    args = parser.parse_args()
    documents = [(str(path), json.loads(path.read_text())) for path in args.reports]
    if len(documents) == 1:
        document = documents[0][1]
    else:
        from tune_merge import merge_runs  # beside this script

        try:
            document = merge_runs(documents)
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    print(render(document, args.kernel))


if __name__ == "__main__":
    main()
