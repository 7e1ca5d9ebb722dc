"""warpforge.ops.cross_entropy against a plain float64 reference (and torch itself)."""

from __future__ import annotations

import functools
import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from device_assert import assert_stops_on_bad_target
from hypothesis import given, settings
from hypothesis import strategies as st

from launch_spy import LaunchSpy
from warpforge.ops import _split_rows as split_rows
from warpforge.ops import cross_entropy
from warpforge.ops._kernels import cross_entropy as kernels
from warpforge.ops._split_rows import split_row_plan
from warpforge.ops._wide_rows import WIDE_ROWS, WideLaunch
from warpforge.runtime import ExecutionPath, device_capabilities

# `import warpforge.ops.cross_entropy as m` would bind the function of the same name.
ce_module = importlib.import_module("warpforge.ops.cross_entropy")

IGNORE = -100
THIS_MACHINE = device_capabilities("cpu").name
"""What the ``*_BY_MODEL`` tables see as the GPU model here (tests list it to take a launch)."""


def reference_cross_entropy(logits, target, *, ignore_index=IGNORE, reduction="mean",
                            label_smoothing=0.0, z_loss=0.0):  # fmt: skip
    """Plain float64 cross entropy, class dimension last."""
    n_classes = logits.shape[-1]
    x = logits.double().reshape(-1, n_classes)
    t = target.reshape(-1).long()
    valid = t != ignore_index
    log_probs = x.log_softmax(dim=-1)
    nll = -log_probs.gather(1, torch.where(valid, t, 0)[:, None])[:, 0]
    smooth = -log_probs.mean(dim=-1)
    lse = x.logsumexp(dim=-1)
    rows = (1 - label_smoothing) * nll + z_loss * lse * lse
    if label_smoothing:  # 0 * inf would turn masked (-inf) logits into NaN
        rows = rows + label_smoothing * smooth
    rows = torch.where(valid, rows, torch.zeros_like(rows))
    if reduction == "none":
        return rows.reshape(target.shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / valid.sum()


def random_target(shape, n_classes, generator, ignore_fraction=0.2):
    target = torch.randint(0, n_classes, shape, generator=generator)
    ignored = torch.rand(shape, generator=generator) < ignore_fraction
    return torch.where(ignored, torch.full_like(target, IGNORE), target)


@pytest.fixture(params=["triton", "torch-reference"])
def path(request, monkeypatch):
    """Run every check on the Triton kernels (interpreter here) and on the PyTorch path."""
    if request.param == "torch-reference":
        monkeypatch.setattr(ce_module, "execution_path", lambda d: ExecutionPath.TORCH_REFERENCE)
    return request.param


def check_forward_backward(logits, target, dtype, tol, **options):
    x = logits.to(dtype).requires_grad_()
    loss = cross_entropy(x, target, **options)
    grad_out = torch.rand(loss.shape, dtype=torch.float64) + 0.5
    (grad,) = torch.autograd.grad(loss, x, grad_out.to(loss.dtype))

    x64 = x.detach().double().requires_grad_()
    expected = reference_cross_entropy(x64, target, **options)
    (expected_grad,) = torch.autograd.grad(expected, x64, grad_out)
    assert loss.dtype == dtype and loss.shape == expected.shape
    torch.testing.assert_close(loss.double(), expected, atol=tol, rtol=tol, equal_nan=True)
    torch.testing.assert_close(grad.double(), expected_grad, atol=tol, rtol=tol)


@pytest.fixture
def fresh_plans():
    """The op's cached split plans cleared before and after the test (a test that patches the
    launch tables must not see, or leave, plans cached under other tables)."""
    caches = (ce_module._fwd_grad_split_plan, ce_module._flag_word_plan,
              ce_module._split_over_looped)  # fmt: skip
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def spy_on(monkeypatch, *names: str) -> list[LaunchSpy]:
    """A ``LaunchSpy`` in place of each of these cross-entropy kernels, in order."""
    spies = []
    for name in names:
        spies.append(LaunchSpy(getattr(kernels, name)))
        monkeypatch.setattr(kernels, name, spies[-1])
    return spies


def check_row_losses(loss, lse, logits, target):
    """Per-row losses (label smoothing 0.1, z-loss 1e-3) and logsumexp against float64."""
    x64 = logits.double()
    expected = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=1e-3
    )
    tol = 2e-5 if logits.dtype == torch.float32 else 1e-3
    torch.testing.assert_close(loss.double(), expected, atol=tol, rtol=tol)
    torch.testing.assert_close(lse.double(), x64.logsumexp(-1), atol=tol, rtol=0)


@pytest.mark.parametrize(
    "shape",
    [(1, 1), (1, 7), (5, 1), (13, 97), (3, 4, 31), (2, 3, 2, 11), (2, 5000), (3, 4099), (17,)],
    ids=lambda s: "x".join(map(str, s)),
)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matches_reference(shape, reduction, path):
    gen = torch.Generator().manual_seed(hash((shape, reduction)) % 2**31)
    logits = torch.randn(shape, generator=gen) * 3
    target = random_target(shape[:-1], shape[-1], gen)
    check_forward_backward(logits, target, torch.float32, 2e-5, reduction=reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_label_smoothing_and_z_loss(reduction, path):
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(11, 257, generator=gen) * 4
    target = random_target((11,), 257, gen)
    check_forward_backward(
        logits, target, torch.float32, 2e-5,
        reduction=reduction, label_smoothing=0.15, z_loss=1e-3, ignore_index=IGNORE,
    )  # fmt: skip


def test_large_vocab_spans_many_chunks(path):
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 65537, generator=gen) * 5
    target = torch.tensor([65536, 0])
    check_forward_backward(logits, target, torch.float32, 2e-5, label_smoothing=0.1)


def test_float16(path):
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(9, 301, generator=gen) * 3
    target = random_target((9,), 301, gen)
    check_forward_backward(logits, target, torch.float16, 5e-3, reduction="sum")


def test_matches_torch_cross_entropy(path):
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(16, 50, generator=gen)
    target = random_target((16,), 50, gen)
    for reduction in ("mean", "sum", "none"):
        ours = cross_entropy(logits, target, reduction=reduction, label_smoothing=0.3)
        theirs = F.cross_entropy(logits, target, reduction=reduction, label_smoothing=0.3)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_int32_target_and_non_contiguous_logits(path):
    gen = torch.Generator().manual_seed(6)
    wide = torch.randn(40, 23, generator=gen)
    logits = wide.t()[:, 3:40:2]  # stride(-1) != 1: [23, 19] view
    assert not logits.is_contiguous()
    target = random_target((23,), 19, gen).to(torch.int32)
    check_forward_backward(logits, target, torch.float32, 2e-5, reduction="none")
    strided_target = torch.randint(0, 19, (46,), generator=gen)[::2]
    check_forward_backward(logits, strided_target, torch.float32, 2e-5, reduction="sum")
    strided_rows = torch.randn(12, 64, generator=gen)[::3, :37]  # row stride 192, last stride 1
    check_forward_backward(strided_rows, random_target((4,), 37, gen), torch.float32, 2e-5)


def test_masked_minus_inf_logits(path):
    gen = torch.Generator().manual_seed(17)
    logits = torch.randn(5, 300, generator=gen) * 3
    logits[:, 100:] = float("-inf")  # e.g. vocabulary padding masked out
    logits[2, :50] = float("-inf")
    target = torch.tensor([3, 99, 60, IGNORE, 0])
    check_forward_backward(logits, target, torch.float32, 2e-5, reduction="none", z_loss=1e-3)


def test_all_rows_ignored_matches_torch(path):
    gen = torch.Generator().manual_seed(8)
    logits = torch.randn(4, 9, generator=gen, requires_grad=True)
    target = torch.full((4,), IGNORE)
    loss = cross_entropy(logits, target)
    expected = F.cross_entropy(logits, target)
    assert math.isnan(loss.item()) and math.isnan(expected.item())
    (grad,) = torch.autograd.grad(loss, logits)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    torch.testing.assert_close(grad, expected_grad)
    assert cross_entropy(logits, target, reduction="sum").item() == 0.0


def test_empty_batch_matches_torch(path):
    logits = torch.randn(0, 5)
    target = torch.zeros(0, dtype=torch.long)
    assert math.isnan(cross_entropy(logits, target).item())
    assert cross_entropy(logits, target, reduction="sum").item() == 0.0
    assert cross_entropy(logits, target, reduction="none").shape == (0,)


def test_backward_writes_every_element_of_a_poisoned_buffer(path):
    gen = torch.Generator().manual_seed(9)
    logits = torch.randn(6, 333, generator=gen)
    target = random_target((6,), 333, gen)
    _, lse = ce_module.row_losses(logits, target, IGNORE, 0.1, 0.01)
    grad_loss = torch.rand(6, generator=gen)
    poisoned = torch.full_like(logits, float("nan"))
    ce_module.row_grads(poisoned, logits, target, lse, grad_loss, IGNORE, 0.1, 0.01)
    x64 = logits.double().requires_grad_()
    rows = reference_cross_entropy(x64, target, reduction="none", label_smoothing=0.1, z_loss=0.01)
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    torch.testing.assert_close(poisoned.double(), expected, atol=2e-6, rtol=2e-5)


