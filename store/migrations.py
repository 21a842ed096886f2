"""Creating and upgrading the schema, inside one locked transaction so concurrent openers agree.

Version history (models.SCHEMA_VERSION is the newest):
  1  sessions, tool_calls, llm_requests.
  2  plans table (planner decisions); tool_calls.env_timeout_s (harness-wide deadline, for replay).
A database newer than this code is refused; an older one is upgraded in place when it is opened.
"""

from __future__ import annotations

import time
from typing import Callable

from sqlalchemy import Connection, inspect, insert, select, func, text

from tao_harness.store.models import SCHEMA_VERSION, Base, Plan, SchemaVersion

# An arbitrary constant naming the advisory lock that serializes schema set-up on PostgreSQL.
_PG_SCHEMA_LOCK = 0x7A0_5C4E


class SchemaError(Exception):
    """The database cannot be used by this version of tao_harness; the message says what to do."""


def _to_v2(conn: Connection) -> None:
    Plan.__table__.create(conn, checkfirst=True)
    columns = {column["name"] for column in inspect(conn).get_columns("tool_calls")}
    if "env_timeout_s" not in columns:
        conn.execute(text("ALTER TABLE tool_calls ADD COLUMN env_timeout_s DOUBLE PRECISION"))


# target version -> step that upgrades from the version before it
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _to_v2}

_TAO_TABLES = {"sessions", "tool_calls", "llm_requests"}


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))


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
