from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from warpforge.tune.database import PerfDatabase
from warpforge.tune.search import Trial
from warpforge.tune.shipped import (
    CONFIGS_FORMAT,
    SHIPPED_MEASURED_MAX,
    SHIPPED_MEASURED_MIN_RELATIVE,
    TRIALS_FORMAT,
    export_shipped,
    export_trials,
    import_file,
    read_shipped,
)

F1 = {"N": 1024, "dtype": "float16"}
F2 = {"N": 4096, "dtype": "float16"}


def _fill(db: PerfDatabase) -> None:
    for features, config, status, median in (
        (F1, {"B": 1}, "ok", 3e-5),
        (F1, {"B": 2}, "ok", 1e-5),
        (F1, {"B": 3}, "incorrect", None),
        (F2, {"B": 4}, "ok", 2e-5),
        (F2, {"B": 5}, "error", None),
    ):
        db.record_trial(
            kernel="kx",
            source_hash="h",
            device="gpu/sm_90",
            features=features,
            trial=Trial(
                config,
                status,
                median,
                None if median is None else median * 0.9,
                None if median is None else median * 1.1,
                error=None if status == "ok" else "bad",
            ),
        )
    db.record_trial(
        kernel="other",
        source_hash="h",
        device="gpu/sm_90",
        features=F1,
        trial=Trial({"B": 9}, "ok", 1.0),
    )


