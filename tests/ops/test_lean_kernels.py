"""The lean stream kernels (``softmax_bwd_tile_kernel``, ``cross_entropy_bwd_flat_kernel``):
32-bit offsets unless an operand reaches 2**31 elements, no predicates on exact tiles. Against float64 formulas on poisoned outputs, at exact and
ragged tiles; the 64-bit choice at the 2**31 boundary on meta tensors (CPU) and on real ones
(GPU)."""

from __future__ import annotations

import importlib

import pytest
import torch

import warpforge.ops._kernels.cross_entropy as ce_kernels
import warpforge.ops._kernels.softmax as softmax_kernels
from warpforge.ops import softmax_ops

ce = importlib.import_module("warpforge.ops.cross_entropy")

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def grad_atol(dtype: torch.dtype, classes: int) -> float:
    """Absolute tolerance of cross-entropy gradients, whose entries are about 1 / classes but
    the target's: the dtype's tolerance scaled to that size, at least float16's subnormal step
    (about 6e-8) there."""
    return max(TOL[dtype] / classes, 1e-7)


# --------------------------------------------------------------------------- references


def softmax_dx(dy, y, log):
    dy64, y64 = dy.double(), y.double()
    if log:
        return dy64 - y64.exp() * dy64.sum(-1, keepdim=True)
    return y64 * (dy64 - (dy64 * y64).sum(-1, keepdim=True))


def ce_grad(logits, target, grad, ignore_index, smoothing, z_loss):
    x = logits.double()
    V = x.shape[-1]
    lse = torch.logsumexp(x, -1, keepdim=True)
    valid = target != ignore_index
    one_hot = torch.nn.functional.one_hot(torch.where(valid, target, 0), V).double()
    d = torch.exp(x - lse) * (1 + 2 * z_loss * lse) - smoothing / V - (1 - smoothing) * one_hot
    return d * torch.where(valid, grad.double(), 0.0)[:, None]


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("M", "N", "rows", "stride"),
    [(8, 64, 4, None), (7, 67, 2, None), (5, 128, 1, None), (1, 1, 1, None), (6, 40, 4, 53)],
)
def test_softmax_backward_tile(log, M, N, rows, stride, device, poison_outputs):
    x = torch.randn(M, stride or N, device=device)[:, :N] * 3
    y = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
    dy = torch.randn(M, stride or N, device=device)[:, :N]
    dx = torch.empty(M, N, device=device)
    softmax_ops.softmax_backward_tile(dy, y, dx, log, rows, 1)
    torch.testing.assert_close(dx.double(), softmax_dx(dy, y, log), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("M", "V", "block"), [(6, 40, 16), (5, 37, 32), (4, 64, 64), (3, 1000, 256), (1, 16, 16)]
)
@pytest.mark.parametrize(("smoothing", "z_loss"), [(0.0, 0.0), (0.1, 1e-4)])
def test_cross_entropy_flat_backward(M, V, block, smoothing, z_loss, device, poison_outputs):
    logits = torch.randn(M, V, device=device) * 3
    target = torch.randint(0, V, (M,), device=device)
    target[M // 2] = -100  # an ignored row, mid-matrix, so blocks span it
    lse = torch.logsumexp(logits, -1)
    grad = torch.rand(M, device=device) + 0.5
    out = torch.empty(M, V, device=device)
    ce.flat_row_grads(out, logits, target, lse, grad, -100, smoothing, z_loss, (block, 1))
    want = ce_grad(logits, target, grad, -100, smoothing, z_loss)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)


def test_cross_entropy_flat_backward_refuses_blocks_wider_than_a_row(device):
    logits = torch.randn(2, 8, device=device)
    with pytest.raises(ValueError, match="BLOCK <= n_cols"):
        ce.flat_row_grads(torch.empty_like(logits), logits, torch.zeros(2, dtype=torch.long,
                          device=device), logits[:, 0], logits[:, 0], -100, 0.0, 0.0, (16, 1))  # fmt: skip


# --------------------------------------------------------------------------- 32 / 64-bit choice


