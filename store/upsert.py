"""Writing one batch of records in one transaction, as upserts that work on SQLite and PostgreSQL.

A record's None fields mean "unknown": `ON CONFLICT (key) DO UPDATE SET col = COALESCE(new, old)`, so
a tool_start row and the later tool_end row for the same call merge into one. The key is the table's
primary key: the id, or (session_id, id) for tool calls, whose ids are only unique within a session.
Rows that share a key inside a batch are merged in Python first (PostgreSQL refuses to touch a row
twice in one statement), and rows are sorted by key so concurrent writers lock rows in the same order.

A tool call may be reported twice: by the harness's shim and by the proxy, which reads it from the LLM
traffic (`source`). The shim measures the call itself (exact start, end, exit code), the proxy only sees
the turn around it, so a proxy record only fills in what a shim record left unknown, whichever came
first: `COALESCE(old, new)` where the stored row is the shim's and the new one the proxy's.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from sqlalchemy import Connection, Table, and_, case, func, insert
from sqlalchemy.dialects import postgresql, sqlite

from tao_harness.store.models import LLMAttempt, LLMRequest, Plan, Session, ToolCall
from tao_harness.store.records import (LLMAttemptRecord, LLMRequestRecord, PlanRecord, SessionRecord,
                                       StoreRecord, ToolCallRecord)
from tao_harness.store.redact import Redactor

_JSON_FIELDS = ("args", "hints", "labels")
# ToolCall.source values: a record from the second only fills in what the first left unknown.
SHIM, PROXY = "shim", "proxy"


def _row(record: StoreRecord) -> dict[str, Any]:
    row = dict(vars(record))  # the records are plain (non-slotted) dataclasses: fields live in __dict__
    for key, value in row.items():
        if isinstance(value, tuple):
            row[key] = list(value)
        elif value is not None and key in _JSON_FIELDS:
            row[key] = dict(value)
    return row


def _key_names(table: Table) -> list[str]:
    return [column.name for column in table.primary_key.columns]


def merge_by_key(
    table: Table, records: Iterable[SessionRecord | ToolCallRecord | LLMRequestRecord | LLMAttemptRecord]
) -> list[dict[str, Any]]:
    """One row per primary key of `table`, in key order; a later record's known (non-None) fields win."""
    names = _key_names(table)
    merged: dict[tuple[str, ...], dict[str, Any]] = {}
    for record in records:
        row = _row(record)
        key = tuple(row[name] for name in names)
        earlier = merged.get(key)
        if earlier is None:
            merged[key] = row
        elif row.get("source") == PROXY and earlier.get("source") == SHIM:
            earlier.update((name, value) for name, value in row.items() if earlier[name] is None)
        else:
            earlier.update((name, value) for name, value in row.items() if value is not None)
    return [merged[key] for key in sorted(merged)]


def _dialect_insert(conn: Connection, table: Table) -> Any:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"upserts are implemented for SQLite and PostgreSQL, not {conn.dialect.name}")


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert `rows`, or fill in the known fields of the rows already stored under the same key."""
    if not rows:
        return
    stmt = _dialect_insert(conn, table)
    key = _key_names(table)
    names = [name for name in rows[0] if name not in key]
    if "source" in table.c:
        shim_kept = and_(stmt.excluded.source == PROXY, table.c.source == SHIM)
        updates = {name: case((shim_kept, func.coalesce(table.c[name], stmt.excluded[name])),
                              else_=func.coalesce(stmt.excluded[name], table.c[name])) for name in names}
    else:
        updates = {name: func.coalesce(stmt.excluded[name], table.c[name]) for name in names}
    conn.execute(stmt.on_conflict_do_update(index_elements=key, set_=updates), list(rows))


def _ensure_sessions(conn: Connection, children: Sequence[dict[str, Any]]) -> None:
    # A call may arrive before (or without) its session record; the foreign key needs the parent row.
    first: dict[str, dict[str, Any]] = {}
    for child in children:
        session = child["session_id"]
        first.setdefault(
            session, {"id": session, "harness": child.get("harness"), "started_at": child["started_at"]}
        )
    if first:
        stmt = _dialect_insert(conn, Session.__table__).on_conflict_do_nothing(index_elements=["id"])
        conn.execute(stmt, [first[key] for key in sorted(first)])


def write_batch(conn: Connection, records: Sequence[StoreRecord], redactor: Redactor | None = None) -> None:
    """Write `records` on `conn` (the caller owns the transaction), redacting call text first."""
    sessions = merge_by_key(Session.__table__, (r for r in records if isinstance(r, SessionRecord)))
    calls = merge_by_key(ToolCall.__table__, (r for r in records if isinstance(r, ToolCallRecord)))
    requests = merge_by_key(LLMRequest.__table__, (r for r in records if isinstance(r, LLMRequestRecord)))
    attempts = merge_by_key(LLMAttempt.__table__, (r for r in records if isinstance(r, LLMAttemptRecord)))
    plans = [_row(r) for r in records if isinstance(r, PlanRecord)]
    if redactor is not None:
        for call in calls:
            if call["command"] is not None:
                call["command"] = redactor.text(call["command"])
            if call["args"] is not None:
                call["args"] = redactor.value(call["args"])
    upsert(conn, Session.__table__, sessions)
    _ensure_sessions(conn, [*calls, *requests, *attempts])
    upsert(conn, ToolCall.__table__, calls)
    upsert(conn, LLMRequest.__table__, requests)
    upsert(conn, LLMAttempt.__table__, attempts)
    if plans:
        conn.execute(insert(Plan.__table__), plans)
