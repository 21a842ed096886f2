"""Creating and upgrading the schema, inside one locked transaction so concurrent openers agree.

Version history (models.SCHEMA_VERSION is the newest):
  1  sessions, tool_calls, llm_requests.
  2  plans table (planner decisions); tool_calls.env_timeout_s (harness-wide deadline, for replay).
  3  tool_calls keyed by (session_id, id): call ids are only unique within a session.
  4  llm_attempts table (every upstream attempt of a request); llm_requests.attempts. llm_requests rows
     now hold what the client got; before, a request continued on another replica kept only a merge.
  5  sessions.time_scale: which clock the session's records are on (1 = wall clock, >1 = emulated).
  6  tool_calls.source: who reported the call, "shim" or "proxy" (read from the LLM traffic).
A database newer than this code is refused; an older one is upgraded in place when it is opened.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from sqlalchemy import Connection, Select, inspect, insert, select, func, text

from tao_harness.store.models import SCHEMA_VERSION, Base, LLMAttempt, Plan, SchemaVersion, ToolCall

# An arbitrary constant naming the advisory locks that serialize schema set-up on PostgreSQL; the second
# key is the schema's hash, so openers of different schemas of one database (tenants, tests) never wait
# on each other.
_PG_SCHEMA_LOCK = 0x7A0_5C4E
# How long an opener waits for that lock (and the upgrade's table locks) before giving up with an error:
# an upgrade takes seconds, and an opener stuck mid-upgrade must not hold every other one forever.
_PG_LOCK_WAIT = "120s"


class SchemaError(Exception):
    """The database cannot be used by this version of tao_harness; the message says what to do."""


def _to_v2(conn: Connection) -> None:
    Plan.__table__.create(conn, checkfirst=True)
    columns = {column["name"] for column in inspect(conn).get_columns("tool_calls")}
    if "env_timeout_s" not in columns:
        conn.execute(text("ALTER TABLE tool_calls ADD COLUMN env_timeout_s DOUBLE PRECISION"))


def _to_v3(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        old_key = inspect(conn).get_pk_constraint("tool_calls")["name"]
        conn.execute(
            text(f'ALTER TABLE tool_calls DROP CONSTRAINT "{old_key}", ADD PRIMARY KEY (session_id, id)')
        )
        return
    # SQLite cannot change a primary key in place: the table is rebuilt under the new key. Only the
    # columns both layouts have are copied, so a column another step adds later is not lost or doubled.
    old = inspect(conn)
    columns = [c["name"] for c in old.get_columns("tool_calls") if c["name"] in ToolCall.__table__.c]
    for index in old.get_indexes("tool_calls"):
        conn.execute(text(f'DROP INDEX "{index["name"]}"'))
    conn.execute(text("ALTER TABLE tool_calls RENAME TO tool_calls_v2"))
    ToolCall.__table__.create(conn)
    names = ", ".join(f'"{name}"' for name in columns)
    conn.execute(text(f"INSERT INTO tool_calls ({names}) SELECT {names} FROM tool_calls_v2"))
    conn.execute(text("DROP TABLE tool_calls_v2"))


def _to_v4(conn: Connection) -> None:
    LLMAttempt.__table__.create(conn, checkfirst=True)
    columns = {column["name"] for column in inspect(conn).get_columns("llm_requests")}
    if "attempts" not in columns:
        conn.execute(text("ALTER TABLE llm_requests ADD COLUMN attempts INTEGER"))


def _to_v5(conn: Connection) -> None:
    columns = {column["name"] for column in inspect(conn).get_columns("sessions")}
    if "time_scale" not in columns:
        conn.execute(text("ALTER TABLE sessions ADD COLUMN time_scale DOUBLE PRECISION"))


def _to_v6(conn: Connection) -> None:
    columns = {column["name"] for column in inspect(conn).get_columns("tool_calls")}
    if "source" not in columns:
        conn.execute(text("ALTER TABLE tool_calls ADD COLUMN source VARCHAR(16)"))


# target version -> step that upgrades from the version before it
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _to_v2, 3: _to_v3, 4: _to_v4, 5: _to_v5, 6: _to_v6}

_TAO_TABLES = {"sessions", "tool_calls", "llm_requests"}


def schema_lock() -> Select[Any]:
    """PostgreSQL: take the current schema's set-up lock, until the transaction ends."""
    schema_key = func.hashtext(func.coalesce(func.current_schema(), ""))
    return select(func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK, schema_key))


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"SET LOCAL lock_timeout = '{_PG_LOCK_WAIT}'"))
        conn.execute(schema_lock())


def _record(conn: Connection, version: int) -> None:
    conn.execute(insert(SchemaVersion).values(version=version, applied_at=time.time()))


def ensure_schema(conn: Connection, *, create: bool) -> int:
    """Create or upgrade the schema on `conn` (inside its transaction); return the final version."""
    _lock(conn)
    tables = set(inspect(conn).get_table_names())
    if "schema_version" not in tables:
        if tables & _TAO_TABLES:
            raise SchemaError(
                "has tool_calls/sessions tables but no schema_version table; it was not made by tao_harness"
            )
        if not create:
            raise SchemaError("holds no tao_harness history (no schema_version table)")
        if tables:
            raise SchemaError(
                f"holds other tables ({', '.join(sorted(tables)[:3])}) and no tao_harness history; "
                "it is left unchanged: use a new file or an empty database/schema"
            )
        Base.metadata.create_all(conn)
        _record(conn, SCHEMA_VERSION)
        return SCHEMA_VERSION
    version = conn.execute(select(func.max(SchemaVersion.version))).scalar_one_or_none() or 0
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"has schema version {version}, newer than this tao_harness understands ({SCHEMA_VERSION}); "
            "upgrade tao_harness or use another database"
        )
    if version < 1:
        raise SchemaError("has an empty schema_version table; restore it or use another database")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[target](conn)
        _record(conn, target)
    return SCHEMA_VERSION
