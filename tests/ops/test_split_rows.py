"""Launch plans of the split-row kernels (warpforge.ops._split_rows): whole groups of programs
per row, never more programs than the GPU holds at once, two launches under the interpreter."""

from __future__ import annotations

import pytest
import torch

from warpforge.ops import _split_rows
from warpforge.runtime import DeviceCapabilities

H100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(_split_rows, "device_capabilities", lambda device: H100)


@pytest.mark.parametrize(
    ("M", "N", "chunks", "programs"),
    [(8192, 262144, 8, 128), (4096, 128256, 4, 132), (16384, 32000, 1, 132), (3, 262144, 8, 24)],
)
def test_gpu_plan_is_resident_whole_groups(on_h100, M, N, chunks, programs):
    plan = _split_rows.split_row_plan(M, N, "cuda")
    assert plan is not None and plan.synchronized and plan.stages() == (0,)
    assert plan.chunks == chunks and plan.programs == programs
    assert plan.programs % plan.chunks == 0 and plan.programs <= H100.sm_count
    assert plan.chunks_pow2 >= plan.chunks and plan.chunks_pow2 & (plan.chunks_pow2 - 1) == 0
    assert (plan.chunks - 1) * plan.block < N <= plan.chunks * plan.block


def test_gpu_plan_counts_programs_per_sm(on_h100):
    plan = _split_rows.split_row_plan(8192, 262144, "cuda", block=8192, programs_per_sm=2)
    assert plan is not None and plan.chunks == 32 and plan.programs == 256


def test_gpu_plan_refuses_rows_needing_more_programs_than_resident(on_h100):
    assert _split_rows.split_row_plan(4, 133 * 32768, "cuda") is None
    assert _split_rows.split_row_plan(4, 132 * 32768, "cuda").programs == 132


def test_interpreter_plan_runs_two_launches_without_waiting():
    plan = _split_rows.split_row_plan(10, 100, "cpu", block=16)
    assert plan is not None and not plan.synchronized and plan.stages() == (1, 2)
    assert plan.chunks == 7 and plan.chunks_pow2 == 8
    assert plan.programs == 7 * min(10, _split_rows._INTERPRETER_SLOTS)


def test_workspace_and_arrivals_shapes():
    plan = _split_rows.split_row_plan(5, 100, "cpu", block=32)
    assert plan.workspace(5, 4, torch.device("cpu")).shape == (5 * 4 * 4,)
    arrivals = plan.arrivals(5, torch.device("cpu"))
    assert arrivals.dtype == torch.int32 and not arrivals.any()


@pytest.mark.parametrize("block", [0, 8, 24, 1000])
def test_block_must_be_a_power_of_two_of_at_least_16(block):
    with pytest.raises(ValueError, match="block: expected a power of 2 >= 16"):
        _split_rows.split_row_plan(4, 100, "cpu", block=block)


def test_gpu_plan_counts_only_the_mps_share_of_the_sms(on_h100, monkeypatch):
    monkeypatch.setenv(_split_rows.MPS_SHARE, "50")
    plan = _split_rows.split_row_plan(8192, 262144, "cuda")
    assert plan is not None and plan.programs == 64  # 66 SMs: 8 whole groups of 8
    monkeypatch.setenv(_split_rows.MPS_SHARE, "5")  # 6 SMs cannot hold a row of 8 chunks
    assert _split_rows.split_row_plan(8192, 262144, "cuda") is None
    monkeypatch.setenv(_split_rows.MPS_SHARE, "half")  # unreadable: no synchronized launch
    assert _split_rows.split_row_plan(8192, 262144, "cuda") is None


def test_gpu_synchronized_split_can_be_switched_off(on_h100, monkeypatch):
    monkeypatch.setenv(_split_rows.SWITCH, "0")
    assert _split_rows.split_row_plan(8192, 262144, "cuda") is None
    monkeypatch.setenv(_split_rows.SWITCH, "1")
    assert _split_rows.split_row_plan(8192, 262144, "cuda") is not None
