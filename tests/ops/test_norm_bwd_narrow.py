"""The norm backward of rows of 16385-65535 columns: the lagged split-row kernel
(``norm_bwd_lag_flags_kernel``, dx of a row written one iteration after its sums are
published) at wide rows, and the dispatch of :data:`warpforge.ops.norm.NORM_BWD_NARROW`.
Against float64 formulas, on poisoned outputs; the interpreter runs the two-launch fallback.
The lagged kernel's small-chunk cases run with the other split backwards in
``test_norm_split_bwd.py``."""

from __future__ import annotations

import pytest
import torch
from test_norm_split_bwd import KINDS, _gradients, check, expected, operands

import warpforge.ops._kernels.norm_lag_bwd
import warpforge.ops._kernels.norm_split_bwd
from launch_spy import LaunchSpy
from warpforge.ops import norm
from warpforge.ops._split_rows import split_row_plan


@pytest.mark.parametrize(("N", "dtype", "grads"), [(16411, torch.float16, True),
                                                   (32768, torch.float32, False),
                                                   (40009, torch.float32, False)])  # fmt: skip
@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
def test_lag_backward_wide_rows(center, residual, N, dtype, grads, device, poison_outputs):
    """Rows of the narrow split's widths at a launch of a few wide chunks (ragged at 16411 and
    40009), more rows than slots. dweight / dbias at one width only: under the interpreter
    their partial sums (N / 16 programs each) take most of the time."""
    M = 5
    plan = split_row_plan(M, N, device, block=4096, num_warps=4, flag_words=True)
    x, dy, dh, w, mean, rstd = operands(M, N, dtype, device, None, 20.0 if center else 0.0)
    dh = dh if residual else None
    want = expected(dy, x, w, mean, rstd, dh, 0.5, center)
    for run in (norm.lag_norm_backward, norm.split_norm_backward):
        got = run(dy, x, w, mean if center else None, rstd, dh, 0.5, center, grads,
                  grads and center, plan)  # fmt: skip
        check(got, want, dtype, grads, grads and center)


@pytest.mark.parametrize(("op", "kernel"), [("rms", "lag"), ("add_rms", "flags"),
                                            ("layer", "lag")])  # fmt: skip
