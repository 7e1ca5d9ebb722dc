"""Moving tuning results in and out of the database as JSON, including the file the package ships.

Two formats, both UTF-8 JSON objects with a ``format`` tag and a ``version``:

**Shipped configs** (``"format": "warpforge.tune.configs"``, version 2): the best config per
problem, what :func:`warpforge.tune.lookup.config_for` reads from ``warpforge/tune/shipped/*.json``::

    {
      "format": "warpforge.tune.configs",
      "version": 2,
      "generated": "2026-11-21T20:00:00+00:00",
      "kernels": {
        "row_sum": [
          {"source_hash": "57d9127785515137",
           "device": "NVIDIA H100 80GB HBM3/sm_90",
           "features": {"M": 4096, "N": 4096, "dtype": "float16"},
           "config": {"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 2},
           "median_s": 1.1e-05, "ci_s": [1.0e-05, 1.2e-05],
           "measured": [{"config": {"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4,
                                    "num_stages": 2}, "relative": 1.0},
                        {"config": {"BLOCK_N": 512, "ROWS": 2, "num_warps": 4,
                                    "num_stages": 2}, "relative": 0.96}]}
        ]
      }
    }

``median_s`` and ``ci_s`` are optional (informational). ``measured`` (version 2, optional) lists the
fastest configs measured on the problem with their relative speed (best time / their time), at most
:data:`SHIPPED_MEASURED_MAX` of them and none slower than :data:`SHIPPED_MEASURED_MIN_RELATIVE`: the
evidence the consensus lookup (:mod:`warpforge.tune.consensus`) weighs. Version 1 files (no
``measured``) still load; their entries count as their best alone. An entry applies to a registered
kernel only while its ``source_hash`` matches the kernel's current source. The package ships one
file per GPU model, named by :func:`shipped_file_name`; a lookup on that model reads that file
alone unless it needs another model's configs.

**Trials** (``"format": "warpforge.tune.trials"``, version 1): every stored trial, one object per
trial with the columns of the ``trials`` table (``kernel, source_hash, device, features, config,
status, median_s, ci_low_s, ci_high_s, rel_stderr, samples, error, host, created_at``), under
``"trials"``. ``warpforge db import`` accepts both formats; shipped entries become ``ok`` trials.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warpforge.atomic_write import write_atomically
from warpforge.tune.consensus import EVIDENCE_MAX, EVIDENCE_MIN_RELATIVE, top_evidence
from warpforge.tune.lookup import StoredConfig, normalize_features
from warpforge.tune.space import config_key
from warpforge.validation import check_positive, describe

if TYPE_CHECKING:  # the database layer loads only for export/import, never for reading
    from warpforge.tune.database import PerfDatabase

CONFIGS_FORMAT = "warpforge.tune.configs"
TRIALS_FORMAT = "warpforge.tune.trials"
FORMAT_VERSION = 1
"""Version of the trials format."""
CONFIGS_VERSION = 2
"""Version of the shipped-configs format written; :data:`CONFIGS_VERSIONS` are read."""
CONFIGS_VERSIONS = (1, 2)
SHIPPED_MEASURED_MAX = EVIDENCE_MAX
SHIPPED_MEASURED_MIN_RELATIVE = EVIDENCE_MIN_RELATIVE
"""What is shipped per problem is what the consensus lookup weighs: its fastest configs, at most
:data:`SHIPPED_MEASURED_MAX` and none slower than this share of the best's speed."""


def shipped_file_name(device: str) -> str:
    """The shipped file of one GPU model, named from its device fingerprint:
    ``NVIDIA H100 80GB HBM3/sm_90`` -> ``nvidia-h100-80gb-hbm3-sm_90.json``."""
    return (re.sub(r"[^a-z0-9_]+", "-", device.lower()).strip("-") or "device") + ".json"


def _write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    """Write to a temporary file and rename it over ``path``: a crash never leaves half a file."""
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True) + "\n")


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
    versions = CONFIGS_VERSIONS if document["format"] == CONFIGS_FORMAT else (FORMAT_VERSION,)
    if document.get("version") not in versions:
        raise ValueError(
            f"{path}: expected format version {' or '.join(map(str, versions))}, "
            f"got {document.get('version')!r}"
        )
    return document


