"""The config for a problem: the exact stored best, else the nearest tuned problems' consensus.

:func:`config_for` is what ops and the compiler call on every launch, so it is cached in the process
(a dict hit after the first call per problem) and it never fails an op: order is

1. the in-process cache;
2. an exact match in the performance database (only if it exists or a URL is configured; it is
   never created or migrated by a lookup; ``WARPFORGE_TUNE_DB=0`` turns this off);
3. an exact match in the shipped JSON (package data, ``warpforge/tune/shipped/*.json``): what
   users get with no database and no tuning;
4. the consensus of the nearest tuned problems among shipped and stored results (categorical
   features such as the dtype, and the device, must match exactly; sizes are compared as ``log2``
   distances): the config with the best weighted geometric mean of its relative speeds on the 3
   nearest, from the fastest configs measured there (:mod:`warpforge.tune.consensus`); when
   nothing they measured carries over faithfully, the nearest neighbour's best carried over;
5. when neither the database nor the shipped JSON holds anything for the kernel on this GPU
   model that the problem can be compared with (the same categorical features: an H200 table of
   float32 norm configs says nothing of bfloat16), steps 3-4 over the shipped configs of another
   model of the same architecture (an H200 takes the H100's; ``WARPFORGE_TUNE_OTHER_MODELS=0``
   turns this off);
6. ``default``.

The database is asked once per (kernel, device) per process: that one query returns every config
measured on every stored problem of the kernel (each with its fastest time), and later shapes, in
any bucket, are answered from memory. If the database cannot be opened, the lookup logs once and
goes on without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from warpforge.tune.consensus import NEIGHBOURS, Neighbour, consensus_config, top_evidence
from warpforge.tune.space import ConfigSpace, config_key
from warpforge.tune.transfer import Transfer
from warpforge.tune.tunable import TunableKernel, device_fingerprint, dtype_name, find_tunable
from warpforge.validation import check_choice, describe

logger = logging.getLogger("warpforge.tune")


@dataclass(frozen=True)
class StoredConfig:
    """A best config known for one problem, from the shipped JSON or the database."""

    features: dict[str, object]
    config: dict[str, object]
    source_hash: str
    device: str
    median_s: float | None
    origin: str
    """``"shipped"`` or ``"database"``."""
    measured: tuple[tuple[dict[str, object], float], ...] = ()
    """Every config measured on this problem with its relative speed (best time / its time, the
    best's is 1.0), fastest first; empty when only the best is known."""
    failed: tuple[dict[str, object], ...] = ()
    """Configs that were incorrect or errored on this problem (the consensus never picks them)."""

    def evidence(self) -> tuple[tuple[dict[str, object], float], ...]:
        """What was measured here: :attr:`measured`, with the best at relative speed 1 first if
        it is missing (a file that lists only the best, or none)."""
        if any(config == self.config for config, _ in self.measured):
            return self.measured
        return ((self.config, 1.0), *self.measured)


def normalize_features(features: Mapping[str, object]) -> dict[str, object]:
    """Features as stored: ints for sizes, dtype names for dtypes, strings for the rest."""
    if not isinstance(features, Mapping):
        raise TypeError(f"features: expected a mapping of name -> value, got {describe(features)}")
    out: dict[str, object] = {}
    for key, value in features.items():
        if not isinstance(key, str):
            raise TypeError(f"features: expected string keys, got {describe(key)}")
        if isinstance(value, bool) or value is None:
            out[key] = value
        elif isinstance(value, torch.dtype):
            out[key] = dtype_name(value)
        elif isinstance(value, int) or (
            hasattr(value, "__index__") and not isinstance(value, float)
        ):
            out[key] = int(value)  # type: ignore[call-overload]
        elif isinstance(value, float):
            out[key] = int(value) if value.is_integer() else value
        else:
            out[key] = str(value)
    return out


def _is_size(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def feature_distance(a: Mapping[str, object], b: Mapping[str, object]) -> float | None:
    """Euclidean distance of the sizes on a log2 scale; ``None`` when not comparable.

    Not comparable: different feature names, or any categorical (non-numeric) feature differs.
    A size <= 0 is compared by value (log of it is undefined), so it must match exactly.
    """
    if set(a) != set(b):
        return None
    total = 0.0
    for key, x in a.items():
        y = b[key]
        if _is_size(x) and _is_size(y):
            if x == y:
                continue
            if x <= 0 or y <= 0:  # type: ignore[operator]
                return None
            total += (math.log2(x) - math.log2(y)) ** 2  # type: ignore[arg-type]
        elif x != y:
            return None
    return math.sqrt(total)


def nearest(
    features: Mapping[str, object], candidates: Iterable[StoredConfig], k: int = 1
) -> list[tuple[float, StoredConfig]]:
    """The ``k`` comparable candidates closest to ``features`` (fastest first among ties)."""
    scored = []
    for candidate in candidates:
        d = feature_distance(features, candidate.features)
        if d is not None:
            scored.append((d, candidate))
    scored.sort(key=lambda p: (p[0], p[1].median_s if p[1].median_s is not None else math.inf))
    return scored[:k]


def _key(features: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(features.items()))


def _distinct_problems(stored: Iterable[StoredConfig]) -> list[StoredConfig]:
    """One entry per problem (the first given wins: the database's before the shipped file's)."""
    seen: set[str] = set()
    out = []
    for entry in stored:
        key = repr(_key(entry.features))
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


SELECTIONS = ("consensus", "nearest")
"""How an unseen problem's config is chosen: the consensus of the nearest tuned problems, or the
single nearest neighbour's best (the rule before the consensus, kept to compare them)."""

OTHER_MODELS_ENV = "WARPFORGE_TUNE_OTHER_MODELS"
"""``0`` keeps a GPU model with nothing tuned for a kernel on the default config instead of the
shipped configs of another model of its architecture (read at each lookup not yet cached)."""


def shipped_directory() -> Path:
    return Path(str(resources.files("warpforge.tune") / "shipped"))


def _stored_problems(records: Iterable[Any], device: str) -> list[StoredConfig]:
    """Measured configs (:class:`~warpforge.tune.database.MeasuredRecord`) grouped per problem:
    its best, and every config with its relative speed, fastest first. Equal medians go to the
    smallest canonical config JSON, the rule ``best_configs`` keeps, so both answer alike."""
    grouped: dict[tuple[str, str], list[Any]] = {}
    for record in records:
        grouped.setdefault((record.source_hash, repr(_key(record.features))), []).append(record)
    problems = []
    for records_of_problem in grouped.values():
        failed = tuple(dict(r.config) for r in records_of_problem if r.failed)
        group = [r for r in records_of_problem if math.isfinite(r.median_s)]
        if not group:  # nothing ran correctly here: no best to offer
            continue
        group.sort(key=lambda r: (r.median_s, config_key(r.config)))
        best = group[0]
        if best.median_s <= 0:
            continue
        measured = tuple(
            (dict(config), relative)
            for config, relative in top_evidence(
                [(r.config, best.median_s / r.median_s) for r in group]
            )
        )
        problems.append(
            StoredConfig(
                dict(best.features),
                dict(best.config),
                best.source_hash,
                device,
                best.median_s,
                "database",
                measured,
                failed,
            )
        )
    return problems


class ConfigLookup:
    """The cached lookup behind :func:`config_for` (one per process; tests make their own)."""

    def __init__(
        self,
        *,
        database_url: str | None = None,
        shipped_dir: str | Path | None = None,
        use_database: bool | None = None,
        selection: str = "consensus",
        other_models: bool | None = None,
    ) -> None:
        check_choice("selection", selection, SELECTIONS)
        if other_models is not None and not isinstance(other_models, bool):
            raise TypeError(f"other_models: expected a bool or None, got {describe(other_models)}")
        self._selection = selection
        self._other_models = other_models
        self._database_url = database_url
        self._shipped_dir = Path(shipped_dir) if shipped_dir is not None else None
        self._use_database = use_database
        self._lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget everything cached (and close the database connection)."""
        with getattr(self, "_lock", threading.Lock()):
            db = getattr(self, "_db", None)
            if db is not None:
                db.close()
            self._results: dict[tuple[Any, ...], dict[str, object]] = {}
            self._origins: dict[tuple[Any, ...], str] = {}
            self._hints: dict[str, tuple[ConfigSpace | None, Transfer | None]] = {}
            self._shipped: dict[tuple[Path, str], list[StoredConfig]] = {}
            self._shipped_files: list[Path] | None = None
            self._shipped_documents: dict[Path, dict[str, Any] | None] = {}
            self._db_rows: dict[tuple[str, str], list[StoredConfig]] = {}
            self._db: Any = None
            self._db_state = "unopened"  # unopened | open | unavailable | disabled
            self._devices: dict[str, str] = {}
            self._stale_warned: set[tuple[str, str]] = set()
            self.db_queries = 0
            """Database queries made by this lookup (the caching tests count them)."""

    # -- public ----------------------------------------------------------------------------------
    def config_for(
        self,
        kernel: str,
        features: Mapping[str, object],
        default: Mapping[str, object],
        *,
        device: torch.device | str | None = None,
        space: ConfigSpace | None = None,
        transfer: Transfer | None = None,
    ) -> dict[str, object]:
        """The tuned config for ``kernel`` on ``features``, or a copy of ``default``.

        ``space`` and ``transfer`` stand in for a registered tunable's (generated kernels that
        are not registered): stored configs are checked against ``space`` and neighbours are
        carried over with ``transfer``. A registered tunable's own always win."""
        fingerprint = self._device(device)
        raw_key = (kernel, fingerprint, _key(features) if isinstance(features, Mapping) else None)
        try:
            hit = self._results.get(raw_key)
        except TypeError:  # unhashable feature values: normalise first
            hit = None
        if hit is not None:
            return dict(hit)
        if not isinstance(kernel, str) or not kernel:
            raise ValueError(f"kernel: expected a non-empty kernel name, got {kernel!r}")
        if not isinstance(default, Mapping):
            raise TypeError(
                f"default: expected a mapping of parameter -> value, got {describe(default)}"
            )
        normalized = normalize_features(features)
        with self._lock:
            if space is not None or transfer is not None:
                self._hints[kernel] = (space, transfer)
            found = self._resolve(kernel, normalized, fingerprint)
            config, origin = found if found is not None else (dict(default), "default")
            with contextlib.suppress(TypeError):  # unhashable feature values are not cached
                self._results[raw_key] = config
                self._origins[raw_key] = origin
        return dict(config)

    def starting_configs(
        self,
        kernel: str,
        features: Mapping[str, object],
        *,
        device: torch.device | str | None = None,
        k: int = 3,
    ) -> list[dict[str, object]]:
        """Seeds for a search on an unseen problem: the consensus config of the nearest stored
        problems first (see :mod:`warpforge.tune.consensus`), then the bests of the ``k`` nearest
        carried over (exact match first), duplicates dropped."""
        normalized = normalize_features(features)
        fingerprint = self._device(device)
        with self._lock:
            pool = _distinct_problems(self._candidates(kernel, fingerprint, normalized))
        found = nearest(normalized, pool, k=len(pool))
        carried: list[dict[str, object]] = []
        for _, stored in found:
            if len(carried) >= max(1, k):
                break
            config = self._transfer(kernel, stored.config, stored.features, normalized)
            if (
                config is not None
                and config not in carried
                and self._fits(kernel, config, normalized)
            ):
                carried.append(config)
        choice = (
            self._consensus(kernel, normalized, found) if self._selection == "consensus" else None
        )
        if choice is None:
            return carried
        return [choice, *(c for c in carried if c != choice)]

    # -- resolution ------------------------------------------------------------------------------
    def _resolve(
        self, kernel: str, features: dict[str, object], device: str
    ) -> tuple[dict[str, object], str] | None:
        """(config, where it came from) or ``None`` for the default."""
        # What this machine measured for this very problem beats what the package shipped.
        candidates = self._candidates(kernel, device, features)
        for stored in candidates:
            if stored.features == features and self._fits(kernel, stored.config, features):
                return dict(stored.config), f"{stored.origin} exact"
        pool = _distinct_problems(candidates)
        ranked = nearest(features, pool, k=len(pool))
        if self._selection == "consensus":
            choice = self._consensus(kernel, features, ranked)
            if choice is not None:
                asked = ranked[:NEIGHBOURS]
                where = sorted({stored.origin for _, stored in asked})
                return choice, (
                    f"{'+'.join(where)} consensus of {len(asked)} nearest, nearest "
                    f"{asked[0][1].features}"
                )
        for _, stored in ranked:
            config = self._transfer(kernel, stored.config, stored.features, features)
            if config is not None and self._fits(kernel, config, features):
                return config, f"{stored.origin} nearest {stored.features}"
        return None

    def _consensus(
        self,
        kernel: str,
        features: dict[str, object],
        ranked: list[tuple[float, StoredConfig]],
    ) -> dict[str, object] | None:
        """The config the :data:`NEIGHBOURS` nearest problems agree on (``None``: no evidence)."""
        asked = ranked[:NEIGHBOURS]

        def carry(i: int, config: Mapping[str, object]) -> dict[str, object] | None:
            carried = self._transfer(kernel, config, asked[i][1].features, features)
            return (
                carried if carried is not None and self._fits(kernel, carried, features) else None
            )

        def carry_back(i: int, config: Mapping[str, object]) -> dict[str, object] | None:
            return self._transfer(kernel, config, features, asked[i][1].features)

        choice = consensus_config(
            [Neighbour(distance, stored.evidence(), stored.failed) for distance, stored in asked],
            carry,
            carry_back,
        )
        return None if choice is None else choice.config

    def _transfer(
        self,
        kernel: str,
        config: Mapping[str, object],
        source: Mapping[str, object],
        target: Mapping[str, object],
    ) -> dict[str, object] | None:
        """``config``, measured on the problem ``source``, carried to ``target``."""
        tunable = self._tunable(kernel)
        transfer = (
            tunable.transfer if tunable is not None else self._hints.get(kernel, (None,) * 2)[1]
        )
        if transfer is None:
            return dict(config)
        try:
            return dict(transfer(config, source, target))
        except (KeyError, TypeError, ValueError) as exc:
            logger.debug("cannot carry %s from %s to %s: %s", kernel, source, target, exc)
            return None

    def origin(
        self,
        kernel: str,
        features: Mapping[str, object],
        *,
        device: torch.device | str | None = None,
    ) -> str | None:
        """Where :meth:`config_for` took its answer for this problem from (``"database exact"``,
        ``"shipped nearest {...}"``, ``"default"``...); ``None`` when it was not asked yet."""
        return self._origins.get((kernel, self._device(device), _key(features)))

    def _candidates(
        self, kernel: str, device: str, features: Mapping[str, object]
    ) -> list[StoredConfig]:
        """This model's stored and shipped configs of ``kernel``; another model's of the same
        architecture too when none of this model's is comparable with ``features``."""
        own = self._database_rows(kernel, device) + [
            s for s in self._shipped_for(kernel, device) if self._matches(kernel, s, device)
        ]
        comparable = any(feature_distance(features, s.features) is not None for s in own)
        if comparable or not self._other_models_enabled():
            return own
        return own + self._same_architecture(kernel, self._shipped_for(kernel), device)

    def _same_architecture(
        self, kernel: str, shipped: list[StoredConfig], device: str
    ) -> list[StoredConfig]:
        """The shipped configs of one other GPU model of ``device``'s architecture (the one
        with the most entries for ``kernel``, ties to the name), for a problem nothing
        comparable was tuned for on this model: an H200 takes the H100's table rather than the
        default. Such a config is valid
        there (same registers, shared memory and instructions); how fast it is was measured on
        the other model, hence the origin names it."""
        model, _, arch = device.rpartition("/")
        if not model or not arch.startswith("sm_"):  # the CPU paths have no architecture
            return []
        by_model: dict[str, list[StoredConfig]] = {}
        for stored in shipped:
            other_model, _, other_arch = stored.device.rpartition("/")
            # _matches with the entry's own device: the source-hash rule, nothing else
            if (
                other_arch == arch
                and other_model != model
                and self._matches(kernel, stored, stored.device)
            ):
                by_model.setdefault(stored.device, []).append(stored)
        if not by_model:
            return []
        chosen = min(by_model, key=lambda name: (-len(by_model[name]), name))
        return [
            dataclasses.replace(stored, origin=f"shipped for {chosen}")
            for stored in by_model[chosen]
        ]

    def _other_models_enabled(self) -> bool:
        if self._other_models is not None:
            return self._other_models
        from warpforge import runtime

        return runtime.switch_on(OTHER_MODELS_ENV)

    @staticmethod
    def _tunable(kernel: str) -> TunableKernel | None:
        return find_tunable(kernel)

    def _matches(self, kernel: str, stored: StoredConfig, device: str) -> bool:
        if stored.device != device:
            return False
        tunable = self._tunable(kernel)
        # A registered kernel only takes configs measured on its current source.
        if tunable is None or stored.source_hash == tunable.source_hash:
            return True
        if (kernel, device) not in self._stale_warned:
            # an edit to a tuned kernel drops its shipped configs: say so once, not silently
            self._stale_warned.add((kernel, device))
            logger.warning(
                "shipped configs of %s for %s were tuned on another source of the kernel "
                "(%s, now %s) and are skipped; `warpforge db stale` lists them, re-tune or "
                "re-hash them", kernel, device, stored.source_hash, tunable.source_hash,
            )  # fmt: skip
        return False

    def _fits(
        self, kernel: str, config: Mapping[str, object], features: Mapping[str, object]
    ) -> bool:
        tunable = self._tunable(kernel)
        space = tunable.space if tunable is not None else self._hints.get(kernel, (None,) * 2)[0]
        if space is None:
            return True
        try:
            return space.allows(config, features)
        except (KeyError, TypeError, ValueError) as exc:
            # Features the space cannot judge (e.g. a size its constraints need is missing): the
            # stored config cannot be vouched for, so it is not used; the op still runs.
            logger.debug("config %s not checkable for %s %s: %s", config, kernel, features, exc)
            return False

    def _device(self, device: torch.device | str | None) -> str:
        name = "default" if device is None else str(device)
        fingerprint = self._devices.get(name)
        if fingerprint is None:
            from warpforge import runtime

            target = runtime.default_device() if device is None else torch.device(device)
            fingerprint = device_fingerprint(target)
            self._devices[name] = fingerprint
        return fingerprint

    # -- shipped JSON ----------------------------------------------------------------------------
    def _shipped_for(self, kernel: str, device: str | None = None) -> list[StoredConfig]:
        """The shipped entries of ``kernel``; with ``device``, from the file named for that GPU
        model alone (:func:`~warpforge.tune.shipped.shipped_file_name`) where the directory
        holds one. Each model's configs ship in a file of their own, so another model's file
        is parsed only when step 5 of the lookup needs it (the H100 file took 1.9 ms to parse
        on the development machine, every process that launches a kernel on an H200 paying it
        before). Each file is read once, and only the entries of the kernels asked about are
        checked (checking all of the H100 file's took 9.1 ms of a 60 ms warm-start profile on
        the H200)."""
        from warpforge.tune.shipped import shipped_file_name

        if self._shipped_files is None:
            directory = self._shipped_dir or shipped_directory()
            self._shipped_files = sorted(directory.glob("*.json")) if directory.is_dir() else []
        files = self._shipped_files
        if device is not None:
            named = [p for p in files if p.name == shipped_file_name(device)]
            files = named or files
        return [entry for path in files for entry in self._shipped_entries(path, kernel)]

    def _shipped_entries(self, path: Path, kernel: str) -> list[StoredConfig]:
        """The entries of ``kernel`` in one shipped file, cached even when some were bad (their
        warning is given once)."""
        cached = self._shipped.get((path, kernel))
        if cached is None:
            cached = self._shipped[(path, kernel)] = self._read_shipped_entries(path, kernel)
        return cached

    def _read_shipped_entries(self, path: Path, kernel: str) -> list[StoredConfig]:
        from warpforge.tune.shipped import configs_entries, load_configs_document

        if path not in self._shipped_documents:
            try:
                self._shipped_documents[path] = load_configs_document(path)
            except (OSError, TypeError, ValueError) as exc:
                logger.warning("ignoring shipped tuning file %s: %s", path, exc)
                self._shipped_documents[path] = None
        document = self._shipped_documents[path]
        if document is None:
            return []
        errors: list[str] = []
        entries = configs_entries(document, path, errors=errors, kernels=(kernel,))
        if errors:  # one warning per file and kernel; its good entries are still used
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            logger.warning(
                "ignoring %d malformed entr%s of shipped tuning file %s: %s%s",
                len(errors),
                "y" if len(errors) == 1 else "ies",
                path,
                errors[0],
                more,
            )
        return entries.get(kernel, [])

    # -- database --------------------------------------------------------------------------------
    def _database_enabled(self) -> bool:
        if self._use_database is not None:
            return self._use_database
        return os.environ.get("WARPFORGE_TUNE_DB", "1").strip().lower() not in {
            "0",
            "false",
            "no",
            "off",
        }

    def _database_rows(self, kernel: str, device: str) -> list[StoredConfig]:
        cached = self._db_rows.get((kernel, device))
        if cached is not None:
            return cached
        rows: list[StoredConfig] = []
        db = self._open_database()
        if db is not None:
            try:
                self.db_queries += 1
                tunable = self._tunable(kernel)
                records = db.measured_configs(
                    kernel=kernel,
                    device=device,
                    source_hash=tunable.source_hash if tunable is not None else None,
                    include_failed=True,
                )
                rows = _stored_problems(records, device)
            except Exception as exc:  # a broken database must never fail an op
                self._give_up_database(f"query failed: {exc}")
        self._db_rows[(kernel, device)] = rows
        return rows

    def _open_database(self) -> Any:
        if self._db_state == "open":
            return self._db
        if self._db_state != "unopened":
            return None
        if not self._database_enabled():
            self._db_state = "disabled"
            return None
        from warpforge.environment import database_url
        from warpforge.tune.sqlite_location import sqlite_path

        url = self._database_url or database_url()
        try:
            path = sqlite_path(url)
            if path is not None and path != ":memory:" and not Path(path).exists():
                self._db_state = "unavailable"  # nothing tuned here yet: not worth a warning
                return None
            from warpforge.tune.database import PerfDatabase  # only when there is one to open

            self._db = PerfDatabase(url, create=False, migrate=False, connect_timeout_s=2)
        except Exception as exc:
            self._give_up_database(str(exc))
            return None
        self._db_state = "open"
        return self._db

    def _give_up_database(self, why: str) -> None:
        self._db_state = "unavailable"
        logger.warning(
            "warpforge.tune: performance database unavailable (%s); using shipped and default "
            "configs for the rest of this process",
            why,
        )


_LOOKUP = ConfigLookup()


def config_for(
    kernel: str,
    features: Mapping[str, object],
    default: Mapping[str, object],
    *,
    device: torch.device | str | None = None,
    space: ConfigSpace | None = None,
    transfer: Transfer | None = None,
) -> dict[str, object]:
    """The config ops and the compiler launch ``kernel`` with for a problem described by
    ``features``: tuned if known (database or shipped JSON, exact or nearest), else ``default``.

    ``device`` defaults to the current CUDA device (the CPU when there is none). ``space`` and
    ``transfer`` describe a kernel that is not a registered tunable (see
    :meth:`ConfigLookup.config_for`). Never raises for a missing or broken database; raises
    ``TypeError``/``ValueError`` for malformed arguments.
    """
    return _LOOKUP.config_for(
        kernel, features, default, device=device, space=space, transfer=transfer
    )


def checked_config_for(
    kernel: str,
    features: Mapping[str, object],
    default: Mapping[str, object],
    *,
    space: ConfigSpace | None = None,
    transfer: Transfer | None = None,
    device: torch.device | str | None = None,
) -> dict[str, object]:
    """:func:`config_for` for a launch that must not fail: ``default`` when the lookup raises or
    its answer is not allowed by ``space`` (by default the registered tunable's space; a kernel
    neither registered nor given a space takes its stored config unchecked). Reasons are logged."""
    try:
        chosen = config_for(
            kernel, features, default, device=device, space=space, transfer=transfer
        )
        if chosen == dict(default):
            return chosen
        if space is None:
            tunable = find_tunable(kernel)
            space = tunable.space if tunable is not None else None
        why = None if space is None else space.rejection(chosen, dict(features))
        if why is None:
            return chosen
        logger.warning("ignoring tuned config %s for %s %s: %s", chosen, kernel, features, why)
    except Exception as exc:  # tuning must never break a launch
        logger.warning("tuned config lookup failed for %s %s: %s", kernel, features, exc)
    return dict(default)


def starting_configs(
    kernel: str,
    features: Mapping[str, object],
    *,
    device: torch.device | str | None = None,
    k: int = 3,
) -> list[dict[str, object]]:
    """Seeds for a short search on an unseen problem (see :meth:`ConfigLookup.starting_configs`)."""
    return _LOOKUP.starting_configs(kernel, features, device=device, k=k)


def reset_lookup_cache() -> None:
    """Forget cached lookups (after tuning in this process, so new results are seen)."""
    _LOOKUP.clear()
