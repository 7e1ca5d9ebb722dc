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
    plan = _split_rows.split_row_plan(
        8192, 262144, "cuda", block=8192, num_warps=16, programs_per_sm=2
    )
    assert plan is not None and plan.chunks == 32 and plan.programs == 256
    # two 512-thread programs an SM: at most 64 registers a thread
    assert plan.max_registers == 64
    assert plan.launch_options() == {"num_warps": 16, "maxnreg": 64}


def test_one_program_per_sm_leaves_the_registers_alone(on_h100):
    plan = _split_rows.split_row_plan(8192, 262144, "cuda")
    assert plan.max_registers is None and plan.launch_options() == {"num_warps": 32}


@pytest.mark.parametrize(("per_sm", "warps", "registers"), [(4, 8, 64), (2, 4, 248), (3, 8, 80)])
def test_register_cap_fits_the_planned_programs(on_h100, per_sm, warps, registers):
    plan = _split_rows.split_row_plan(
        4096, 131072, "cuda", block=8192, num_warps=warps, programs_per_sm=per_sm
    )
    assert plan.max_registers == registers and plan.max_registers % 8 == 0
    assert per_sm * warps * 32 * plan.max_registers <= _split_rows.REGISTERS_PER_SM


@pytest.mark.parametrize(("per_sm", "warps"), [(2, 32), (4, 16), (0, 8)])
def test_programs_per_sm_beyond_what_every_gpu_holds_is_refused(per_sm, warps):
    with pytest.raises(ValueError, match="programs_per_sm: expected"):
        _split_rows.split_row_plan(8192, 262144, "cuda", num_warps=warps, programs_per_sm=per_sm)


