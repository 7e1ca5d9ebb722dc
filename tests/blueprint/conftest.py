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


def _as_float64(ir):  # type: ignore[no-untyped-def]
    """The same blueprint with float inputs and casts at float64: the ground truth."""
    from warpforge.blueprint import BlueprintIR, IRNode, TensorSchema

    inputs = [
        (n, TensorSchema(s.shape, "float64" if s.is_float else s.dtype)) for n, s in ir.inputs
    ]
    nodes = [
        IRNode(n.name, n.op, n.inputs, {**n.attrs, "dtype": "float64"})
        if n.op == "cast" and n.attrs["dtype"] in ("float16", "bfloat16", "float32")
        else n
        for n in ir.nodes
    ]
    return BlueprintIR(ir.name + "_f64", inputs, nodes, ir.outputs)


@pytest.fixture
def reference64():  # type: ignore[no-untyped-def]
    """``reference64(ir, inputs)``: the blueprint's outputs computed in float64 by PyTorch."""
    from warpforge.blueprint import default_registry
    from warpforge.blueprint.program import run_reference

    def run(ir, inputs):  # type: ignore[no-untyped-def]
        wide = [t.double() if t.is_floating_point() else t for t in inputs]
        return run_reference(_as_float64(ir), wide, default_registry())

    return run
