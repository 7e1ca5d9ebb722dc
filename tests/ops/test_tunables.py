"""The op kernels read their launch configs from warpforge.tune, and tune from its CLI."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from launch_spy import LaunchSpy
from warpforge import ops
from warpforge.cli import app
from warpforge.ops import norm, softmax_ops, tunables
from warpforge.ops._kernels import norm as norm_kernels
from warpforge.tune import lookup
from warpforge.tune.database import PerfDatabase
from warpforge.tune.search import Trial
from warpforge.tune.tunable import device_fingerprint, get_tunable

cross_entropy_module = importlib.import_module("warpforge.ops.cross_entropy")
LAUNCH_CACHES = (
    norm._fwd_launch_config,
    norm._bwd_launch_config,
    softmax_ops._fwd_launch_config,
    softmax_ops._bwd_launch_config,
    cross_entropy_module._fwd_launch_config,
)


@pytest.fixture(autouse=True)
def private_lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A fresh lookup over an empty shipped directory and a database in ``tmp_path``."""
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    monkeypatch.setenv("WARPFORGE_DB_URL", url)
    monkeypatch.setenv("WARPFORGE_TUNE_DB", "1")
    (tmp_path / "shipped").mkdir()
    monkeypatch.setattr(lookup, "_LOOKUP", lookup.ConfigLookup(shipped_dir=tmp_path / "shipped"))
    for cache in LAUNCH_CACHES:
        cache.cache_clear()
    yield url
    for cache in LAUNCH_CACHES:
        cache.cache_clear()


def _store_best(url: str, kernel: str, features: dict, config: dict) -> None:
    with PerfDatabase(url) as db:
        db.record_trial(
            kernel=kernel,
            source_hash=get_tunable(kernel).source_hash,
            device=device_fingerprint("cpu"),
            features=features,
            trial=Trial(config, "ok", 1e-6),
        )


def _rms_norm64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + 1e-6) * w.double()


def _spy_rms_norm(monkeypatch: pytest.MonkeyPatch) -> tuple[LaunchSpy, torch.Tensor]:
    spy = LaunchSpy(norm_kernels.norm_fwd_rows_kernel)
    monkeypatch.setattr(norm_kernels, "norm_fwd_rows_kernel", spy)
    x, w = torch.randn(5, 37), torch.randn(37)
    y = ops.rms_norm(x, w)
    torch.testing.assert_close(y.double(), _rms_norm64(x, w), rtol=1e-5, atol=1e-5)
    return spy, y


@pytest.mark.usefixtures("private_lookup")
@pytest.mark.interpreter
def test_heuristic_is_the_default_config(monkeypatch: pytest.MonkeyPatch) -> None:
    spy, _ = _spy_rms_norm(monkeypatch)
    heuristic = norm.fwd_launch_heuristic(5, 37, torch.float32, "cpu")
    (launch,) = spy.launches
    assert (launch["ROWS"], launch["num_warps"], launch["BLOCK_N"]) == (
        heuristic.rows_per_program,
        heuristic.num_warps,
        heuristic.block_n,
    )