def _entry(kernel: str, raw: object, where: str) -> StoredConfig:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object, got {describe(raw)}")
    missing = [k for k in ("source_hash", "device", "features", "config") if k not in raw]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    _check_fields(raw, where, strings=("source_hash", "device"), times=("median_s",))
    median = raw.get("median_s")
    measured = raw.get("measured", [])
    if not isinstance(measured, list):
        raise ValueError(f"{where}: measured must be a list, got {describe(measured)}")
    pairs = []
    for i, item in enumerate(measured):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("config"), dict)
            or isinstance(item.get("relative"), bool)
            or not isinstance(item.get("relative"), (int, float))
            or not 0 < item["relative"] <= 1
        ):
            raise ValueError(
                f"{where}: measured[{i}] must be {{'config': {{...}}, 'relative': a number in "
                f"(0, 1]}}, got {item!r}"
            )
        pairs.append((dict(item["config"]), float(item["relative"])))
    return StoredConfig(
        normalize_features(raw["features"]),
        dict(raw["config"]),
        str(raw["source_hash"]),
        str(raw["device"]),
        None if median is None else float(median),
        "shipped",
        tuple(sorted(pairs, key=lambda pair: -pair[1])),
    )


def _check_fields(
    raw: Mapping[str, Any], where: str, *, strings: tuple[str, ...], times: tuple[str, ...]
) -> None:
    """An entry's (a shipped config's or an exported trial's) ``strings`` are non-empty strings,
    its features and config objects, its ``times`` absent or finite (``median_s`` > 0, the
    interval bounds >= 0, as ``record_trial`` takes them); ``ValueError`` naming ``where``
    otherwise. (Lookups read shipped files: the database layer is not imported here.)"""
    for field in strings:
        if not isinstance(raw[field], str) or not raw[field]:
            raise ValueError(f"{where}: {field} must be a non-empty string, got {raw[field]!r}")
    for field in ("features", "config"):
        if not isinstance(raw[field], dict):
            raise ValueError(f"{where}: {field} must be an object, got {describe(raw[field])}")
    for field in (f for f in times if raw.get(f) is not None):
        try:
            check_positive(field, raw[field], allow_zero=field != "median_s", finite=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc} ({raw.get(field)!r})") from exc


def read_shipped(
    path: str | Path, *, errors: list[str] | None = None
) -> dict[str, list[StoredConfig]]:
    """The entries of a shipped-configs file, by kernel; ``ValueError`` naming what is malformed.

    With an ``errors`` list, a malformed entry is left out and its message (naming the file and the
    entry) appended instead: the lookup keeps a file's good entries when one is bad. A malformed
    document (not JSON, wrong format) still raises."""
    return configs_entries(load_configs_document(path), path, errors=errors)


def load_configs_document(path: str | Path) -> dict[str, Any]:
    """A shipped-configs file's document, its format and ``kernels`` object checked (entries are
    checked by :func:`configs_entries`); ``ValueError`` naming what is malformed."""
    document = _read_document(path)
    if document["format"] != CONFIGS_FORMAT:
        raise ValueError(f"{path}: expected format {CONFIGS_FORMAT!r}, got {document['format']!r}")
    if not isinstance(document.get("kernels"), dict):
        raise ValueError(f"{path}: 'kernels' must be an object of kernel name -> entries")
    return document


def configs_entries(
    document: Mapping[str, Any],
    path: str | Path,
    *,
    errors: list[str] | None = None,
    kernels: Iterable[str] | None = None,
) -> dict[str, list[StoredConfig]]:
    """The entries of a :func:`load_configs_document` document, by kernel (only ``kernels``'
    when given: a lookup checks the entries of the kernels it is asked about, not the whole
    file); ``errors`` as for :func:`read_shipped`."""
    table = document["kernels"]
    names = list(table) if kernels is None else [k for k in kernels if k in table]
    result: dict[str, list[StoredConfig]] = {}
    for name in names:
        entries = table[name]
        if not isinstance(entries, list):
            raise ValueError(f"{path}: kernels[{name!r}] must be a list of entries")
        good = []
        for i, raw in enumerate(entries):
            try:
                good.append(_entry(name, raw, f"{path}: kernels[{name!r}][{i}]"))
            except (TypeError, ValueError) as exc:
                if errors is None:
                    raise
                errors.append(str(exc))
        result[name] = good
    return result


