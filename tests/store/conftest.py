"""Fixtures: a fresh database URL per test, on SQLite (a temp file) and on the real PostgreSQL.

PostgreSQL tests run when TAO_TEST_PG_URL is set; each gets its own schema (via the libpq `options`
search_path), so tests running in parallel under xdist never see each other's tables.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

PG_ENV = "TAO_TEST_PG_URL"
LOCK_WAIT_S = 30  # longer than any test's own transactions take to end once it has returned
# Other connections holding locks in a schema, with their state and last statement: locks on its tables,
# or on the schema itself (taken by whoever creates a table in it: their tables are not yet visible).
HOLDERS = """
SELECT DISTINCT a.pid, a.state, left(a.query, 200)
FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.pid <> pg_backend_pid() AND l.granted AND (
    l.relation IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = :schema)
    OR (l.classid = 'pg_namespace'::regclass
        AND l.objid = (SELECT oid FROM pg_namespace WHERE nspname = :schema)))
"""


@contextmanager
def _schema_url() -> Iterator[str]:
    """The PostgreSQL URL with a new, empty schema of its own as search_path; the schema is dropped after."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)")
    schema = f"tao_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        holders = _drop_schema(admin, schema)
        admin.dispose()
    assert not holders, f"connections left holding locks in the test's schema (ended): {holders}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    with _schema_url() as url:
        yield url


@pytest.fixture
def other_pg_url() -> Iterator[str]:
    """A second schema of the same database (another tenant)."""
    with _schema_url() as url:
        yield url


def _drop_schema(admin: Engine, schema: str) -> list[tuple[Any, ...]]:
    """Drop the schema; connections the test left mid-transaction in it are ended first and returned.

    A plain DROP would wait for their locks forever: one leaked transaction could hold a whole CI run."""

    def drop() -> None:  # bounded: a lock still held makes it fail, not wait
        with admin.begin() as conn:
            conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT_S}s'"))
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))

    try:
        drop()
        return []
    except OperationalError:
        pass
    with admin.begin() as conn:
        holders = [tuple(row) for row in conn.execute(text(HOLDERS), {"schema": schema})]
        conn.execute(text("SELECT pg_terminate_backend(pid) FROM unnest(CAST(:pids AS int[])) AS pid"),
                     {"pids": [row[0] for row in holders]})
    drop()  # a holder the query missed fails the test, not the run
    return holders


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))