def test_export_writes_the_documented_format_and_reads_back(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "shipped" / "configs.json"
    with PerfDatabase(db_url) as db:
        _fill(db)
        assert export_shipped("kx", path, database=db) == 2
    document = json.loads(path.read_text())
    assert document["format"] == CONFIGS_FORMAT and document["version"] == 2
    assert set(document["kernels"]) == {"kx"}
    entries = {json.dumps(e["features"], sort_keys=True): e for e in document["kernels"]["kx"]}
    assert entries[json.dumps(F1, sort_keys=True)]["config"] == {"B": 2}
    # B=1 (3x slower) is below the shipped share of the best's speed; failed configs never ship
    assert entries[json.dumps(F1, sort_keys=True)]["measured"] == [
        {"config": {"B": 2}, "relative": 1.0}
    ]
    assert entries[json.dumps(F1, sort_keys=True)]["ci_s"] == [
        pytest.approx(9e-6),
        pytest.approx(1.1e-5),
    ]
    read = read_shipped(path)["kx"]
    assert {(e.features["N"], e.config["B"], e.device, e.source_hash) for e in read} == {
        (1024, 2, "gpu/sm_90", "h"),
        (4096, 4, "gpu/sm_90", "h"),
    }
    assert not list(path.parent.glob(".*"))  # no temporary file left behind


def test_export_ships_the_fastest_measured_configs_with_their_relative_speed(
    tmp_path: Path, db_url: str
) -> None:
    path = tmp_path / "configs.json"
    medians = {b: 1e-5 * (1 + 0.01 * b) for b in range(SHIPPED_MEASURED_MAX + 4)}
    with PerfDatabase(db_url) as db:
        for b, median in medians.items():
            for repeat in (1.0, 1.5):  # a config timed twice counts with its faster median
                db.record_trial(
                    kernel="kx",
                    source_hash="h",
                    device="gpu/sm_90",
                    features=F1,
                    trial=Trial({"B": b}, "ok", median * repeat),
                )
        export_shipped("kx", path, database=db)
    (entry,) = json.loads(path.read_text())["kernels"]["kx"]
    shipped = [(m["config"]["B"], m["relative"]) for m in entry["measured"]]
    expected = [
        (b, round(medians[0] / m, 4))
        for b, m in medians.items()
        if medians[0] / m >= SHIPPED_MEASURED_MIN_RELATIVE
    ][:SHIPPED_MEASURED_MAX]
    assert shipped == expected and len(shipped) == SHIPPED_MEASURED_MAX
    (stored,) = read_shipped(path)["kx"]
    assert stored.measured[0] == ({"B": 0}, 1.0) and len(stored.measured) == len(expected)


def test_export_lists_the_entry_config_first_when_another_config_tied_its_time(
    tmp_path: Path, db_url: str
) -> None:
    # Equal times (coarse timers on the CPU) go to the smallest config JSON whatever the order
    # they were stored in ('{"B":10}' < '{"B":9}'), and the entry's own config leads its evidence.
    path = tmp_path / "configs.json"
    with PerfDatabase(db_url) as db:
        for b in (9, 10, 3):
            db.record_trial(
                kernel="kx",
                source_hash="h",
                device="gpu/sm_90",
                features=F1,
                trial=Trial({"B": b}, "ok", 2e-5 if b == 3 else 1e-5),
            )
        export_shipped("kx", path, database=db)
    (entry,) = json.loads(path.read_text())["kernels"]["kx"]
    assert entry["config"] == {"B": 10}
    assert entry["measured"] == [
        {"config": {"B": 10}, "relative": 1.0},
        {"config": {"B": 9}, "relative": 1.0},
    ]
    assert read_shipped(path)["kx"][0].evidence()[0] == ({"B": 10}, 1.0)


def test_version_1_files_still_load_as_their_best_alone(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    entry = {"source_hash": "h", "device": "d", "features": F1, "config": {"B": 2}}
    path.write_text(
        json.dumps({"format": CONFIGS_FORMAT, "version": 1, "kernels": {"kx": [entry]}})
    )
    (stored,) = read_shipped(path)["kx"]
    assert stored.config == {"B": 2} and stored.measured == ()
    assert stored.evidence() == (({"B": 2}, 1.0),)


def test_shipped_configs_import_into_another_database(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "configs.json"
    with PerfDatabase(f"sqlite:///{tmp_path / 'a.db'}") as source:
        _fill(source)
        export_shipped(None, path, database=source)
    with PerfDatabase(db_url) as target:
        assert import_file(path, database=target) == 3
        assert target.best("kx", "h", "gpu/sm_90", F1).config == {"B": 2}
        assert target.best("other", "h", "gpu/sm_90", F1).config == {"B": 9}


def test_trials_round_trip_through_json(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "trials.json"
    with PerfDatabase(f"sqlite:///{tmp_path / 'a.db'}") as source:
        _fill(source)
        assert export_trials(path, database=source, kernel="kx") == 5
        before = [t.as_dict() for t in source.trials(kernel="kx")]
    document = json.loads(path.read_text())
    assert document["format"] == TRIALS_FORMAT
    # the exporting process's environment, as the harness's reports carry theirs
    exported_by = document["exported_by"]
    assert {"date", "git_commit", "torch", "triton", "device"} <= exported_by.keys()
    assert exported_by["torch"] == torch.__version__
    with PerfDatabase(db_url) as target:
        assert import_file(path, database=target) == 5
        after = [t.as_dict() for t in target.trials(kernel="kx")]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "id"} for r in rows]  # noqa: E731
    assert strip(after) == strip(before)


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ("not json", "not valid JSON"),
        ({"format": "something"}, "expected a JSON object with format"),
        ({"format": CONFIGS_FORMAT, "version": 7, "kernels": {}}, "version"),
        ({"format": TRIALS_FORMAT, "version": 2, "trials": []}, "version"),
        (
            {
                "format": CONFIGS_FORMAT,
                "version": 2,
                "kernels": {
                    "k": [
                        {
                            "source_hash": "h",
                            "device": "d",
                            "features": {},
                            "config": {},
                            "measured": [{"config": {}, "relative": 1.5}],
                        }
                    ]
                },
            },
            "measured",
        ),
        (
            {"format": CONFIGS_FORMAT, "version": 1, "kernels": {"k": [{"device": "d"}]}},
            "missing field",
        ),
        (
            {
                "format": TRIALS_FORMAT,
                "version": 1,
                "trials": [
                    {
                        "kernel": "k",
                        "source_hash": "h",
                        "device": "d",
                        "features": {},
                        "config": {},
                        "status": "fast",
                    }
                ],
            },
            "status",
        ),
        (
            {
                "format": TRIALS_FORMAT,
                "version": 1,
                "trials": [
                    {
                        "kernel": "k",
                        "source_hash": "h",
                        "device": "d",
                        "features": {},
                        "config": {},
                        "status": "ok",
                    }
                ],
            },
            "median_s",
        ),
    ],
)
def test_malformed_files_import_nothing(tmp_path: Path, document: object, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    with PerfDatabase(f"sqlite:///{tmp_path / 'x.db'}") as db:
        with pytest.raises(ValueError, match=match):
            import_file(path, database=db)
        assert db.count_trials() == 0


def _trials_document(**over: object) -> dict:
    good = {
        "kernel": "k",
        "source_hash": "h",
        "device": "d",
        "features": {"N": 1},
        "config": {"B": 1},
        "status": "ok",
        "median_s": 1e-5,
    }
    return {"format": TRIALS_FORMAT, "version": 1, "trials": [good, {**good, **over}]}


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"median_s": float("nan")}, r"trials\[1\]: median_s.*nan"),
        ({"median_s": float("inf")}, r"trials\[1\]: median_s.*inf"),
        ({"median_s": -1e-5}, r"trials\[1\]: median_s.*> 0"),
        ({"median_s": "fast"}, r"trials\[1\]: median_s.*number.*str"),
        ({"ci_low_s": -1.0}, r"trials\[1\]: ci_low_s"),
        ({"features": [1, 2]}, r"trials\[1\]: features must be an object.*list"),
        ({"config": "B=1"}, r"trials\[1\]: config must be an object"),
        ({"device": ""}, r"trials\[1\]: device must be a non-empty string"),
    ],
)
def test_bad_trials_are_named_and_import_nothing(tmp_path: Path, over: dict, match: str) -> None:
    path = tmp_path / "trials.json"
    path.write_text(json.dumps(_trials_document(**over)))
    with PerfDatabase(f"sqlite:///{tmp_path / 'x.db'}") as db:
        with pytest.raises(ValueError, match=match):
            import_file(path, database=db)
        assert db.count_trials() == 0


