"""A roofline plot of a report: every kernel placed against the device's measured ceilings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from warpforge.harness.report import CANDIDATE


def roofline_points(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """(label, row label, arithmetic intensity FLOP/byte, achieved FLOP/s and bytes/s, dtype)
    for every timed row; the row label adds the shape and dtype, which tell apart the rows of
    one problem in a sweep."""
    points = []
    for r in report["results"]:
        t = r.get("times", {}).get(CANDIDATE)
        if not t or not r.get("bytes_moved") or r.get("status") != "ok":
            continue
        flops = r.get("flops") or 0.0
        bytes_moved = r["bytes_moved"]
        points.append(
            {
                "label": r["problem"],
                "row_label": _row_label(r),
                "intensity": flops / bytes_moved if flops else None,
                "flop_per_s": flops / t["median_s"] if flops else None,
                "byte_per_s": bytes_moved / t["median_s"],
                "dtype": r.get("dtype"),
            }
        )
    return points


def _row_label(row: Mapping[str, Any]) -> str:
    shape = " ".join(f"{k}={v}" for k, v in (row.get("shape") or {}).items())
    return " ".join(part for part in (row["problem"], shape, str(row.get("dtype") or "")) if part)


def _rate_text(flop_per_s: float) -> str:
    if flop_per_s >= 1e12:
        return f"{flop_per_s / 1e12:.1f} TFLOP/s"
    return f"{flop_per_s / 1e9:.1f} GFLOP/s"


def plot_roofline(report: Mapping[str, Any], output: str | Path) -> Path:
    """Draw the roofline PNG for ``report`` at ``output``; needs matplotlib (extra ``plot``)."""
    from warpforge.optional import require

    matplotlib = require("matplotlib", extra="plot", feature="warpforge roofline")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ceilings = report.get("ceilings")
    if not ceilings:
        raise ValueError(
            "report: has no measured ceilings; run `warpforge ceilings` and bench again"
        )
    bandwidth = ceilings["copy_bytes_per_s"]
    peaks = ceilings["matmul_flops_per_s"]
    points = roofline_points(report)
    intensities = [p["intensity"] for p in points if p["intensity"]] or [1.0]
    lo = min(min(intensities) / 4, 0.05)
    hi = max(max(intensities) * 4, max(peaks.values()) / bandwidth * 8)
    # one bar a row: a sweep's many rows get a taller figure rather than overlapping labels
    fig, (ax, bw) = plt.subplots(
        1, 2, figsize=(14, max(6.0, 0.18 * len(points) + 1.5)), dpi=120,
        gridspec_kw={"width_ratios": [3, 2]},
    )  # fmt: skip
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for key, peak in sorted(peaks.items(), key=lambda kv: -kv[1]):
        label = f"{key} peak {_rate_text(peak)}"
        ax.plot(xs, [min(peak, bandwidth * x) / 1e12 for x in xs], label=label)
    ax.plot(xs, [bandwidth * x / 1e12 for x in xs], "k--", linewidth=0.8,
            label=f"copy {bandwidth / 1e9:.0f} GB/s")  # fmt: skip
    for p in points:
        if p["intensity"] is None:
            continue
        ax.scatter([p["intensity"]], [p["flop_per_s"] / 1e12], zorder=3)
        ax.annotate(p["label"], (p["intensity"], p["flop_per_s"] / 1e12), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"roofline: {ceilings.get('device', 'device')}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", linewidth=0.3)
    # every kernel against the copy ceiling, FLOPs or not
    positions = range(len(points))
    bw.barh(positions, [p["byte_per_s"] / 1e9 for p in points])
    bw.set_yticks(positions, [p["row_label"] for p in points])
    bw.invert_yaxis()  # the report's order, top down
    bw.axvline(bandwidth / 1e9, color="k", linestyle="--", linewidth=0.8,
               label=f"copy ceiling {bandwidth / 1e9:.0f} GB/s")  # fmt: skip
    bw.set_xlabel("achieved GB/s (analytic bytes / median time)")
    bw.set_title("bandwidth")
    bw.legend(fontsize=7, loc="lower right")
    bw.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    plt.close(fig)
    return output
