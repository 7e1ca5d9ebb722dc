"""Moving tuning results in and out of the database as JSON, including the file the package ships.

Two formats, both UTF-8 JSON objects with a ``format`` tag and a ``version``:

**Shipped configs** (``"format": "warpforge.tune.configs"``, version 1): the best config per
problem, what :func:`warpforge.tune.lookup.config_for` reads from ``warpforge/tune/shipped/*.json``::

    {
      "format": "warpforge.tune.configs",
      "version": 1,
      "generated": "2026-11-21T20:00:00+00:00",
      "kernels": {
        "row_sum": [
          {"source_hash": "57d9127785515137",
           "device": "NVIDIA H100 80GB HBM3/sm_90",
           "features": {"M": 4096, "N": 4096, "dtype": "float16"},
           "config": {"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 2},
           "median_s": 1.1e-05, "ci_s": [1.0e-05, 1.2e-05]}
        ]
      }
    }

``median_s`` and ``ci_s`` are optional (informational). An entry applies to a registered kernel only
while its ``source_hash`` matches the kernel's current source.

**Trials** (``"format": "warpforge.tune.trials"``, version 1): every stored trial, one object per
trial with the columns of the ``trials`` table (``kernel, source_hash, device, features, config,
status, median_s, ci_low_s, ci_high_s, rel_stderr, samples, error, host, created_at``), under
``"trials"``. ``warpforge db import`` accepts both formats; shipped entries become ``ok`` trials.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warpforge.tune.lookup import StoredConfig, normalize_features
from warpforge.validation import describe

if TYPE_CHECKING:  # the database layer loads only for export/import, never for reading
    from warpforge.tune.database import PerfDatabase

CONFIGS_FORMAT = "warpforge.tune.configs"
TRIALS_FORMAT = "warpforge.tune.trials"
FORMAT_VERSION = 1


def _write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    """Write to a temporary file and rename it over ``path``: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_document(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") not in (
        CONFIGS_FORMAT,
        TRIALS_FORMAT,
    ):
        raise ValueError(
            f"{path}: expected a JSON object with format {CONFIGS_FORMAT!r} or {TRIALS_FORMAT!r}"
        )
    if document.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: expected format version {FORMAT_VERSION}, got {document.get('version')!r}"
        )
    return document


def _entry(kernel: str, raw: object, where: str) -> StoredConfig:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object, got {describe(raw)}")
    missing = [k for k in ("source_hash", "device", "features", "config") if k not in raw]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    if not isinstance(raw["features"], dict) or not isinstance(raw["config"], dict):
        raise ValueError(f"{where}: features and config must be objects")
    median = raw.get("median_s")
    return StoredConfig(
        normalize_features(raw["features"]),
        dict(raw["config"]),
        str(raw["source_hash"]),
        str(raw["device"]),
        None if median is None else float(median),
        "shipped",
    )


def read_shipped(path: str | Path) -> dict[str, list[StoredConfig]]:
    """The entries of a shipped-configs file, by kernel; ``ValueError`` naming what is malformed."""
    document = _read_document(path)
    if document["format"] != CONFIGS_FORMAT:
        raise ValueError(f"{path}: expected format {CONFIGS_FORMAT!r}, got {document['format']!r}")
    kernels = document.get("kernels")
    if not isinstance(kernels, dict):
        raise ValueError(f"{path}: 'kernels' must be an object of kernel name -> entries")
    result: dict[str, list[StoredConfig]] = {}
    for name, entries in kernels.items():
        if not isinstance(entries, list):
            raise ValueError(f"{path}: kernels[{name!r}] must be a list of entries")
        result[name] = [
            _entry(name, raw, f"{path}: kernels[{name!r}][{i}]") for i, raw in enumerate(entries)
        ]
    return result


