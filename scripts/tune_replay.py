"""Replay the nearest-match lookup on recorded GPU trials: no GPU, no new measurement.

``benchmarks/tune_bench.py`` stores every trial of its exhaustive searches (``tune.db``: the
training shapes and the held-out shapes). For each held-out (kernel, shape) of a run, this script
builds a database holding only that kernel's *other* problems' trials (the training shapes), asks
a fresh :class:`~warpforge.tune.lookup.ConfigLookup` for the held-out shape with each selection
rule (``nearest``: the single nearest neighbour's best carried over; ``consensus``: the default,
see :mod:`warpforge.tune.consensus`), and also from a shipped-configs file exported from those
training trials alone (what users get with no database). Quality = the held-out shape's
exhaustive best median / the chosen config's median, both from the held-out shape's recorded
exhaustive search (every valid config was timed there). The config the GPU run itself picked
(``nearest_config`` in its JSON, chosen by the code of that run) is scored the same way.

    PYTHONPATH=src python scripts/tune_replay.py \\
        benchmarks/results/tune-2026-11-22-h100.json \\
        --databases benchmarks/results/tune-2026-11-22-logs/tune-dbs-logs.tgz \\
        --out benchmarks/results/tune-replay-2026-11-22-h100.json --sensitivity

Recorded trials keep their stored source hash; the replay relabels them with each kernel's current
one, so the current code's spaces and transfers judge them (a config the current space rejects is
never chosen). Qualities come from search medians, not from an interleaved re-timing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import itertools
import json
import math
import sqlite3
import statistics
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from warpforge.tune.database import PerfDatabase, canonical_json
from warpforge.tune.lookup import ConfigLookup, normalize_features
from warpforge.tune.search import Trial
from warpforge.tune.shipped import export_shipped
from warpforge.tune.space import config_key
from warpforge.tune.tunable import get_tunable

TARGET = 0.95
SELECTIONS = ("nearest", "consensus")


class RecordedDeviceLookup(ConfigLookup):
    """A lookup that answers for the recorded run's device, whatever this machine has."""

    def __init__(self, fingerprint: str, **kwargs: Any) -> None:
        self._fingerprint = fingerprint
        super().__init__(**kwargs)

    def _device(self, device: torch.device | str | None) -> str:
        return self._fingerprint


def trials_database(path: Path, workdir: Path) -> Path:
    """``path`` itself, or the database (``tune.db``, else the only ``*.db``) extracted from a
    ``.tgz`` of a run's databases."""
    if path.suffix == ".db":
        return path
    with tarfile.open(path) as archive:
        files = [m for m in archive.getmembers() if m.isfile() and m.name.endswith(".db")]
        named = [m for m in files if Path(m.name).name == "tune.db"]
        chosen = named or (files if len(files) == 1 else [])
        if not chosen:
            raise SystemExit(f"{path}: holds no tune.db (nor a single *.db)")
        source = archive.extractfile(chosen[0])
        assert source is not None
        target = Path(tempfile.mkdtemp(prefix="db-", dir=workdir)) / Path(chosen[0].name).name
        target.write_bytes(source.read())
    return target


def recorded_problems(db_paths: Path | Sequence[Path], kernel: str) -> dict[str, dict[str, Any]]:
    """Per problem (canonical features): features, device and the fastest ok median per config,
    over the trials of every database given (runs of the same kernel source on one device)."""
    rows = []
    for db_path in [db_paths] if isinstance(db_paths, Path) else db_paths:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
            rows += conn.execute(
                "SELECT features, config, device, median_s FROM trials WHERE kernel = ? "
                "AND status = 'ok' AND median_s IS NOT NULL",
                (kernel,),
            ).fetchall()
    problems: dict[str, dict[str, Any]] = {}
    for features_json, config_json, device, median in rows:
        features = json.loads(features_json)
        problem = problems.setdefault(
            canonical_json(features), {"features": features, "device": device, "medians": {}}
        )
        key = config_key(json.loads(config_json))
        problem["medians"][key] = min(median, problem["medians"].get(key, math.inf))
    return problems


def quality(problem: Mapping[str, Any], config: Mapping[str, object] | None) -> float | None:
    """Exhaustive best median / ``config``'s median on the recorded problem."""
    if config is None:
        return None
    medians = problem["medians"]
    median = medians.get(config_key(config))
    return None if median is None else min(medians.values()) / median


def exhaustively_measured(kernel_name: str, problem: Mapping[str, Any]) -> bool:
    """Whether every config the kernel's space allows on ``problem`` was timed there (only then
    can any chosen config be scored)."""
    features = normalize_features(problem["features"])
    valid = get_tunable(kernel_name).space.valid_configs(features)
    return {config_key(c) for c in valid} <= set(problem["medians"])


