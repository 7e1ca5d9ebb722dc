"""Database URLs for the tune tests: a fresh SQLite file, or a fresh PostgreSQL schema per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'perf.db'}"


@pytest.fixture
def pg_schema_url(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a schema created for this test and dropped after."""
    import psycopg

    schema = f"wf_tune_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in postgres_url else "?"
    try:
        yield f"{postgres_url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each database test runs on SQLite and on PostgreSQL."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_schema_url"
    return request.getfixturevalue(name)
