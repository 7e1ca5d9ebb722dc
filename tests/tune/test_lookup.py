from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tune_synthetic import make_synthetic

from warpforge.tune import lookup as lookup_mod
from warpforge.tune.database import PerfDatabase
from warpforge.tune.lookup import (
    ConfigLookup,
    StoredConfig,
    feature_distance,
    nearest,
    normalize_features,
)
from warpforge.tune.search import Trial
from warpforge.tune.tunable import device_fingerprint, register_tunable, unregister_tunable

CPU = device_fingerprint("cpu")
DEFAULT = {"BLOCK": 64, "num_warps": 2, "unroll": 1}


@pytest.fixture
def kernel() -> Iterator:
    k = register_tunable(make_synthetic("lookup_synthetic"), replace=True)
    yield k
    unregister_tunable(k.name)


def _store(
    url: str,
    kernel,
    n: int,
    config: dict,
    median: float = 1e-5,
    device: str = CPU,
    dtype: str = "float32",
    source: str | None = None,
) -> None:
    with PerfDatabase(url) as db:
        db.record_trial(
            kernel=kernel.name,
            source_hash=source or kernel.source_hash,
            device=device,
            features={"N": n, "dtype": dtype},
            trial=Trial(config, "ok", median),
        )


def _stored(n: int, dtype: str = "float16", median: float = 1.0) -> StoredConfig:
    return StoredConfig({"N": n, "dtype": dtype}, {"n": n}, "h", "d", median, "database")


def test_distance_is_log2_and_categoricals_must_match() -> None:
    assert feature_distance({"N": 1024, "dtype": "f16"}, {"N": 2048, "dtype": "f16"}) == 1.0
    assert feature_distance({"M": 4, "N": 4}, {"M": 16, "N": 32}) == pytest.approx(math.sqrt(4 + 9))
    assert feature_distance({"N": 1024, "dtype": "f16"}, {"N": 1024, "dtype": "f32"}) is None
    assert feature_distance({"N": 1024}, {"M": 1024}) is None
    assert feature_distance({"N": 0}, {"N": 4}) is None


def test_nearest_compares_sizes_on_a_log_scale() -> None:
    # Linearly 512 is nearer to 1000 (488 vs 500); on log2, 1500 is (0.58 vs 0.97).
    got = nearest({"N": 1000, "dtype": "float16"}, [_stored(512), _stored(1500)])
    assert got[0][1].features["N"] == 1500


def test_nearest_excludes_other_dtypes_even_when_sizes_match() -> None:
    got = nearest({"N": 1024, "dtype": "float16"}, [_stored(1024, "bfloat16"), _stored(8192)], k=5)
    assert [c.features["N"] for _, c in got] == [8192]


def test_nearest_breaks_ties_by_speed() -> None:
    got = nearest(
        {"N": 1024, "dtype": "float16"}, [_stored(512, median=2.0), _stored(2048, median=1.0)]
    )
    assert got[0][1].features["N"] == 2048


def test_normalize_features() -> None:
    assert normalize_features({"N": 4.0, "dtype": torch.float16, "flag": True}) == {
        "N": 4,
        "dtype": "float16",
        "flag": True,
    }
    with pytest.raises(TypeError, match="features"):
        normalize_features([("N", 1)])  # type: ignore[arg-type]


def test_exact_match_returns_the_stored_best(sqlite_url: str, kernel, tmp_path: Path) -> None:
    best = {"BLOCK": 128, "num_warps": 4, "unroll": 2}
    _store(sqlite_url, kernel, 1024, {"BLOCK": 256, "num_warps": 4, "unroll": 2}, 2e-5)
    _store(sqlite_url, kernel, 1024, best, 1e-5)
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert (
        lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")
        == best
    )


