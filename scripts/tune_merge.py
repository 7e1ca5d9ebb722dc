"""Join tuning-benchmark runs done in parts into one report, and compose shipped-configs files.

``scripts/gpu/tune_check.sh`` runs in two parts (``norms``, ``blueprints``), each within one device
call. This joins their outputs (no GPU):

    python scripts/tune_merge.py runs MERGED_DIR NORMS_DIR BLUEPRINTS_DIR

writes ``MERGED_DIR/tune_bench.json`` (every part's results; ``scripts/tune_table.py`` renders it)
and ``MERGED_DIR/shipped-<device>.json`` (the parts' exported configs in one file). The parts
must come from the same device and software (device, driver, torch, Triton, CUDA, warpforge
commit) and tune different kernels: a mismatch is an error, never a silent mix.

    python scripts/tune_merge.py shipped OUT.json BASE.json NEW.json [...] [--exclude-heldout RUN.json]
        [--drop-stale]

composes a shipped-configs file from exported ones (:func:`warpforge.tune.shipped.merge_shipped`:
later files replace an earlier file's entry for the same problem), leaving out the held-out
shapes of the tuning benchmark runs given with ``--exclude-heldout`` so that a nearest-match check
on them never finds them shipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What must agree between parts for their times to be comparable.
_SAME_ENVIRONMENT = ("device", "driver", "torch", "triton", "cuda_runtime", "git_commit")


def merge_runs(parts: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One tune_bench document holding every part's results; ``ValueError`` when the parts are
    not comparable (another device or software) or overlap (a kernel tuned in two parts)."""
    if not parts:
        raise ValueError("parts: expected at least one tune_bench report, got none")
    for name, document in parts:
        if document.get("benchmark") != "tune_bench":
            raise ValueError(f"{name}: expected a tune_bench report")
    first_name, first = parts[0]
    seen: dict[tuple[str, str], str] = {}
    for name, document in parts:
        if document.get("device_fingerprint") != first.get("device_fingerprint"):
            raise ValueError(
                f"{name}: device {document.get('device_fingerprint')!r} differs from "
                f"{first_name}'s {first.get('device_fingerprint')!r}"
            )
        env, first_env = (
            document.get("environment_fingerprint", {}),
            first.get("environment_fingerprint", {}),
        )
        for key in _SAME_ENVIRONMENT:
            if env.get(key) != first_env.get(key):
                raise ValueError(
                    f"{name}: {key} {env.get(key)!r} differs from {first_name}'s "
                    f"{first_env.get(key)!r}"
                )
        for result in document["results"]:
            key = (result["kernel"], result["dtype"])
            if key in seen:
                raise ValueError(f"{name}: {key[0]} {key[1]} was already tuned in {seen[key]}")
            seen[key] = name
    merged = dict(first)
    merged["results"] = [r for _, d in parts for r in d["results"]]
    merged["skipped"] = [s for _, d in parts for s in d.get("skipped") or ()]
    merged["complete"] = all(d.get("complete") for _, d in parts)
    merged["wall_s"] = sum(d.get("wall_s") or 0.0 for _, d in parts)
    merged["parts"] = [
        {
            "report": name,
            "kernels": d["arguments"].get("kernels"),
            "budget_kernels": d["arguments"].get("budget_kernels"),
            "wall_s": d.get("wall_s"),
            "max_wall_s": d.get("max_wall_s"),
            "complete": d.get("complete"),
            "compile_ahead": d.get("compile_ahead"),
        }
        for name, d in parts
    ]
    merged["arguments"] = {
        **first["arguments"],
        "kernels": [k for _, d in parts for k in d["arguments"].get("kernels") or ()],
        "budget_kernels": [k for _, d in parts for k in d["arguments"].get("budget_kernels") or ()],
    }
    merged["method"] = {
        **first.get("method", {}),
        "budget_kernels": sorted(
            {k for _, d in parts for k in d.get("method", {}).get("budget_kernels") or ()}
        ),
    }
    merged.pop("compile_ahead", None)  # per part, under "parts"
    return merged


def heldout_problems(document: dict[str, Any]) -> list[tuple[str, dict[str, object]]]:
    """``(kernel, features)`` of every held-out shape of a tune_bench report."""
    return [
        (result["kernel"], entry["features"])
        for result in document["results"]
        for entry in result["heldout"]
    ]


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: cannot read a JSON report ({exc})") from None


def _runs(args: argparse.Namespace) -> int:
    from warpforge.tune.shipped import merge_shipped

    parts = []
    for directory in args.parts:
        report = directory / "tune_bench.json" if directory.is_dir() else directory
        parts.append((str(report), _load(report)))
    try:
        merged = merge_runs(parts)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    args.merged.mkdir(parents=True, exist_ok=True)
    shipped = []
    for name, document in parts:
        if document.get("shipped_file"):
            path = Path(name).parent / document["shipped_file"]
            if path.exists():
                shipped.append(path)
    if shipped:
        out = args.merged / Path(shipped[0]).name
        count = merge_shipped(shipped, out)
        merged["shipped_file"] = out.name
        print(f"wrote {out}: {count} entries from {len(shipped)} part(s)")
    else:
        merged["shipped_file"] = None
    target = args.merged / "tune_bench.json"
    target.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}: {len(merged['results'])} kernel(s) from {len(parts)} part(s)")
    return 0


def _shipped(args: argparse.Namespace) -> int:
    from warpforge.tune.shipped import merge_shipped

    exclude = [p for run in args.exclude_heldout for p in heldout_problems(_load(run))]
    try:
        count = merge_shipped(args.sources, args.out, exclude=exclude, drop_stale=args.drop_stale)
    except (OSError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    print(
        f"wrote {args.out}: {count} entries ({len(exclude)} held-out problem(s) left out"
        + (", stale entries dropped)" if args.drop_stale else ")")
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    runs = commands.add_parser("runs", help="join tune_check.sh parts into one report")
    runs.add_argument("merged", type=Path, help="directory for the merged report")
    runs.add_argument("parts", type=Path, nargs="+", help="part directories (or their JSON)")
    runs.set_defaults(handler=_runs)
    shipped = commands.add_parser("shipped", help="compose a shipped-configs file")
    shipped.add_argument("out", type=Path, help="file to write")
    shipped.add_argument("sources", type=Path, nargs="+", help="exported files, oldest first")
    shipped.add_argument(
        "--exclude-heldout",
        type=Path,
        action="append",
        default=[],
        help="tune_bench report whose held-out shapes are left out (repeatable)",
    )
    shipped.add_argument(
        "--drop-stale",
        action="store_true",
        help="leave out entries tuned on an earlier source of their kernel (warpforge db stale)",
    )
    shipped.set_defaults(handler=_shipped)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