@pytest.mark.parametrize("element_size", [1, 2, 4, 8])
def test_split_launch_is_a_valid_plan_for_every_element_size(on_h100, element_size):
    options = _split_rows.split_launch(element_size)
    plan = _split_rows.split_row_plan(8192, 262144, "cuda", **options)
    per_sm, warps = options["programs_per_sm"], options["num_warps"]
    assert plan is not None and plan.programs <= H100.sm_count * per_sm
    assert plan.prefetch == options["prefetch"] and plan.num_warps == warps
    assert per_sm == 1 or per_sm * warps <= _split_rows.MAX_RESIDENT_WARPS


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_split_kernels_fit_their_planned_programs_per_sm(dtype):
    """The compiled split kernels use no more registers than their plan allows (Triton's
    maxnreg is honoured), so the planned programs are resident at once (never a hang)."""
    from warpforge.ops._kernels.cross_entropy import (
        cross_entropy_fwd_grad_flags_kernel,
        cross_entropy_fwd_grad_split_kernel,
    )
    from warpforge.ops._kernels.softmax import softmax_fwd_split_kernel

    options = _split_rows.split_launch(dtype.itemsize)
    per_sm, warps = options["programs_per_sm"], options["num_warps"]
    M, N = 300, 3 * options["block"] + 5
    plan = _split_rows.split_row_plan(M, N, "cuda", **options)
    x = torch.randn(M, N, device="cuda").to(dtype)
    y = torch.empty_like(x)
    kernel = softmax_fwd_split_kernel[(plan.programs,)](
        x, y, plan.workspace(M, 2, x.device), plan.arrivals(M, x.device), N, N, M, N,
        LOG=False, BLOCK_N=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0,
        PREFETCH=plan.prefetch, RELEASE_ONLY=plan.release_only, **plan.launch_options(),
    )  # fmt: skip
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=1e-2, rtol=1e-2)
    target = torch.randint(0, N, (M,), device="cuda")
    loss, lse = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    ce_kernel = cross_entropy_fwd_grad_split_kernel[(plan.programs,)](
        x, target, loss, lse, y, torch.ones(1, device="cuda"), plan.workspace(M, 4, x.device),
        plan.arrivals(M, x.device), 0, N, N, M, N, -100, 0.0, 0.0, BLOCK=plan.block,
        CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch, HAS_SMOOTHING=False,
        CHECK_TARGETS=False, EARLY=True, RELEASE_ONLY=plan.release_only, **plan.launch_options(),
    )  # fmt: skip
    torch.testing.assert_close(lse, torch.logsumexp(x.float(), -1), atol=1e-3, rtol=1e-4)
    lse.fill_(float("nan"))
    words = torch.full((M * 2 * plan.chunks_pow2,), -1, dtype=torch.int64, device="cuda")
    flags_kernel = cross_entropy_fwd_grad_flags_kernel[(plan.programs,)](
        x, target, loss, lse, y, torch.ones(1, device="cuda"), words, 0, N, N, M, N, -100, 0.0,
        0.0, BLOCK=plan.block, CHUNKS_POW2=plan.chunks_pow2, STAGE=0, PREFETCH=plan.prefetch,
        HAS_SMOOTHING=False, CHECK_TARGETS=False, **plan.launch_options(),
    )  # fmt: skip
    torch.testing.assert_close(lse, torch.logsumexp(x.float(), -1), atol=1e-3, rtol=1e-4)
    for compiled in (kernel, ce_kernel, flags_kernel):
        registers = per_sm * warps * 32 * compiled.n_regs
        assert registers <= _split_rows.REGISTERS_PER_SM, (compiled.n_regs, plan)


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


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("prefetch", [False, True], ids=["default", "prefetch"])
def test_gpu_split_plans_match_the_reference(dtype, prefetch):
    """The ops' split launch (and the prefetching variant at 16 elements a thread) on the GPU:
    cross entropy with its gradient in place over the logits (smoothing, z-loss, a target in a
    late chunk), softmax and log-softmax, rows in several waves, against float64."""
    import importlib

    from warpforge.ops import softmax_ops

    ce = importlib.import_module("warpforge.ops.cross_entropy")
    options = _split_rows.split_launch(dtype.itemsize)
    if prefetch:
        options = {**options, "block": 4096, "num_warps": 8, "programs_per_sm": 4, "prefetch": True}
    M, N = 1500, 5 * options["block"] + 7
    plan = _split_rows.split_row_plan(M, N, "cuda", **options)
    assert plan.prefetch == options["prefetch"] and plan.programs < M  # programs loop over rows
    gen = torch.Generator(device="cuda").manual_seed(31)
    x = (torch.randn(M, N, device="cuda", generator=gen) * 3).to(dtype)
    target = torch.randint(0, N, (M,), device="cuda", generator=gen)
    target[0], target[1], target[2] = N - 1, -100, 4 * options["block"]
    grad_loss = torch.rand(M, device="cuda", generator=gen) + 0.5
    x64 = x.double().requires_grad_()
    valid = target != -100
    lse64 = x64.logsumexp(-1)
    picked = x64.gather(1, torch.where(valid, target, 0)[:, None])[:, 0]
    rows = 0.9 * (lse64 - picked) + 0.1 * (lse64 - x64.mean(-1)) + 1e-4 * lse64**2
    rows = torch.where(valid, rows, torch.zeros_like(rows))
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    in_place = x.clone()
    loss, lse = ce.row_losses(
        in_place, target, -100, 0.1, 1e-4, grad_out=in_place, grad_loss=grad_loss, split=plan
    )
    tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    torch.testing.assert_close(loss.double(), rows.detach(), atol=tol, rtol=tol)
    torch.testing.assert_close(lse.double(), lse64.detach(), atol=tol, rtol=1e-6)
    torch.testing.assert_close(in_place.double(), expected, atol=tol * 1e-3, rtol=tol)
    for log in (False, True):
        y = softmax_ops.softmax_forward(x, log, split=plan)
        reference = torch.log_softmax(x.double(), -1) if log else torch.softmax(x.double(), -1)
        # probabilities of about 1 / N: the tolerance scaled to that size
        atol = tol if log else tol / N
        torch.testing.assert_close(y.double(), reference, atol=atol, rtol=tol)
    no_grad_loss, _ = ce.row_losses(x, target, -100, 0.1, 1e-4)  # the loss-only kernel
    torch.testing.assert_close(no_grad_loss.double(), rows.detach(), atol=tol, rtol=tol)