def test_unseen_shape_takes_the_nearest_neighbours_config(
    sqlite_url: str, kernel, tmp_path: Path
) -> None:
    _store(sqlite_url, kernel, 1024, {"BLOCK": 128, "num_warps": 4, "unroll": 1})
    _store(sqlite_url, kernel, 65536, {"BLOCK": 1024, "num_warps": 8, "unroll": 4})
    _store(sqlite_url, kernel, 2048, {"BLOCK": 256, "num_warps": 8, "unroll": 4}, dtype="float16")
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert lookup.config_for(
        kernel.name, {"N": 4096, "dtype": "float32"}, DEFAULT, device="cpu"
    ) == {"BLOCK": 128, "num_warps": 4, "unroll": 1}
    assert (
        lookup.config_for(kernel.name, {"N": 32768, "dtype": "float32"}, DEFAULT, device="cpu")[
            "BLOCK"
        ]
        == 1024
    )
    assert (
        lookup.config_for(kernel.name, {"N": 2048, "dtype": "bfloat16"}, DEFAULT, device="cpu")
        == DEFAULT
    )
    seeds = lookup.starting_configs(kernel.name, {"N": 4096, "dtype": "float32"}, device="cpu", k=2)
    assert seeds == [
        {"BLOCK": 128, "num_warps": 4, "unroll": 1},
        {"BLOCK": 1024, "num_warps": 8, "unroll": 4},
    ]


def test_a_neighbour_config_invalid_for_the_new_shape_is_skipped(
    sqlite_url: str, kernel, tmp_path: Path
) -> None:
    # BLOCK=1024 does not divide N=1536 (a constraint of the synthetic space): next neighbour wins.
    _store(sqlite_url, kernel, 2048, {"BLOCK": 1024, "num_warps": 4, "unroll": 1})
    _store(sqlite_url, kernel, 256, {"BLOCK": 256, "num_warps": 4, "unroll": 1})
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert (
        lookup.config_for(kernel.name, {"N": 1536, "dtype": "float32"}, DEFAULT, device="cpu")[
            "BLOCK"
        ]
        == 256
    )


def test_other_devices_and_old_source_hashes_are_not_used(
    sqlite_url: str, kernel, tmp_path: Path
) -> None:
    _store(
        sqlite_url,
        kernel,
        1024,
        {"BLOCK": 128, "num_warps": 4, "unroll": 2},
        device="NVIDIA H100/sm_90",
    )
    _store(
        sqlite_url, kernel, 1024, {"BLOCK": 256, "num_warps": 4, "unroll": 2}, source="old-source"
    )
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert (
        lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")
        == DEFAULT
    )


def test_one_database_query_per_kernel_however_many_shapes(
    sqlite_url: str, kernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in (256, 1024, 4096):
        _store(sqlite_url, kernel, n, {"BLOCK": min(n, 512), "num_warps": 4, "unroll": 1})
    calls = []
    original = PerfDatabase.measured_configs
    monkeypatch.setattr(
        PerfDatabase,
        "measured_configs",
        lambda self, **kw: calls.append(kw) or original(self, **kw),
    )
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    shapes = [2**i for i in range(4, 17)] * 20  # 13 size buckets, each looked up 20 times
    for n in shapes:
        lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device="cpu")
    assert len(calls) == 1 and lookup.db_queries == 1
    queries_after_open = lookup._db.queries
    for n in shapes:
        lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device="cpu")
    assert lookup._db.queries == queries_after_open


def test_repeated_lookups_are_answered_from_the_cache(
    sqlite_url: str, kernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Speed is shown by the benchmarks; here only that a repeated lookup does no work: it neither
    # resolves again nor asks the database.
    _store(sqlite_url, kernel, 1024, {"BLOCK": 128, "num_warps": 4, "unroll": 2})
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    resolved = []
    original = ConfigLookup._resolve
    monkeypatch.setattr(
        ConfigLookup,
        "_resolve",
        lambda self, *args: resolved.append(args) or original(self, *args),
    )
    features = {"N": 1024, "dtype": "float32"}
    first = lookup.config_for(kernel.name, features, DEFAULT, device="cpu")
    queries = lookup._db.queries
    for _ in range(50):
        assert lookup.config_for(kernel.name, features, DEFAULT, device="cpu") == first
    assert len(resolved) == 1 and lookup.db_queries == 1 and lookup._db.queries == queries


def test_returned_configs_are_copies(sqlite_url: str, kernel, tmp_path: Path) -> None:
    _store(sqlite_url, kernel, 1024, {"BLOCK": 128, "num_warps": 4, "unroll": 2})
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    first = lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")
    first["BLOCK"] = 9
    assert (
        lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")[
            "BLOCK"
        ]
        == 128
    )
    default = dict(DEFAULT)
    got = lookup.config_for(kernel.name, {"N": 8, "dtype": "float64"}, default, device="cpu")
    got["BLOCK"] = 1
    assert default == DEFAULT