def export_shipped(
    kernels: str | Iterable[str] | None,
    path: str | Path,
    *,
    database: PerfDatabase | None = None,
    device: str | None = None,
    current_source_only: bool = True,
    exclude: Iterable[tuple[str, Mapping[str, object]]] = (),
) -> int:
    """Write the best stored configs of ``kernels`` (all when ``None``) as a shipped-configs file.

    With ``current_source_only``, a registered kernel exports only results for its current source
    hash (older ones would be ignored at lookup anyway). ``exclude`` names problems, as
    ``(kernel, features)``, left out of the file (a benchmark's held-out shapes: a later check of
    the nearest match on them must not find them shipped). Returns the number of entries written.
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
    left_out = _problem_set("exclude", exclude)
    from warpforge.tune.database import database_or_default

    with database_or_default(database) as db:
        records = db.best_configs(device=device)
        grouped: dict[str, list[dict[str, Any]]] = {}
        measured: dict[tuple[str, str], dict[str, list[Any]]] = {}
        for r in records:
            if names is not None and r.kernel not in names:
                continue
            tunable = find_tunable(r.kernel)
            if current_source_only and tunable is not None and r.source_hash != tunable.source_hash:
                continue
            if _problem_name(r.kernel, r.features) in left_out:
                continue
            if (r.kernel, r.device) not in measured:  # one query per (kernel, device)
                by_problem: dict[str, list[Any]] = {}
                for m in db.measured_configs(kernel=r.kernel, device=r.device):
                    key = _problem_key(m.source_hash, m.features)
                    by_problem.setdefault(key, []).append(m)
                measured[(r.kernel, r.device)] = by_problem
            others = measured[(r.kernel, r.device)].get(_problem_key(r.source_hash, r.features), [])
            grouped.setdefault(r.kernel, []).append(
                {
                    "source_hash": r.source_hash,
                    "device": r.device,
                    "features": r.features,
                    "config": r.config,
                    "median_s": r.median_s,
                    "ci_s": [r.ci_low_s, r.ci_high_s],
                    "measured": _shipped_measured(r.config, r.median_s, others),
                }
            )
    return _write_configs(path, grouped)


def stale_entries(path: str | Path) -> list[tuple[str, StoredConfig]]:
    """The entries of a shipped-configs file tuned on another source than the kernel's current
    one (the kernel was edited since), or whose features name code the kernel no longer
    generates (a blueprint's graph identity; :attr:`TunableKernel.current_features`): lookups
    never reach them, so they want re-tuning. Kernels no provider registers here (another
    package's) are never called stale."""
    return _stale(read_shipped(path))


def _stale(kernels: Mapping[str, list[StoredConfig]]) -> list[tuple[str, StoredConfig]]:
    from warpforge.tune.tunable import find_tunable, registered_tunables

    registered_tunables()  # loads every provider of tunables
    stale = []
    for kernel, entries in kernels.items():
        tunable = find_tunable(kernel)
        if tunable is None:
            continue
        current = tunable.current_features
        stale.extend(
            (kernel, e)
            for e in entries
            if e.source_hash != tunable.source_hash
            or (current is not None and not current(e.features))
        )
    return stale


def merge_shipped(
    sources: Iterable[str | Path],
    path: str | Path,
    *,
    exclude: Iterable[tuple[str, Mapping[str, object]]] = (),
    drop_stale: bool = False,
) -> int:
    """Write one shipped-configs file holding the entries of every file in ``sources``.

    An entry is one problem (kernel, source hash, device, features); where several sources hold
    the same problem, the later source's entry replaces the earlier one (list the newest results
    last). ``exclude`` names problems, as ``(kernel, features)``, left out whatever their source
    hash and device. ``drop_stale`` leaves out the problems :func:`stale_entries` names (tuned on
    an earlier source of their kernel, or for code it no longer generates). Every source is read and validated before anything is
    written, and entries are copied as exported (version 1 entries stay without ``measured``).
    Returns the number of entries written.
    """
    files = [Path(source) for source in _as_list("sources", sources)]
    if not files:
        raise ValueError("sources: expected at least one shipped-configs file, got none")
    left_out = _problem_set("exclude", exclude)
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for file in files:
        parsed = read_shipped(file)  # validates every entry, naming what is malformed
        stale = (
            {(e.source_hash, _problem_name(k, e.features)) for k, e in _stale(parsed)}
            if drop_stale
            else set()
        )
        for kernel, entries in _read_document(file)["kernels"].items():
            slot = merged.setdefault(kernel, {})
            for raw in entries:
                features = normalize_features(raw["features"])
                if _problem_name(kernel, features) in left_out:
                    continue
                if (raw["source_hash"], _problem_name(kernel, features)) in stale:
                    continue
                key = json.dumps([raw["source_hash"], raw["device"], features], sort_keys=True)
                slot.pop(key, None)  # re-inserted last: the file's order follows the sources
                slot[key] = raw
    kernels = {name: list(entries.values()) for name, entries in merged.items() if entries}
    return _write_configs(path, kernels)


def _write_configs(path: str | Path, kernels: Mapping[str, list[dict[str, Any]]]) -> int:
    """Write a shipped-configs document (atomically) holding ``kernels``; returns its entries."""
    document = {
        "format": CONFIGS_FORMAT,
        "version": CONFIGS_VERSION,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "kernels": dict(kernels),
    }
    _write_json_atomically(Path(path), document)
    return sum(len(v) for v in kernels.values())


def _as_list(name: str, values: object) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"{name}: expected an iterable of items, got {describe(values)}")
    return list(values)


def _problem_name(kernel: str, features: Mapping[str, object]) -> str:
    return json.dumps([kernel, normalize_features(features)], sort_keys=True)


def _problem_set(name: str, problems: Iterable[tuple[str, Mapping[str, object]]]) -> set[str]:
    """``(kernel, features)`` pairs as comparable keys; ``TypeError`` naming a malformed one."""
    keys = set()
    for item in _as_list(name, problems):
        if (
            not isinstance(item, tuple)
            or len(item) != 2
            or not isinstance(item[0], str)
            or not isinstance(item[1], Mapping)
        ):
            raise TypeError(f"{name}: expected (kernel name, features mapping) pairs, got {item!r}")
        keys.add(_problem_name(item[0], item[1]))
    return keys


def _problem_key(source_hash: str, features: Mapping[str, object]) -> str:
    return json.dumps([source_hash, dict(features)], sort_keys=True)


def _shipped_measured(
    best_config: Mapping[str, object], best_s: float, measured: list[Any]
) -> list[dict[str, Any]]:
    """The fastest configs of one problem with their relative speed, as shipped: the entry's own
    config first, also when another config tied its time (the ranking keeps order on ties)."""
    best_key = config_key(best_config)
    ordered = sorted(measured, key=lambda m: config_key(m.config) != best_key)
    pairs = [(m.config, min(1.0, best_s / m.median_s)) for m in ordered if m.median_s > 0]
    return [
        {"config": config, "relative": round(relative, 4)}
        for config, relative in top_evidence(pairs)
    ]


def export_trials(
    path: str | Path, *, database: PerfDatabase | None = None, kernel: str | None = None
) -> int:
    """Write every stored trial (of ``kernel``, or all) as a trials file; returns the count.

    Each trial names its device and time; ``exported_by`` adds the exporting process's
    environment (versions, commit, date, device), which is the trials' own when the export runs
    where they were measured, as the device calls' scripts do."""
    from warpforge.environment import environment_fingerprint
    from warpforge.tune.database import database_or_default

    with database_or_default(database) as db:
        trials = db.trials(kernel=kernel)
    rows = []
    for t in trials:
        row = t.as_dict()
        row.pop("id")
        rows.append(row)
    document = {
        "format": TRIALS_FORMAT,
        "version": FORMAT_VERSION,
        "exported_by": environment_fingerprint(),
        "trials": rows,
    }
    _write_json_atomically(Path(path), document)
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
            # the checks record_trial makes, here before anything is written
            _check_fields(raw, where, strings=("kernel", "source_hash", "device"),
                          times=("median_s", "ci_low_s", "ci_high_s"))  # fmt: skip
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

    with database_or_default(database) as db, db.batch():
        for item in pending:
            db.record_trial(**item)
    return len(pending)
