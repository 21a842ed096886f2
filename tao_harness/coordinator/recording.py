"""What a tool event becomes in the history store: one `ToolCallRecord` per call, upserted by (session, call id).

Shared by the live coordinator and `tao history import-spool` (events replayed straight from a shim's
spool into the store when no coordinator is running), so both record the same family key and hints.
"""

from __future__ import annotations

from tao_harness.events import ToolEnd, ToolEvent, ToolStart
from tao_harness.readiness.call import describe_call
from tao_harness.store.records import ToolCallRecord


def tool_call_record(event: ToolEvent) -> ToolCallRecord:
    if isinstance(event, ToolEnd):
        return ToolCallRecord(id=event.call_id, session_id=event.session, ended_at=event.at,
                              duration_s=event.duration_s, status=event.status, exit_code=event.exit_code,
                              source=event.source)
    if isinstance(event, ToolStart):
        family, hints = describe_call(event.tool_name, event.command, event.args,
                                      env_timeout_s=event.env_timeout_s, harness=event.harness,
                                      kind=event.kind)
        return ToolCallRecord(
            id=event.call_id, session_id=event.session, harness=event.harness, tool_name=event.tool_name,
            family=family, command=event.command,
            args=dict(event.args) or None, hints=hints.to_json(), timeout_s=hints.max_s,
            env_timeout_s=event.env_timeout_s, background=hints.background, started_at=event.at,
            source=event.source,
        )
    raise TypeError(f"not a tool event: {event!r}")
