"""SQLAlchemy 2.x table models of the history database, with the indexes its queries use.

Times are epoch seconds in double-precision columns: they sort, subtract and compare identically on
SQLite and PostgreSQL, and the estimator works in seconds anyway. JSON columns hold the tool's own
argument object, parsed hints and session labels.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 6
"""Version of the layout below; migrations.py upgrades older databases to it."""


class Base(DeclarativeBase):
    pass


class SchemaVersion(Base):
    """One row per applied schema version; the highest is the database's version."""

    __tablename__ = "schema_version"
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    applied_at: Mapped[float] = mapped_column(Double)


class Session(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    harness: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[float | None] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # Added in schema version 3: the clock of the session's records, as a rate against the wall clock
    # (1 = wall clock; 25 = emulated time running 25x faster, e.g. `tao demo`). NULL: recorded before.
    time_scale: Mapped[float | None] = mapped_column(Double)

    __table_args__ = (Index("ix_sessions_started_at", "started_at"),)


class ToolCall(Base):
    """Keyed by (session, call id) since schema version 3: harnesses number their calls per session,
    so two sessions may well use the same call id."""

    __tablename__ = "tool_calls"
    session_id: Mapped[str] = mapped_column(
        String(200), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    harness: Mapped[str | None] = mapped_column(String(64))
    tool_name: Mapped[str | None] = mapped_column(String(200))
    family: Mapped[str | None] = mapped_column(String(200))
    command: Mapped[str | None] = mapped_column(Text)
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    hints: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    timeout_s: Mapped[float | None] = mapped_column(Double)
    env_timeout_s: Mapped[float | None] = mapped_column(Double)
    background: Mapped[bool | None] = mapped_column(Boolean)
    started_at: Mapped[float | None] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    duration_s: Mapped[float | None] = mapped_column(Double)
    status: Mapped[str | None] = mapped_column(String(32))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    # Added in schema version 6: who reported the call, "shim" (the harness's own hooks) or "proxy" (read
    # from the LLM traffic). A shim's values win over the proxy's (upsert.py). NULL: recorded before.
    source: Mapped[str | None] = mapped_column(String(16))

    __table_args__ = (
        # per-family durations in completion order (estimator load) and `calls --family`
        Index("ix_tool_calls_family_ended", "family", "ended_at"),
        # `calls --session`, newest first
        Index("ix_tool_calls_session_started", "session_id", "started_at"),
        # recent calls, `--since`, prune and the time-ordered accuracy replay
        Index("ix_tool_calls_started_at", "started_at"),
    )


class LLMRequest(Base):
    """One LLM request as its client saw it: usage and timing of the answer it got, whichever replicas
    (`attempts` of them, version 3) produced it; `replica` is the last one."""

    __tablename__ = "llm_requests"
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(200), ForeignKey("sessions.id", ondelete="CASCADE"))
    replica: Mapped[str | None] = mapped_column(String(200))
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    queue_wait_s: Mapped[float | None] = mapped_column(Double)
    ttft_s: Mapped[float | None] = mapped_column(Double)
    latency_s: Mapped[float | None] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    status: Mapped[str | None] = mapped_column(String(32))
    attempts: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_llm_requests_session_started", "session_id", "started_at"),
        Index("ix_llm_requests_replica_started", "replica", "started_at"),
        Index("ix_llm_requests_started_at", "started_at"),
    )


class LLMAttempt(Base):
    """One upstream attempt of an LLM request (added in schema version 4): what that replica was sent and
    did. A request a replica failed mid-answer has one row per replica; the continuation's prompt holds
    the answer text already sent."""

    __tablename__ = "llm_attempts"
    id: Mapped[str] = mapped_column(String(220), primary_key=True)  # "<request id>#<attempt>"
    request_id: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer)  # 1, 2, ... in the order they were sent
    session_id: Mapped[str] = mapped_column(String(200), ForeignKey("sessions.id", ondelete="CASCADE"))
    replica: Mapped[str | None] = mapped_column(String(200))
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    ttft_s: Mapped[float | None] = mapped_column(Double)
    latency_s: Mapped[float | None] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    status: Mapped[str | None] = mapped_column(String(32))

    __table_args__ = (
        Index("ix_llm_attempts_request", "request_id", "attempt"),
        Index("ix_llm_attempts_started_at", "started_at"),
    )


class Plan(Base):
    """Added in schema version 2."""

    __tablename__ = "plans"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[float] = mapped_column(Double)
    policy: Mapped[str] = mapped_column(String(64))
    solver: Mapped[str] = mapped_column(String(32))
    objective: Mapped[list[float] | None] = mapped_column(JSON(none_as_null=True))
    solve_ms: Mapped[float] = mapped_column(Double)
    n_waiting: Mapped[int] = mapped_column(Integer)
    n_assigned: Mapped[int] = mapped_column(Integer)
    fallback: Mapped[bool] = mapped_column(Boolean)
    discarded: Mapped[bool] = mapped_column(Boolean)

    __table_args__ = (
        Index("ix_plans_created_at", "created_at"),
        Index("ix_plans_policy", "policy", "created_at"),
    )