def test_public_ops_take_the_narrow_split_where_listed(op, kernel, monkeypatch, device):
    """A family listed in NORM_BWD_NARROW takes its kernel from NORM_BWD_NARROW_MIN_N columns
    with the autograd result of the other kernels; narrower rows, unlisted families and
    WARPFORGE_NORM_BWD_SPLIT=0 keep the others."""
    module = (warpforge.ops._kernels.norm_lag_bwd if kernel == "lag"
              else warpforge.ops._kernels.norm_split_bwd)  # fmt: skip
    name = "norm_bwd_lag_flags_kernel" if kernel == "lag" else "norm_bwd_flags_kernel"
    spy = LaunchSpy(getattr(module, name))
    monkeypatch.setattr(module, name, spy)
    family = {"rms": "rms_norm", "add_rms": "add_rms_norm", "layer": "layer_norm"}[op]
    launch = {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": True}
    monkeypatch.setattr(norm, "NORM_BWD_NARROW", {(family, 4): ((kernel, launch, 0, 65535),)})
    monkeypatch.delenv(norm.NORM_BWD_NARROW_ENV, raising=False)
    monkeypatch.delenv(norm.NORM_BWD_SPLIT, raising=False)
    norm.norm_bwd_narrow_plan.cache_clear()
    M, N = 3, norm.NORM_BWD_NARROW_MIN_N + 2
    x, dy, r, w, _, _ = operands(M, N, torch.float32, device)
    b = torch.randn(N, device=device)
    got = _gradients(op, x, r, w, b, dy)
    assert len(spy.grids) == (2 if device.type == "cpu" else 1)
    spy.grids.clear()
    monkeypatch.setenv(norm.NORM_BWD_SPLIT, "0")
    other = _gradients(op, x, r, w, b, dy)
    assert not spy.grids
    for g, o in zip(got, other, strict=True):
        torch.testing.assert_close(g, o, atol=1e-4, rtol=1e-4)
    monkeypatch.delenv(norm.NORM_BWD_SPLIT)
    n = norm.NORM_BWD_NARROW_MIN_N - 1
    _gradients(op, x[:, :n], r[:, :n], w[:n], b[:n], dy[:, :n])
    assert not spy.grids
    monkeypatch.setattr(norm, "NORM_BWD_NARROW", {})
    norm.norm_bwd_narrow_plan.cache_clear()
    _gradients(op, x, r, w, b, dy)
    assert not spy.grids
    norm.norm_bwd_narrow_plan.cache_clear()


@pytest.mark.gpu
@pytest.mark.parametrize(("center", "residual"), KINDS, ids=["rms", "add_rms", "layer"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    ("M", "N"), [(300, 32768), (37, 40009), (64, 65536), (29, 16411), (19, 131072), (11, 262144)]
)
def test_narrow_backward_gpu(center, residual, dtype, M, N, poison_outputs):
    """The one-launch meetings of both kernels at the table's plan (else the default split
    plan) and the swept launches (bf16 and fp32, the dtypes the table serves), bitwise the
    same on a second run."""
    x, dy, dh, w, mean, rstd = operands(M, N, dtype, "cuda", shift=20.0 if center else 0.0)
    dh = dh if residual else None
    want = expected(dy, x, w, mean, rstd, dh, 0.0, center)
    family = "layer_norm" if center else "add_rms_norm" if residual else "rms_norm"
    runs = []
    narrow = norm.norm_bwd_narrow_plan(family, M, N, dtype.itemsize, "cuda")
    if narrow is not None:
        runs.append((norm.lag_norm_backward if narrow[0] == "lag" else norm.split_norm_backward,
                     narrow[1]))  # fmt: skip
    elif (default := norm.norm_bwd_split_plan(M, N, dtype.itemsize, "cuda")) is not None:
        runs.append((norm.split_norm_backward, default))  # widths the table leaves to it
    for launch in GPU_LAUNCHES:
        p = split_row_plan(M, N, "cuda", **launch, flag_words=True)
        if p is not None and p.chunks_pow2 <= 64:
            runs += [(norm.lag_norm_backward, p), (norm.split_norm_backward, p)]
    assert runs
    for run, p in runs:
        got = run(dy, x, w, mean, rstd, dh, 0.0, center, True, center, p)
        check(got, want, dtype, True, center)
        again = run(dy, x, w, mean, rstd, dh, 0.0, center, True, center, p)
        for g, g2 in zip(got, again, strict=True):  # no atomics in any sum
            assert torch.equal(g, g2)


GPU_LAUNCHES = ({"block": 2048, "num_warps": 8, "programs_per_sm": 2, "prefetch": True},)


def test_narrow_table_from_the_environment(monkeypatch):
    """WARPFORGE_NORM_BWD_NARROW replaces the table (sweeps); a malformed item is an error."""
    env = norm.NORM_BWD_NARROW_ENV
    monkeypatch.setenv(env, "rms_norm:2=lag/2048/8/2/0/32768/65536; layer_norm:4=flags/4096/4/2/1/0/65535;"
                            "rms_norm:2=flags/1024/4/4/1/16385/32767")  # fmt: skip
    table = norm._narrow_table()
    assert table == {
        ("rms_norm", 2): (
            ("lag", {"block": 2048, "num_warps": 8, "programs_per_sm": 2, "prefetch": False},
             32768, 65536),
            ("flags", {"block": 1024, "num_warps": 4, "programs_per_sm": 4, "prefetch": True},
             16385, 32767),
        ),
        ("layer_norm", 4): (
            ("flags", {"block": 4096, "num_warps": 4, "programs_per_sm": 2, "prefetch": True},
             0, 65535),
        ),
    }  # fmt: skip
    monkeypatch.setenv(env, "none")
    assert norm._narrow_table() == {}
    for bad in ("rms_norm=lag/1/2/3/4/5/6", "rms_norm:2=lag/1/2", "rms_norm:2=fast/1/2/3/4/5/6"):
        monkeypatch.setenv(env, bad)
        with pytest.raises(ValueError, match=env):
            norm._narrow_table()


@pytest.fixture
def narrow_plan(monkeypatch):
    """``narrow_plan(model, family, M, N, element_size)``: the (kernel, block) that
    ``norm_bwd_narrow_plan`` picks on an sm_90 GPU of 132 SMs named ``model`` (None: no split),
    from the tables in the code unless a test sets the environment's."""
    import warpforge.ops._split_rows as split_rows
    from warpforge.runtime import DeviceCapabilities

    monkeypatch.delenv(norm.NORM_BWD_NARROW_ENV, raising=False)

    def plan(model, family, M, N, element_size):
        gpu = DeviceCapabilities(model, (9, 0), 132, 50 * 2**20, 80 * 2**30, 232448)
        monkeypatch.setattr(split_rows, "device_capabilities", lambda device: gpu)
        norm.norm_bwd_narrow_plan.cache_clear()  # plans are cached per shape, not per model
        got = norm.norm_bwd_narrow_plan(family, M, N, element_size, "cuda")
        return None if got is None else (got[0], got[1].block)

    return plan


def test_an_h200_takes_its_own_bf16_entries_and_the_shared_rest(narrow_plan, monkeypatch):
    """On an H200 the bf16 backward takes NORM_BWD_NARROW_BY_MODEL's entries (the lagged kernel
    for all three from 32768 columns, in 1024-column programs under 65536, RMSNorm's and
    add+RMSNorm's there in 8192-column programs), and float32 rows of 65537-131072 columns the
    flags kernel in 8192-column programs; narrower rows keep the shared table and float32 rows
    past 131072 the split default; the environment's table still replaces both."""

    def plan(family, N, element_size=2):
        return narrow_plan("NVIDIA H200", family, 8192, N, element_size)

    assert plan("rms_norm", 32767) == ("flags", 2048)
    assert plan("rms_norm", 65536) == plan("rms_norm", 131072) == ("lag", 2048)
    assert plan("rms_norm", 262144) == ("lag", 8192)
    for family in ("rms_norm", "add_rms_norm", "layer_norm"):
        assert plan(family, 32768) == plan(family, 40009) == plan(family, 65535) == ("lag", 1024)
    assert plan("add_rms_norm", 65536) == ("lag", 2048)
    assert plan("add_rms_norm", 262144) == ("lag", 8192)
    assert plan("layer_norm", 65536) == plan("layer_norm", 131071) == ("lag", 2048)
    assert plan("layer_norm", 131072) == ("lag", 4096)
    assert plan("layer_norm", 262144) == ("lag", 4096)
    assert plan("rms_norm", 65536, 4) is None  # float32: the shared table's
    assert plan("layer_norm", 65536, 4) == ("flags", 2048)
    for family in ("rms_norm", "add_rms_norm", "layer_norm"):
        assert plan(family, 32768, 4) == ("flags", 4096 if family != "layer_norm" else 2048)
        assert plan(family, 65537, 4) == plan(family, 131072, 4) == ("flags", 8192)
        assert plan(family, 131073, 4) is None
    monkeypatch.setenv(norm.NORM_BWD_NARROW_ENV, "none")
    assert plan("add_rms_norm", 65536) is None


@pytest.mark.parametrize("element_size", [2, 4])
def test_narrow_plans_pick_the_first_choice_holding_the_width(element_size, narrow_plan):
    """The shipped table on an H100-like GPU: bf16 RMSNorm takes the flags kernel under 32768
    columns and the lagged one from there to 131072; add+RMSNorm the flags kernel at 8192
    columns over 131072; LayerNorm only from 32768 columns. float32
    takes the flags kernel only: at 2048 columns under 32768, at 4096 from there to 65535, and
    LayerNorm at 2048 to 65536; nothing under NORM_BWD_NARROW_MIN_N."""

    def plan(family, N):
        return narrow_plan("H100", family, 4096, N, element_size)

    if element_size == 4:
        for family in ("rms_norm", "add_rms_norm"):
            assert plan(family, 16384) is None
            assert plan(family, 16385) == ("flags", 2048)
            assert plan(family, 32767) == ("flags", 2048)
            assert plan(family, 32768) == ("flags", 4096)
            assert plan(family, 65535) == ("flags", 4096)
            assert plan(family, 65536) is None
        assert plan("layer_norm", 16384) is None
        assert plan("layer_norm", 16385) == ("flags", 2048)
        assert plan("layer_norm", 65536) == ("flags", 2048)
        assert plan("layer_norm", 65537) is None
        return
    assert plan("rms_norm", 16384) is None
    assert plan("rms_norm", 16385) == ("flags", 2048)
    assert plan("rms_norm", 32767) == ("flags", 2048)
    assert plan("rms_norm", 32768) == ("lag", 2048)
    assert plan("rms_norm", 65536) == ("lag", 2048)
    assert plan("rms_norm", 131072) == ("lag", 2048)
    assert plan("rms_norm", 131073) is None
    assert plan("add_rms_norm", 40009) == ("flags", 4096)
    assert plan("add_rms_norm", 65536) is None
    assert plan("add_rms_norm", 131072) is None
    assert plan("add_rms_norm", 131073) == ("flags", 8192)
    assert plan("add_rms_norm", 262144) == ("flags", 8192)
    assert plan("add_rms_norm", 262145) is None
    assert plan("layer_norm", 32767) is None
    assert plan("layer_norm", 32768) == ("flags", 4096)
