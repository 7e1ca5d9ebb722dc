"""The kernels compile for Hopper (sm_90) without a GPU. The interpreter forgives what the
compiler refuses (plain globals, type mixes), so the CPU tier compiles them too, in a child
process without the interpreter, and checks that value rows move in 16-byte vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HELPER = Path(__file__).with_name("robotics_hopper_compile.py")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    # a private Triton cache: other processes compiling the same kernel into the shared cache
    # can make Triton read an entry that is still being written
    env = {**os.environ, "TRITON_INTERPRET": "0", "WARPFORGE_INTERPRET": "0",
           "TRITON_DEFAULT_FP_FUSION": "1",
           "TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("triton-cache"))}  # fmt: skip
    src = str(Path(__file__).parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(HELPER)], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)


def test_resample_reads_values_in_16_byte_vectors(compiled: dict) -> None:
    for name in ("resample_bf16", "resample_prefetch"):
        assert compiled[name]["v4_loads"] > 0, name
        assert compiled[name]["b16_loads"] == 0, name


def test_prefetch_variant_prefetches_and_the_default_does_not(compiled: dict) -> None:
    assert compiled["resample_prefetch"]["prefetches"] > 0
    assert compiled["resample_bf16"]["prefetches"] == 0


def test_every_variant_compiled(compiled: dict) -> None:
    expected = {"resample_bf16", "resample_slerp_int64", "resample_prefetch", "resample_backward",
                "streams_fp64",
                "streams_i64", "resample_brackets", "resample_gather_grad",
                "voxelize_010", "voxelize_101", "voxelize_200"}  # fmt: skip
    assert set(compiled) == expected
    atomic = [name for name in expected if name.startswith(("voxelize", "resample_backward"))]
    assert all(compiled[name]["atomics"] > 0 for name in atomic)


def test_backward_atomics_are_relaxed(compiled: dict) -> None:
    # the gradient is read only after the kernel: ordering each add would fence every one
    assert compiled["resample_backward"]["ordered_atomics"] == 0


def test_gather_backward_has_no_atomics(compiled: dict) -> None:
    # the deterministic backward: every gradient element has one writer, summing in fixed order
    assert compiled["resample_brackets"]["atomics"] == 0
    assert compiled["resample_gather_grad"]["atomics"] == 0
