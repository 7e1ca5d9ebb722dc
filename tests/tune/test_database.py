from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest
import torch

from warpforge.tune import database as dbmod
from warpforge.tune.database import (
    CURRENT_VERSION,
    DatabaseUnavailable,
    Migration,
    PerfDatabase,
    canonical_json,
)
from warpforge.tune.search import Trial

PROBLEM = {"kernel": "k", "source_hash": "h1", "device": "dev/sm_90"}
FEATURES = {"N": 4096, "dtype": "float16"}


def _record(db: PerfDatabase, trial: Trial, features: dict | None = None, **over: str) -> int:
    return db.record_trial(**{**PROBLEM, **over}, features=features or FEATURES, trial=trial)


def test_round_trip_keeps_every_field(db_url: str) -> None:
    with PerfDatabase(db_url) as db:
        assert db.schema_version() == CURRENT_VERSION
        ok = Trial({"BLOCK": 128, "num_warps": 4}, "ok", 2e-5, 1.9e-5, 2.1e-5, 0.004, 37)
        bad = Trial({"BLOCK": 64, "num_warps": 4}, "incorrect", error="3 element(s) off")
        err = Trial({"BLOCK": 8, "num_warps": 4}, "error", error="OutOfResources: shared memory")
        ids = [_record(db, t) for t in (ok, bad, err)]
        assert ids == sorted(ids) and len(set(ids)) == 3
        rows = db.trials(kernel="k")
    assert [r.status for r in rows] == ["ok", "incorrect", "error"]
    first = rows[0]
    assert first.features == FEATURES and first.config == ok.config
    assert (first.median_s, first.ci_low_s, first.ci_high_s) == (2e-5, 1.9e-5, 2.1e-5)
    assert (first.rel_stderr, first.samples, first.error) == (0.004, 37, None)
    assert first.source_hash == "h1" and first.device == "dev/sm_90" and first.host
    assert rows[2].error == "OutOfResources: shared memory" and rows[2].median_s is None


def test_best_is_the_fastest_correct_trial(db_url: str) -> None:
    with PerfDatabase(db_url) as db:
        _record(db, Trial({"b": 1}, "ok", 3e-5))
        fast_id = _record(db, Trial({"b": 2}, "ok", 1e-5))
        _record(db, Trial({"b": 3}, "ok", 2e-5))
        _record(db, Trial({"b": 4}, "incorrect", error="wrong"))
        _record(db, Trial({"b": 5}, "ok", 5e-6), source_hash="h2")  # other source: other problem
        _record(db, Trial({"b": 6}, "ok", 4e-6), features={"N": 8192, "dtype": "float16"})
        best = db.best("k", "h1", "dev/sm_90", FEATURES)
        assert best is not None and best.config == {"b": 2} and best.trial_id == fast_id
        assert db.best("k", "h1", "dev/sm_90", {"N": 1, "dtype": "float16"}) is None
        assert len(db.best_configs(kernel="k")) == 3
        assert len(db.best_configs(kernel="k", source_hash="h1")) == 2
        assert db.count_trials(kernel="k") == 6 and db.count_trials(status="incorrect") == 1
        assert [t.config for t in db.trials(status="ok", limit=2)] == [{"b": 1}, {"b": 2}]


@pytest.mark.parametrize("order", [(9, 10, 2), (2, 10, 9), (10, 9, 2)])
def test_equal_medians_go_to_the_smallest_config_json_in_any_order(
    db_url: str, order: tuple[int, ...]
) -> None:
    from warpforge.tune.lookup import _stored_problems

    # '{"b":10}' < '{"b":2}' < '{"b":9}' as text: the rule is the JSON's, not the numbers'.
    with PerfDatabase(db_url) as db:
        _record(db, Trial({"b": 1}, "ok", 2e-5))
        for b in order:
            _record(db, Trial({"b": b}, "ok", 1e-5))
        best = db.best("k", "h1", "dev/sm_90", FEATURES)
        (problem,) = _stored_problems(db.measured_configs(kernel="k", device="dev/sm_90"), "d")
    assert best is not None and best.config == {"b": 10}
    assert problem.config == best.config  # the lookup picks what best_configs keeps