def test_forward_with_grad_fills_a_poisoned_buffer_even_in_place(path):
    gen = torch.Generator().manual_seed(14)
    logits = torch.randn(5, 1201, generator=gen) * 2
    target = random_target((5,), 1201, gen)
    grad_loss = torch.rand(5, generator=gen) + 0.5
    x64 = logits.double().requires_grad_()
    rows = reference_cross_entropy(x64, target, reduction="none", label_smoothing=0.2, z_loss=0.1)
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    poisoned = torch.full_like(logits, float("nan"))
    loss, _ = ce_module.row_losses(
        logits, target, IGNORE, 0.2, 0.1, grad_out=poisoned, grad_loss=grad_loss
    )
    torch.testing.assert_close(loss.double(), rows.detach(), atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(poisoned.double(), expected, atol=2e-6, rtol=2e-5)
    in_place = logits.clone()  # the gradient may overwrite the logits it is computed from
    ce_module.row_losses(in_place, target, IGNORE, 0.2, 0.1, grad_out=in_place, grad_loss=grad_loss)
    torch.testing.assert_close(in_place.double(), expected, atol=2e-6, rtol=2e-5)


def test_chunked_forward_with_grad_loops_rows_and_chunks_in_place(path):
    """Rows longer than the block: the persistent chunked kernel (more rows than programs, the
    gradient pass walking each row backwards), into a poisoned buffer and in place."""
    gen = torch.Generator().manual_seed(18)
    logits = torch.randn(9, 37, generator=gen) * 3
    target = random_target((9,), 37, gen)
    target[0], target[1] = 0, 36  # first and last column
    grad_loss = torch.rand(9, generator=gen) + 0.5
    x64 = logits.double().requires_grad_()
    rows = reference_cross_entropy(x64, target, reduction="none", label_smoothing=0.1, z_loss=0.01)
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    for out in (torch.full_like(logits, float("nan")), logits.clone()):
        source = out if not out.isnan().any() else logits
        loss, _ = ce_module.row_losses(
            source, target, IGNORE, 0.1, 0.01, grad_out=out, grad_loss=grad_loss, launch=(16, 1)
        )
        torch.testing.assert_close(loss.double(), rows.detach(), atol=2e-5, rtol=2e-5)
        torch.testing.assert_close(out.double(), expected, atol=2e-6, rtol=2e-5)


def _check_forward_with_grad(logits, target, grad_loss, **forced):
    """``row_losses`` with a gradient through the ``forced`` kernel (``split=`` a plan or
    ``looped=`` a launch; smoothing 0.1, z-loss 0.01) against float64: into a NaN-poisoned
    buffer, then in place over a copy of the logits."""
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=0.01
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    for out in (torch.full_like(logits, float("nan")), logits.clone()):
        source = out if not out.isnan().any() else logits
        loss, lse = ce_module.row_losses(
            source, target, IGNORE, 0.1, 0.01, grad_out=out, grad_loss=grad_loss, **forced
        )
        torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=2e-5, rtol=2e-5)
        torch.testing.assert_close(lse.double(), logits.double().logsumexp(-1), atol=1e-5, rtol=0)
        torch.testing.assert_close(out.double(), expected, atol=2e-6, rtol=2e-5)


@pytest.mark.parametrize("words", [False, True], ids=["counter", "flag-words"])
@pytest.mark.parametrize("prefetch", [False, True], ids=["load", "prefetch"])
@pytest.mark.parametrize(("rows", "vocab"), [(9, 37), (4, 16), (7, 100), (5, 41 * 16 - 3)])
def test_split_forward_with_grad_over_small_chunks(path, rows, vocab, prefetch, words, monkeypatch):
    """Rows split over 16-column programs (ragged last chunk; targets at the first and last
    column, at a chunk boundary, ignored), more rows than slots, smoothing and z-loss, into a
    poisoned buffer and in place (the target logit is read before any gradient lands; with
    ``prefetch`` each program loads its next row's chunk before writing this one's), with both
    meetings: the arrival counter and the flag words (41 chunks: two vectors of words). Chunks
    count from each row's start (the aligned chunks of unaligned rows have their own test)."""
    monkeypatch.setenv(ce_module.ALIGNED_SPLIT, "0")
    gen = torch.Generator().manual_seed(24)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    target = random_target((rows,), vocab, gen)
    target[0], target[1], target[2 % rows] = 0, vocab - 1, min(16, vocab - 1)
    target[rows - 1] = IGNORE
    grad_loss = torch.rand(rows, generator=gen) + 0.5
    plan = split_row_plan(rows, vocab, "cpu", block=16, num_warps=1, prefetch=prefetch,
                          flag_words=words)  # fmt: skip
    _check_forward_with_grad(logits, target, grad_loss, split=plan)


LOOPED_GRAD = {
    "16c-1w": WideLaunch(1, chunk=16),
    "16c-1w-unrolled": WideLaunch(1, chunk=16, unrolled=True),
    "32c-1w-unrolled-forwards": WideLaunch(1, chunk=32, unrolled=True, forwards=True),
}