def leave_one_out(
    kernels: Sequence[str], db_paths: Sequence[Path], work: Path
) -> list[dict[str, Any]]:
    """Every exhaustively measured problem of ``kernels`` held out in turn: the lookup reads the
    kernel's other problems only and is scored on the held-out one's own measurements."""
    cases = []
    for name in kernels:
        problems = recorded_problems(db_paths, name)
        for problem in problems.values():
            if not exhaustively_measured(name, problem):
                continue
            features = normalize_features(problem["features"])
            shape = {k: v for k, v in features.items() if isinstance(v, int) and k != "whole_rows"}
            heldout = {"features": features, "shape": shape}
            case = replay_case(name, heldout, problems, work)
            case["dtype"] = features.get("dtype")
            cases.append(case)
    return cases


def replay_case(
    kernel_name: str, heldout: Mapping[str, Any], problems: dict[str, dict[str, Any]], work: Path
) -> dict[str, Any]:
    kernel = get_tunable(kernel_name)
    features = normalize_features(heldout["features"])
    target_key = canonical_json(features)
    target = problems.get(target_key)
    if target is None:
        return {"kernel": kernel_name, "shape": heldout["shape"], "note": "no recorded trials"}
    training = {k: p for k, p in problems.items() if k != target_key}
    case_dir = Path(tempfile.mkdtemp(prefix="case-", dir=work))
    url = f"sqlite:///{case_dir / 'train.db'}"
    with PerfDatabase(url) as db:
        for problem in training.values():
            for key, median in problem["medians"].items():
                db.record_trial(
                    kernel=kernel.name,
                    source_hash=kernel.source_hash,
                    device=problem["device"],
                    features=problem["features"],
                    trial=Trial(json.loads(key), "ok", median),
                )
        shipped_dir = case_dir / "shipped"
        export_shipped(kernel.name, shipped_dir / "configs.json", database=db)
    default = kernel.default_config(features)
    entry: dict[str, Any] = {
        "kernel": kernel_name,
        "shape": heldout["shape"],
        "training_shapes": len(training),
        "valid_configs_measured": len(target["medians"]),
        "gpu_run": {
            "config": heldout.get("nearest_config"),
            "origin": heldout.get("nearest_origin"),
            "quality_from_trials": quality(target, heldout.get("nearest_config")),
            "quality_retimed": heldout.get("nearest_quality"),
        },
    }
    for source, options in (
        ("database", {"database_url": url, "shipped_dir": case_dir / "none", "use_database": True}),
        ("shipped", {"shipped_dir": shipped_dir, "use_database": False}),
    ):
        for selection in SELECTIONS:
            lookup = RecordedDeviceLookup(target["device"], selection=selection, **options)
            config = lookup.config_for(kernel.name, features, default)
            entry[f"{selection}_{source}"] = {
                "config": config,
                "origin": lookup.origin(kernel.name, features),
                "quality": quality(target, config),
            }
            lookup.clear()
    return entry


def summarise(cases: list[dict[str, Any]]) -> dict[str, Any]:
    def stats(values: list[float | None]) -> dict[str, Any]:
        known = [v for v in values if v is not None]
        if not known:
            return {"cases": 0}
        return {
            "cases": len(values),
            "meeting_target": sum(v >= TARGET for v in known),
            "min": min(known),
            "geomean": statistics.geometric_mean(known),
            "unknown": len(values) - len(known),
        }

    columns = {"gpu_run": [c.get("gpu_run", {}).get("quality_from_trials") for c in cases]}
    for source in ("database", "shipped"):
        for selection in SELECTIONS:
            name = f"{selection}_{source}"
            columns[name] = [c.get(name, {}).get("quality") for c in cases]
    return {name: stats(values) for name, values in columns.items()}


SENSITIVITY = {
    "neighbours": (2, 3, 4),
    "min_support": (0.34, 0.5, 0.67),
    "evidence_min_relative": (0.7, 0.8, 0.9),
}
"""The consensus's constants varied around their defaults by ``--sensitivity``."""


@contextlib.contextmanager
def consensus_constants(
    neighbours: int, min_support: float, evidence_min_relative: float
) -> Iterator[None]:
    """The consensus rule with other constants, for this replay only (restored on exit)."""
    from warpforge.tune import consensus, lookup

    saved = (lookup.NEIGHBOURS, consensus.MIN_SUPPORT, consensus.EVIDENCE_MIN_RELATIVE)
    lookup.NEIGHBOURS, consensus.MIN_SUPPORT = neighbours, min_support
    consensus.EVIDENCE_MIN_RELATIVE = evidence_min_relative
    try:
        yield
    finally:
        lookup.NEIGHBOURS, consensus.MIN_SUPPORT, consensus.EVIDENCE_MIN_RELATIVE = saved