def test_measured_configs_can_flag_the_configs_that_failed(db_url: str) -> None:
    import math

    with PerfDatabase(db_url) as db:
        _record(db, Trial({"b": 1}, "ok", 2e-5))
        _record(db, Trial({"b": 1}, "incorrect", error="off"))  # flaky: ok once, wrong once
        _record(db, Trial({"b": 2}, "ok", 1e-5))
        _record(db, Trial({"b": 3}, "error", error="OutOfResources"))
        plain = db.measured_configs(kernel="k", device="dev/sm_90")
        flagged = db.measured_configs(kernel="k", device="dev/sm_90", include_failed=True)
    assert [(m.config, m.failed) for m in plain] == [({"b": 1}, False), ({"b": 2}, False)]
    assert [(m.config, m.median_s, m.failed) for m in flagged] == [
        ({"b": 1}, 2e-5, True),
        ({"b": 2}, 1e-5, False),
        ({"b": 3}, math.inf, True),
    ]


def test_feature_order_does_not_matter(db_url: str) -> None:
    with PerfDatabase(db_url) as db:
        _record(db, Trial({"b": 1}, "ok", 1e-5), features={"dtype": "float16", "N": 4096})
        assert db.best("k", "h1", "dev/sm_90", {"N": 4096, "dtype": "float16"}) is not None


def _create_v1(url: str) -> None:
    """A database as the first schema version left it, with trials in it."""
    with _raw(url) as (conn, dialect):
        for statement in [
            "CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, description TEXT, applied_at TEXT NOT NULL)",
            *dbmod.MIGRATIONS[0].statements(dialect),
            "INSERT INTO schema_version VALUES (1, 'trials table', '2026-01-01')",
        ]:
            conn.execute(statement)
        insert = dialect.sql(
            "INSERT INTO trials (kernel, source_hash, device, features, config, status, median_s, "
            "ci_low_s, ci_high_s, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        f = canonical_json(FEATURES)
        for config, status, median in (
            ({"b": 1}, "ok", 3e-5),
            ({"b": 2}, "ok", 1e-5),
            ({"b": 3}, "incorrect", None),
            ({"b": 4}, "ok", 1e-5),
        ):
            conn.execute(
                insert,
                (
                    "k",
                    "h1",
                    "dev/sm_90",
                    f,
                    canonical_json(config),
                    status,
                    median,
                    None,
                    None,
                    None,
                    "2026-01-01",
                ),
            )


class _raw:
    """A plain DB-API connection (autocommit), as an older warpforge would have used."""

    def __init__(self, url: str) -> None:
        path = dbmod.sqlite_path(url)
        if path is not None:
            self.conn = sqlite3.connect(path, isolation_level=None)
            self.dialect = dbmod.SQLITE
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)
            self.dialect = dbmod.POSTGRES

    def __enter__(self):
        return self.conn, self.dialect

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def test_migrating_from_v1_keeps_trials_and_backfills_best(db_url: str) -> None:
    _create_v1(db_url)
    with pytest.raises(DatabaseUnavailable, match="schema version 1"):
        PerfDatabase(db_url, migrate=False)
    with PerfDatabase(db_url) as db:
        assert db.schema_version() == CURRENT_VERSION == 2
        rows = db.trials()
        assert len(rows) == 4 and all(r.rel_stderr is None and r.samples is None for r in rows)
        best = db.best("k", "h1", "dev/sm_90", FEATURES)
        assert (
            best is not None and best.config == {"b": 2} and best.median_s == 1e-5
        )  # tie: older id
        _record(db, Trial({"b": 5}, "ok", 5e-6, rel_stderr=0.01, samples=9))
        assert db.best("k", "h1", "dev/sm_90", FEATURES).config == {"b": 5}
    with _raw(db_url) as (conn, _):
        versions = [
            r[0]
            for r in conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        ]
    assert versions == [1, 2]