def test_an_import_failing_midway_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trials.json"
    path.write_text(json.dumps(_trials_document()))
    real = PerfDatabase.record_trial
    calls = []

    def fail_second(self, **kw):
        calls.append(kw)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, **kw)

    with PerfDatabase(f"sqlite:///{tmp_path / 'x.db'}") as db:
        monkeypatch.setattr(PerfDatabase, "record_trial", fail_second)
        with pytest.raises(OSError, match="disk full"):
            import_file(path, database=db)
        monkeypatch.undo()
        assert db.count_trials() == 0  # the first trial was rolled back with the second
        assert import_file(path, database=db) == 2 and db.count_trials() == 2


def test_export_rejects_bad_kernel_names(tmp_path: Path) -> None:
    with (
        PerfDatabase(f"sqlite:///{tmp_path / 'x.db'}") as db,
        pytest.raises(TypeError, match="kernels"),
    ):
        export_shipped([1], tmp_path / "o.json", database=db)  # type: ignore[list-item]


def test_ops_and_blueprints_launch_with_shipped_configs_and_no_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary file in the package's shipped directory tunes an op and a compiled blueprint
    with no database anywhere (the case of a user who installed warpforge and tuned nothing)."""
    import torch

    from warpforge import ops
    from warpforge.blueprint import problems
    from warpforge.blueprint.compiler import clear_compiled
    from warpforge.blueprint.compiler import compile as compile_blueprint
    from warpforge.blueprint.launch import rows_default
    from warpforge.ops import norm
    from warpforge.ops._kernels import norm as norm_kernels
    from warpforge.tune import lookup
    from warpforge.tune.tunable import device_fingerprint, get_tunable

    fused, blueprint = (
        get_tunable("add_rms_norm.fwd"),
        get_tunable("blueprint.bias_gelu.k0_add_gelu"),
    )
    fused_config = {"BLOCK_N": 64, "ROWS": 2, "num_warps": 2}
    fused_features = {"M": 5, "N": 37, "dtype": "float32"}
    assert fused.space.rejection(fused_config, fused_features) is None
    bp_features = blueprint.features({"T": 7, "H": 33}, torch.float32)
    bp_config = next(
        c for c in blueprint.space.valid_configs(bp_features) if c != rows_default(7, 33, False)
    )
    shipped_dir = tmp_path / "package" / "shipped"
    shipped_dir.mkdir(parents=True)
    (shipped_dir / "cpu.json").write_text(
        json.dumps(
            {
                "format": CONFIGS_FORMAT,
                "version": 1,
                "kernels": {
                    kernel.name: [
                        {
                            "source_hash": kernel.source_hash,
                            "device": device_fingerprint("cpu"),
                            "features": features,
                            "config": config,
                        }
                    ]
                    for kernel, features, config in (
                        (fused, fused_features, fused_config),
                        (blueprint, bp_features, bp_config),
                    )
                },
            }
        )
    )
    monkeypatch.setattr(lookup, "shipped_directory", lambda: shipped_dir)
    monkeypatch.setattr(lookup, "_LOOKUP", lookup.ConfigLookup())
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("WARPFORGE_DB_URL", raising=False)
    norm._fwd_launch_config.cache_clear()
    clear_compiled()
    launches: list[dict] = []
    real_kernel = norm_kernels.norm_fwd_rows_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launches.append(kwargs)
                return real_kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(norm_kernels, "norm_fwd_rows_kernel", Spy())
    try:
        x, r, w = torch.randn(5, 37), torch.randn(5, 37), torch.randn(37)
        y, h = ops.rms_norm(x, w, residual=r)
        torch.testing.assert_close(h, x + r)
        h64 = h.double()
        y64 = h64 * torch.rsqrt(h64.square().mean(-1, keepdim=True) + 1e-6) * w.double()
        torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-5)
        ops.rms_norm(x, w)  # the plain RMSNorm has no shipped entry: its heuristic
        fused_launch, plain_launch = launches
        assert {k: fused_launch[k] for k in fused_config} == fused_config
        heuristic = norm.fwd_launch_heuristic(5, 37, torch.float32, "cpu")
        assert plain_launch["ROWS"] == heuristic.rows_per_program

        module = compile_blueprint(problems.bias_gelu_blueprint("float32"))
        xb, b = torch.randn(7, 33), torch.randn(33)
        expected = problems.bias_gelu_reference(xb.double(), b.double())
        torch.testing.assert_close(module(xb, b).double(), expected, rtol=1e-5, atol=1e-5)
        (program,) = [p for p in module._programs.values() if hasattr(p, "_launches")]
        assert list(program._launches.values()) == [bp_config]
        assert lookup._LOOKUP.db_queries == 0  # no database was ever asked
    finally:
        norm._fwd_launch_config.cache_clear()
        clear_compiled()


def test_export_leaves_out_excluded_problems(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "configs.json"
    with PerfDatabase(db_url) as db:
        _fill(db)
        assert export_shipped("kx", path, database=db, exclude=[("kx", F2)]) == 1
        assert export_shipped(None, tmp_path / "all.json", database=db, exclude=[("kx", F1)]) == 2
        with pytest.raises(TypeError, match="exclude: expected"):
            export_shipped("kx", path, database=db, exclude=[("kx",)])  # type: ignore[list-item]
    assert [e.features for e in read_shipped(path)["kx"]] == [F1]
    everything = read_shipped(tmp_path / "all.json")
    assert [e.features for e in everything["kx"]] == [F2]
    assert [e.features for e in everything["other"]] == [F1]  # same features, another kernel


def _shipped_file(
    path: Path, kernel: str, entries: list[tuple[dict, dict, str]], device: str = "gpu/sm_90"
) -> Path:
    document = {
        "format": CONFIGS_FORMAT,
        "version": 2,
        "kernels": {
            kernel: [
                {
                    "source_hash": source,
                    "device": device,
                    "features": features,
                    "config": config,
                    "measured": [{"config": config, "relative": 1.0}],
                }
                for features, config, source in entries
            ]
        },
    }
    path.write_text(json.dumps(document))
    return path


def test_a_lookup_says_once_that_it_skips_shipped_configs_of_an_edited_kernel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Configs tuned on an earlier source of a registered kernel are skipped (the default is
    returned), and the lookup warns once per kernel and device rather than dropping them
    silently: an edit to a tuned kernel would otherwise fall back to its heuristic unnoticed."""
    from tune_synthetic import make_synthetic

    from warpforge.tune.lookup import ConfigLookup
    from warpforge.tune.tunable import device_fingerprint, register_tunable, unregister_tunable

    kernel = make_synthetic("edited-kernel")  # source hash "synthetic-v1"
    register_tunable(kernel)
    try:
        cpu = device_fingerprint(torch.device("cpu"))
        entries = [(F1, {"B": 1}, "synthetic-v0"), (F2, {"B": 2}, "synthetic-v0")]
        _shipped_file(tmp_path / "cpu.json", "edited-kernel", entries, device=cpu)
        lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
        default = {"B": 9}
        with caplog.at_level("WARNING", logger="warpforge.tune"):
            assert lookup.config_for("edited-kernel", F1, default, device="cpu") == default
            assert lookup.config_for("edited-kernel", F2, default, device="cpu") == default
        stale = [r.getMessage() for r in caplog.records if "another source" in r.getMessage()]
        assert len(stale) == 1
        assert "edited-kernel" in stale[0] and "synthetic-v0, now synthetic-v1" in stale[0]
    finally:
        unregister_tunable("edited-kernel")


