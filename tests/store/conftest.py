"""Fixtures: a fresh database URL per test, on SQLite (a temp file) and on the real PostgreSQL.

PostgreSQL tests run when TAO_TEST_PG_URL is set; each gets its own schema (via the libpq `options`
search_path), so tests running in parallel under xdist never see each other's tables.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

PG_ENV = "TAO_TEST_PG_URL"


@pytest.fixture
def pg_url() -> Iterator[str]:
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
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))