class _Recorder:
    """Stands in for a Triton kernel: records the constexprs of each launch."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(kwargs)


@pytest.mark.parametrize(("M", "wide"), [(2**23 - 1, False), (2**23, True)])
def test_softmax_tile_offsets_widen_at_2_31_elements(M, wide, monkeypatch):
    """(M, 256) reaches 2**31 elements at M = 2**23: the furthest offset formed decides."""
    recorder = _Recorder()
    monkeypatch.setattr(softmax_kernels, "softmax_bwd_tile_kernel", recorder)
    y = torch.empty(M, 256, device="meta")
    softmax_ops.softmax_backward_tile(y, y, y, False, 1, 1)
    assert recorder.launches[0]["WIDE"] is wide


@pytest.mark.parametrize(("M", "wide"), [(65534, False), (65536, True)])
def test_cross_entropy_flat_offsets_widen_at_2_31_elements(M, wide, monkeypatch):
    """32768 classes: 65536 rows are 2**31 elements."""
    recorder = _Recorder()
    monkeypatch.setattr(ce_kernels, "cross_entropy_bwd_flat_kernel", recorder)
    x = torch.empty(M, 32768, device="meta")
    t = torch.empty(M, dtype=torch.long, device="meta")
    ce.flat_row_grads(x, x, t, x[:, 0], x[:, 0], -100, 0.0, 0.0, (4096, 8))
    assert recorder.launches[0]["WIDE"] is wide


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("M", "N", "rows", "warps"), [(32768, 256, 2, 2), (4099, 1000, 1, 4)])
def test_softmax_backward_tile_gpu(log, dtype, M, N, rows, warps, poison_outputs):
    x = torch.randn(M, N, device="cuda") * 3
    y = (torch.log_softmax(x, -1) if log else torch.softmax(x, -1)).to(dtype)
    dy = torch.randn(M, N, device="cuda").to(dtype)
    dx = torch.empty(M, N, device="cuda", dtype=dtype)
    softmax_ops.softmax_backward_tile(dy, y, dx, log, rows, warps)
    torch.testing.assert_close(
        dx.double(), softmax_dx(dy, y, log), atol=TOL[dtype], rtol=TOL[dtype]
    )


@pytest.mark.gpu
def test_softmax_backward_tile_past_2_31_elements_gpu():
    """2**23 + 3 rows of 256 bf16 columns: rows past 2**31 elements address correctly."""
    M, N = 2**23 + 3, 256
    y = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    dx = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    softmax_ops.softmax_backward_tile(dy, y, dx, False, 2, 2)
    for rows in (slice(0, 4), slice(M - 5, M)):
        want = softmax_dx(dy[rows], y[rows], False)
        torch.testing.assert_close(dx[rows].double(), want, atol=0.2, rtol=1.6e-2)
    assert not dx.isnan().any()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("M", "V", "block", "warps"),
                         [(16384, 32000, 1024, 4), (300, 50257, 2048, 8), (64, 4099, 4096, 8)])  # fmt: skip
def test_cross_entropy_flat_backward_gpu(dtype, M, V, block, warps, poison_outputs):
    logits = (torch.randn(M, V, device="cuda") * 3).to(dtype)
    target = torch.randint(0, V, (M,), device="cuda")
    target[::16] = -100
    lse = torch.logsumexp(logits.float(), -1)
    grad = torch.rand(M, device="cuda") + 0.5
    out = torch.empty(M, V, device="cuda", dtype=dtype)
    ce.flat_row_grads(out, logits, target, lse, grad, -100, 0.1, 1e-4, (block, warps))
    want = ce_grad(logits, target, grad, -100, 0.1, 1e-4)
    torch.testing.assert_close(out.double(), want, atol=grad_atol(dtype, V), rtol=TOL[dtype])


@pytest.mark.gpu
def test_cross_entropy_flat_backward_past_2_31_elements_gpu():
    M, V = 65536 + 5, 32768
    logits = torch.randn(M, V, device="cuda", dtype=torch.bfloat16)
    target = torch.randint(0, V, (M,), device="cuda")
    lse = torch.logsumexp(logits.float(), -1)
    grad = torch.rand(M, device="cuda") + 0.5
    out = torch.full((M, V), float("nan"), device="cuda", dtype=torch.bfloat16)
    ce.flat_row_grads(out, logits, target, lse, grad, -100, 0.0, 0.0, (4096, 8))
    for rows in (slice(0, 3), slice(M - 3, M)):
        want = ce_grad(logits[rows], target[rows], grad[rows], -100, 0.0, 0.0)
        torch.testing.assert_close(out[rows].double(), want, atol=grad_atol(torch.bfloat16, V),
                                   rtol=1.6e-2)  # fmt: skip
    assert not out.isnan().any()


# --------------------------------------------------------------------------- dispatch


def test_cross_entropy_backward_op_takes_the_flat_stream_for_float32_rows(device):
    """float32 rows of one block or more take the flat kernel (8200 classes: one block spans
    two rows), aligned to 16 bytes or not, at any width; the op's backward matches the float64
    gradient."""
    launch = ce.FLAT_BWD_LAUNCHES[4]
    for n_cols in (launch[0], 2049, 8192, 8200, 8201, 50257, 128256):
        assert ce._flat_bwd_launch(torch.empty(2, n_cols, device=device)) == launch
    assert ce._flat_bwd_launch(torch.empty(2, launch[0] - 1, device=device)) is None
    assert ce._flat_bwd_launch(torch.empty(2, 8200, device=device, dtype=torch.float16)) is None
    assert ce._flat_bwd_launch(torch.empty(2, 50257, device=device, dtype=torch.float16)) is None
    assert ce._flat_bwd_launch(torch.empty(2, 16400, device=device)[:, :8200]) is None
    logits = torch.randn(3, 8200, device=device) * 3
    target = torch.tensor([5, -100, 8199], device=device)
    lse = torch.logsumexp(logits, -1)
    grad = torch.rand(3, device=device) + 0.5
    got = ce._cross_entropy_bwd(grad, logits, target, lse, -100, 0.0, 0.0)
    want = ce_grad(logits, target, grad, -100, 0.0, 0.0)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.interpreter
def test_cross_entropy_backward_row_launch_by_gpu_model(monkeypatch, poison_outputs):
    """The saved-lse backward's row kernel takes ``BWD_ROW_LAUNCHES_BY_MODEL``' launch on the GPU
    model it names, for rows of at least its BLOCK classes of its element size, and
    ``bwd_launch_heuristic``'s elsewhere; listed for this machine as 16-column slices (three a
    row of 41 classes, the last ragged), the op's 2-byte backward launches them and matches
    float64, and so does the kernel with the eviction hint."""
    from types import SimpleNamespace

    from launch_spy import LaunchSpy
    from warpforge.ops import _split_rows

    real = _split_rows.device_capabilities
    for name, size, n_cols, want in (
        ("NVIDIA H200", 2, 50257, (1024, 2, False)),
        ("NVIDIA H200", 2, 1024, (1024, 2, False)),
        ("NVIDIA H200", 2, 1023, (*ce.bwd_launch_heuristic(1023, 2), True)),
        ("NVIDIA H200", 4, 50257, (*ce.bwd_launch_heuristic(50257, 4), True)),
        ("NVIDIA H100 80GB HBM3", 2, 50257, (*ce.bwd_launch_heuristic(50257, 2), True)),
    ):
        monkeypatch.setattr(
            _split_rows, "device_capabilities", lambda device, n=name: SimpleNamespace(name=n)
        )
        assert ce._bwd_row_launch(n_cols, size, torch.device("cuda")) == want, (name, size, n_cols)
    monkeypatch.setattr(_split_rows, "device_capabilities", real)
    here = real("cpu").name
    monkeypatch.setitem(ce.BWD_ROW_LAUNCHES_BY_MODEL, here, {2: (16, 1, False)})
    spy = LaunchSpy(ce_kernels.cross_entropy_bwd_kernel)
    monkeypatch.setattr(ce_kernels, "cross_entropy_bwd_kernel", spy)
    gen = torch.Generator().manual_seed(11)
    logits = (torch.randn(5, 41, generator=gen) * 3).half()
    target = torch.randint(0, 41, (5,), generator=gen)
    target[2] = -100
    lse = torch.logsumexp(logits.float(), -1)
    grad = torch.rand(5, generator=gen) + 0.5
    got = ce._cross_entropy_bwd(grad, logits, target, lse, -100, 0.0, 0.0)
    assert [
        (la["BLOCK"], la["num_warps"], la["EVICT_FIRST"], la["grid"]) for la in spy.launches
    ] == [(16, 1, False, (15,))]
    want = ce_grad(logits, target, grad, -100, 0.0, 0.0)
    torch.testing.assert_close(got.double(), want, atol=grad_atol(torch.float16, 41), rtol=2e-3)
    hinted = torch.full_like(logits, float("nan"))  # the sweeps' variant with the hint
    ce.row_grads(hinted, logits, target, lse, grad, -100, 0.0, 0.0, evict_first=True)
    assert spy.launches[-1]["EVICT_FIRST"] is True
    torch.testing.assert_close(hinted, got, atol=0, rtol=0)


def test_softmax_backward_op_takes_the_tile_kernel(monkeypatch, device):
    """Whole rows of the table's shapes go to the lean tile kernel at its launch; others keep
    the row kernel."""
    seen = []
    real = softmax_ops.softmax_backward_tile

    def spy(dy, y, dx, log, rows, warps):
        seen.append((rows, warps))
        return real(dy, y, dx, log, rows, warps)

    monkeypatch.setattr(softmax_ops, "softmax_backward_tile", spy)
    y = torch.softmax(torch.randn(8, 256, device=device), -1)
    dy = torch.randn(8, 256, device=device)
    dx = softmax_ops._softmax_bwd(dy, y, False)
    torch.testing.assert_close(dx.double(), softmax_dx(dy, y, False), atol=1e-5, rtol=1e-5)
    assert seen == [softmax_ops.BWD_TILE_LAUNCHES[(4, 256, False)]]
    softmax_ops._softmax_bwd(dy[:, :100], y[:, :100].contiguous(), False)  # block 128: not listed
    assert len(seen) == 1