@pytest.mark.interpreter
def test_a_stored_config_changes_the_launch(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    heuristic = norm.fwd_launch_heuristic(5, 37, torch.float32, "cpu")
    tuned = {"BLOCK_N": 64, "ROWS": 2, "num_warps": 2}
    assert tuned != tunables.row_config_dict(heuristic)
    _store_best(private_lookup, "rms_norm.fwd", {"M": 5, "N": 37, "dtype": "float32"}, tuned)
    spy, _ = _spy_rms_norm(monkeypatch)
    (launch,) = spy.launches
    assert (launch["BLOCK_N"], launch["ROWS"], launch["num_warps"]) == (64, 2, 2)
    assert launch["grid"] == (3,)  # ceil(5 rows / 2 per program)


@pytest.mark.interpreter
def test_a_stored_cross_entropy_config_changes_the_launch(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warpforge.ops._kernels import cross_entropy as kernels

    _store_best(
        private_lookup, "cross_entropy.fwd", {"M": 3, "V": 300, "dtype": "float32"},
        {"BLOCK": 64, "num_warps": 2},
    )  # fmt: skip
    spy = LaunchSpy(kernels.cross_entropy_fwd_kernel)
    monkeypatch.setattr(kernels, "cross_entropy_fwd_kernel", spy)
    logits, target = torch.randn(3, 300), torch.randint(0, 300, (3,))
    loss = ops.cross_entropy(logits, target, reduction="none")
    expected = torch.nn.functional.cross_entropy(logits.double(), target, reduction="none")
    torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-5)
    (launch,) = spy.launches
    assert (launch["BLOCK"], launch["num_warps"]) == (64, 2)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.interpreter
def test_a_stored_softmax_backward_config_changes_the_launch(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch, log: bool
) -> None:
    """softmax.bwd's tuned launch reaches the backward row kernel of softmax and log-softmax
    (they share it), and the gradient stays exact."""
    from warpforge.ops._kernels import softmax as softmax_kernels

    heuristic = softmax_ops.bwd_launch_heuristic(5, 37, torch.float32, "cpu")
    tuned = {"BLOCK_N": 64, "ROWS": 2, "num_warps": 2}
    assert tuned != tunables.row_config_dict(heuristic)
    features = {"M": 5, "N": 37, "dtype": "float32"}
    assert get_tunable("softmax.bwd").space.rejection(tuned, features) is None
    _store_best(private_lookup, "softmax.bwd", features, tuned)
    spy = LaunchSpy(softmax_kernels.softmax_bwd_rows_kernel)
    monkeypatch.setattr(softmax_kernels, "softmax_bwd_rows_kernel", spy)
    x, dy = torch.randn(5, 37), torch.randn(5, 37)
    leaf = x.clone().requires_grad_()
    (got,) = torch.autograd.grad((ops.log_softmax if log else ops.softmax)(leaf), leaf, dy)
    leaf64 = x.double().requires_grad_()
    y64 = (torch.log_softmax if log else torch.softmax)(leaf64, -1)
    (want,) = torch.autograd.grad(y64, leaf64, dy.double())
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    (launch,) = spy.launches
    assert (launch["BLOCK_N"], launch["ROWS"], launch["num_warps"]) == (64, 2, 2)
    assert launch["grid"] == (3,)  # ceil(5 rows / 2 per program)


@pytest.mark.interpreter
def test_softmax_backward_trials_run_the_row_kernel_where_the_op_takes_a_tile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trial's launch runs the row kernel it configures, for softmax's backward and then
    log-softmax's (they share the launch, so a trial times both), also at a row length whose
    op call takes the tile kernel (``BWD_TILE_LAUNCHES``), and both match the float64
    gradients."""
    from warpforge.ops._kernels import softmax as softmax_kernels

    assert (4, 256, False) in softmax_ops.BWD_TILE_LAUNCHES
    tunable = get_tunable("softmax.bwd")
    features = {"M": 6, "N": 256, "dtype": "float32"}
    dy, y, log_y = tunable.make_inputs(
        {"M": 6, "N": 256}, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(5)
    )
    # softmax and log-softmax outputs of one x, as the two ops save them
    torch.testing.assert_close(y.sum(-1), torch.ones(6))
    torch.testing.assert_close(log_y.exp(), y)
    rows, tile = (LaunchSpy(getattr(softmax_kernels, name)) for name in
                  ("softmax_bwd_rows_kernel", "softmax_bwd_tile_kernel"))  # fmt: skip
    monkeypatch.setattr(softmax_kernels, "softmax_bwd_rows_kernel", rows)
    monkeypatch.setattr(softmax_kernels, "softmax_bwd_tile_kernel", tile)
    config = {"BLOCK_N": 256, "ROWS": 2, "num_warps": 4}
    assert tunable.space.rejection(config, features) is None
    got_softmax, got_log = tunable.run(config, dy, y, log_y)
    want_softmax, want_log = tunable.reference(dy.double(), y.double(), log_y.double())
    dy64, y64 = dy.double(), y.double()
    torch.testing.assert_close(want_softmax, y64 * (dy64 - (dy64 * y64).sum(-1, keepdim=True)))
    torch.testing.assert_close(want_log, dy64 - y64 * dy64.sum(-1, keepdim=True))
    torch.testing.assert_close(got_softmax.double(), want_softmax, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_log.double(), want_log, rtol=1e-5, atol=1e-6)
    assert [launch["ROWS"] for launch in rows.launches] == [2, 2] and not tile.launches
    assert [launch["LOG"] for launch in rows.launches] == [False, True]
    softmax_ops.softmax_backward(dy, y, False)  # the op's own dispatch: the tile kernel
    assert len(tile.launches) == 1 and len(rows.launches) == 2


@pytest.mark.interpreter
def test_a_config_the_space_rejects_is_not_used(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ROWS=2 with a chunk narrower than the row: the chunked kernel takes one row per program
    bad = {"BLOCK_N": 16, "ROWS": 2, "num_warps": 1}
    assert get_tunable("rms_norm.fwd").space.rejection(bad, {"M": 5, "N": 37}) is not None
    _store_best(private_lookup, "rms_norm.fwd", {"M": 5, "N": 37, "dtype": "float32"}, bad)
    spy, _ = _spy_rms_norm(monkeypatch)
    heuristic = norm.fwd_launch_heuristic(5, 37, torch.float32, "cpu")
    assert spy.launches[0]["ROWS"] == heuristic.rows_per_program


@pytest.mark.interpreter
def test_a_broken_database_never_breaks_an_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("WARPFORGE_DB_URL", f"sqlite:///{garbage}")
    spy, _ = _spy_rms_norm(monkeypatch)
    heuristic = norm.fwd_launch_heuristic(5, 37, torch.float32, "cpu")
    assert spy.launches[0]["num_warps"] == heuristic.num_warps


def test_a_failing_lookup_never_breaks_an_op(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args, **kwargs):
        raise RuntimeError("lookup exploded")

    monkeypatch.setattr(lookup, "config_for", explode)
    x = torch.randn(4, 50)
    torch.testing.assert_close(
        ops.softmax(x).double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-6
    )


@pytest.mark.interpreter
def test_launch_configs_are_cached_per_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = tunables.tuned_config

    def counting(kernel, *args, **kwargs):
        calls.append(kernel)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(tunables, "tuned_config", counting)
    x, w = torch.randn(3, 20), torch.randn(20)
    for _ in range(3):
        ops.rms_norm(x, w)
    ops.rms_norm(torch.randn(4, 20), w)
    assert calls == ["rms_norm.fwd", "rms_norm.fwd"]  # one lookup per shape


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("rms_norm.fwd", "M=3,N=20"),
        ("rms_norm.bwd", "M=3,N=20"),
        ("add_rms_norm.fwd", "M=3,N=20"),
        ("add_rms_norm.bwd", "M=3,N=20"),
        ("layer_norm.fwd", "M=2,N=9"),
        ("layer_norm.bwd", "M=2,N=9"),
        ("softmax.fwd", "M=3,N=20"),
        ("softmax.bwd", "M=3,N=20"),
        ("cross_entropy.fwd", "M=2,V=40"),
    ],
)
def test_warpforge_tune_tunes_the_op_kernels(private_lookup: str, name: str, shape: str) -> None:
    result = CliRunner().invoke(
        app, ["tune", name, "--shape", shape, "--db", private_lookup], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    with PerfDatabase(private_lookup) as db:
        trials = db.trials(kernel=name)
        best = db.best_configs(kernel=name)
    assert trials and all(t.status == "ok" for t in trials), [
        (t.config, t.status, t.error) for t in trials if t.status != "ok"
    ]
    assert len(best) == 1


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "N"), [("rms_norm.fwd", 512), ("rms_norm.bwd", 4096)])
def test_gpu_tuned_config_is_used_by_the_op(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch, name: str, N: int
) -> None:
    """A config tuned by ``warpforge tune`` reaches the op's row kernel, at a row length the
    op runs on its tuned launch (bf16 forwards of the lengths ``NORM_FWD_TILE_LAUNCHES`` lists
    take the tile kernel, and of 2048-16384 columns the whole-row launches of
    ``NORM_FWD_ROW_LAUNCHES``, whatever is tuned)."""
    from warpforge.ops import norm

    direction = name.rsplit(".", 1)[1]
    if direction == "fwd":
        assert norm.norm_fwd_wide_launch(N, 2, name) is None
        assert (2, name, N) not in norm.NORM_FWD_TILE_LAUNCHES
    M = 4096
    result = CliRunner().invoke(
        app,
        ["tune", name, "--shape", f"M={M},N={N}", "--dtype", "bf16", "--budget", "5",
         "--db", private_lookup],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with PerfDatabase(private_lookup) as db:
        (best,) = db.best_configs(kernel=name)
    spies = []
    for kind in ("rows", "chunked"):  # the tuned config may pick either kernel
        kernel_name = f"norm_{direction}_{kind}_kernel"
        spies.append(LaunchSpy(getattr(norm_kernels, kernel_name)))
        monkeypatch.setattr(norm_kernels, kernel_name, spies[-1])
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = ops.rms_norm(x, w)
    y.backward(torch.randn_like(y))
    torch.testing.assert_close(y.double(), _rms_norm64(x, w), rtol=1.6e-2, atol=1.6e-2)
    (launch,) = [launch for spy in spies for launch in spy.launches]
    expected = dict(best.config)
    programs_per_sm = expected.pop("PROGRAMS_PER_SM", 0)  # the backward's grid, not a kwarg
    if expected["BLOCK_N"] < N:  # chunked kernels take one row per program, no ROWS
        assert expected.pop("ROWS") == 1
        assert not expected.pop("RELOAD", False) and not programs_per_sm
    assert {k: launch[k] for k in expected} == expected
    if programs_per_sm:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        tiles = -(-M // expected["ROWS"])
        assert launch["grid"] == (min(tiles, sms * programs_per_sm),)


@pytest.mark.interpreter
def test_a_stored_backward_config_sets_the_knobs(
    private_lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tuned LayerNorm backward config reaches the rows kernel: tile, RELOAD, and its
    PROGRAMS_PER_SM grid (on a device whose SM count is faked, the grid is that many per SM)."""
    tuned = {"BLOCK_N": 64, "ROWS": 2, "num_warps": 1, "RELOAD": True, "PROGRAMS_PER_SM": 2}
    features = {"M": 11, "N": 37, "dtype": "float32"}
    assert get_tunable("layer_norm.bwd").space.rejection(tuned, features) is None
    _store_best(private_lookup, "layer_norm.bwd", features, tuned)
    caps = norm.device_capabilities("cpu")
    monkeypatch.setattr(
        norm, "device_capabilities", lambda d: dataclasses.replace(caps, sm_count=2)
    )
    norm._bwd_grid.cache_clear()
    spy = LaunchSpy(norm_kernels.norm_bwd_rows_kernel)
    monkeypatch.setattr(norm_kernels, "norm_bwd_rows_kernel", spy)
    x, w, b, dy = torch.randn(11, 37), torch.randn(37), torch.randn(37), torch.randn(11, 37)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    got = torch.autograd.grad(ops.layer_norm(*leaves), leaves, dy)
    leaves64 = [t.double().requires_grad_() for t in (x, w, b)]
    y64 = torch.nn.functional.layer_norm(leaves64[0], (37,), leaves64[1], leaves64[2], 1e-5)
    want = torch.autograd.grad(y64, leaves64, dy.double())
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-4)
    (launch,) = spy.launches
    assert (launch["BLOCK_N"], launch["ROWS"], launch["num_warps"]) == (64, 2, 1)
    assert launch["RELOAD"] is True and launch["PARTIALS_IN_MEMORY"] is False
    assert launch["grid"] == (4,)  # 2 SMs x 2 programs (6 tiles of 2 rows)
    norm._bwd_grid.cache_clear()