def test_no_database_file_gives_the_default_and_creates_nothing(tmp_path: Path, kernel) -> None:
    path = tmp_path / "missing" / "perf.db"
    lookup = ConfigLookup(database_url=f"sqlite:///{path}", shipped_dir=tmp_path)
    assert (
        lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")
        == DEFAULT
    )
    assert not path.exists() and not path.parent.exists()


def test_tune_db_0_disables_the_database(
    sqlite_url: str, kernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(sqlite_url, kernel, 1024, {"BLOCK": 128, "num_warps": 4, "unroll": 2})
    monkeypatch.setenv("WARPFORGE_TUNE_DB", "0")
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert (
        lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu")
        == DEFAULT
    )
    assert lookup.db_queries == 0


@pytest.mark.parametrize("url_kind", ["garbage_file", "dead_server"])
def test_a_broken_database_falls_back_and_warns_once(
    url_kind: str, tmp_path: Path, kernel, caplog: pytest.LogCaptureFixture
) -> None:
    if url_kind == "garbage_file":
        bad = tmp_path / "perf.db"
        bad.write_bytes(b"this is not a database" * 100)
        url = f"sqlite:///{bad}"
    else:
        url = "postgresql://nobody@127.0.0.1:1/none"
    lookup = ConfigLookup(database_url=url, shipped_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="warpforge.tune"):
        for n in (1024, 2048, 4096):
            assert (
                lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device="cpu")
                == DEFAULT
            )
    warnings = [r for r in caplog.records if "performance database unavailable" in r.getMessage()]
    assert len(warnings) == 1


def test_database_exact_match_comes_before_shipped_and_shipped_before_neighbours(
    sqlite_url: str, kernel, tmp_path: Path
) -> None:
    from warpforge.tune.shipped import export_shipped

    shipped = {"BLOCK": 256, "num_warps": 8, "unroll": 4}
    other = tmp_path / "other.db"
    _store(f"sqlite:///{other}", kernel, 1024, shipped)
    _store(f"sqlite:///{other}", kernel, 1 << 20, {"BLOCK": 1024, "num_warps": 8, "unroll": 4})
    shipped_dir = tmp_path / "shipped"
    with PerfDatabase(f"sqlite:///{other}") as db:
        export_shipped(kernel.name, shipped_dir / "configs.json", database=db)
    measured_here = {"BLOCK": 128, "num_warps": 4, "unroll": 2}
    _store(sqlite_url, kernel, 1024, measured_here)
    _store(sqlite_url, kernel, 4096, {"BLOCK": 128, "num_warps": 2, "unroll": 2})
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=shipped_dir)

    def ask(n: int) -> dict[str, object]:
        return lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device="cpu")

    assert ask(1024) == measured_here  # this machine's measurement beats the shipped one
    assert ask(4096)["num_warps"] == 2
    # No database entry for 2^20: the shipped exact match, not the database's nearest (4096).
    assert ask(1 << 20) == {"BLOCK": 1024, "num_warps": 8, "unroll": 4}
    # With no database, the shipped neighbour is used.
    offline = ConfigLookup(database_url=sqlite_url, shipped_dir=shipped_dir, use_database=False)
    assert (
        offline.config_for(kernel.name, {"N": 1 << 19, "dtype": "float32"}, DEFAULT, device="cpu")[
            "BLOCK"
        ]
        == 1024
    )


def test_module_level_config_for_uses_the_environment(
    tmp_path: Path, kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    _store(url, kernel, 1024, {"BLOCK": 128, "num_warps": 4, "unroll": 2})
    monkeypatch.setenv("WARPFORGE_DB_URL", url)
    lookup_mod.reset_lookup_cache()
    try:
        got = lookup_mod.config_for(
            kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cpu"
        )
        assert got == {"BLOCK": 128, "num_warps": 4, "unroll": 2}
    finally:
        lookup_mod.reset_lookup_cache()


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("", {"N": 1}, DEFAULT), ValueError, "kernel"),
        (("k", [1], DEFAULT), TypeError, "features"),
        (("k", {"N": 1}, [1]), TypeError, "default"),
    ],
)
def test_bad_arguments(args: tuple, error: type[Exception], match: str, tmp_path: Path) -> None:
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    with pytest.raises(error, match=match):
        lookup.config_for(*args, device="cpu")


