from __future__ import annotations

import pytest
import torch

from warpforge.tune.examples import ROW_SUM, row_sum
from warpforge.tune.tunable import get_tunable


def _check(x: torch.Tensor, config: dict) -> None:
    got = row_sum(config, x)
    ref = x.double().sum(dim=1)
    own = (x.sum(dim=1).double() - ref).abs()
    atol, rtol = ROW_SUM.tolerance(x.dtype)
    assert got.dtype == x.dtype and got.shape == (x.shape[0],)
    assert torch.all(
        (got.double() - ref).abs() <= torch.maximum(atol + rtol * ref.abs(), 2 * own)
    ), config


@pytest.mark.parametrize("shape", [(1, 1), (7, 37), (13, 300), (2, 64)])
def test_every_valid_config_is_correct_on_odd_shapes(
    shape: tuple[int, int], cpu_float_dtypes
) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    for dtype in cpu_float_dtypes:
        x = torch.randn(shape, generator=g).to(dtype)
        features = ROW_SUM.features({"M": shape[0], "N": shape[1]}, dtype)
        configs = ROW_SUM.space.valid_configs(features)
        assert configs, features
        for config in configs[:: max(1, len(configs) // 6)]:  # a spread of the valid configs
            _check(x, config)


def test_non_contiguous_input() -> None:
    g = torch.Generator().manual_seed(5)
    base = torch.randn(40, 23, generator=g)
    config = {"BLOCK_N": 64, "ROWS": 4, "num_warps": 1, "num_stages": 1}
    _check(base.t(), config)  # column-major: stride_n != 1
    _check(base[::3, 1::2], {"BLOCK_N": 64, "ROWS": 2, "num_warps": 1, "num_stages": 1})


def test_loop_over_columns_with_a_ragged_tail() -> None:
    x = torch.randn(5, 131, generator=torch.Generator().manual_seed(9))
    _check(x, {"BLOCK_N": 64, "ROWS": 2, "num_warps": 2, "num_stages": 2})


def test_default_config_is_valid_for_every_declared_shape() -> None:
    for shape in (*ROW_SUM.shapes, *ROW_SUM.cpu_shapes, *ROW_SUM.sweep, {"M": 1, "N": 1}):
        for dtype in ROW_SUM.dtypes:
            f = ROW_SUM.features(shape, dtype)
            assert ROW_SUM.space.rejection(ROW_SUM.default_config(f), f) is None, (shape, dtype)


def test_rejects_non_2d_input() -> None:
    with pytest.raises(ValueError, match="2-D"):
        row_sum(ROW_SUM.default_config({"M": 2, "N": 8}), torch.randn(2, 2, 2))


def test_registered_by_name() -> None:
    assert get_tunable("row_sum") is ROW_SUM


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gpu_every_valid_config_on_a_large_shape(dtype: torch.dtype) -> None:
    x = torch.randn(1000, 4099, device="cuda", generator=torch.Generator("cuda").manual_seed(0)).to(
        dtype
    )
    features = ROW_SUM.features({"M": 1000, "N": 4099}, dtype)
    for config in ROW_SUM.space.valid_configs(features):
        _check(x, config)
