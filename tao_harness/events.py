"""Tool events: what shims report about tool calls, in one wire format for every harness.

A shim sends `tool_start` when the harness launches a tool and `tool_end` when it returns; both carry
the harness's own call id so they pair up. Times are Unix seconds measured by the shim (the harness's
clock), so a late delivery (from the spool) keeps the true timing. JSON form:

    {"type": "tool_start", "session": "s1", "call_id": "toolu_01", "tool_name": "Bash",
     "harness": "claude-code", "at": 1764400000.25, "command": "pytest -q",
     "args": {"command": "pytest -q", "timeout": 120000}, "env_timeout_s": null, "kind": "call"}
    {"type": "tool_end", "session": "s1", "call_id": "toolu_01", "at": 1764400004.5,
     "duration_s": 4.25, "status": "ok", "exit_code": 0}

`source` says who reported the event: "shim" (the default: the harness's own hooks) or "proxy" (the
proxy read the call from the LLM traffic: its start is the end of the response that named it, its end the
arrival of the request that carried its result). Both may report one call under the same call id; a
shim's record wins (tao_harness.store.upsert).

`duration_s` on `tool_end` is the harness-measured duration when it has one (Claude Code's
`duration_ms`), else null and the receiver uses `at` minus the start. `status` is one of
`tao_harness.outcomes.TOOL_STATUSES` (ok, error, timeout, killed, cancelled; the old "interrupted" is
read as cancelled) and `exit_code` the command's real exit code when the harness reports one.
Unknown fields are ignored. `events_from_body` also fits each event to what the history store can hold
(`fit_for_store`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Mapping

from tao_harness.outcomes import TOOL_STATUSES, ToolStatus, normalize_status
from tao_harness.store.limits import MAX_HARNESS_CHARS, LimitError, fit_json, fit_text, identifier, int32

CallKind = Literal["call", "job"]
CALL_KINDS: tuple[str, ...] = ("call", "job")
EventSource = Literal["shim", "proxy"]
EVENT_SOURCES: tuple[str, ...] = ("shim", "proxy")


class EventError(ValueError):
    """An event that cannot be used; the message names the field."""


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise EventError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _seconds(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    try:
        number = math.nan if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
    except OverflowError:  # an integer past the float range, e.g. 10**400
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise EventError(f"{key}: expected a non-negative number, got {str(value)[:40]}")
    return number


def _optional_text(data: Mapping[str, Any], key: str) -> str | None:
    return None if data.get(key) is None else _text(data, key)


def _optional_seconds(data: Mapping[str, Any], key: str) -> float | None:
    return None if data.get(key) is None else _seconds(data, key)


@dataclass(frozen=True, slots=True)
class ToolStart:
    session: str
    # The harness's id for this call (Claude Code tool_use_id, OpenCode callID, ...).
    call_id: str
    # The harness's tool name ("Bash", "bash", "Read", "Monitor", ...).
    tool_name: str
    # Unix seconds when the tool was launched.
    at: float
    harness: str | None = None
    # Shell command text, when the tool runs one.
    command: str | None = None
    # The tool's own argument object, for hints (timeouts, background flags).
    args: Mapping[str, Any] = field(default_factory=dict)
    # A harness-wide deadline in seconds (mini-SWE-agent `environment.timeout`).
    env_timeout_s: float | None = None
    # "call": the agent waits for it (a turn's tool call). "job": work a call left running — a background
    # command or a Monitor watch — from its launch to the end the harness reported; the agent does not
    # wait for it, so it holds no turn and has its own family (`<family>@job`).
    kind: CallKind = "call"
    source: EventSource = "shim"
    type: Literal["tool_start"] = "tool_start"


@dataclass(frozen=True, slots=True)
class ToolEnd:
    session: str
    call_id: str
    # Unix seconds when the tool returned.
    at: float
    # Harness-measured duration, when it reports one.
    duration_s: float | None = None
    status: ToolStatus = "ok"
    exit_code: int | None = None
    source: EventSource = "shim"
    type: Literal["tool_end"] = "tool_end"


ToolEvent = ToolStart | ToolEnd


def event_from_json(data: Any) -> ToolEvent:
    if not isinstance(data, Mapping):
        raise EventError(f"event: expected a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    session, call_id, at = _text(data, "session"), _text(data, "call_id"), _seconds(data, "at")
    source = data.get("source", "shim")
    if source not in EVENT_SOURCES:
        raise EventError(f"source: expected one of {', '.join(EVENT_SOURCES)}, got {source!r}")
    if kind == "tool_start":
        args = data.get("args") or {}
        if not isinstance(args, Mapping):
            raise EventError(f"args: expected an object, got {type(args).__name__}")
        command = data.get("command")
        if command is not None and not isinstance(command, str):
            raise EventError(f"command: expected a string, got {type(command).__name__}")
        call_kind = data.get("kind", "call")
        if call_kind not in CALL_KINDS:
            raise EventError(f"kind: expected one of {', '.join(CALL_KINDS)}, got {call_kind!r}")
        return ToolStart(session=session, call_id=call_id, tool_name=_text(data, "tool_name"), at=at,
                         harness=_optional_text(data, "harness"), command=command, args=dict(args),
                         env_timeout_s=_optional_seconds(data, "env_timeout_s"), kind=call_kind, source=source)
    if kind == "tool_end":
        raw_status = data.get("status", "ok")
        status = normalize_status(raw_status) if isinstance(raw_status, str) else None
        if status is None:
            raise EventError(f"status: expected one of {', '.join(TOOL_STATUSES)}, got {raw_status!r}")
        exit_code = data.get("exit_code")
        if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
            raise EventError(f"exit_code: expected an integer, got {exit_code!r}")
        return ToolEnd(session=session, call_id=call_id, at=at,
                       duration_s=_optional_seconds(data, "duration_s"), status=status,
                       exit_code=exit_code, source=source)
    raise EventError(f"type: expected 'tool_start' or 'tool_end', got {kind!r}")


def fit_for_store(event: ToolEvent) -> ToolEvent:
    """`event` as the history store can hold it (tao_harness.store.limits): names and the exit code are
    checked (EventError naming the field), command and argument text made to fit."""
    try:
        identifier("session", event.session)
        identifier("call_id", event.call_id)
        if isinstance(event, ToolEnd):
            if event.exit_code is not None:
                int32("exit_code", event.exit_code)
            return event
        identifier("tool_name", event.tool_name)
        if event.harness is not None:
            identifier("harness", event.harness, MAX_HARNESS_CHARS)
    except LimitError as exc:
        raise EventError(str(exc)) from None
    return replace(event, command=None if event.command is None else fit_text(event.command),
                   args=fit_json(dict(event.args)))


def event_to_json(event: ToolEvent) -> dict[str, Any]:
    data = asdict(event)
    if isinstance(event, ToolStart):
        data["args"] = dict(event.args)
    return data


def events_from_body(body: Any) -> list[ToolEvent]:
    """A `POST /v1/events` body: one event object or `{"events": [...]}`; errors name the index."""
    batch = isinstance(body, Mapping) and "events" in body
    items = body["events"] if batch else [body]
    if not isinstance(items, list):
        raise EventError("events: expected a list")
    events = []
    for index, item in enumerate(items):
        try:
            events.append(fit_for_store(event_from_json(item)))
        except EventError as exc:
            raise EventError(f"events[{index}].{exc}" if batch else str(exc)) from None
    return events