def test_features_the_space_cannot_judge_fall_back_to_the_default(
    sqlite_url: str, kernel, tmp_path: Path
) -> None:
    # The synthetic space needs N to check divisibility; a caller that omits it must still get a config.
    with PerfDatabase(sqlite_url) as db:
        db.record_trial(
            kernel=kernel.name, source_hash=kernel.source_hash, device=CPU, features={"dtype": "float32"},
            trial=Trial({"BLOCK": 128, "num_warps": 4, "unroll": 2}, "ok", 1e-5),
        )  # fmt: skip
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    assert lookup.config_for(kernel.name, {"dtype": "float32"}, DEFAULT, device="cpu") == DEFAULT


_sizes = st.integers(min_value=1, max_value=1 << 40)


@settings(max_examples=50, deadline=None)
@given(a=_sizes, b=_sizes, c=_sizes, dtype=st.sampled_from(["float16", "float32"]))
def test_distance_is_a_metric_on_log_sizes(a: int, b: int, c: int, dtype: str) -> None:
    fa, fb, fc = ({"N": n, "dtype": dtype} for n in (a, b, c))
    assert feature_distance(fa, fb) == feature_distance(fb, fa)
    assert (feature_distance(fa, fb) == 0) == (a == b)
    assert feature_distance(fa, fc) <= feature_distance(fa, fb) + feature_distance(fb, fc) + 1e-9
    assert feature_distance(fa, {"N": b, "dtype": "bfloat16"}) is None


def test_lookup_without_a_database_file_never_imports_the_database_layer(tmp_path) -> None:
    """A new process's first launch asks for configs; with no database file there is nothing
    to open, and importing the database layer only to learn that would cost its first result."""
    import subprocess
    import sys

    import warpforge

    src = str(Path(warpforge.__file__).resolve().parents[1])
    code = (
        "import sys\n"
        "from warpforge.tune.lookup import ConfigLookup\n"
        "lookup = ConfigLookup()\n"
        "got = lookup.config_for('rms_norm.fwd', {'M': 64, 'N': 128, 'dtype': 'float32'},\n"
        "                        {'BLOCK_N': 128, 'ROWS': 1, 'num_warps': 4}, device='cpu')\n"
        "print(sorted(got), 'warpforge.tune.database' in sys.modules)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "WARPFORGE_DB_URL": f"sqlite:///{tmp_path / 'absent' / 'perf.db'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("False"), done.stdout + done.stderr
    assert not (tmp_path / "absent").exists()


def test_a_malformed_shipped_entry_is_skipped_with_one_warning_and_the_rest_kept(
    kernel, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from warpforge.tune import shipped

    good = {"BLOCK": 128, "num_warps": 4, "unroll": 2}

    def entry(n: int, **over: object) -> dict:
        return {
            "source_hash": kernel.source_hash,
            "device": CPU,
            "features": {"N": n, "dtype": "float32"},
            "config": good,
            **over,
        }

    bad = [entry(2048, median_s=[1]), entry(4096, median_s={}), entry(8192, median_s=math.nan)]
    document = {
        "format": shipped.CONFIGS_FORMAT,
        "version": 2,
        "kernels": {kernel.name: [entry(1024, median_s=1e-5), *bad]},
    }
    (tmp_path / "cpu.json").write_text(json.dumps(document))
    reads = []
    original = shipped.read_shipped
    load = shipped.load_configs_document
    monkeypatch.setattr(
        shipped, "load_configs_document", lambda *a, **kw: reads.append(a) or load(*a, **kw)
    )
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    with caplog.at_level(logging.WARNING, logger="warpforge.tune"):
        for n in (1024, 1024, 2048, 4096, 8192):
            lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device="cpu")
    assert lookup.origin(kernel.name, {"N": 1024, "dtype": "float32"}, device="cpu") == (
        "shipped exact"
    )
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "3 malformed entries" in warning and "cpu.json" in warning
    assert f"kernels[{kernel.name!r}][1]: median_s" in warning and "[1]" in warning
    assert len(reads) == 1  # read once, cached with the bad entries left out
    with pytest.raises(ValueError, match=r"cpu\.json: kernels\[.*\]\[1\]: median_s.*\[1\]"):
        original(tmp_path / "cpu.json")  # the strict reader (merge, import) refuses the file


H100 = "NVIDIA H100 80GB HBM3/sm_90"
H200 = "NVIDIA H200/sm_90"


def _ship(directory: Path, kernel, entries: list[tuple], name: str = "configs.json") -> None:
    """A shipped file ``name`` of (device, N, config[, dtype]) entries for ``kernel`` (float32
    unless an entry names its dtype)."""
    import json

    from warpforge.tune import shipped

    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "format": shipped.CONFIGS_FORMAT,
        "version": 2,
        "kernels": {
            kernel.name: [
                {
                    "source_hash": kernel.source_hash,
                    "device": entry[0],
                    "features": {"N": entry[1], "dtype": entry[3] if len(entry) > 3 else "float32"},
                    "config": entry[2],
                    "median_s": 1e-5,
                }
                for entry in entries
            ]
        },
    }
    (directory / name).write_text(json.dumps(document))


