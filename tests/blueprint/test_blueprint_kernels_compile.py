"""causal_attention_scores' generated kernel compiles for Hopper (sm_90) without a GPU, every
variant of its kept-range passes, and so does the backward row kernel with a column sum. The interpreter forgives what the compiler refuses (scalar
loop bounds, type mixes), so the CPU tier compiles it too, in a child process without the
interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from hopper_compile_child import compile_in_child

HELPER = Path(__file__).with_name("blueprint_hopper_compile.py")


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return compile_in_child(HELPER, tmp_path_factory.mktemp("triton-cache"))


@pytest.fixture(scope="module")
def compiled(summary: dict) -> dict[str, dict[str, int]]:
    return summary["causal"]


def test_every_variant_compiles_to_tensor_core_code(compiled: dict) -> None:
    assert set(compiled) == {
        "kept_range_even", "kept_range_ragged", "kept_range_ragged_last_rows_first",
    }  # fmt: skip
    assert all(ptx["wgmma"] > 0 for ptx in compiled.values())


def test_constant_masks_fold_selects_away(compiled: dict) -> None:
    # EVEN_M/EVEN_N: the row and column masks are constants, so their selects disappear
    assert compiled["kept_range_even"]["selects"] < compiled["kept_range_ragged"]["selects"]


def test_exp_is_exp2_of_an_fma(compiled: dict) -> None:
    for ptx in compiled.values():
        assert ptx["exp2"] > 0 and ptx["fma"] >= ptx["exp2"] // 2


def test_column_sums_kernel_compiles_with_its_row_loop(summary: dict) -> None:
    # the two [T, H] gradients and the partial row are stored; the row-block loop branches back
    assert summary["column_sums"]["stores"] >= 3 and summary["column_sums"]["branches"] >= 1
