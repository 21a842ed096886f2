"""Read and maintenance queries over the history: recent calls, per-family durations, replay, prune.

Long results are streamed (`yield_per`), so loading a large history into the estimator or exporting
it does not hold every row in memory at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from sqlalchemy import Select, delete, exists, func, or_, select

from tao_harness.outcomes import CENSORED_STATUSES
from tao_harness.readiness.accuracy import CallSample
from tao_harness.store.engine import Store
from tao_harness.store.models import LLMAttempt, LLMRequest, Plan, Session, ToolCall
from tao_harness.store.records import ToolCallRecord

STREAM_ROWS = 2000


def _stream(store: Store, stmt: Select[Any]) -> Iterator[Any]:
    with store.engine.connect() as conn:
        yield from conn.execution_options(yield_per=STREAM_ROWS).execute(stmt)


def recent_calls(
    store: Store,
    *,
    session: str | None = None,
    family: str | None = None,
    since: float | None = None,
    limit: int = 50,
) -> list[ToolCallRecord]:
    """Newest calls first (by start time), optionally filtered."""
    stmt = select(*ToolCall.__table__.columns)
    if session is not None:
        stmt = stmt.where(ToolCall.session_id == session)
    if family is not None:
        stmt = stmt.where(ToolCall.family == family)
    if since is not None:
        stmt = stmt.where(ToolCall.started_at >= since)
    stmt = stmt.order_by(ToolCall.started_at.desc(), ToolCall.id.desc()).limit(limit)
    with store.engine.connect() as conn:
        return [ToolCallRecord(**row._asdict()) for row in conn.execute(stmt)]


def family_durations(store: Store, family: str | None = None) -> Iterator[tuple[str, float]]:
    """(family, duration_s) of every completed call, in completion order: feeds DurationHistory.
    Timed-out and cancelled calls are left out: they stopped before their work ended (outcomes.py)."""
    stmt = select(ToolCall.family, ToolCall.duration_s).where(
        ToolCall.family.is_not(None), ToolCall.duration_s.is_not(None),
        or_(ToolCall.status.is_(None), ToolCall.status.not_in(CENSORED_STATUSES)),
    )
    if family is not None:
        stmt = stmt.where(ToolCall.family == family)
    for row in _stream(store, stmt.order_by(ToolCall.ended_at, ToolCall.id)):
        yield str(row[0]), float(row[1])


def completed_calls(store: Store) -> Iterator[ToolCallRecord]:
    """Every completed call in start-time order (the accuracy replay's input)."""
    stmt = (
        select(*ToolCall.__table__.columns)
        .where(ToolCall.duration_s.is_not(None), ToolCall.started_at.is_not(None))
        .order_by(ToolCall.started_at, ToolCall.id)
    )
    for row in _stream(store, stmt):
        yield ToolCallRecord(**row._asdict())


def call_samples(store: Store) -> Iterator[CallSample]:
    """Completed calls as the accuracy replay wants them, in start-time order."""
    for call in completed_calls(store):
        yield CallSample(
            started_at=call.started_at or 0.0,
            tool_name=call.tool_name or "",
            command=call.command,
            args=call.args,
            duration_s=call.duration_s or 0.0,
            env_timeout_s=call.env_timeout_s,
            session_id=call.session_id,
            harness=call.harness,
            status=call.status,
        )


def all_calls(store: Store) -> Iterator[ToolCallRecord]:
    """Every stored call, complete or not, in start-time order (export)."""
    stmt = select(*ToolCall.__table__.columns).order_by(ToolCall.started_at, ToolCall.id)
    for row in _stream(store, stmt):
        yield ToolCallRecord(**row._asdict())


@dataclass(frozen=True)
class PruneResult:
    """Rows deleted by `prune`, per table."""

    tool_calls: int
    llm_requests: int
    llm_attempts: int
    plans: int
    sessions: int


def prune(store: Store, before: float) -> PruneResult:
    """Delete calls, requests and plans that started before `before`, then sessions left empty."""
    with store.engine.connect().execution_options(tao_begin="IMMEDIATE") as conn, conn.begin():
        calls = conn.execute(delete(ToolCall).where(ToolCall.started_at < before)).rowcount
        requests = conn.execute(delete(LLMRequest).where(LLMRequest.started_at < before)).rowcount
        attempts = conn.execute(delete(LLMAttempt).where(LLMAttempt.started_at < before)).rowcount
        plans = conn.execute(delete(Plan).where(Plan.created_at < before)).rowcount
        orphan = (
            ~exists().where(ToolCall.session_id == Session.id)
            & ~exists().where(LLMRequest.session_id == Session.id)
            & ~exists().where(LLMAttempt.session_id == Session.id)
            & (func.coalesce(Session.ended_at, Session.started_at) < before)
        )
        sessions = conn.execute(delete(Session).where(orphan)).rowcount
    return PruneResult(tool_calls=calls, llm_requests=requests, llm_attempts=attempts, plans=plans,
                       sessions=sessions)


def count_calls(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(ToolCall)).scalar_one())
