from __future__ import annotations

import socket
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, inspect, select, text
from sqlalchemy.pool import NullPool

from tao_harness.store import migrations
from tao_harness.store.engine import StoreError, open_store, resolve_url
from tao_harness.store.models import SCHEMA_VERSION, SchemaVersion, ToolCall
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.writer import StoreWriter


def test_creates_schema_and_reopens_read_only(db_url: str) -> None:
    with open_store(db_url) as store:
        assert store.schema_version == SCHEMA_VERSION
        tables = set(inspect(store.engine).get_table_names())
        assert {"sessions", "tool_calls", "llm_requests", "plans", "schema_version"} <= tables
        indexes = {ix["name"] for ix in inspect(store.engine).get_indexes("tool_calls")}
        assert "ix_tool_calls_family_ended" in indexes
    with open_store(db_url, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store, store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30_000


def test_missing_file_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "none.db"
    with pytest.raises(StoreError, match="no history database at"):
        open_store(str(missing), create=False)
    assert not missing.exists() and not missing.parent.exists()


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite\n" * 500)
    with pytest.raises(StoreError, match="not a usable SQLite database: file is not a database"):
        open_store(str(corrupt))
    assert corrupt.read_bytes() == b"this is not sqlite\n" * 500


def test_empty_database_is_not_a_history_when_reading(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreError, match="holds no tao_harness history"):
        open_store(str(empty), create=False)


def test_newer_schema_is_refused(db_url: str) -> None:
    with open_store(db_url) as store, store.engine.begin() as conn:
        conn.execute(SchemaVersion.__table__.insert().values(version=SCHEMA_VERSION + 7, applied_at=0.0))
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 7}, newer than"):
        open_store(db_url)


_V2_TOOL_CALLS = """CREATE TABLE tool_calls (
    id VARCHAR(200) PRIMARY KEY, session_id VARCHAR(200) REFERENCES sessions (id) ON DELETE CASCADE,
    harness VARCHAR(64), tool_name VARCHAR(200), family VARCHAR(200), command TEXT, args JSON, hints JSON,
    timeout_s DOUBLE PRECISION, env_timeout_s DOUBLE PRECISION, background BOOLEAN,
    started_at DOUBLE PRECISION, ended_at DOUBLE PRECISION, duration_s DOUBLE PRECISION,
    status VARCHAR(32), exit_code INTEGER)"""


def _downgrade(conn: Connection, version: int) -> None:
    """Turn a fresh database back into the layout of schema `version` (1 or 2), with one stored call."""
    conn.execute(text("DROP TABLE tool_calls"))
    conn.execute(text(_V2_TOOL_CALLS))
    conn.execute(text("CREATE INDEX ix_tool_calls_family_ended ON tool_calls (family, ended_at)"))
    conn.execute(text("CREATE INDEX ix_tool_calls_session_started ON tool_calls (session_id, started_at)"))
    conn.execute(text("CREATE INDEX ix_tool_calls_started_at ON tool_calls (started_at)"))
    conn.execute(text("INSERT INTO sessions (id) VALUES ('s1')"))
    conn.execute(
        text("INSERT INTO tool_calls (id, session_id, tool_name, family, duration_s, args) "
             "VALUES ('c1', 's1', 'Read', 'Read', 0.5, '{\"path\": \"a.py\"}')")
    )
    conn.execute(text("ALTER TABLE sessions DROP COLUMN time_scale"))  # schema 5
    conn.execute(text("DROP TABLE llm_attempts"))  # schema 4
    conn.execute(text("ALTER TABLE llm_requests DROP COLUMN attempts"))
    if version < 2:
        conn.execute(text("DROP TABLE plans"))
        conn.execute(text("ALTER TABLE tool_calls DROP COLUMN env_timeout_s"))
    conn.execute(text("DELETE FROM schema_version"))
    conn.execute(SchemaVersion.__table__.insert().values(version=version, applied_at=0.0))


