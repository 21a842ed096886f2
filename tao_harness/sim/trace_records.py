"""Trace → history records: the inverse of `trace_export`, for seeding a history database from a trace.

Each session is laid out as if it had run alone with no admission wait: every LLM request takes
`llm_s`, every tool its recorded duration. The engine is assumed to have cached the whole previous
context of a session and, from the second session on, the shared prefix of its first prompt, so
`export_trace` recovers the same prefix groups and token counts. Tool args are not stored for shell
calls by the shims, so they are dropped here too.
"""

from __future__ import annotations

from collections.abc import Sequence

from tao_harness.sim.trace import TraceSession
from tao_harness.store.records import LLMRequestRecord, SessionRecord, StoreRecord, ToolCallRecord


def trace_to_records(
    sessions: Sequence[TraceSession],
    start: float = 1_700_000_000.0,
    llm_s: float = 0.5,
    harness: str = "trace",
) -> list[StoreRecord]:
    """Session, LLM-request and tool-call records for `sessions`, starting at epoch second `start`."""
    out: list[StoreRecord] = []
    for number, session in enumerate(sessions):
        now = start + session.arrival_s
        labels = {"prefix_group": session.prefix_group} if session.prefix_group else None
        out.append(SessionRecord(session.session, harness=harness, started_at=now, labels=labels))
        context = 0
        for index, turn in enumerate(session.turns):
            prompt = context + turn.input_tokens
            cached = session.shared_prefix_tokens if number > 0 and index == 0 else context
            out.append(
                LLMRequestRecord(
                    f"{session.session}/r{index}",
                    session.session,
                    prompt_tokens=prompt,
                    cached_tokens=cached,
                    completion_tokens=turn.output_tokens,
                    started_at=now,
                    ended_at=now + llm_s,
                )
            )
            now += llm_s
            context = prompt + turn.output_tokens
            if turn.tool is not None:
                tool = turn.tool
                out.append(
                    ToolCallRecord(
                        f"{session.session}/t{index}",
                        session.session,
                        harness=harness,
                        tool_name=tool.name,
                        command=tool.command,
                        timeout_s=tool.timeout_s,
                        started_at=now,
                        ended_at=now + tool.duration_s,
                        duration_s=tool.duration_s,
                    )
                )
                now += tool.duration_s
        out.append(SessionRecord(session.session, ended_at=now))
    return out