def test_a_failing_migration_changes_nothing(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    PerfDatabase(db_url).close()
    bad = Migration(3, "broken", lambda d: ["CREATE TABLE extra (x INTEGER)", "THIS IS NOT SQL"])
    monkeypatch.setattr(dbmod, "MIGRATIONS", (*dbmod.MIGRATIONS, bad))
    monkeypatch.setattr(dbmod, "CURRENT_VERSION", 3)
    with pytest.raises(Exception, match=r"(?i)syntax"):
        PerfDatabase(db_url)
    monkeypatch.undo()
    with PerfDatabase(db_url) as db:
        assert db.schema_version() == 2
        assert not db._table_exists("extra")


def test_a_newer_schema_is_refused(db_url: str) -> None:
    PerfDatabase(db_url).close()
    with _raw(db_url) as (conn, dialect):
        conn.execute(
            dialect.sql("INSERT INTO schema_version VALUES (?, ?, ?)"), (99, "future", "2030")
        )
    with pytest.raises(DatabaseUnavailable, match="newer"):
        PerfDatabase(db_url)


def test_another_programs_trials_table_is_refused_untouched(tmp_path: Path) -> None:
    """A file with a `trials` table but no warpforge schema_version is someone else's: refused
    with a clear error before anything is written (migrating failed half-way, a raw sqlite3
    error)."""
    import sqlite3

    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE trials (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO trials (note) VALUES ('theirs')")
    conn.close()
    with pytest.raises(DatabaseUnavailable, match="not a warpforge performance database"):
        PerfDatabase(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = conn.execute("SELECT note FROM trials").fetchall()
    conn.close()
    assert tables == {"trials"} and rows == [("theirs",)]


def test_sqlite_uses_wal_and_create_false_never_creates(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "perf.db"
    with pytest.raises(DatabaseUnavailable, match="no performance database"):
        PerfDatabase(f"sqlite:///{path}", create=False)
    assert not path.exists() and not path.parent.exists()
    with PerfDatabase(f"sqlite:///{path}") as db:
        assert db._execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db._execute("PRAGMA busy_timeout").fetchone()[0] == dbmod.BUSY_TIMEOUT_MS
    assert path.exists()


def test_default_url_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WARPFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPFORGE_DB_URL", raising=False)
    with PerfDatabase() as db:
        assert db.url == f"sqlite:///{tmp_path / 'perf.db'}"
    assert (tmp_path / "perf.db").exists()


@pytest.mark.parametrize("url", ["mysql://x", "sqlite:/rel.db", ""])
def test_bad_urls(url: str) -> None:
    with pytest.raises((ValueError, TypeError), match="url"):
        PerfDatabase(url)


def test_record_trial_validates(sqlite_url: str) -> None:
    with PerfDatabase(sqlite_url) as db:
        with pytest.raises(ValueError, match="kernel"):
            db.record_trial(
                kernel="", source_hash="h", device="d", features={}, trial=Trial({}, "ok", 1.0)
            )
        with pytest.raises(TypeError, match="features"):
            db.record_trial(
                kernel="k", source_hash="h", device="d", features=[1], trial=Trial({}, "ok", 1.0)
            )  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="limit"):
            db.trials(limit=0)


def test_a_problem_key_over_the_index_limit_is_refused_on_both_backends(db_url: str) -> None:
    """PostgreSQL refuses btree index rows over about 2700 bytes: a key at the limit is stored
    (incompressible text, so no index compression helps), one byte over is a ValueError naming
    features, not a database error, and on SQLite alike; nothing is half-written."""
    import secrets

    from warpforge.tune.database import MAX_PROBLEM_KEY_BYTES, canonical_json

    head = len("k") + len("h1") + len("dev/sm_90") + len(canonical_json({"blob": ""}))
    blob = secrets.token_hex(MAX_PROBLEM_KEY_BYTES)[: MAX_PROBLEM_KEY_BYTES - head]
    with PerfDatabase(db_url) as db:
        db.record_trial(kernel="k", source_hash="h1", device="dev/sm_90",
                        features={"blob": blob}, trial=Trial({"b": 0}, "ok", 1e-4))  # fmt: skip
        assert db.best("k", "h1", "dev/sm_90", {"blob": blob}) is not None
        with pytest.raises(ValueError, match=r"features: .*at most 2400 bytes.*got 2401"):
            db.record_trial(kernel="k", source_hash="h1", device="dev/sm_90",
                            features={"blob": blob + "0"}, trial=Trial({"b": 0}, "ok", 1e-4))  # fmt: skip
        assert db.count_trials(kernel="k") == 1


@pytest.mark.parametrize(
    ("trial", "error", "message"),
    [
        (Trial({"b": 1}, "ok", float("nan")), ValueError, "median_s.*nan"),
        (Trial({"b": 1}, "ok", float("inf")), ValueError, "median_s.*inf"),
        (Trial({"b": 1}, "ok", -1e-5), ValueError, "median_s.*> 0.*-1e-05"),
        (Trial({"b": 1}, "ok", 0.0), ValueError, "median_s.*> 0"),
        (Trial({"b": 1}, "ok", "1e-5"), TypeError, "median_s.*number.*str"),
        (Trial({"b": 1}, "ok", True), TypeError, "median_s"),
        (Trial({"b": 1}, "ok", 1e-5, float("nan"), 2e-5), ValueError, "ci_low_s"),
        (Trial({"b": 1}, "ok", 1e-5, -1.0, 2e-5), ValueError, "ci_low_s"),
        (Trial({"b": 1}, "ok", 1e-5, 1e-6, float("inf")), ValueError, "ci_high_s"),
        (Trial({"b": 1}, "incorrect", float("nan")), ValueError, "median_s"),
    ],
)
def test_record_trial_refuses_impossible_times(
    db_url: str, trial: Trial, error: type, message: str
) -> None:
    with PerfDatabase(db_url) as db:
        _record(db, Trial({"b": 0}, "ok", 1e-4))
        with pytest.raises(error, match=message):
            _record(db, trial)
        # Nothing half-written, and the problem keeps its real best.
        assert db.count_trials(kernel="k") == 1
        best = db.best("k", "h1", "dev/sm_90", FEATURES)
        assert best is not None and best.config == {"b": 0}


# -- two processes at once --------------------------------------------------------------------
TRIALS_PER_WORKER = 60


def _tuning_worker(url: str, worker: int) -> None:
    """Tune the synthetic kernel into ``url``, then write more trials one by one."""
    from tune_synthetic import fake_timer, make_synthetic

    from warpforge.tune.search import exhaustive_search

    with PerfDatabase(url) as db:
        exhaustive_search(
            make_synthetic(),
            {"N": 1024},
            torch.float32,
            "cpu",
            timer=fake_timer,
            database=db,
            seed=worker,
        )
        for i in range(TRIALS_PER_WORKER):
            db.record_trial(
                kernel="stress",
                source_hash="s",
                device="d",
                features={"N": 1},
                trial=Trial({"worker": worker, "i": i}, "ok", 1.0 + i + worker / 10),
            )


def test_two_processes_tuning_at_once_lose_nothing(db_url: str) -> None:
    from tune_synthetic import BEST, make_synthetic

    ctx = mp.get_context("spawn")
    workers = [ctx.Process(target=_tuning_worker, args=(db_url, w)) for w in range(2)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
    assert [p.exitcode for p in workers] == [0, 0]
    kernel = make_synthetic()
    per_search = len(kernel.space.valid_configs(kernel.features({"N": 1024}, torch.float32)))
    with PerfDatabase(db_url) as db:
        assert db.count_trials(kernel="synthetic") == 2 * per_search
        assert db.count_trials(kernel="stress") == 2 * TRIALS_PER_WORKER
        stress = {(t.config["worker"], t.config["i"]) for t in db.trials(kernel="stress")}
        assert stress == {(w, i) for w in range(2) for i in range(TRIALS_PER_WORKER)}
        best = db.best_configs(kernel="synthetic")
        assert len(best) == 1 and best[0].config == BEST
        assert db.best("stress", "s", "d", {"N": 1}).config == {"worker": 0, "i": 0}
        if db.dialect is dbmod.SQLITE:
            assert db._execute("PRAGMA integrity_check").fetchone()[0] == "ok"
