from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text

from tao_harness.store.engine import StoreError, open_store, resolve_url
from tao_harness.store.models import SCHEMA_VERSION, SchemaVersion
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


def test_version_1_database_is_upgraded_keeping_rows(db_url: str) -> None:
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            writer.submit(
                ToolCallRecord(id="c1", session_id="s1", tool_name="Read", family="Read", duration_s=0.5)
            )
        with store.engine.begin() as conn:  # turn it back into the version-1 layout
            conn.execute(text("DROP TABLE plans"))
            conn.execute(text("ALTER TABLE tool_calls DROP COLUMN env_timeout_s"))
            conn.execute(text("DELETE FROM schema_version"))
            conn.execute(SchemaVersion.__table__.insert().values(version=1, applied_at=0.0))
    with open_store(db_url, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION == 2
        columns = {c["name"] for c in inspect(store.engine).get_columns("tool_calls")}
        assert "env_timeout_s" in columns and inspect(store.engine).has_table("plans")
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT duration_s FROM tool_calls WHERE id = 'c1'")).scalar() == 0.5
            versions = (
                conn.execute(select(SchemaVersion.version).order_by(SchemaVersion.version)).scalars().all()
            )
        assert versions == [1, 2]


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


def test_url_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve_url(None).database == str(tmp_path / "data" / "tao_harness" / "history.db")
    assert resolve_url(str(tmp_path / "h.db")).render_as_string() == f"sqlite:///{tmp_path / 'h.db'}"
    assert resolve_url("postgresql+psycopg://postgres@127.0.0.1/test").get_backend_name() == "postgresql"
    with pytest.raises(StoreError, match="not a database URL"):
        resolve_url("::nonsense://")
    assert not (tmp_path / "data").exists()