def replay_all(
    run: Mapping[str, Any], db_path: Path | Sequence[Path], work: Path
) -> list[dict[str, Any]]:
    cases = []
    for result in run["results"]:
        problems = recorded_problems(db_path, result["kernel"])
        for heldout in result["heldout"]:
            cases.append(replay_case(result["kernel"], heldout, problems, work))
    return cases


def sensitivity(
    run: Mapping[str, Any], db_path: Path | Sequence[Path], work: Path
) -> list[dict[str, Any]]:
    """The consensus (database) over the :data:`SENSITIVITY` grid of its constants."""
    rows = []
    for neighbours, support, relative in itertools.product(*SENSITIVITY.values()):
        with consensus_constants(neighbours, support, relative):
            cases = replay_all(run, db_path, work)
        stats = summarise(cases)["consensus_database"]
        rows.append(
            {
                "neighbours": neighbours,
                "min_support": support,
                "evidence_min_relative": relative,
                **stats,
                "misses": {
                    c["kernel"]: c["consensus_database"]["quality"]
                    for c in cases
                    if (c.get("consensus_database", {}).get("quality") or 0.0) < TARGET
                },
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", type=Path, help="tune_bench.json of the recorded run")
    parser.add_argument(
        "--databases",
        type=Path,
        nargs="+",
        required=True,
        help="its tune.db, or the .tgz holding it; more databases of the same kernel sources "
        "and device add their problems as training shapes (e.g. a later tuning run)",
    )
    parser.add_argument(
        "--leave-one-out",
        action="store_true",
        help="also hold out, in turn, every exhaustively measured problem of the run's kernels "
        "in the databases (the lookup reads the others only)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the replay JSON here")
    parser.add_argument(
        "--sensitivity",
        action="store_true",
        help="also replay the consensus with its constants varied (SENSITIVITY)",
    )
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text())
    if run.get("benchmark") != "tune_bench":
        parser.error(f"{args.run}: expected a tune_bench JSON")
    grid = None
    with tempfile.TemporaryDirectory(prefix="wf-tune-replay-") as tmp:
        work = Path(tmp)
        db_path = [trials_database(path, work) for path in args.databases]
        cases = replay_all(run, db_path, work)
        if args.sensitivity:
            grid = sensitivity(run, db_path, work)
        loo = None
        if args.leave_one_out:
            loo = leave_one_out([r["kernel"] for r in run["results"]], db_path, work)
    document = {
        "benchmark": "tune_replay",
        "note": "offline replay of the lookup on recorded GPU trials (no new measurement): "
        "quality = the held-out shape's exhaustive best median / the chosen config's median, "
        "both from the recorded exhaustive search of the held-out shape",
        "run": str(args.run),
        "run_device": run.get("device_fingerprint"),
        "run_environment": run.get("environment_fingerprint"),
        "databases": [str(path) for path in args.databases],
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "target": TARGET,
        "cases": cases,
        "summary": summarise(cases),
    }
    if grid is not None:
        document["sensitivity"] = grid
    if loo is not None:
        document["leave_one_out"] = {"cases": loo, "summary": summarise(loo)}
    if args.out is not None:
        args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    columns = ["gpu_run", "nearest_database", "consensus_database", "consensus_shipped"]
    print(f"{'kernel':70s} " + " ".join(f"{c:>18s}" for c in columns))
    for case in cases:
        values = [case.get("gpu_run", {}).get("quality_from_trials")] + [
            case.get(c, {}).get("quality") for c in columns[1:]
        ]
        cells = " ".join(f"{'-' if v is None else f'{v:.4f}':>18s}" for v in values)
        print(f"{case['kernel'][-70:]:70s} {cells}")
    for row in grid or ():
        print(
            f"neighbours {row['neighbours']} min_support {row['min_support']} evidence >= "
            f"{row['evidence_min_relative']}: {row['meeting_target']}/{row['cases']}, "
            f"min {row['min']:.4f}"
        )
    for case in loo or ():
        cells = " ".join(
            f"{'-' if v is None else f'{v:.4f}':>18s}"
            for v in (case.get(c, {}).get("quality") for c in columns[1:])
        )
        label = f"leave-one-out {case['kernel'][-40:]} {case['shape']} {case.get('dtype') or ''}"
        print(f"{label:89s} {cells}")
    if loo is not None:
        for name, stats in document["leave_one_out"]["summary"].items():
            if stats.get("cases"):
                print(
                    f"leave-one-out {name:20s} >= {TARGET}: {stats['meeting_target']}/"
                    f"{stats['cases']}  min {stats['min']:.4f}  geomean {stats['geomean']:.3f}"
                )
    for name, stats in document["summary"].items():
        if stats.get("cases"):
            print(
                f"{name:20s} >= {TARGET}: {stats['meeting_target']}/{stats['cases']}  "
                f"min {stats['min']:.4f}  geomean {stats['geomean']:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