@pytest.fixture
def on_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lookups for "cuda" see an H200 (this machine has no GPU)."""
    monkeypatch.setattr(
        lookup_mod,
        "device_fingerprint",
        lambda d: H200 if torch.device(d).type == "cuda" else CPU,
    )
    monkeypatch.delenv(lookup_mod.OTHER_MODELS_ENV, raising=False)


def test_a_model_with_nothing_tuned_takes_another_models_shipped_configs_of_its_architecture(
    kernel, tmp_path: Path, on_h200: None
) -> None:
    at_1024 = {"BLOCK": 256, "num_warps": 8, "unroll": 4}
    at_1m = {"BLOCK": 1024, "num_warps": 8, "unroll": 2}
    _ship(
        tmp_path,
        kernel,
        [
            (H100, 1024, at_1024),
            (H100, 1 << 20, at_1m),
            ("NVIDIA A100-SXM4-80GB/sm_80", 1024, {"BLOCK": 64, "num_warps": 2, "unroll": 1}),
        ],
    )
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)

    def ask(n: int, device: str = "cuda") -> dict[str, object]:
        return lookup.config_for(kernel.name, {"N": n, "dtype": "float32"}, DEFAULT, device=device)

    assert ask(1024) == at_1024
    assert lookup.origin(kernel.name, {"N": 1024, "dtype": "float32"}, device="cuda") == (
        f"shipped for {H100} exact"
    )
    assert ask(1 << 19)["BLOCK"] == 1024  # the H100's nearest tuned shape, carried over
    origin = lookup.origin(kernel.name, {"N": 1 << 19, "dtype": "float32"}, device="cuda")
    assert origin is not None and f"shipped for {H100}" in origin and "exact" not in origin
    assert ask(1024, device="cpu") == DEFAULT  # the interpreter never takes a GPU's configs


def test_another_models_configs_serve_a_dtype_this_model_has_no_configs_for(
    kernel, tmp_path: Path, on_h200: None
) -> None:
    # the H200 table holds float32 only: a bfloat16 problem takes the H100's bfloat16 config,
    # a float32 one the H200's own (no float32 config is comparable with a bfloat16 problem)
    h100_bf16 = {"BLOCK": 512, "num_warps": 4, "unroll": 1}
    h200_fp32 = {"BLOCK": 128, "num_warps": 2, "unroll": 2}
    _ship(
        tmp_path,
        kernel,
        [
            (H100, 1024, h100_bf16, "bfloat16"),
            (H100, 1024, {"BLOCK": 256, "num_warps": 8, "unroll": 4}),
            (H200, 1024, h200_fp32),
        ],
    )
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    for dtype, want, origin in [
        ("bfloat16", h100_bf16, f"shipped for {H100} exact"),
        ("float32", h200_fp32, "shipped exact"),
    ]:
        features = {"N": 1024, "dtype": dtype}
        assert lookup.config_for(kernel.name, features, DEFAULT, device="cuda") == want
        assert lookup.origin(kernel.name, features, device="cuda") == origin


def test_another_models_file_is_read_only_when_this_models_has_nothing_comparable(
    kernel, tmp_path: Path, on_h200: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warpforge.tune import shipped

    h200_fp32 = {"BLOCK": 128, "num_warps": 2, "unroll": 2}
    h100_bf16 = {"BLOCK": 512, "num_warps": 4, "unroll": 1}
    _ship(tmp_path, kernel, [(H200, 1024, h200_fp32)], shipped.shipped_file_name(H200))
    _ship(tmp_path, kernel, [(H100, 1024, h100_bf16, "bfloat16")], shipped.shipped_file_name(H100))
    read: list[str] = []
    original = shipped.load_configs_document

    def spy(path):  # type: ignore[no-untyped-def]
        read.append(Path(path).name)
        return original(path)

    monkeypatch.setattr(shipped, "load_configs_document", spy)
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    fp32 = {"N": 2048, "dtype": "float32"}
    assert lookup.config_for(kernel.name, fp32, DEFAULT, device="cuda") == h200_fp32
    assert read == [shipped.shipped_file_name(H200)]  # the H100's file not parsed
    bf16 = {"N": 1024, "dtype": "bfloat16"}
    assert lookup.config_for(kernel.name, bf16, DEFAULT, device="cuda") == h100_bf16
    assert sorted(read) == sorted(shipped.shipped_file_name(d) for d in (H100, H200))


def test_another_models_configs_stop_at_one_config_tuned_on_this_model(
    sqlite_url: str, kernel, tmp_path: Path, on_h200: None
) -> None:
    _ship(tmp_path, kernel, [(H100, 1024, {"BLOCK": 256, "num_warps": 8, "unroll": 4})])
    own = {"BLOCK": 128, "num_warps": 2, "unroll": 2}
    _store(sqlite_url, kernel, 4096, own, device=H200)
    lookup = ConfigLookup(database_url=sqlite_url, shipped_dir=tmp_path)
    got = lookup.config_for(kernel.name, {"N": 1024, "dtype": "float32"}, DEFAULT, device="cuda")
    assert got["num_warps"] == 2  # this model's own measurement, though of another shape
    origin = lookup.origin(kernel.name, {"N": 1024, "dtype": "float32"}, device="cuda")
    assert origin is not None and origin.startswith("database") and H100 not in origin


def test_other_models_are_off_by_argument_or_environment(
    kernel, tmp_path: Path, on_h200: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ship(tmp_path, kernel, [(H100, 1024, {"BLOCK": 256, "num_warps": 8, "unroll": 4})])
    features = {"N": 1024, "dtype": "float32"}
    off = ConfigLookup(shipped_dir=tmp_path, use_database=False, other_models=False)
    assert off.config_for(kernel.name, features, DEFAULT, device="cuda") == DEFAULT
    assert off.origin(kernel.name, features, device="cuda") == "default"
    monkeypatch.setenv(lookup_mod.OTHER_MODELS_ENV, "0")
    from_env = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    assert from_env.config_for(kernel.name, features, DEFAULT, device="cuda") == DEFAULT
    with pytest.raises(TypeError, match=r"other_models: expected a bool or None, got str"):
        ConfigLookup(shipped_dir=tmp_path, use_database=False, other_models="no")  # type: ignore[arg-type]


def test_of_several_other_models_the_one_with_most_entries_is_taken(
    kernel, tmp_path: Path, on_h200: None
) -> None:
    h800 = "NVIDIA H800/sm_90"
    one = {"BLOCK": 64, "num_warps": 2, "unroll": 2}
    two = {"BLOCK": 256, "num_warps": 4, "unroll": 1}
    _ship(tmp_path, kernel, [(h800, 1024, one), (H100, 1024, two), (H100, 2048, two)])
    lookup = ConfigLookup(shipped_dir=tmp_path, use_database=False)
    features = {"N": 1024, "dtype": "float32"}
    assert lookup.config_for(kernel.name, features, DEFAULT, device="cuda") == two
    assert lookup.origin(kernel.name, features, device="cuda") == f"shipped for {H100} exact"