@pytest.mark.parametrize("version", [1, 2])
def test_older_database_is_upgraded_keeping_rows(db_url: str, version: int) -> None:
    with open_store(db_url) as store, store.engine.begin() as conn:
        _downgrade(conn, version)
    with open_store(db_url, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        inspector = inspect(store.engine)
        assert "time_scale" in {c["name"] for c in inspector.get_columns("sessions")}
        assert inspector.has_table("llm_attempts")
        assert "attempts" in {c["name"] for c in inspector.get_columns("llm_requests")}
        columns = {c["name"] for c in inspector.get_columns("tool_calls")}
        assert {"env_timeout_s", "source"} <= columns and inspector.has_table("plans")
        assert inspector.get_pk_constraint("tool_calls")["constrained_columns"] == ["session_id", "id"]
        indexes = {ix["name"] for ix in inspector.get_indexes("tool_calls")}
        assert {"ix_tool_calls_family_ended", "ix_tool_calls_session_started", "ix_tool_calls_started_at"} <= indexes
        with store.engine.connect() as conn:
            row = conn.execute(select(ToolCall)).one()
            versions = (
                conn.execute(select(SchemaVersion.version).order_by(SchemaVersion.version)).scalars().all()
            )
        assert (row.session_id, row.id, row.duration_s, row.args) == ("s1", "c1", 0.5, {"path": "a.py"})
        assert versions == list(range(version, SCHEMA_VERSION + 1))
        # After the upgrade, another session may use the same call id without touching s1's row.
        with StoreWriter(store) as writer:
            writer.submit(ToolCallRecord(id="c1", session_id="s2", tool_name="Bash", duration_s=9.0))
        with store.engine.connect() as conn:
            rows = {(r.session_id, r.id): r.duration_s for r in conn.execute(select(ToolCall))}
        assert rows == {("s1", "c1"): 0.5, ("s2", "c1"): 9.0}


def test_unreachable_server_is_a_one_line_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        StoreError, match=rf"cannot open database postgresql\+psycopg://u:\*\*\*@127.0.0.1:{port}"
    ) as info:
        open_store(f"postgresql+psycopg://u:secret@127.0.0.1:{port}/x?connect_timeout=2")
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


def test_concurrent_first_opens_agree(db_url: str) -> None:
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            open_store(db_url).close()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [str(e) for e in errors] == []
    with open_store(db_url) as store, store.engine.connect() as conn:
        assert conn.execute(select(SchemaVersion.version)).scalars().all() == [SCHEMA_VERSION]


def _hold_schema_lock(url: str) -> Connection:
    """A connection inside an opener's critical section on `url`'s schema (as if it hung mid-upgrade)."""
    conn = create_engine(url, poolclass=NullPool).connect()
    conn.execute(migrations.schema_lock())
    return conn


def test_a_stuck_opener_holds_up_its_own_schema_only(
    pg_url: str, other_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrations, "_PG_LOCK_WAIT", "1s")
    stuck = _hold_schema_lock(pg_url)
    try:
        open_store(other_pg_url).close()  # another tenant of the database opens at once
        with pytest.raises(StoreError, match="lock timeout"):  # and this schema's opener gives up, not hangs
            open_store(pg_url)
    finally:
        stuck.close()
    open_store(pg_url).close()


def test_url_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve_url(None).database == str(tmp_path / "data" / "tao_harness" / "history.db")
    assert resolve_url(str(tmp_path / "h.db")).render_as_string() == f"sqlite:///{tmp_path / 'h.db'}"
    assert resolve_url("postgresql+psycopg://postgres@127.0.0.1/test").get_backend_name() == "postgresql"
    with pytest.raises(StoreError, match="not a database URL"):
        resolve_url("::nonsense://")
    assert not (tmp_path / "data").exists()


def _foreign_sqlite(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("create", [False, True])
def test_foreign_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path, create: bool) -> None:
    # `tao history ...` opens with create=False, `tao coordinator --db` with create=True.
    foreign = tmp_path / "foreign.db"
    before = _foreign_sqlite(foreign)
    expected = "holds no tao_harness history" if not create else r"holds other tables \(users\)"
    with pytest.raises(StoreError, match=expected):
        open_store(str(foreign), create=create)
    assert foreign.read_bytes() == before  # still the rollback journal, no tables added
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no -wal / -shm files
    with sqlite3.connect(foreign) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    db.close()


def test_foreign_tables_in_postgresql_schema_are_left_alone(pg_url: str) -> None:
    engine = create_engine(pg_url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE users (name TEXT)"))
    with pytest.raises(StoreError, match=r"holds other tables \(users\)"):
        open_store(pg_url)
    assert inspect(engine).get_table_names() == ["users"]
    engine.dispose()
