"""Render a harness report (JSON written by `warpforge bench`) as a Markdown table.

Docs paste this output unchanged, so every number in them traces to a committed results file:
    python scripts/results_table.py benchmarks/results/ops-2026-11-21-h100.json [--problem GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path


def _shape(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def render(report: dict, pattern: str | None) -> str:
    env = report.get("environment", {})
    device = env.get("device", {}).get("name", "?")
    ceilings = report.get("ceilings") or {}
    copy = ceilings.get("copy_bytes_per_s")
    lines = [
        f"Device {device}, torch {env.get('torch')}, Triton {env.get('triton')}, commit "
        f"`{str(env.get('git_commit'))[:12]}`, {env.get('date')}; measured copy ceiling "
        f"{copy / 1e12:.2f} TB/s."
        if copy
        else f"Device {device}.",
        "",
        "| problem | shape | dtype | status | warpforge µs | best baseline | µs | speedup [95% CI] "
        "| GB/s | % of copy ceiling |",
        "| --- | --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: |",
    ]
    for row in report["results"]:
        if pattern and not fnmatch.fnmatchcase(row["problem"], pattern):
            continue
        times = row.get("times") or {}
        cand = times.get("candidate")
        if cand is None:
            reason = row["verification"].get("error") or "; ".join(
                f["reason"] for f in row["verification"].get("findings", [])
            )
            lines.append(
                f"| {row['problem']} | {_shape(row['shape'])} | {row['dtype']} | "
                f"{row['status']} ({reason[:60]}) | | | | | | |"
            )
            continue
        best = row["speedup"]["vs_best"]
        base = times[best["baseline"]]
        lo, hi = best["ci95"]
        share = row.get("percent_of_ceiling")
        share_text = f"{share:.0f}%" if share is not None else "- (no ceilings measured)"
        lines.append(
            f"| {row['problem']} | {_shape(row['shape'])} | {row['dtype']} | {row['status']} | "
            f"{_us(cand['median_s'])} | {best['baseline']} | {_us(base['median_s'])} | "
            f"{best['value']:.2f}x [{lo:.2f}, {hi:.2f}] | {row['achieved']['gb_per_s']:,.0f} | "
            f"{share_text} |"
        )
    lines += ["", *summary(report, pattern)]
    return "\n".join(lines)


def summary(report: dict, pattern: str | None) -> list[str]:
    """The issue targets' view of a report: speed against baselines and the copy ceiling."""
    import statistics

    rows = [
        r
        for r in report["results"]
        if r["status"] == "ok"
        and (r.get("times") or {}).get("candidate")
        and (not pattern or fnmatch.fnmatchcase(r["problem"], pattern))
    ]
    if not rows:
        return []
    vs_compile = [r["speedup"]["vs"]["torch.compile"]["value"] for r in rows
                  if "torch.compile" in r["speedup"]["vs"]]  # fmt: skip
    big = [r for r in rows if r["bytes_moved"] >= 256e6 and r.get("percent_of_ceiling") is not None]
    out = [
        f"- rows timed: {len(rows)}; at or above the best baseline (median): "
        f"{sum(r['speedup']['vs_best']['value'] >= 1.0 for r in rows)}",
    ]
    if vs_compile:
        geomean = statistics.geometric_mean(vs_compile)
        out.append(f"- geometric-mean speedup over torch.compile: {geomean:.2f}x")
    if big:
        out.append(
            f"- rows moving >= 256 MB: {len(big)}; at >= 90% of the copy ceiling: "
            f"{sum(r['percent_of_ceiling'] >= 90 for r in big)}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--problem", help="only problems matching this glob")
    args = parser.parse_args()
    print(render(json.loads(args.report.read_text()), args.problem))


if __name__ == "__main__":
    main()
