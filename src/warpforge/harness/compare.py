"""The performance gate: compare two reports and fail on a regression beyond noise.

For each row present in both reports (same problem, shape and dtype), the ratio new/old of the
candidate's median time is reported with an interval from the two 95% intervals. A row regresses
when the ratio exceeds ``1 + threshold`` *and* its interval lies wholly above 1 (the slowdown is
bigger than the threshold and not explained by noise). A row that passed verification before and
is rejected now is a regression too.

Both reports must come from the same GPU model: a time ratio across models (an H100's report
against an H200's) measures the hardware, not the change, and would hide a regression behind a
faster card. ``across_devices=True`` (``--across-devices``) compares them anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from warpforge.harness.report import CANDIDATE, result_key

DEFAULT_THRESHOLD = 0.03


@dataclass(frozen=True)
class RowComparison:
    key: str
    ratio: float | None
    """new median / old median (above 1: slower)."""
    ci95: tuple[float, float] | None
    status: str
    """``regression``, ``improvement``, ``same``, ``new-rejected``, ``missing``, ``added``."""

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "ratio": self.ratio, "ci95": self.ci95, "status": self.status}


def report_device(report: Mapping[str, Any]) -> str | None:
    """The device a report was measured on, as its environment names it (``None``: unnamed)."""
    device = (report.get("environment") or {}).get("device") or {}
    return device.get("name") if isinstance(device, Mapping) else None


def compare_reports(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    across_devices: bool = False,
) -> list[RowComparison]:
    """Per-row comparison of two loaded reports of one device (see the module's docstring)."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not 0 <= threshold < 1
    ):
        raise ValueError(f"threshold: expected a number in [0, 1), got {threshold!r}")
    old_device, new_device = report_device(old), report_device(new)
    if not across_devices and old_device and new_device and old_device != new_device:
        raise ValueError(
            f"new: measured on {new_device!r}, the old report on {old_device!r}; a time ratio "
            "across devices measures the hardware, not the change (compare reports of one "
            "device, or pass --across-devices)"
        )
    old_rows = {result_key(r): r for r in old["results"]}
    new_rows = {result_key(r): r for r in new["results"]}
    rows = []
    for key, before in old_rows.items():
        after = new_rows.get(key)
        if after is None:
            rows.append(RowComparison(key, None, None, "missing"))
            continue
        if before.get("status") == "ok" and after.get("status") == "rejected":
            rows.append(RowComparison(key, None, None, "new-rejected"))
            continue
        t_old = before.get("times", {}).get(CANDIDATE)
        t_new = after.get("times", {}).get(CANDIDATE)
        if not t_old or not t_new:
            rows.append(RowComparison(key, None, None, "same"))
            continue
        ratio = t_new["median_s"] / t_old["median_s"]
        low = t_new["ci95_s"][0] / t_old["ci95_s"][1]
        high = t_new["ci95_s"][1] / t_old["ci95_s"][0]
        if ratio > 1 + threshold and low > 1.0:
            status = "regression"
        elif ratio < 1 - threshold and high < 1.0:
            status = "improvement"
        else:
            status = "same"
        rows.append(RowComparison(key, ratio, (low, high), status))
    for key in new_rows.keys() - old_rows.keys():
        rows.append(RowComparison(key, None, None, "added"))
    return rows


def has_regression(rows: list[RowComparison]) -> bool:
    return any(r.status in {"regression", "new-rejected"} for r in rows)


def render_comparison(rows: list[RowComparison], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title="warpforge compare (new time / old time)")
    for column in ("problem", "ratio", "95% interval", "status"):
        table.add_column(column, overflow="fold")
    styles = {"regression": "red", "new-rejected": "red", "improvement": "green"}
    for row in sorted(rows, key=lambda r: r.key):
        style = styles.get(row.status, "")
        table.add_row(
            row.key,
            f"{row.ratio:.3f}" if row.ratio is not None else "-",
            f"[{row.ci95[0]:.3f}, {row.ci95[1]:.3f}]" if row.ci95 else "-",
            f"[{style}]{row.status}[/{style}]" if style else row.status,
        )
    console.print(table)
