"""Each blueprint test gets a fresh cache directory, kernel registry and compiled-module table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from warpforge.blueprint import program


@pytest.fixture(autouse=True)
def fresh_blueprint_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from warpforge.blueprint.compiler import clear_compiled
    from warpforge.cache import KernelRegistry, default_metrics

    cache = tmp_path / "warpforge-cache"
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(cache))
    monkeypatch.delenv("WARPFORGE_REDIS_URL", raising=False)
    monkeypatch.setattr(program, "POISON_OUTPUTS", True)
    KernelRegistry.default(refresh=True)
    default_metrics().reset()
    clear_compiled()
    yield cache
    clear_compiled()
    KernelRegistry.default(refresh=True)
