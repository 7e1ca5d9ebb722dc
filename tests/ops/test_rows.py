"""The row view and the launch shapes shared by the norm and softmax kernels."""

from __future__ import annotations

import pytest
import torch

from warpforge.ops import _rows
from warpforge.runtime import DeviceCapabilities

H100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(_rows, "device_capabilities", lambda device: H100)


def test_as_rows_views_without_copy_when_possible():
    x = torch.randn(4, 6, 10)
    assert _rows.as_rows(x).data_ptr() == x.data_ptr()
    sliced = torch.randn(12, 10)[::3]  # row stride 30, unit column stride: still a view
    rows = _rows.as_rows(sliced)
    assert rows.data_ptr() == sliced.data_ptr() and rows.stride() == (30, 1)


def test_as_rows_copies_a_strided_last_dimension():
    x = torch.randn(10, 4).t()
    rows = _rows.as_rows(x)
    assert rows.stride(1) == 1 and torch.equal(rows, x)


def test_short_rows_batch_several_per_program(on_h100):
    config = _rows.row_launch_config(32768, 256, torch.bfloat16, "cuda")
    assert config.single_pass and config.rows_per_program == 16
    assert config.num_programs == 32768 // 16
    assert config.num_warps == 256 * 16 // (32 * 16)


def test_rows_up_to_16k_stay_in_registers(on_h100):
    assert _rows.row_launch_config(4096, 16384, torch.float32, "cuda").single_pass
    assert not _rows.row_launch_config(4096, 16385, torch.float32, "cuda").single_pass


@pytest.mark.parametrize("n", [65536, 262144])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_chunked_grid_keeps_rows_in_flight_within_l2(on_h100, n, dtype):
    config = _rows.row_launch_config(8192, n, dtype, "cuda", reread_operands=2)
    assert not config.single_pass and config.block_n == _rows.CHUNK_N
    in_flight = config.num_programs * 2 * n * dtype.itemsize
    # at least one row per SM; more only while the rows in flight fit the L2 budget
    assert config.num_programs == 132 or in_flight <= 0.75 * H100.l2_bytes


def test_persistent_single_pass_fills_each_sm_once(on_h100):
    config = _rows.row_launch_config(
        16384, 4096, torch.bfloat16, "cuda", elements_per_thread=8, max_warps=32,
        tile_elements=2048, resident_warps=32,
    )  # fmt: skip
    assert config.num_warps == 16 and config.num_programs == 132 * 2


def test_interpreter_grid_is_small():
    config = _rows.row_launch_config(100, 20000, torch.float32, "cpu")
    assert config.num_programs == 4
