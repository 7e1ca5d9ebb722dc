"""Autotuning backed by a performance database.

* :mod:`~warpforge.tune.space`: config spaces with constraints that prune before compiling;
* :mod:`~warpforge.tune.tunable`: the registry of tunable kernels;
* :mod:`~warpforge.tune.search`: exhaustive and budgeted (random + coordinate descent) search,
  and the short descent that refines a nearest match; every candidate checked against the
  reference before it can win;
* :mod:`~warpforge.tune.database`: every trial stored in SQLite or PostgreSQL, with migrations;
* :mod:`~warpforge.tune.lookup`: :func:`config_for`, the cached lookup ops and the compiler use;
* :mod:`~warpforge.tune.shipped`: the JSON the package ships, export and import.

Names are imported lazily so ``import warpforge.tune`` stays cheap on an op's hot path.
"""

from __future__ import annotations

import importlib
from typing import Any

# Limits the searches, the compile-ahead pool and the CLI share: defined once, where each of them
# reaches them without importing the others.
DEFAULT_TRIAL_TIMEOUT_S = 300.0
"""Seconds a trial (or a compile-ahead worker's config) may take by default: far above a trial's
compile, check and timing (seconds on the H100), short enough that a hung launch does not hold a
tuning run for long."""

STOPPED_EXIT_CODE = 3
"""The exit status of a process a config stopped: a trial past its watchdog
(``trial_timeout_s``), or, from ``warpforge tune``, a device left unusable."""

_LAZY: dict[str, str] = {
    "ConfigSpace": "warpforge.tune.space",
    "Constraint": "warpforge.tune.space",
    "TunableKernel": "warpforge.tune.tunable",
    "register_tunable": "warpforge.tune.tunable",
    "get_tunable": "warpforge.tune.tunable",
    "registered_tunables": "warpforge.tune.tunable",
    "source_hash": "warpforge.tune.tunable",
    "tune": "warpforge.tune.search",
    "exhaustive_search": "warpforge.tune.search",
    "budgeted_search": "warpforge.tune.search",
    "refine_search": "warpforge.tune.search",
    "PerfDatabase": "warpforge.tune.database",
    "config_for": "warpforge.tune.lookup",
    "starting_configs": "warpforge.tune.lookup",
    "reset_lookup_cache": "warpforge.tune.lookup",
    "export_shipped": "warpforge.tune.shipped",
    "export_trials": "warpforge.tune.shipped",
    "merge_shipped": "warpforge.tune.shipped",
    "import_file": "warpforge.tune.shipped",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'warpforge.tune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