def test_backward_knobs_transfer_only_where_they_apply() -> None:
    space = get_tunable("layer_norm.bwd").space
    transfer = get_tunable("layer_norm.bwd").transfer
    tuned = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "RELOAD": True, "PROGRAMS_PER_SM": 3}
    source = {"M": 16384, "N": 4096, "dtype": "bfloat16"}
    wider = {"M": 8192, "N": 8192, "dtype": "bfloat16"}
    out = transfer(tuned, source, wider)  # twice the row at the same share a thread: 16 warps
    assert out["num_warps"] == 16 and out["RELOAD"] and out["PROGRAMS_PER_SM"] == 3
    assert space.rejection(out, wider) is None
    chunked = {"M": 4096, "N": 65536, "dtype": "bfloat16"}
    out = transfer({**tuned, "BLOCK_N": 8192}, {**source, "N": 16384}, chunked)
    assert (out["RELOAD"], out["PROGRAMS_PER_SM"]) == (False, 0)
    assert space.rejection(out, chunked) is None
    assert "whole rows" in space.rejection({**out, "RELOAD": True}, chunked)
    assert "warps per SM" in space.rejection({**tuned, "num_warps": 32}, source)


def test_shipped_row_configs_match_the_current_kernels() -> None:
    """Every shipped norm and softmax entry names the kernel source it applies to and a config
    its space accepts: an edit to a kernel without re-tuning (or re-hashing, when its code for
    the shipped configs is unchanged) would silently drop them all to the heuristics."""
    import json

    shipped = lookup.shipped_directory()
    names = [f"{family}.{d}" for family in ("rms_norm", "add_rms_norm", "layer_norm", "softmax")
             for d in ("fwd", "bwd")]  # fmt: skip
    seen = 0
    for path in sorted(shipped.glob("*.json")):
        kernels = json.loads(path.read_text())["kernels"]
        for name in names:
            tunable = get_tunable(name)
            for entry in kernels.get(name, []):
                assert entry["source_hash"] == tunable.source_hash, (path.name, name)
                assert tunable.space.rejection(entry["config"], entry["features"]) is None
                seen += 1
    assert seen > 0