def test_merge_shipped_takes_the_later_entry_per_problem_and_leaves_out_held_out_ones(
    tmp_path: Path,
) -> None:
    from warpforge.tune.shipped import merge_shipped

    old = _shipped_file(
        tmp_path / "old.json", "kx", [(F1, {"B": 1}, "h"), (F2, {"B": 2}, "h"), (F1, {"B": 7}, "g")]
    )
    new = _shipped_file(tmp_path / "new.json", "kx", [(F1, {"B": 3}, "h")])
    out = tmp_path / "merged" / "configs.json"
    assert merge_shipped([old, new], out) == 3
    merged = {(e.source_hash, e.features["N"]): e.config for e in read_shipped(out)["kx"]}
    # the newer file wins for the same problem; another source hash is another problem
    assert merged == {("h", 1024): {"B": 3}, ("h", 4096): {"B": 2}, ("g", 1024): {"B": 7}}
    assert merge_shipped([old, new], out, exclude=[("kx", F1)]) == 1
    (left,) = read_shipped(out)["kx"]
    assert left.features == F2 and left.measured == (({"B": 2}, 1.0),)
    assert not list(out.parent.glob(".*"))  # written atomically


def test_merge_shipped_refuses_bad_sources_before_writing(tmp_path: Path) -> None:
    from warpforge.tune.shipped import merge_shipped

    good = _shipped_file(tmp_path / "good.json", "kx", [(F1, {"B": 1}, "h")])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": CONFIGS_FORMAT, "version": 2, "kernels": {"kx": [{}]}}))
    out = tmp_path / "out.json"
    with pytest.raises(ValueError, match="missing field"):
        merge_shipped([good, bad], out)
    assert not out.exists()
    with pytest.raises(ValueError, match="at least one"):
        merge_shipped([], out)
    with pytest.raises(TypeError, match="sources: expected an iterable"):
        merge_shipped(str(good), out)  # type: ignore[arg-type]


