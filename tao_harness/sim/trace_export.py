"""Recorded sessions → trace: what `tao trace export` replays from the history store.

A finished session's LLM requests, in start order, become its turns; the tool calls that ran between
request k's end and request k+1's start become turn k's tool. Rules where the record does not map 1:1:
- `input_tokens` of a turn = its prompt minus the previous prompt and reply (the context it appended);
  a prompt that shrank (the harness compacted its context) counts as appending nothing.
- several tool calls between two requests (parallel calls) become one tool spanning first start to last
  end, named after the longest call; calls after the last request are dropped (the format ends on a turn).
- the prefix group is the session's `prefix_group` label, else its harness; the shared prefix is the
  median cached-token count of the group's first requests (what the engine found already cached).
`trace_records.trace_to_records` is the inverse (trace → records), for seeding a history and for tests.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn
from tao_harness.store.engine import Store
from tao_harness.store.models import LLMRequest, Session, ToolCall


@dataclass(frozen=True)
class _Request:
    started_at: float
    ended_at: float
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class _Call:
    started_at: float
    ended_at: float
    name: str
    command: str | None
    timeout_s: float | None


_IN_CHUNK = 500  # ids per IN (...) list: stays under every backend's bound-parameter limit


def _rows_by_session(
    store: Store, table: Any, columns: Sequence[Any], session_ids: Sequence[str]
) -> Iterator[Any]:
    """`columns` (session_id first) of `table`'s started rows for `session_ids`, by session and start."""
    for i in range(0, len(session_ids), _IN_CHUNK):
        stmt = (
            select(*columns)
            .where(table.session_id.in_(session_ids[i : i + _IN_CHUNK]), table.started_at.is_not(None))
            .order_by(table.session_id, table.started_at, table.id)
        )
        with store.engine.connect() as conn:
            yield from conn.execute(stmt)


def _requests(store: Store, session_ids: Sequence[str]) -> dict[str, list[_Request]]:
    columns = (
        LLMRequest.session_id,
        LLMRequest.started_at,
        LLMRequest.ended_at,
        LLMRequest.prompt_tokens,
        LLMRequest.cached_tokens,
        LLMRequest.completion_tokens,
    )
    out: dict[str, list[_Request]] = defaultdict(list)
    for sid, start, end, prompt, cached, completion in _rows_by_session(
        store, LLMRequest, columns, session_ids
    ):
        end = end if end is not None else start
        out[sid].append(_Request(start, end, prompt or 0, cached or 0, completion or 0))
    return out


def _calls(store: Store, session_ids: Sequence[str]) -> dict[str, list[_Call]]:
    columns = (
        ToolCall.session_id,
        ToolCall.started_at,
        ToolCall.ended_at,
        ToolCall.duration_s,
        ToolCall.tool_name,
        ToolCall.command,
        ToolCall.timeout_s,
        ToolCall.env_timeout_s,
    )
    out: dict[str, list[_Call]] = defaultdict(list)
    for sid, start, end, duration, name, command, timeout, env_timeout in _rows_by_session(
        store, ToolCall, columns, session_ids
    ):
        if end is None and duration is None:
            continue  # never finished: no duration to replay
        end = end if end is not None else start + duration
        deadline = timeout if timeout is not None else env_timeout
        out[sid].append(_Call(start, end, name or "tool", command, deadline))
    return out


def _merged_tool(calls: list[_Call]) -> TraceTool | None:
    if not calls:
        return None
    longest = max(calls, key=lambda c: c.ended_at - c.started_at)
    span = max(c.ended_at for c in calls) - min(c.started_at for c in calls)
    return TraceTool(longest.name, longest.command, round(max(0.0, span), 6), longest.timeout_s)


def _turns(requests: list[_Request], calls: list[_Call]) -> tuple[TraceTurn, ...]:
    turns: list[TraceTurn] = []
    context = 0
    for index, request in enumerate(requests):
        window_end = requests[index + 1].started_at if index + 1 < len(requests) else None
        between = (
            [] if window_end is None else [c for c in calls if request.ended_at <= c.started_at < window_end]
        )
        appended = request.prompt_tokens if index == 0 else max(0, request.prompt_tokens - context)
        turns.append(TraceTurn(appended, request.completion_tokens, _merged_tool(between)))
        context = max(context, request.prompt_tokens) + request.completion_tokens
    return tuple(turns)


def export_trace(
    store: Store, *, session: str | None = None, harness: str | None = None, limit: int | None = None
) -> list[TraceSession]:
    """Finished sessions (ended_at set) with at least one LLM request, oldest first."""
    stmt = select(Session.id, Session.harness, Session.started_at, Session.labels).where(
        Session.ended_at.is_not(None)
    )
    if session is not None:
        stmt = stmt.where(Session.id == session)
    if harness is not None:
        stmt = stmt.where(Session.harness == harness)
    stmt = stmt.order_by(Session.started_at, Session.id)
    if limit is not None:
        stmt = stmt.limit(limit)
    with store.engine.connect() as conn:
        rows = list(conn.execute(stmt))
    ids = [row.id for row in rows]
    requests, calls = _requests(store, ids), _calls(store, ids)
    rows = [row for row in rows if requests.get(row.id)]
    if not rows:
        return []
    group_of = {row.id: (row.labels or {}).get("prefix_group") or row.harness for row in rows}
    first_cached: dict[str | None, list[int]] = defaultdict(list)
    for row in rows:
        first_cached[group_of[row.id]].append(requests[row.id][0].cached_tokens)
    shared = {group: int(statistics.median(values)) for group, values in first_cached.items()}
    origin = min(
        row.started_at if row.started_at is not None else requests[row.id][0].started_at for row in rows
    )
    out: list[TraceSession] = []
    for row in rows:
        turns = _turns(requests[row.id], calls.get(row.id, []))
        start = row.started_at if row.started_at is not None else requests[row.id][0].started_at
        group = group_of[row.id]
        out.append(
            TraceSession(
                session=row.id,
                arrival_s=round(max(0.0, start - origin), 6),
                prefix_group=group,
                shared_prefix_tokens=min(shared[group], turns[0].input_tokens) if group is not None else 0,
                turns=turns,
            )
        )
    return out