def export_shipped(
    kernels: str | Iterable[str] | None,
    path: str | Path,
    *,
    database: PerfDatabase | None = None,
    device: str | None = None,
    current_source_only: bool = True,
) -> int:
    """Write the best stored configs of ``kernels`` (all when ``None``) as a shipped-configs file.

    With ``current_source_only``, a registered kernel exports only results for its current source
    hash (older ones would be ignored at lookup anyway). Returns the number of entries written.
    """
    from warpforge.tune.tunable import find_tunable

    names: list[str] | None
    if kernels is None:
        names = None
    elif isinstance(kernels, str):
        names = [kernels]
    else:
        names = list(kernels)
        if not all(isinstance(n, str) and n for n in names):
            raise TypeError(f"kernels: expected kernel names, got {names!r}")
    from warpforge.tune.database import database_or_default

    with database_or_default(database) as db:
        records = db.best_configs(device=device)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if names is not None and r.kernel not in names:
            continue
        tunable = find_tunable(r.kernel)
        if current_source_only and tunable is not None and r.source_hash != tunable.source_hash:
            continue
        grouped.setdefault(r.kernel, []).append(
            {
                "source_hash": r.source_hash,
                "device": r.device,
                "features": r.features,
                "config": r.config,
                "median_s": r.median_s,
                "ci_s": [r.ci_low_s, r.ci_high_s],
            }
        )
    document = {
        "format": CONFIGS_FORMAT,
        "version": FORMAT_VERSION,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "kernels": grouped,
    }
    _write_json_atomically(Path(path), document)
    return sum(len(v) for v in grouped.values())


def export_trials(
    path: str | Path, *, database: PerfDatabase | None = None, kernel: str | None = None
) -> int:
    """Write every stored trial (of ``kernel``, or all) as a trials file; returns the count."""
    from warpforge.tune.database import database_or_default

    with database_or_default(database) as db:
        trials = db.trials(kernel=kernel)
    rows = []
    for t in trials:
        row = t.as_dict()
        row.pop("id")
        rows.append(row)
    _write_json_atomically(
        Path(path), {"format": TRIALS_FORMAT, "version": FORMAT_VERSION, "trials": rows}
    )
    return len(rows)


def import_file(path: str | Path, *, database: PerfDatabase | None = None) -> int:
    """Store the trials (or shipped configs, as ``ok`` trials) of a JSON file; returns the count.

    The whole file is validated before anything is written, so a malformed file imports nothing.
    """
    from warpforge.tune.search import STATUSES, Trial

    document = _read_document(path)
    pending: list[dict[str, Any]] = []
    if document["format"] == CONFIGS_FORMAT:
        for kernel, entries in read_shipped(path).items():
            for e in entries:
                if e.median_s is None:
                    raise ValueError(f"{path}: an entry of {kernel!r} has no median_s to import")
                pending.append(
                    {
                        "kernel": kernel,
                        "source_hash": e.source_hash,
                        "device": e.device,
                        "features": e.features,
                        "trial": Trial(e.config, "ok", e.median_s),
                    }
                )
    else:
        raw_trials = document.get("trials")
        if not isinstance(raw_trials, list):
            raise ValueError(f"{path}: 'trials' must be a list")
        for i, raw in enumerate(raw_trials):
            where = f"{path}: trials[{i}]"
            if not isinstance(raw, dict):
                raise ValueError(f"{where}: expected an object, got {describe(raw)}")
            missing = [
                k
                for k in ("kernel", "source_hash", "device", "features", "config", "status")
                if k not in raw
            ]
            if missing:
                raise ValueError(f"{where}: missing field(s) {missing}")
            if raw["status"] not in STATUSES:
                raise ValueError(
                    f"{where}: status must be one of {list(STATUSES)}, got {raw['status']!r}"
                )
            if raw["status"] == "ok" and raw.get("median_s") is None:
                raise ValueError(f"{where}: an 'ok' trial needs median_s")
            pending.append(
                {
                    "kernel": str(raw["kernel"]),
                    "source_hash": str(raw["source_hash"]),
                    "device": str(raw["device"]),
                    "features": normalize_features(raw["features"]),
                    "created_at": raw.get("created_at"),
                    "host": raw.get("host"),
                    "trial": Trial(
                        dict(raw["config"]),
                        raw["status"],
                        raw.get("median_s"),
                        raw.get("ci_low_s"),
                        raw.get("ci_high_s"),
                        raw.get("rel_stderr"),
                        raw.get("samples"),
                        raw.get("error"),
                    ),
                }
            )
    from warpforge.tune.database import database_or_default

    with database_or_default(database) as db:
        for item in pending:
            db.record_trial(**item)
    return len(pending)
