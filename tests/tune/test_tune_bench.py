"""The tune benchmark runs end to end for any registered tunable (here the synthetic one, on CPU)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tune_synthetic import WRONG_BUT_FAST, make_synthetic

from warpforge.tune.tunable import register_tunable, unregister_tunable

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "tune_bench.py"


@pytest.fixture
def bench():
    spec = importlib.util.spec_from_file_location("tune_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def synthetic() -> Iterator[str]:
    kernel = make_synthetic("bench_synthetic")
    kernel = type(kernel)(
        **{**kernel.__dict__, "sweep": tuple({"N": n} for n in (512, 1024, 4096, 8192))}
    )
    register_tunable(kernel, replace=True)
    yield kernel.name
    unregister_tunable(kernel.name)


def test_bench_writes_json_with_fingerprint_and_qualities(
    bench, synthetic: str, tmp_path: Path
) -> None:
    args = ["--out", str(tmp_path), "--kernels", synthetic, "--device", "cpu", "--budget", "0.05",
            "--trial-time", "0.002", "--retime-time", "0.002", "--retime-rounds", "1", "--min-samples", "2", "--max-samples", "4"]  # fmt: skip
    assert bench.main(args) == 0
    document = json.loads((tmp_path / "tune_bench.json").read_text())
    assert "environment_fingerprint" in document and document["environment_fingerprint"]["torch"]
    (result,) = document["results"]
    assert [e["shape"]["N"] for e in result["train"]] == [512, 4096, 8192]
    assert [e["shape"]["N"] for e in result["heldout"]] == [1024]
    for entry in result["heldout"]:
        assert entry["exhaustive"]["best_config"] not in (None, WRONG_BUT_FAST)
        assert entry["exhaustive"]["status_counts"]["incorrect"] == 1
        assert entry["nearest_quality"] > 0 and entry["budget_quality"] > 0
        assert set(entry["retimed"]) == {"exhaustive", "nearest", "default", "budgeted"}
    assert result["summary"]["nearest_match"]["shapes"] == 1
