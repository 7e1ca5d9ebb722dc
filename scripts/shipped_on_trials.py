"""How a shipped config table fares on another GPU's exhaustive trials, as Markdown.

    python scripts/shipped_on_trials.py SHIPPED.json TRIALS.json [--kernel GLOB]

SHIPPED.json is a shipped table (``warpforge tune export``, format ``warpforge.tune.configs``,
e.g. ``src/warpforge/tune/shipped/nvidia-h100-80gb-hbm3-sm_90.json``); TRIALS.json every trial
of an exhaustive search on the other GPU (``warpforge tune export --trials``, format
``warpforge.tune.trials``). For each shipped (kernel, shape, dtype) the other GPU searched, the
row gives that GPU's best config and median time, the shipped config's median time in the same
search, and their ratio (1.000: the shipped config is the best there). It answers whether that
GPU needs a table of its own: docs paste this output unchanged, so the numbers trace to the two
committed files. Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path
from typing import Any


def _key(config: dict[str, Any]) -> tuple:
    return tuple(sorted(config.items()))


def _load(path: Path, expected_format: str) -> dict[str, Any]:
    document = json.loads(path.read_text())
    if document.get("format") != expected_format:
        raise SystemExit(
            f"{path}: expected a {expected_format!r} file, got format {document.get('format')!r}"
        )
    return document


def compare(shipped: dict[str, Any], trials: dict[str, Any], pattern: str | None = None) -> list:
    """(kernel, features, best trial, shipped config's trial or None) for every shipped entry
    that the trials searched, in the shipped table's order."""
    searched: dict[tuple, list[dict[str, Any]]] = {}
    for trial in trials["trials"]:
        if trial.get("status") == "ok":
            key = (trial["kernel"], _key(trial["features"]))
            searched.setdefault(key, []).append(trial)
    rows = []
    for kernel, entries in shipped["kernels"].items():
        if pattern and not fnmatch.fnmatchcase(kernel, pattern):
            continue
        for entry in entries:
            found = searched.get((kernel, _key(entry["features"])))
            if not found:
                continue
            best = min(found, key=lambda t: t["median_s"])
            same = [t for t in found if _key(t["config"]) == _key(entry["config"])]
            rows.append((kernel, entry["features"], best, same[0] if same else None))
    return rows


def render(shipped: dict[str, Any], trials: dict[str, Any], pattern: str | None = None) -> str:
    rows = compare(shipped, trials, pattern)
    devices = sorted({t["device"] for t in trials["trials"]})
    lines = [
        f"Trials on {', '.join(devices)}; shipped configs tuned on "
        f"{', '.join(sorted({e['device'] for v in shipped['kernels'].values() for e in v}))}.",
        "",
        "| kernel | shape | dtype | best config there | µs | shipped config µs | ratio |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    ratios = []
    for kernel, features, best, same in rows:
        shape = " ".join(f"{k}={v}" for k, v in features.items() if k != "dtype")
        config = " ".join(f"{k}={v}" for k, v in best["config"].items())
        if same is None:
            shipped_cell, ratio_cell = "not tried", "—"
        else:
            ratio = same["median_s"] / best["median_s"]
            ratios.append(ratio)
            shipped_cell, ratio_cell = f"{same['median_s'] * 1e6:,.2f}", f"{ratio:.3f}"
        lines.append(
            f"| {kernel} | {shape} | {features.get('dtype', '')} | {config} | "
            f"{best['median_s'] * 1e6:,.2f} | {shipped_cell} | {ratio_cell} |"
        )
    lines.append("")
    if ratios:
        lines.append(
            f"- shapes: {len(rows)}; shipped config timed at {len(ratios)}; slowest against the "
            f"best there: {max(ratios):.3f}x; the best itself at "
            f"{sum(r == 1.0 for r in ratios)}"
        )
    else:
        lines.append("- no shipped shape was searched in these trials")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shipped", type=Path, help="a shipped config table")
    parser.add_argument("trials", type=Path, help="every trial of another GPU's search")
    parser.add_argument("--kernel", help="only kernels matching this glob")
    args = parser.parse_args()
    shipped = _load(args.shipped, "warpforge.tune.configs")
    trials = _load(args.trials, "warpforge.tune.trials")
    print(render(shipped, trials, args.kernel))


if __name__ == "__main__":
    main()
