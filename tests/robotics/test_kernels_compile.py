"""The kernels compile for Hopper (sm_90) without a GPU. The interpreter forgives what the
compiler refuses (plain globals, type mixes), so the CPU tier compiles them too, in a child
process without the interpreter, and checks that value rows move in 16-byte vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopper_compile_child import compile_in_child

HELPER = Path(__file__).with_name("robotics_hopper_compile.py")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    return compile_in_child(HELPER, tmp_path_factory.mktemp("triton-cache"))


def test_resample_reads_values_in_16_byte_vectors(compiled: dict) -> None:
    for name in ("resample_bf16", "resample_prefetch", "streams_shared_bf16"):
        assert compiled[name]["v4_loads"] > 0, name
        assert compiled[name]["b16_loads"] == 0, name


def test_streams_store_rows_in_vectors_where_the_output_allows(compiled: dict) -> None:
    # rows of 550 float32 columns (align.fwd): 8-byte stores once the launch says each stream's
    # strides, column and width are even (OUT_VECS); one element at a time without it
    assert compiled["streams_out_vec2"]["vector_b32_stores"] > 0
    assert compiled["streams_out_vec2"]["scalar_b32_stores"] == 0
    assert compiled["streams_out_vec1"]["vector_b32_stores"] == 0
    assert compiled["streams_out_vec1"]["scalar_b32_stores"] > 0
    assert compiled["streams_shared_bf16"]["vector_b32_stores"] > 0


def test_prefetch_variant_prefetches_and_the_default_does_not(compiled: dict) -> None:
    assert compiled["resample_prefetch"]["prefetches"] > 0
    assert compiled["resample_bf16"]["prefetches"] == 0


def test_every_variant_compiled(compiled: dict) -> None:
    expected = {"resample_bf16", "resample_slerp_int64", "resample_prefetch", "resample_backward",
                "streams_fp64", "streams_i64", "streams_shared_bf16", "streams_out_vec2",
                "streams_out_vec1", "resample_brackets", "resample_gather_grad",
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