def test_stale_entries_are_listed_and_dropped_on_merge(tmp_path: Path) -> None:
    """An entry tuned on an earlier source of a registered kernel is stale (lookups skip it);
    kernels nobody registers here are left alone."""
    from tune_synthetic import make_synthetic

    from warpforge.tune.shipped import merge_shipped, stale_entries
    from warpforge.tune.tunable import register_tunable, unregister_tunable

    kernel = make_synthetic("stale-check")  # source hash "synthetic-v1"
    register_tunable(kernel)
    try:
        path = _shipped_file(
            tmp_path / "s.json",
            "stale-check",
            [(F1, {"B": 1}, "synthetic-v1"), (F2, {"B": 2}, "synthetic-v0")],
        )
        other = _shipped_file(tmp_path / "o.json", "unregistered-kernel", [(F1, {"B": 3}, "x")])
        stale = stale_entries(path)
        assert [(k, e.features["N"], e.source_hash) for k, e in stale] == [
            ("stale-check", 4096, "synthetic-v0")
        ]
        assert stale_entries(other) == []
        out = tmp_path / "merged.json"
        assert merge_shipped([path, other], out, drop_stale=True) == 2
        kept = read_shipped(out)
        assert [e.source_hash for e in kept["stale-check"]] == ["synthetic-v1"]
        assert len(kept["unregistered-kernel"]) == 1
        assert merge_shipped([path], out) == 2  # without drop_stale both stay
    finally:
        unregister_tunable("stale-check")
