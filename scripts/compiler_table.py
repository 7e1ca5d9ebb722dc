"""Markdown tables of ``benchmarks/compiler_bench.py`` reports, against the issue's targets.

    python scripts/compiler_table.py REPORT.json [REPORT.json ...]

One row a blueprint (reports of several runs on one machine and software are merged; reports of
different machines or software are refused): cold compile of warpforge and of torch.compile in
fresh processes with empty caches, their ratio, and a new process's first result from the disk
cache (median of the warm repeats; with triton's import inside the window; without the
bytecode prefix). Then, per report, the in-memory hit path's percentiles and the replay's hit
ratio, and how many blueprints meet each target the report records.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

SAME_RUN_KEYS = ("device", "torch", "triton", "git_commit")


def _environment(report: dict[str, Any]) -> tuple:
    env = report["environment_fingerprint"]
    return tuple(json.dumps(env.get(key), sort_keys=True) for key in SAME_RUN_KEYS)


def _blueprint_row(blueprint: dict[str, Any]) -> dict[str, Any]:
    shape = " ".join(f"{k}={v}" for k, v in blueprint["shape"].items())
    ours = blueprint["warpforge_cold"]["seconds"]
    # compiler_bench.py --skip-torch-compile leaves torch.compile's cold run out
    theirs = blueprint.get("torch_compile_cold", {}).get("seconds")
    warm = [run["seconds"] * 1e3 for run in blueprint["warm_first_result"]]
    return {
        "problem": blueprint["problem"],
        "shape": shape,
        "cold_s": ours,
        "torch_cold_s": theirs,
        "ratio": ours / theirs if theirs else None,
        "warm_ms": statistics.median(warm),
        "warm_repeats_ms": warm,
        "with_triton_import_ms": blueprint.get("warm_first_result_including_triton_import_ms"),
        # reports before the twenty-second session have no such run (nor a BLAS stage)
        "with_blas_init_ms": blueprint.get("warm_first_result_including_blas_init_ms"),
        "without_prefix_ms": blueprint.get("warm_first_result_without_bytecode_prefix_ms_median"),
    }


def _number(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or "-" for a measurement the report does not have."""
    return "-" if value is None else f"{value:.{digits}f}"


def render(reports: list[dict[str, Any]]) -> str:
    if not reports:
        raise ValueError("reports: expected at least one compiler_bench report, got none")
    if len({_environment(r) for r in reports}) > 1:
        raise ValueError(
            f"reports: expected one machine, software and commit ({', '.join(SAME_RUN_KEYS)}), "
            "got reports of several"
        )
    env = reports[0]["environment_fingerprint"]
    targets = reports[0]["targets"]
    device = env.get("device", {}).get("name", "?")
    lines = [
        f"Device {device}, torch {env.get('torch')}, Triton {env.get('triton')}, commit "
        f"`{str(env.get('git_commit'))[:12]}`, {env.get('date')}.",
        "",
        "| blueprint | shape | warpforge cold s | torch.compile cold s | ratio | first result "
        "from disk, ms | with triton import, ms | with cuBLAS start-up, ms | without bytecode "
        "prefix, ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = [_blueprint_row(b) for r in reports for b in r["blueprints"]]
    for row in sorted(rows, key=lambda row: row["problem"]):
        lines.append(
            f"| {row['problem']} | {row['shape']} | {row['cold_s']:.2f} | "
            f"{_number(row['torch_cold_s'])} | {_number(row['ratio'])} | {row['warm_ms']:.1f} | "
            f"{_number(row['with_triton_import_ms'], 1)} | {_number(row['with_blas_init_ms'], 1)} | "
            f"{_number(row['without_prefix_ms'], 1)} |"
        )
    lines.append("")
    ratio_max, warm_max = targets["cold_compile_ratio_max"], targets["warm_first_result_ms_max"]
    ratios = [row["ratio"] for row in rows if row["ratio"] is not None]
    lines.append(
        f"- cold compile <= {ratio_max:.0%} of torch.compile's: "
        + (
            f"{sum(r <= ratio_max for r in ratios)} of {len(ratios)} blueprints"
            if ratios
            else "not measured (torch.compile's cold run skipped)"
        )
    )
    lines.append(
        f"- first result from disk <= {warm_max:g} ms (median of the repeats): "
        f"{sum(row['warm_ms'] <= warm_max for row in rows)} of {len(rows)} blueprints; every "
        "repeat, ms: "
        + "; ".join(
            f"{row['problem']} " + " / ".join(f"{ms:.1f}" for ms in row["warm_repeats_ms"])
            for row in sorted(rows, key=lambda row: row["problem"])
        )
    )
    launches = [  # compiler_bench.py records this since the twenty-first session
        (b["problem"], [run["first_launch_s"] * 1e3 for run in b["warm_first_result"]])
        for r in reports
        for b in r["blueprints"]
        if all("first_launch_s" in run for run in b["warm_first_result"])
    ]
    if launches:
        lines.append(
            "- of which the kernels' first launch, every repeat, ms: "
            + "; ".join(
                f"{name} " + " / ".join(f"{ms:.1f}" for ms in values)
                for name, values in sorted(launches)
            )
        )
    ahead = [b for r in reports for b in r["blueprints"] if "warpforge_cold_concurrent" in b]
    if ahead:  # compiler_bench.py --concurrent-compile
        lines.append(
            "- cold compile with the kernels compiled concurrently (WARPFORGE_CONCURRENT_COMPILE=1): "
            + "; ".join(
                f"{b['problem']} {b['warpforge_cold_concurrent']['seconds']:.2f} s "
                f"(ratio {b['cold_compile_ratio_concurrent']:.2f})"
                for b in sorted(ahead, key=lambda b: b["problem"])
            )
        )
    for report in reports:
        names = ", ".join(b["problem"] for b in report["blueprints"])
        hit = report["hit_lookup"]["per_call_hit_path"]
        call = report["hit_lookup"]["call_lookup_and_launch"]
        replay = report["replay"]
        lines.append(
            f"- run of {names}: per-call hit path p50 {hit['p50_us']:.1f} us, p99 "
            f"{hit['p99_us']:.1f} us (target {targets['hit_lookup_p99_us_max']:g}); the whole "
            f"call p50 {call['p50_us']:.1f} us, p99 {call['p99_us']:.1f} us; replay of "
            f"{replay['calls']} calls: hit ratio {replay['hit_ratio']:.4f} (target "
            f"{targets['hit_ratio_min']:g})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.reports]
    print(render(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