def test_layer_norm_backward_trials_time_and_check_the_bias_gradient() -> None:
    """The tuner times LayerNorm's backward as models run it, with a bias gradient (a second
    partial row per program, so another register budget), and checks all three gradients."""
    tunable = get_tunable("layer_norm.bwd")
    features = {"M": 5, "N": 37, "dtype": "float32"}
    inputs = tunable.make_inputs(
        {"M": 5, "N": 37}, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(3)
    )
    got = tunable.run(tunable.default_config(features), *inputs)
    want = tunable.reference(*inputs)
    assert len(got) == len(want) == 3
    dy = inputs[0]
    torch.testing.assert_close(want[2], dy.sum(dim=0))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    rms = get_tunable("rms_norm.bwd")
    rms_inputs = rms.make_inputs(
        {"M": 5, "N": 37}, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(4)
    )
    assert len(rms.run(rms.default_config(features), *rms_inputs)) == 2


def test_norm_forward_tunables_name_the_rows_other_kernels_take(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The norm forwards' tunables say where the op runs another kernel whatever is tuned (the
    tile table, the one-row-a-program tables), and ``warpforge tune`` says it before tuning
    there; the backwards (their launch tables adjust the tuned launch) and other rows say
    nothing."""
    from warpforge.tune import commands

    monkeypatch.setattr(
        norm, "NORM_FWD_TILE_LAUNCHES", {(2, "rms_norm.fwd", 256): norm.TileLaunch(8, 4)}
    )
    fwd = get_tunable("rms_norm.fwd")
    assert "norm_fwd_tile_kernel" in fwd.bypassed({"M": 64, "N": 256}, torch.bfloat16)
    assert fwd.bypassed({"M": 64, "N": 256}, torch.float32) is None  # not listed for 4 bytes
    assert fwd.bypassed({"M": 64, "N": 512}, torch.bfloat16) is None
    assert norm.norm_fwd_wide_launch(4096, 2, "rms_norm.fwd") is not None
    assert "one-row-a-program" in fwd.bypassed({"M": 64, "N": 4096}, torch.bfloat16)
    assert get_tunable("rms_norm.bwd").bypassed is None
    problems = [({"M": 64, "N": 256}, torch.bfloat16), ({"M": 64, "N": 512}, torch.bfloat16)]
    commands._note_bypassed(fwd, problems)
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: rms_norm.fwd M=64,N=256 bfloat16: the op runs norm_fwd_tile_kernel "
        "(NORM_FWD_TILE_LAUNCHES) at 256 columns there, whatever is tuned"
    ]