@pytest.mark.parametrize("launch", list(LOOPED_GRAD))
@pytest.mark.parametrize(("rows", "vocab"), [(9, 37), (4, 16), (5, 1), (3, 16 * 32 - 5)])
def test_looped_forward_with_grad(launch, rows, vocab):
    """``cross_entropy_fwd_grad_looped_kernel`` on each launch: one and several chunks (a
    ragged last one, at most 32 unrolled), targets at the first and last column and on a chunk
    boundary, an ignored row, a -inf logit, into a poisoned buffer and in place."""
    gen = torch.Generator().manual_seed(31)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    target = random_target((rows,), vocab, gen)
    target[0], target[1], target[2 % rows] = 0, vocab - 1, min(16, vocab - 1)
    target[rows - 1] = IGNORE
    if vocab > 1:  # a masked class, not the target
        logits[0, vocab // 2 if vocab // 2 else 1] = float("-inf")
    grad_loss = torch.rand(rows, generator=gen) + 0.5
    _check_forward_with_grad(logits, target, grad_loss, looped=LOOPED_GRAD[launch])


def test_looped_forward_with_grad_routes_as_measured(monkeypatch):
    """2-byte rows of 16385-32768 classes of whole 16-byte vectors take the looped kernel in
    4096-column chunks, 64 registers a thread; float32, narrower, longer and unaligned rows
    keep the other kernels."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    launch = ce_module.fwd_grad_looped_launch
    assert launch(32000, 2).chunk == launch(16392, 2).chunk == launch(32768, 2).chunk == 4096
    assert launch(32000, 2).max_registers == 64
    assert launch(16384, 2) is launch(32769, 2) is launch(32001, 2) is launch(32000, 4) is None


@pytest.mark.interpreter
def test_looped_forward_with_grad_float16_and_the_table(monkeypatch):
    """fp16 rows through the looped kernel by default when ``FWD_GRAD_LOOPED_LAUNCHES`` lists
    their size (and only from the launch's ``min_n``); a looped launch needs a chunk and no
    other forced launch."""
    spy = LaunchSpy(kernels.cross_entropy_fwd_grad_looped_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_grad_looped_kernel", spy)
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    monkeypatch.setitem(ce_module.FWD_GRAD_LOOPED_LAUNCHES, 2, WideLaunch(2, min_n=200, chunk=64))
    gen = torch.Generator().manual_seed(32)
    for vocab, taken in ((199, 0), (200, 1), (517, 1)):
        spy.grids.clear()
        logits = (torch.randn(6, vocab, generator=gen) * 3).half().requires_grad_()
        target = random_target((6,), vocab, gen)
        loss = cross_entropy(logits, target, label_smoothing=0.05)
        (grad,) = torch.autograd.grad(loss, logits)
        assert len(spy.grids) == taken, vocab
        x64 = logits.detach().double().requires_grad_()
        want = reference_cross_entropy(x64, target, label_smoothing=0.05)
        (want_grad,) = torch.autograd.grad(want, x64)
        torch.testing.assert_close(loss.double(), want, atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(grad.double(), want_grad, atol=1e-3, rtol=1e-3)
    x = torch.randn(2, 40)
    t = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="looped: expected a launch with a chunk"):
        ce_module.row_losses(x, t, IGNORE, 0.0, 0.0, grad_out=torch.empty_like(x),
                             grad_loss=torch.ones(2), looped=WideLaunch(1))  # fmt: skip
    with pytest.raises(ValueError, match="looped: give one of launch, split and looped"):
        ce_module.row_losses(x, t, IGNORE, 0.0, 0.0, launch=(16, 1),
                             looped=WideLaunch(1, chunk=16))  # fmt: skip


@pytest.mark.interpreter
def test_looped_rows_take_the_split_where_their_gpu_measured_it(
    monkeypatch, fresh_plans, poison_outputs
):
    """On a GPU model ``SPLIT_OVER_LOOPED_BY_MODEL`` lists for their element size, rows of the
    looped launch's reach (made to be 200+ columns here) that fill 90% of their programs'
    columns get their gradient from the flag-word split plan (64-column chunks here: 250 and
    570 columns), rows off 16-byte boundaries counted from aligned addresses, matching float64
    through the op; rows that fill less (200 of 256, 517 of 576) keep the looped kernel,
    narrower rows and other element sizes their kernels, other GPU models the looped one."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    monkeypatch.setitem(ce_module.SPLIT_OVER_LOOPED_BY_MODEL, THIS_MACHINE, frozenset({2}))
    monkeypatch.setitem(ce_module.FWD_GRAD_LOOPED_LAUNCHES, 2, WideLaunch(2, min_n=200, chunk=64))
    small = (({"block": 64, "num_warps": 1, "programs_per_sm": 4}, 64),)
    monkeypatch.setattr(ce_module, "FLAG_WORDS_LAUNCHES", small)
    split, looped = spy_on(monkeypatch, "cross_entropy_fwd_grad_flags_kernel",
                           "cross_entropy_fwd_grad_looped_kernel")  # fmt: skip
    gen = torch.Generator().manual_seed(33)
    for vocab, taken in ((199, False), (200, False), (250, True), (517, False), (570, True)):
        split.grids.clear()
        looped.grids.clear()
        logits = (torch.randn(6, vocab, generator=gen) * 3).half().requires_grad_()
        target = random_target((6,), vocab, gen)
        loss = cross_entropy(logits, target, label_smoothing=0.05)
        (grad,) = torch.autograd.grad(loss, logits)
        assert (bool(split.grids), bool(looped.grids)) == (taken, vocab >= 200 and not taken)
        x64 = logits.detach().double().requires_grad_()
        want = reference_cross_entropy(x64, target, label_smoothing=0.05)
        (want_grad,) = torch.autograd.grad(want, x64)
        torch.testing.assert_close(loss.double(), want, atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(grad.double(), want_grad, atol=1e-3, rtol=1e-3)
    assert ce_module.fwd_grad_plan(6, 570, 2, torch.device("cpu")).block == 64
    assert ce_module.fwd_grad_plan(6, 570, 4, torch.device("cpu")) is None
    monkeypatch.delitem(ce_module.SPLIT_OVER_LOOPED_BY_MODEL, THIS_MACHINE)
    ce_module._split_over_looped.cache_clear()
    assert ce_module.fwd_grad_plan(6, 570, 2, torch.device("cpu")) is None


def test_looped_loss_only_forward_routes_as_measured(monkeypatch):
    """Loss only: 2-byte rows of 16385-32768 classes of whole 16-byte vectors take the
    unrolled 2048-column chunks on 8 warps; float32, narrower, longer and unaligned rows keep
    the rolled launch."""
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    launch = ce_module.fwd_looped_launch
    assert launch(32000, 2) == launch(16392, 2) == launch(32768, 2)
    assert (launch(32000, 2).chunk, launch(32000, 2).num_warps, launch(32000, 2).unrolled) == (
        2048,
        8,
        True,
    )
    assert launch(16384, 2) is launch(32769, 2) is launch(32001, 2) is launch(32000, 4) is None
    monkeypatch.setenv(WIDE_ROWS, "0")
    assert launch(32000, 2) is None


@pytest.mark.interpreter
def test_looped_loss_only_forward_float16_by_default(monkeypatch):
    """Loss-only fp16 rows (no gradient asked) of whole 16-byte vectors take the looped launch
    by default when ``FWD_LOOPED_LAUNCHES`` lists their size, from its ``min_n``, with the
    row's chunk count unrolled; against float64."""
    spy = LaunchSpy(kernels.cross_entropy_fwd_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_kernel", spy)
    monkeypatch.delenv(WIDE_ROWS, raising=False)
    monkeypatch.setitem(
        ce_module.FWD_LOOPED_LAUNCHES, 2, WideLaunch(2, min_n=300, chunk=64, unrolled=True)
    )
    gen = torch.Generator().manual_seed(34)
    # rows of whole 16-byte vectors below and from min_n; one that is not (the aligned kernel)
    for vocab, chunks in ((296, 0), (304, 5), (520, 9), (517, 0)):
        spy.launches.clear()
        logits = (torch.randn(6, vocab, generator=gen) * 3).half()
        target = random_target((6,), vocab, gen)
        target[0] = vocab - 1
        loss = cross_entropy(logits, target, label_smoothing=0.05, reduction="none")
        looped = [la for la in spy.launches if la.get("CHUNKS")]
        assert [(la["BLOCK"], la["CHUNKS"]) for la in looped] == ([(64, chunks)] if chunks else [])
        want = reference_cross_entropy(logits.double(), target, label_smoothing=0.05,
                                       reduction="none")  # fmt: skip
        torch.testing.assert_close(loss.double(), want, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("launch", list(LOOPED_GRAD))
@pytest.mark.parametrize(("rows", "vocab"), [(4, 16), (5, 1), (3, 16 * 32 - 5)])
def test_looped_loss_only_forward(launch, rows, vocab):
    """The loss-only forward kernel forced onto a looped launch (its chunks unrolled where the
    launch is): smoothing, z-loss, an ignored row, against float64."""
    gen = torch.Generator().manual_seed(33)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    target = random_target((rows,), vocab, gen)
    target[0], target[rows - 1] = vocab - 1, IGNORE
    loss, lse = ce_module.row_losses(logits, target, IGNORE, 0.1, 1e-3,
                                     looped=LOOPED_GRAD[launch])  # fmt: skip
    check_row_losses(loss, lse, logits, target)


@pytest.mark.parametrize("prefetch", [False, True], ids=["load", "prefetch"])
@pytest.mark.parametrize(
    ("rows", "vocab", "dtype"),
    [(9, 37, torch.float16), (5, 33, torch.float16), (6, 100, torch.float16),
     (4, 33 * 16 - 3, torch.float16), (5, 37, torch.float32), (6, 34, torch.float32)],
)  # fmt: skip
@pytest.mark.interpreter
def test_split_forward_with_grad_counts_chunks_from_aligned_addresses(rows, vocab, dtype, prefetch):
    """The flag-word split kernel over rows that start off 16-byte boundaries (ALIGN 8 in
    float16: 9 x 37 meets every lead 0-7; ALIGN 4 in float32) in 16-column chunks counted from
    each row's aligned address: the partial first and last vectors of each row through the
    edge tensor, targets in them, at the first and last column and a chunk boundary, and
    ignored; more rows than slots, smoothing and z-loss; into a NaN-poisoned buffer and in
    place; against float64."""
    from warpforge.ops._kernels import cross_entropy as kernels

    align = 16 // dtype.itemsize
    gen = torch.Generator().manual_seed(rows * vocab)
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to(dtype)
    target = random_target((rows,), vocab, gen)
    target[0], target[1], target[2], target[3] = 0, vocab - 1, 3, IGNORE
    target[4 % rows] = vocab - 2
    grad_loss = torch.rand(rows, generator=gen) + 0.5
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=0.01
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    plan = split_row_plan(rows, vocab + align - 1, "cpu", block=16, num_warps=1,
                          prefetch=prefetch, flag_words=True)  # fmt: skip
    spy = LaunchSpy(kernels.cross_entropy_fwd_grad_flags_kernel)
    tol = 2e-5 if dtype == torch.float32 else 2e-3
    for out in (torch.full_like(logits, float("nan")), logits.clone()):
        source = out if not out.isnan().any() else logits
        assert ce_module._aligned_split_align(source, out) == align
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(kernels, "cross_entropy_fwd_grad_flags_kernel", spy)
            loss, lse = ce_module.row_losses(
                source, target, IGNORE, 0.1, 0.01, grad_out=out, grad_loss=grad_loss, split=plan
            )
        torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=2e-4, rtol=2e-4)
        torch.testing.assert_close(lse.double(), logits.double().logsumexp(-1), atol=1e-4, rtol=0)
        torch.testing.assert_close(out.double(), expected, atol=tol / 2, rtol=tol)
    assert len(spy.grids) == 2 * 2  # two launches (stages) on the interpreter, two buffers
    strided = torch.empty(rows, vocab + 1, dtype=dtype)[:, :vocab]
    assert ce_module._aligned_split_align(logits, strided) == 1  # the gradient laid out otherwise


@pytest.mark.parametrize("early", [False, True], ids=["chunk0-target", "early-target"])
def test_split_forward_with_grad_early_and_late_target_loads(path, early, monkeypatch):
    """Both target paths of the split kernel (EARLY: every program loads its row's target one
    row ahead and the target logit itself) over ragged 16-column chunks, targets at the first,
    last and a chunk's first column and ignored, more rows than slots, into a poisoned buffer
    and in place."""
    monkeypatch.setattr(ce_module, "SPLIT_EARLY_TARGET", early)
    gen = torch.Generator().manual_seed(31)
    rows, vocab = 11, 53
    logits = torch.randn(rows, vocab, generator=gen) * 3
    target = random_target((rows,), vocab, gen)
    target[0], target[1], target[2], target[3] = 0, vocab - 1, 16, IGNORE
    grad_loss = torch.rand(rows, generator=gen) + 0.5
    plan = split_row_plan(rows, vocab, "cpu", block=16, num_warps=1, prefetch=True,
                          release_only=True)  # fmt: skip
    _check_forward_with_grad(logits, target, grad_loss, split=plan)


@pytest.mark.parametrize("rows", [1, 37])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_forward_with_grad_reductions_over_many_rows(path, rows, reduction, monkeypatch):
    """The forward-with-gradient op's single-program reductions (the mean's 1 / count, the
    reduced loss in the logits' dtype) over more rows than one (16-row) block, against float64;
    a mean over only ignored rows is NaN (as torch), its gradient 0."""
    monkeypatch.setattr(ce_module, "_reduction_launch", lambda n_rows: (16, 1))
    gen = torch.Generator().manual_seed(36 + rows)
    logits = torch.randn(rows, 5, generator=gen) * 2
    target = random_target((rows,), 5, gen, ignore_fraction=0.3)
    for t in (target, torch.full_like(target, IGNORE)):
        x = logits.half().requires_grad_()
        loss = cross_entropy(x, t, reduction=reduction)
        (grad,) = torch.autograd.grad(loss, x)
        x64 = x.detach().double().requires_grad_()
        expected = reference_cross_entropy(x64, t, reduction=reduction)
        (expected_grad,) = torch.autograd.grad(expected, x64)
        assert loss.dtype == torch.float16 and loss.shape == ()
        torch.testing.assert_close(loss.double(), expected, atol=2e-3, rtol=2e-3, equal_nan=True)
        torch.testing.assert_close(grad.double(), expected_grad, atol=1e-4, rtol=2e-3)


@pytest.mark.parametrize("rows", [1, 37])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.interpreter
def test_loss_only_forward_reduces_in_one_launch(path, rows, reduction, monkeypatch):
    """Without a gradient the reduced loss comes from the row kernel and one single-program
    reduction (sum, count, division, cast), over more rows than one (16-row) block, against
    float64; a mean over only ignored rows is NaN (as torch)."""
    monkeypatch.setattr(ce_module, "_reduction_launch", lambda n_rows: (16, 1))
    from warpforge.ops._kernels import cross_entropy as kernels

    spy = LaunchSpy(kernels.cross_entropy_reduce_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_reduce_kernel", spy)
    gen = torch.Generator().manual_seed(46 + rows)
    logits = (torch.randn(rows, 7, generator=gen) * 2).half()
    target = random_target((rows,), 7, gen, ignore_fraction=0.3)
    for t in (target, torch.full_like(target, IGNORE)):
        loss = cross_entropy(logits, t, reduction=reduction)
        expected = reference_cross_entropy(logits.double(), t, reduction=reduction)
        assert loss.dtype == torch.float16 and loss.shape == ()
        torch.testing.assert_close(loss.double(), expected, atol=2e-3, rtol=2e-3, equal_nan=True)
    assert len(spy.grids) == (2 if path == "triton" else 0)


SIGNALLING_NAN_BITS = 0x7F800001
"""A float32 signalling NaN: any arithmetic on it, even a multiplication by 1, quiets it."""


@pytest.mark.parametrize("rows", [1, 9])
def test_scaling_skips_unit_factors_and_scales_the_rest(path, rows, device):
    """The persistent scaling kernel: rows whose factor is exactly 1 are left untouched, every
    other row is scaled, with more rows than programs; one broadcast factor of 1 touches nothing,
    one other broadcast factor scales every row. Row 0 holds a signalling NaN: arithmetic on it
    (even times 1) gives a quiet NaN, a different bit pattern, so its bits show whether the row
    was left alone where the kernel runs (the reference path multiplies every row)."""
    gen = torch.Generator().manual_seed(33)
    grad = torch.randn(rows, 45, generator=gen).to(device)
    factors = (torch.rand(rows, generator=gen) + 0.5).to(device)
    factors[0] = 1.0
    grad.view(torch.int32)[0] = SIGNALLING_NAN_BITS  # set as bits: no float conversion on the way
    kernel_runs = ce_module.execution_path(grad.device) is not ExecutionPath.TORCH_REFERENCE
    expected = grad * factors[:, None]
    out = grad.clone()
    ce_module.scale_row_grads(out, factors)
    if kernel_runs:
        assert (out[0].view(torch.int32) == SIGNALLING_NAN_BITS).all()
    torch.testing.assert_close(out[1:], expected[1:])
    out = grad.clone()
    ce_module.scale_row_grads(out, torch.ones((), device=device))
    torch.testing.assert_close(out, grad, equal_nan=True)
    if kernel_runs:
        assert torch.equal(out.view(torch.int32), grad.view(torch.int32))
    out = grad.clone()
    ce_module.scale_row_grads(out, torch.full((), 0.25, device=device))
    torch.testing.assert_close(out, grad * 0.25, equal_nan=True)


def test_split_forward_with_grad_float16_and_masked_chunks():
    gen = torch.Generator().manual_seed(25)
    logits = torch.randn(5, 70, generator=gen) * 2
    logits[1, 16:48] = float("-inf")  # whole chunks of -inf: zero sums, never NaN
    target = torch.tensor([3, 60, IGNORE, 69, 16])
    x = logits.half()
    grad = torch.full_like(x, float("nan"))
    scale = torch.full((1,), 0.25)
    plan = split_row_plan(5, 70, "cpu", block=16, num_warps=1, prefetch=True)
    loss, _ = ce_module.row_losses(
        x, target, IGNORE, 0.0, 0.0, grad_out=grad, grad_loss=scale, split=plan
    )
    x64 = x.double().requires_grad_()
    expected_rows = reference_cross_entropy(x64, target, reduction="none")
    (expected,) = torch.autograd.grad(
        expected_rows, x64, torch.full((5,), 0.25, dtype=torch.float64)
    )
    torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(grad.double(), expected, atol=1e-3, rtol=1e-3)


def test_split_forward_with_grad_for_long_rows_of_two_and_four_bytes():
    cpu = torch.device("cpu")
    plan = ce_module._fwd_grad_split_plan
    assert plan(4, 40000, 4, cpu) is not None  # float32 past the whole-row block
    assert plan(4, 40000, 2, cpu) is not None  # bfloat16 / float16 too
    assert plan(4, 40000, 1, cpu) is None  # no 1-byte logits: the streaming backward
    assert plan(4, 32768, 4, cpu) is None  # fits the whole-row kernel
    assert plan(4, 40000, 2, cpu).flag_words and not plan(4, 40000, 4, cpu).flag_words
    assert ce_module.gradient_in_forward(4, 40000, 4, cpu)
    assert ce_module.gradient_in_forward(4, 40000, 2, cpu)
    assert ce_module.gradient_in_forward(4, 32000, 2, cpu)


def test_two_byte_rows_meet_through_flag_words_up_to_64_chunks(monkeypatch):
    """The 2-byte split plans on an H100: four 8192-column programs an SM with 4 warps each (128
    registers) meeting through flag words while a row has at most 64 chunks, then the counter
    (8 warps)."""
    from warpforge.ops import _split_rows
    from warpforge.runtime import DeviceCapabilities

    h100 = DeviceCapabilities("H100", (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
    monkeypatch.setattr(_split_rows, "device_capabilities", lambda device: h100)
    plan = ce_module._fwd_grad_split_plan.__wrapped__
    for vocab, block, warps, registers, chunks, words in (
        (40000, 8192, 4, 128, 5, True),
        (128256, 8192, 4, 128, 16, True),
        (262144, 8192, 4, 128, 32, True),
        (400000, 8192, 4, 128, 49, True),
        (600000, 8192, 8, 64, 74, False),
    ):
        p = plan(8192, vocab, 2, "cuda")
        got = (p.block, p.num_warps, p.max_registers, p.chunks, p.flag_words)
        assert got == (block, warps, registers, chunks, words), (vocab, p)
        assert p.programs <= 132 * 32 // p.num_warps and p.programs % p.chunks == 0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.interpreter
def test_long_rows_take_the_split_forward_with_grad(reduction, monkeypatch):
    """Past the whole-row block the public op writes the gradient in the forward through the
    split kernel (made to apply to small rows here), not the streaming backward."""
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    monkeypatch.setattr(
        ce_module, "_fwd_grad_split_plan",
        lambda n_rows, n_cols, size, device: split_row_plan(n_rows, n_cols, device, block=16, num_warps=1),
    )  # fmt: skip
    split_calls = []
    split_losses = ce_module._split_row_losses
    monkeypatch.setattr(
        ce_module, "_split_row_losses", lambda *a: split_calls.append(1) or split_losses(*a)
    )
    monkeypatch.setattr(ce_module, "row_grads", lambda *a, **k: pytest.fail("streamed backward"))
    gen = torch.Generator().manual_seed(26)
    # 44 columns: rows on 16-byte boundaries (unaligned ones take the flat backward instead)
    logits = torch.randn(3, 4, 44, generator=gen) * 3
    target = random_target((3, 4), 44, gen)
    target[0, 0] = 43
    check_forward_backward(
        logits, target, torch.float32, 2e-5,
        reduction=reduction, label_smoothing=0.1, z_loss=1e-3,
    )  # fmt: skip
    assert split_calls == [1]


def test_streaming_backward_covers_every_column_block(path):
    """The backward's (row, block) grid with several blocks per row and a ragged last block."""
    gen = torch.Generator().manual_seed(19)
    logits = torch.randn(4, 53, generator=gen) * 2
    target = torch.tensor([52, IGNORE, 0, 17])
    _, lse = ce_module.row_losses(logits, target, IGNORE, 0.0, 0.05)
    grad_loss = torch.rand(4, generator=gen) + 0.5
    poisoned = torch.full_like(logits, float("nan"))
    ce_module.row_grads(poisoned, logits, target, lse, grad_loss, IGNORE, 0.0, 0.05, launch=(16, 1))
    x64 = logits.double().requires_grad_()
    rows = reference_cross_entropy(x64, target, reduction="none", z_loss=0.05)
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    torch.testing.assert_close(poisoned.double(), expected, atol=2e-6, rtol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("vocab", [16, 33, 37, 80, 96])
def test_loss_only_forward_over_odd_and_even_chunk_counts(dtype, vocab):
    """The loss-only kernel folds two 16-column chunks a step (the second loaded while the
    first is folded in): 1 to 6 chunks, a ragged last one, a chunk of only -inf, the row max in
    the last chunk, label smoothing (the plain row sum), rows with a stride wider than V."""
    gen = torch.Generator().manual_seed(vocab)
    wide = torch.randn(6, vocab + 11, generator=gen) * 3
    wide[0, vocab - 1] = 12.0  # the row max in the last chunk
    if vocab > 32:
        wide[1, 16:32] = float("-inf")
    logits = wide[:, :vocab].to(dtype)  # row stride vocab + 11, last stride 1
    target = random_target((6,), vocab, gen)
    target[0] = vocab - 1
    loss, lse = ce_module.row_losses(logits, target, IGNORE, 0.1, 1e-3, launch=(16, 1))
    check_row_losses(loss, lse, logits, target)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("vocab", [1, 5, 16, 37, 256, 1000])
@pytest.mark.parametrize("short", [(4, 1), (16, 4)])
@pytest.mark.interpreter
def test_loss_only_forward_takes_short_rows_several_a_program(dtype, vocab, short, monkeypatch):
    """Short rows, ROWS a program (forced here up to 1000 classes; dispatched up to
    SHORT_ROWS_MAX_COLS): a ragged last program (37
    rows), rows with a stride wider than V, -inf logits, the row max first and last, label
    smoothing and z-loss, an ignored row, against float64."""
    from warpforge.ops._kernels import cross_entropy as kernels

    spy = LaunchSpy(kernels.cross_entropy_fwd_rows_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_rows_kernel", spy)
    gen = torch.Generator().manual_seed(vocab + 7 * short[0])
    wide = (torch.randn(37, vocab + 5, generator=gen) * 3).to(dtype)
    wide[0, vocab - 1] = wide[1, 0] = 12.0
    if vocab > 4:
        wide[2, 1:4] = float("-inf")
    logits = wide[:, :vocab]
    target = random_target((37,), vocab, gen)
    target[0], target[1], target[3] = vocab - 1, 0, IGNORE
    loss, lse = ce_module.loss_only_rows(logits, target, IGNORE, 0.1, 1e-3, short=short)
    check_row_losses(loss, lse, logits, target)
    assert spy.grids == [(-(-37 // short[0]),)]


@pytest.mark.interpreter
def test_loss_only_forward_dispatches_short_rows_up_to_the_measured_width(path):
    """The several-rows-a-program kernel serves rows of 1 to SHORT_ROWS_MAX_COLS classes on the
    kernels' path, and no row on the PyTorch path."""
    widths = (1, ce_module.SHORT_ROWS_MAX_COLS, ce_module.SHORT_ROWS_MAX_COLS + 1)
    taken = [ce_module._short_rows(torch.empty(3, n)) for n in widths]
    assert taken == ([True, True, False] if path == "triton" else [False] * 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("vocab", [1, 5, 16, 29, 37, 61, 80, 97])
@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.interpreter
def test_loss_only_forward_of_unaligned_rows_reads_aligned_chunks(dtype, vocab, offset,
                                                                  monkeypatch):  # fmt: skip
    """Rows that start off 16-byte boundaries (row stride vocab + 3) are read in 16-column
    chunks from the aligned address before each row: a row inside one chunk, rows across two
    to eight, the row max and -inf runs at both ends, label smoothing (the plain row sum),
    against float64. A buffer that is itself unaligned (``offset``) keeps the plain kernel."""
    from warpforge.ops._kernels import cross_entropy as kernels

    spy = LaunchSpy(kernels.cross_entropy_fwd_aligned_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_aligned_kernel", spy)
    gen = torch.Generator().manual_seed(vocab + 100 * offset)
    wide = (torch.randn(9, vocab + 3, generator=gen) * 3).to(dtype)
    flat = torch.empty(wide.numel() + 8, dtype=dtype)
    flat[offset : offset + wide.numel()] = wide.reshape(-1)
    rows = flat[offset : offset + wide.numel()].view(9, vocab + 3)
    rows[0, vocab - 1] = 12.0  # the row max in the last column
    rows[2, 0] = 12.0  # and in the first
    if vocab > 8:
        rows[1, :7] = float("-inf")
        rows[3, vocab - 7 : vocab] = float("-inf")
    logits = rows[:, :vocab]
    target = random_target((9,), vocab, gen)
    target[0], target[2] = vocab - 1, 0
    loss, lse = ce_module.loss_only_rows(logits, target, IGNORE, 0.1, 1e-3, launch=(16, 1))
    check_row_losses(loss, lse, logits, target)
    aligned = (vocab + 3) * logits.element_size() % 16 != 0 and logits.data_ptr() % 16 == 0
    assert len(spy.grids) == (1 if aligned else 0)


@pytest.mark.interpreter
def test_unaligned_loss_only_launch_follows_the_table(monkeypatch):
    """2-byte rows of 16385-65536 classes that start off 16-byte boundaries take
    ``ALIGNED_FWD_LAUNCHES``' launch; 4-byte rows and rows outside that range keep the tuned or
    heuristic one; a table entry moved onto a small fp16 row is taken by the op, against
    float64."""
    from warpforge.ops._kernels import cross_entropy as kernels

    launch = ce_module._aligned_fwd_launch
    assert launch(4096, 50257, torch.bfloat16, "cpu") == (1024, 4)
    assert launch(4096, 50257, torch.float32, "cpu") == ce_module.launch_heuristic(50257, 4)
    for n in (16383, 65537):
        assert launch(4096, n, torch.bfloat16, "cpu") == ce_module.launch_heuristic(n, 2)
    spy = LaunchSpy(kernels.cross_entropy_fwd_aligned_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_aligned_kernel", spy)
    monkeypatch.setitem(ce_module.ALIGNED_FWD_LAUNCHES, 2, WideLaunch(1, min_n=300, chunk=32))
    gen = torch.Generator().manual_seed(42)
    logits = (torch.randn(5, 301, generator=gen) * 3).half()
    target = random_target((5,), 301, gen)
    loss = cross_entropy(logits, target, label_smoothing=0.1, reduction="none")
    assert [(la["BLOCK"], la["num_warps"]) for la in spy.launches] == [(32, 1)]
    want = reference_cross_entropy(logits.double(), target, label_smoothing=0.1, reduction="none")
    torch.testing.assert_close(loss.double(), want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.interpreter
def test_long_unaligned_rows_take_the_aligned_forward_and_the_flat_backward(dtype, monkeypatch):
    """With ``WARPFORGE_CE_ALIGNED_SPLIT=0``, rows past the whole-row block that start off
    16-byte boundaries (made to apply to 41 columns here) skip the split forward with
    gradient: the aligned loss-only forward saves lse and the flat backward streams the
    logits, matching float64; aligned rows stay fused."""
    from warpforge.ops._kernels import cross_entropy as kernels

    monkeypatch.setenv(ce_module.ALIGNED_SPLIT, "0")
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    monkeypatch.setattr(ce_module, "gradient_in_forward", lambda *a: True)
    monkeypatch.setattr(ce_module, "FLAT_BWD_LAUNCHES", {4: (16, 1), 2: (16, 1)})
    monkeypatch.setattr(ce_module, "SHORT_ROWS_MAX_COLS", 0)  # 41 columns count as long here
    forward = LaunchSpy(kernels.cross_entropy_fwd_aligned_kernel)
    backward = LaunchSpy(kernels.cross_entropy_bwd_flat_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_aligned_kernel", forward)
    monkeypatch.setattr(kernels, "cross_entropy_bwd_flat_kernel", backward)
    gen = torch.Generator().manual_seed(41)
    logits = torch.randn(3, 5, 41, generator=gen) * 3
    target = random_target((3, 5), 41, gen)
    target[0, 0] = 40
    assert not ce_module._fused_gradient(logits.to(dtype).reshape(15, 41))
    tol = 2e-5 if dtype == torch.float32 else 2e-3
    check_forward_backward(logits, target, dtype, tol, label_smoothing=0.1, z_loss=1e-3)
    assert len(forward.grids) == 1 and len(backward.grids) == 1
    assert ce_module._fused_gradient(torch.randn(4, 48).to(dtype))  # rows on 16-byte boundaries


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.interpreter
def test_long_unaligned_rows_take_the_aligned_split(dtype, monkeypatch):
    """Rows past the whole-row block that start off 16-byte boundaries (made to apply to 45
    columns, in 16-column chunks) get their gradient in the forward from the flag-word split
    kernel counting chunks from aligned addresses (ALIGN 8 and 4; in float16 one chunk more
    than the row's start would need), in place of the op's own split plan (a counter plan in float32),
    matching float64 through the op's forward and backward."""
    from warpforge.ops._kernels import cross_entropy as kernels

    small = functools.lru_cache(maxsize=None)(
        lambda n_rows, n_cols, size, device, words: split_row_plan(
            n_rows, n_cols, device, block=16, num_warps=1, prefetch=True, flag_words=words
        )
    )  # cached, as the op's plans are: the op's own plan is the cached object
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    monkeypatch.setattr(ce_module, "gradient_in_forward", lambda *a: True)
    monkeypatch.setattr(ce_module, "_fwd_grad_split_plan",
                        lambda n_rows, n_cols, size, device: small(n_rows, n_cols, size, device,
                                                                   size == 2))  # fmt: skip
    monkeypatch.setattr(ce_module, "_flag_word_plan",
                        lambda n_rows, n_cols, size, device: small(n_rows, n_cols, size, device,
                                                                   True))  # fmt: skip
    spy = LaunchSpy(kernels.cross_entropy_fwd_grad_flags_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_grad_flags_kernel", spy)
    gen = torch.Generator().manual_seed(43)
    logits = torch.randn(3, 5, 45, generator=gen) * 3
    target = random_target((3, 5), 45, gen)
    target[0, 0], target[0, 1], target[0, 2] = 44, 0, 2
    assert ce_module._fused_gradient(logits.to(dtype).reshape(15, 45))
    tol = 2e-5 if dtype == torch.float32 else 2e-3
    check_forward_backward(logits, target, dtype, tol, label_smoothing=0.1, z_loss=1e-3)
    chunks = math.ceil((45 + 16 // dtype.itemsize - 1) / 16)  # float16: 4, one more than 45 need
    assert len(spy.grids) == 2 and all(grid[0] % chunks == 0 for grid in spy.grids)


@pytest.mark.interpreter
def test_float32_split_meets_through_flag_words_where_its_gpu_measured_it(
    monkeypatch, fresh_plans, poison_outputs
):
    """On a GPU model ``FLOAT32_FLAG_WORDS_BY_MODEL`` lists, float32 rows past the whole-row
    block (made 16 columns here) split over its flag-word launch (16-column chunks here) rather
    than the counter launch, matching float64 through the op; rows that start off 16-byte
    boundaries keep ``ALIGNED_FLOAT32_LAUNCHES``' plan (32-column chunks here), read from
    aligned addresses; other GPU models keep the counter launch."""
    words = (({"block": 16, "num_warps": 1, "programs_per_sm": 2, "prefetch": False}, 64),)
    aligned = (({"block": 32, "num_warps": 1, "programs_per_sm": 4, "prefetch": False}, 64),)
    monkeypatch.setattr(ce_module, "WHOLE_ROW_MAX_BLOCK", 16)
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    monkeypatch.setitem(ce_module.FLOAT32_FLAG_WORDS_BY_MODEL, THIS_MACHINE, words)
    monkeypatch.setattr(ce_module, "ALIGNED_FLOAT32_LAUNCHES", aligned)
    flags, counter = spy_on(monkeypatch, "cross_entropy_fwd_grad_flags_kernel",
                            "cross_entropy_fwd_grad_split_kernel")  # fmt: skip
    gen = torch.Generator().manual_seed(44)
    for vocab, block, align in ((48, 16, 1), (45, 32, 4)):
        flags.launches.clear()
        logits = torch.randn(6, vocab, generator=gen) * 3
        target = random_target((6,), vocab, gen)
        target[0], target[1] = 0, vocab - 1
        check_forward_backward(logits, target, torch.float32, 2e-5, label_smoothing=0.1)
        assert {(la["BLOCK"], la["ALIGN"]) for la in flags.launches} == {(block, align)}
    assert not counter.launches
    monkeypatch.delitem(ce_module.FLOAT32_FLAG_WORDS_BY_MODEL, THIS_MACHINE)
    ce_module._fwd_grad_split_plan.cache_clear()
    assert not ce_module._fwd_grad_split_plan(6, 48, 4, torch.device("cpu")).flag_words


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_long_rows_save_lse_for_the_streaming_backward(reduction, path, monkeypatch):
    """Past FUSED_GRAD_MAX_COLS the forward saves lse and the backward streams the logits (made
    to apply to small rows here), with grad_output applied in that one pass."""
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    backward_calls = []
    row_grads = ce_module.row_grads
    monkeypatch.setattr(
        ce_module, "row_grads", lambda *a, **k: backward_calls.append(1) or row_grads(*a, **k)
    )
    gen = torch.Generator().manual_seed(20)
    logits = torch.randn(3, 5, 41, generator=gen) * 3
    target = random_target((3, 5), 41, gen)
    target[0, 0] = 40
    check_forward_backward(
        logits, target, torch.float32, 2e-5,
        reduction=reduction, label_smoothing=0.1, z_loss=1e-3,
    )  # fmt: skip
    assert backward_calls == [1]
    small = torch.randn(4, 16, generator=gen, requires_grad=True)  # 16 columns: fused again
    cross_entropy(small, torch.tensor([0, 15, IGNORE, 3])).backward()
    assert backward_calls == [1]


def test_unit_grad_output_skips_scaling_and_keeps_user_logits(path):
    gen = torch.Generator().manual_seed(15)
    logits = (torch.randn(7, 45, generator=gen) * 2).requires_grad_()
    before = logits.detach().clone()
    target = random_target((7,), 45, gen)
    cross_entropy(logits, target, label_smoothing=0.1).backward()
    x64 = before.double().requires_grad_()
    (expected,) = torch.autograd.grad(
        reference_cross_entropy(x64, target, label_smoothing=0.1), x64
    )
    torch.testing.assert_close(logits.grad.double(), expected, atol=2e-6, rtol=2e-5)
    assert torch.equal(logits.detach(), before)


def test_backward_gets_no_zero_filled_gradient_for_the_gradient_output(path):
    """The forward's gradient output receives no gradient; autograd must not materialize a
    zero [rows, V] tensor for it (a full extra write of the logits' size in every backward)."""
    gen = torch.Generator().manual_seed(28)
    logits = (torch.randn(6, 50, generator=gen) * 2).requires_grad_()
    target = random_target((6,), 50, gen)
    loss = cross_entropy(logits, target)
    with torch.profiler.profile(record_shapes=True) as prof:
        (grad,) = torch.autograd.grad(loss, logits)
    filled = [e.name for e in prof.events() if [6, 50] in e.input_shapes and "zero" in e.name]
    assert filled == []
    x64 = logits.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(reference_cross_entropy(x64, target), x64)
    torch.testing.assert_close(grad.double(), expected, atol=2e-6, rtol=2e-5)


def test_second_backward_through_one_forward_raises(path):
    logits = torch.randn(3, 6, requires_grad=True)
    loss = cross_entropy(logits, torch.tensor([0, 1, 2]))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        loss.backward()


def test_forward_only_op_has_its_own_backward(path):
    """The op used without grad mode still differentiates (e.g. when called directly)."""
    gen = torch.Generator().manual_seed(16)
    logits = torch.randn(6, 77, generator=gen, requires_grad=True)
    target = random_target((6,), 77, gen)
    loss, _ = torch.ops.warpforge.cross_entropy_fwd(logits, target, IGNORE, 0.05, 0.02)
    grad_loss = torch.rand(6, generator=gen)
    (grad,) = torch.autograd.grad(loss, logits, grad_loss)
    x64 = logits.detach().double().requires_grad_()
    rows = reference_cross_entropy(x64, target, reduction="none", label_smoothing=0.05, z_loss=0.02)
    (expected,) = torch.autograd.grad(rows, x64, grad_loss.double())
    torch.testing.assert_close(grad.double(), expected, atol=2e-6, rtol=2e-5)


def test_kernel_gives_nan_for_out_of_range_target_instead_of_reading_out_of_bounds(path):
    logits = torch.randn(3, 8)
    target = torch.tensor([8, -5, 2])
    loss, _ = ce_module.row_losses(logits, target, IGNORE, 0.0, 0.0)
    assert math.isnan(loss[0]) and math.isnan(loss[1]) and not math.isnan(loss[2])


@settings(max_examples=12, deadline=None)
@given(
    rows=st.integers(1, 6),
    n_classes=st.integers(1, 70),
    smoothing=st.sampled_from([0.0, 0.1, 1.0]),
    z_loss=st.sampled_from([0.0, 1e-2]),
    reduction=st.sampled_from(["mean", "sum", "none"]),
    seed=st.integers(0, 2**16),
)
def test_property_matches_reference(rows, n_classes, smoothing, z_loss, reduction, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, n_classes, generator=gen) * 4
    target = random_target((rows,), n_classes, gen, ignore_fraction=0.1)
    target[0] = n_classes - 1  # at least one non-ignored row: mean stays finite
    check_forward_backward(
        logits, target, torch.float32, 3e-5,
        reduction=reduction, label_smoothing=smoothing, z_loss=z_loss,
    )  # fmt: skip


@pytest.mark.parametrize("strategy", ["fused", "split"])
def test_compiles_fullgraph_with_fake_kernels(strategy, monkeypatch):
    if strategy == "split":  # the forward saves lse, the backward op streams the logits
        monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 8)
    gen = torch.Generator().manual_seed(10)
    logits = torch.randn(5, 12, generator=gen, requires_grad=True)
    target = random_target((5,), 12, gen)

    def loss_fn(x, t):
        return cross_entropy(x, t, label_smoothing=0.1, z_loss=1e-3) * 2

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    loss = compiled(logits, target)
    (grad,) = torch.autograd.grad(loss, logits)
    eager = loss_fn(logits, target)
    (eager_grad,) = torch.autograd.grad(eager, logits)
    torch.testing.assert_close(loss, eager)
    torch.testing.assert_close(grad, eager_grad)


def test_long_unaligned_rows_compile_fullgraph(monkeypatch):
    """The choice of the aligned forward and the streaming backward for long rows off 16-byte
    boundaries (made to apply to 41 columns) traces under torch.compile(fullgraph=True), where
    tensors have no address."""
    monkeypatch.setattr(ce_module, "FUSED_GRAD_MAX_COLS", 16)
    monkeypatch.setattr(ce_module, "gradient_in_forward", lambda *a: True)
    gen = torch.Generator().manual_seed(13)
    logits = torch.randn(6, 41, generator=gen, requires_grad=True)
    target = random_target((6,), 41, gen)

    def loss_fn(x, t):
        return cross_entropy(x, t, label_smoothing=0.1)

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    loss = compiled(logits, target)
    (grad,) = torch.autograd.grad(loss, logits)
    x64 = logits.detach().double().requires_grad_()
    expected = reference_cross_entropy(x64, target, label_smoothing=0.1)
    (expected_grad,) = torch.autograd.grad(expected, x64)
    torch.testing.assert_close(loss.double(), expected, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(grad.double(), expected_grad, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_compiled_cpu_call_still_rejects_out_of_range_targets(path, grad, reduction):
    """The public function's value check is traced away under torch.compile; the ops' bodies
    run eagerly in the graph and raise there instead of returning NaN."""
    gen = torch.Generator().manual_seed(14)
    logits = torch.randn(4, 9, generator=gen, requires_grad=grad)
    target = torch.tensor([0, 9, IGNORE, 3])

    def loss_fn(x, t):
        with torch.set_grad_enabled(grad):
            return cross_entropy(x, t, reduction=reduction)

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    with pytest.raises(ValueError, match=r"target: expected class indices in \[0, 9\).*got 9"):
        compiled(logits, target)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_only_forward_compiles_fullgraph(reduction):
    """Without a gradient (inference, evaluation) the loss goes through the reduced or the
    per-row forward op, and both trace under torch.compile(fullgraph=True)."""
    gen = torch.Generator().manual_seed(12)
    logits = torch.randn(2, 5, 37, generator=gen).half()
    target = random_target((2, 5), 37, gen)

    def loss_fn(x, t):
        with torch.no_grad():
            return cross_entropy(x, t, reduction=reduction, label_smoothing=0.1)

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    got = compiled(logits, target)
    expected = reference_cross_entropy(
        logits.double(), target, reduction=reduction, label_smoothing=0.1
    )
    assert got.dtype == torch.float16 and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, atol=2e-3, rtol=2e-3)


def test_custom_ops_pass_opcheck():
    gen = torch.Generator().manual_seed(11)
    logits = torch.randn(4, 10, generator=gen, requires_grad=True)
    target = random_target((4,), 10, gen)
    torch.library.opcheck(
        torch.ops.warpforge.cross_entropy_fwd.default, (logits, target, IGNORE, 0.1, 0.01)
    )
    torch.library.opcheck(
        torch.ops.warpforge.cross_entropy_fwd_grad.default,
        (logits.detach(), target, IGNORE, 0.1, 0.01, "mean"),
    )
    torch.library.opcheck(
        torch.ops.warpforge.cross_entropy_fwd_reduced.default,
        (logits.detach(), target, IGNORE, 0.1, 0.01, "mean"),
    )
    torch.library.opcheck(
        torch.ops.warpforge.cross_entropy_scale_grad_.default,
        (torch.randn(4, 10, generator=gen), torch.rand(4, generator=gen)),
    )
    _, lse = ce_module.row_losses(logits.detach(), target, IGNORE, 0.1, 0.01)
    torch.library.opcheck(
        torch.ops.warpforge.cross_entropy_bwd.default,
        (torch.rand(4, generator=gen), logits.detach(), target, lse, IGNORE, 0.1, 0.01),
    )


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda x, t: cross_entropy(x.double(), t), TypeError, "logits: expected dtype"),
        (lambda x, t: cross_entropy(x, t.float()), TypeError, "target: expected dtype"),
        (lambda x, t: cross_entropy(x, t[:3]), ValueError, r"target: expected shape \(4,\)"),
        (
            lambda x, t: cross_entropy(x, t, reduction="avg"),
            ValueError,
            "reduction: expected one of",
        ),
        (lambda x, t: cross_entropy(x, t, label_smoothing=1.5), ValueError, "label_smoothing"),
        (lambda x, t: cross_entropy(x, t, label_smoothing=-0.1), ValueError, "label_smoothing"),
        (
            lambda x, t: cross_entropy(x, t, z_loss=-1e-4),
            ValueError,
            "z_loss: expected a finite number >= 0",
        ),
        (lambda x, t: cross_entropy(x, t, ignore_index=1.5), TypeError, "ignore_index"),
        (
            lambda x, t: cross_entropy(x, torch.tensor([0, 1, 6, 2])),
            ValueError,
            r"target: expected class indices in \[0, 6\).*got 6 at position \(2,\)",
        ),
        (lambda x, t: cross_entropy(x, torch.tensor([0, -1, 0, 2])), ValueError, "got -1"),
        (
            lambda x, t: cross_entropy(x[:, :0], t),
            ValueError,
            "logits: expected at least one class",
        ),
        (lambda x, t: cross_entropy(x.numpy(), t), TypeError, "logits: expected a torch.Tensor"),
    ],
)
def test_invalid_arguments_raise_naming_the_argument(call, error, match):
    logits = torch.randn(4, 6)
    target = torch.tensor([0, 5, IGNORE, 3])
    with pytest.raises(error, match=match):
        call(logits, target)


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape",
    [(64, 32000), (5, 16392), (7, 32768), (8, 128256), (3, 262144), (300, 5), (300, 50257),
     (37, 65537)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gpu_matches_reference(shape, dtype):
    """The op's forward and backward against float64, smoothing and z-loss; 50257 and 65537
    columns take the split forward with gradient from aligned addresses, 2-byte rows of
    16392-32768 the looped kernel or, on the H200, the split one
    (``SPLIT_OVER_LOOPED_BY_MODEL``)."""
    gen = torch.Generator().manual_seed(20)
    logits = torch.randn(shape, generator=gen) * 3
    target = random_target(shape[:-1], shape[-1], gen)
    x = logits.to("cuda", dtype).requires_grad_()
    t = target.cuda()
    loss = cross_entropy(x, t, label_smoothing=0.1, z_loss=1e-4, reduction="sum")
    (grad,) = torch.autograd.grad(loss, x)
    x64 = x.detach().double().requires_grad_()
    expected = reference_cross_entropy(x64, t, label_smoothing=0.1, z_loss=1e-4, reduction="sum")
    (expected_grad,) = torch.autograd.grad(expected, x64)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(loss.double(), expected, rtol=tol, atol=tol * shape[0])
    # gradient entries of about 1 / classes: the tolerance scaled to that size, at least
    # float16's subnormal step (about 6e-8) there
    grad_atol = max(tol / shape[-1], 1e-7)
    torch.testing.assert_close(grad.double(), expected_grad, rtol=tol, atol=grad_atol)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4099, 256), (37, 50257), (5, 151936), (11, 8191)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gpu_loss_only_forward(shape, dtype, reduction):
    """Without a gradient: the row kernel (aligned chunks where rows start off 16-byte
    boundaries: 50257 and 8191 columns) and the one-launch reduction, against float64."""
    gen = torch.Generator().manual_seed(shape[1] + 3)
    logits = (torch.randn(shape, generator=gen) * 3).to("cuda", dtype)
    target = random_target(shape[:-1], shape[-1], gen).cuda()
    loss = cross_entropy(logits, target, label_smoothing=0.05, reduction=reduction)
    expected = reference_cross_entropy(
        logits.double(), target, label_smoothing=0.05, reduction=reduction
    )
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    scale = 1 if reduction == "mean" else shape[0]
    torch.testing.assert_close(loss.double(), expected, rtol=tol, atol=tol * scale)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("rows", "vocab"), [(300, 32000), (5, 16392), (7, 32768)])
def test_gpu_looped_forward_with_grad(dtype, rows, vocab):
    """The looped forward with gradient on the GPU: the shipped launch (2-byte rows) and a
    rolled one, smoothing and z-loss, into a poisoned buffer and in place, against float64."""
    gen = torch.Generator().manual_seed(rows + vocab)
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", dtype)
    target = random_target((rows,), vocab, gen).cuda()
    target[0], target[1] = 0, vocab - 1
    grad_loss = (torch.rand(rows, generator=gen) + 0.5).cuda()
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=1e-4
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    shipped = ce_module.FWD_GRAD_LOOPED_LAUNCHES[2]
    for launch in (shipped, WideLaunch(8, chunk=2048)):
        for out in (torch.full_like(logits, float("nan")), logits.clone()):
            source = out if not out.isnan().any() else logits
            loss, _ = ce_module.row_losses(source, target, IGNORE, 0.1, 1e-4, grad_out=out,
                                           grad_loss=grad_loss, looped=launch)  # fmt: skip
            torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=tol, rtol=tol)
            torch.testing.assert_close(out.double(), expected, atol=tol * 1e-3, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("rows", "vocab"), [(300, 32000), (5, 16392), (7, 32768)])
def test_gpu_looped_loss_only_forward(dtype, rows, vocab):
    """The loss-only forward on the GPU on the shipped looped launch (2-byte rows) and a
    rolled one, and by default (no gradient asked): smoothing and z-loss against float64."""
    gen = torch.Generator().manual_seed(rows * vocab)
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", dtype)
    target = random_target((rows,), vocab, gen).cuda()
    target[0], target[1] = 0, vocab - 1
    for launch in (ce_module.FWD_LOOPED_LAUNCHES[2], WideLaunch(8, chunk=2048)):
        loss, lse = ce_module.row_losses(logits, target, IGNORE, 0.1, 1e-3, looped=launch)
        check_row_losses(loss, lse, logits, target)
    loss = cross_entropy(logits, target, label_smoothing=0.1, z_loss=1e-3, reduction="none")
    want = reference_cross_entropy(logits.double(), target, label_smoothing=0.1, z_loss=1e-3,
                                   reduction="none")  # fmt: skip
    tol = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(loss.double(), want, atol=tol, rtol=tol)  # in the logits' dtype


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_chunked_forward_with_grad_in_place(dtype):
    """The chunked forward-with-gradient kernel (rows longer than one block, as the fused linear
    cross entropy's chunks are at large vocabularies): a persistent grid of fewer programs than
    rows, writing the gradient over the logits."""
    gen = torch.Generator().manual_seed(23)
    rows, vocab = 300, 128256
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", dtype)
    target = random_target((rows,), vocab, gen).cuda()
    grad_loss = (torch.rand(rows, generator=gen) + 0.5).cuda()
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=1e-4
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    in_place = logits.clone()
    loss, _ = ce_module.row_losses(
        in_place, target, IGNORE, 0.1, 1e-4, grad_out=in_place, grad_loss=grad_loss
    )
    tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=tol, rtol=tol)
    torch.testing.assert_close(in_place.double(), expected, atol=tol * 1e-3, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("rows", "vocab"), [(700, 131072 + 5), (40, 262144), (500, 40000)])
def test_gpu_split_forward_with_grad(dtype, rows, vocab):
    """The split kernel's one-launch path (programs of a row meeting through the arrival
    counter, rows in several waves), in place over the logits, smoothing and z-loss."""
    gen = torch.Generator().manual_seed(27)
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", dtype)
    target = random_target((rows,), vocab, gen).cuda()
    target[0], target[1], target[2] = 0, vocab - 1, 32768  # first, last, a chunk's first
    grad_loss = (torch.rand(rows, generator=gen) + 0.5).cuda()
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=1e-4
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    plan = split_row_plan(rows, vocab, "cuda")
    in_place = logits.clone()
    loss, _ = ce_module.row_losses(
        in_place, target, IGNORE, 0.1, 1e-4, grad_out=in_place, grad_loss=grad_loss, split=plan
    )
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=tol, rtol=tol)
    torch.testing.assert_close(in_place.double(), expected, atol=tol * 1e-3, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("early", [False, True], ids=["chunk0-target", "early-target"])
@pytest.mark.parametrize("release", [False, True], ids=["acq-rel", "release"])
def test_gpu_split_forward_with_grad_target_loads_and_arrivals(early, release, monkeypatch):
    """The 2-byte split launch with both target paths and both arrival atomics, in place."""
    monkeypatch.setattr(ce_module, "SPLIT_EARLY_TARGET", early)
    gen = torch.Generator().manual_seed(35)
    rows, vocab = 500, 128256
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", torch.bfloat16)
    target = random_target((rows,), vocab, gen).cuda()
    target[0], target[1], target[2] = 0, vocab - 1, 4096
    grad_loss = (torch.rand(rows, generator=gen) + 0.5).cuda()
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(x64, target, reduction="none", label_smoothing=0.1)
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    plan = split_row_plan(rows, vocab, "cuda", block=4096, num_warps=4, programs_per_sm=8,
                          prefetch=True, release_only=release)  # fmt: skip
    in_place = logits.clone()
    loss, _ = ce_module.row_losses(
        in_place, target, IGNORE, 0.1, 0.0, grad_out=in_place, grad_loss=grad_loss, split=plan
    )
    torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=1.6e-2, rtol=1.6e-2)
    torch.testing.assert_close(in_place.double(), expected, atol=1.6e-5, rtol=1.6e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("broadcast", [False, True], ids=["per-row", "broadcast"])
@pytest.mark.parametrize(
    ("rows", "vocab"), [(100, 128256), (40, 262144), (37, 65536 + 24), (300, 50257), (9, 65537)]
)
def test_gpu_split_forward_with_grad_flag_words(rows, vocab, broadcast):
    """The op's 2-byte split launch meeting through flag words, rows in several waves (33 and
    16 rows in flight at 128256 and 262144 columns), targets at the first, last and a chunk's
    first and last column and ignored, per-row and broadcast grad_loss, smoothing and z-loss:
    into a NaN-poisoned buffer and in place over the logits. 50257 and 65537 columns start rows
    off 16-byte boundaries (chunks counted from aligned addresses, ALIGN 8)."""
    gen = torch.Generator().manual_seed(rows + vocab + broadcast)
    logits = (torch.randn(rows, vocab, generator=gen) * 3).to("cuda", torch.bfloat16)
    target = random_target((rows,), vocab, gen).cuda()
    target[0], target[1], target[2], target[3], target[4] = 0, vocab - 1, 8192, 8191, IGNORE
    if broadcast:
        grad_loss = torch.full((1,), 0.37, device="cuda").expand(rows)
    else:
        grad_loss = (torch.rand(rows, generator=gen) + 0.5).cuda()
    x64 = logits.double().requires_grad_()
    expected_rows = reference_cross_entropy(
        x64, target, reduction="none", label_smoothing=0.1, z_loss=1e-4
    )
    (expected,) = torch.autograd.grad(expected_rows, x64, grad_loss.double())
    plan = ce_module._fwd_grad_split_plan(rows, vocab, 2, logits.device)
    assert plan is not None and plan.chunks_pow2 <= split_rows.FLAG_WORDS_MAX_CHUNKS
    for out in (torch.full_like(logits, float("nan")), logits.clone()):
        source = out if not out.isnan().any() else logits
        loss, lse = ce_module.row_losses(
            source, target, IGNORE, 0.1, 1e-4, grad_out=out, grad_loss=grad_loss, split=plan
        )
        torch.testing.assert_close(loss.double(), expected_rows.detach(), atol=1.6e-2, rtol=1.6e-2)
        torch.testing.assert_close(
            lse.double(), logits.double().logsumexp(-1), atol=1e-4, rtol=1e-5
        )
        torch.testing.assert_close(out.double(), expected, atol=1.6e-5, rtol=1.6e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("vocab", [32000, 128256], ids=["fused", "split"])
def test_gpu_torch_compile_fullgraph_and_cuda_graph(vocab):
    gen = torch.Generator().manual_seed(21)
    logits = (torch.randn(128, vocab, generator=gen) * 2).cuda().to(torch.bfloat16).requires_grad_()
    target = random_target((128,), vocab, gen).cuda()

    def step(x, t):
        loss = cross_entropy(x, t, label_smoothing=0.1)
        (grad,) = torch.autograd.grad(loss, x)
        return loss, grad

    eager_loss, eager_grad = step(logits, target)
    compiled = torch.compile(lambda x, t: cross_entropy(x, t, label_smoothing=0.1), fullgraph=True)
    loss = compiled(logits, target)
    (grad,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(grad, eager_grad)

    static_x = logits.detach().clone().requires_grad_()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(static_x, target)  # warm-up compiles the kernels outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_loss, graph_grad = step(static_x, target)
    fresh = (torch.randn(128, vocab, generator=gen) * 2).cuda().to(torch.bfloat16)
    with torch.no_grad():
        static_x.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    expected_loss, expected_grad = step(fresh.clone().requires_grad_(), target)
    torch.testing.assert_close(graph_loss, expected_loss)
    torch.testing.assert_close(graph_grad, expected_grad)


@pytest.mark.gpu
def test_gpu_logits_beyond_2_pow_31_elements():
    rows, vocab = 8193, 262144  # 2.15e9 elements, 4.3 GB in bf16
    assert rows * vocab > 2**31
    gen = torch.Generator(device="cuda").manual_seed(22)
    logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16, generator=gen)
    logits.requires_grad_()
    target = torch.randint(0, vocab, (rows,), device="cuda", generator=gen)
    loss = cross_entropy(logits, target, reduction="none")
    (grad,) = torch.autograd.grad(loss, logits, torch.ones_like(loss))
    check_rows = torch.tensor([0, 4096, rows - 2, rows - 1], device="cuda")
    x64 = logits.detach()[check_rows].double().requires_grad_()
    expected = reference_cross_entropy(x64, target[check_rows], reduction="none")
    (expected_grad,) = torch.autograd.grad(expected, x64, torch.ones_like(expected))
    torch.testing.assert_close(loss[check_rows].double(), expected, rtol=1.6e-2, atol=2e-2)
    torch.testing.assert_close(grad[check_rows].double(), expected_grad, rtol=1.6e-2, atol=1e-6)


# The kernels a CUDA call can take, each with one target out of range: (rows, vocab, dtype,
# with a gradient): the loss-only row kernel, the short-row kernel (rows of <= 256 classes a
# tile), the forward writing the gradient, the aligned loss-only and split forward-with-
# gradient kernels of rows that start off 16-byte boundaries (vocab 50257).
BAD_TARGET_CASES = [
    (4, 100, torch.float32, False),
    (6, 256, torch.float32, False),
    (4, 100, torch.float32, True),
    (5, 50257, torch.bfloat16, False),
    (5, 50257, torch.bfloat16, True),
]
BAD_TARGET_IDS = ["loss-only", "short-rows", "gradient-in-forward", "unaligned", "unaligned-grad"]


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "vocab", "dtype", "grad"), BAD_TARGET_CASES, ids=BAD_TARGET_IDS)
def test_gpu_bad_target_without_checks_gives_its_row_nan(rows, vocab, dtype, grad, monkeypatch):
    """The documented default on CUDA (no host sync, no device assert): the row of a target
    outside [0, vocab) gets a NaN loss and gradient; the other rows stay right."""
    monkeypatch.delenv("WARPFORGE_CHECKS", raising=False)
    logits = torch.randn(rows, vocab, device="cuda", dtype=dtype).requires_grad_(grad)
    target = torch.randint(0, vocab, (rows,), device="cuda")
    target[1] = vocab  # one past the last class
    target[2] = IGNORE
    loss = cross_entropy(logits, target, reduction="none")
    good = [r for r in range(rows) if r != 1]
    assert loss[1].isnan()
    expected = reference_cross_entropy(logits.detach()[good], target[good], reduction="none")
    torch.testing.assert_close(loss[good].double(), expected, rtol=1.6e-2, atol=2e-2)
    if grad:
        (g,) = torch.autograd.grad(loss, logits, torch.ones_like(loss))
        assert g[1].isnan().all() and not g[good].isnan().any()
    assert cross_entropy(logits.detach(), target).isnan()  # the mean takes the NaN in


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "vocab", "dtype", "grad"), BAD_TARGET_CASES, ids=BAD_TARGET_IDS)
def test_gpu_bad_target_with_checks_stops_every_kernel(rows, vocab, dtype, grad):
    """WARPFORGE_CHECKS=1 on each kernel a call can take; a subprocess each."""
    assert_stops_on_bad_target(
        "import torch, warpforge.ops as ops\n"
        f"x = torch.randn({rows}, {vocab}, device='cuda', dtype={dtype}).requires_grad_({grad})\n"
        f"t = torch.zeros({rows}, dtype=torch.long, device='cuda')\n"
        f"t[{rows - 1}] = {vocab}\n"
        "loss = ops.cross_entropy(x, t)\n"
        "torch.cuda.synchronize()\n"
        "print('no assert, loss', loss.item())\n"
    )
