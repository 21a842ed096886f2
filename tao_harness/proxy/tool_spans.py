"""Tool calls read from the LLM traffic, reported to the coordinator as a shim reports them.

A call's span runs from the end of the response that named it (the agent starts the tool once it has the
whole response) to the arrival of the request that carries its result (the agent asks again once the
tool returned). That is the tool's time plus the agent's own handling on both sides, which a shim, where
there is one, measures exactly: the shim's record of the same call id wins (tao_harness.store.upsert,
and the coordinator keeps the shim's start). Parallel calls of one turn are one row each, all with the
turn's start and the end of the request that returned their results (the traffic cannot tell which of
them finished first).

A call stays open until a request of its session carries its result, or continues the conversation that
made it without one (the agent dropped it: cancelled). Other requests of the session — side requests
such as Claude Code's title or summary calls, which share its session id — leave it open. A text action
(mini-SWE-agent's text-based configs, no call id in the traffic) gets an id of the proxy's making
(`TEXT_CALL_PREFIX` + the request id) and ends at the session's next request.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from tao_harness.events import ToolEnd, ToolStart
from tao_harness.outcomes import ToolStatus
from tao_harness.proxy.tool_results import Results, outcome
from tao_harness.proxy.turns import Turn
from tao_harness.readiness.hints import command_text

# Ids of the proxy's making: the coordinator drops such calls in sessions a shim reports for, where the
# shim's own (random) id names the same call.
TEXT_CALL_PREFIX = "proxy-text-"
TEXT_TOOL = "bash"
# Sessions whose open calls are remembered; the least recently active are forgotten first.
MAX_SESSIONS = 65536


@dataclass(frozen=True, slots=True)
class _Open:
    started_at: float
    # A text action: ended by the session's next request (no result names it).
    text: bool = False


def _command(arguments: dict[str, object]) -> str | None:
    """The shell command of a call's arguments: `command` (a string, or Codex's argv list), else Codex's
    `cmd`."""
    command = command_text(None, arguments)
    cmd = arguments.get("cmd")
    return command if command is not None or not isinstance(cmd, str) else cmd


class ToolSpans:
    """The calls each session's responses made that no request has returned yet."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._open: OrderedDict[str, dict[str, _Open]] = OrderedDict()
        self._max_sessions = max_sessions

    def started(self, session: str, request_id: str, turn: Turn, at: float,
                harness: str | None) -> list[ToolStart]:
        """The calls `turn` (the response to `request_id`, ended at `at`) made, now open."""
        starts = [ToolStart(session=session, call_id=call.call_id, tool_name=call.name, at=at, harness=harness,
                            command=_command(call.arguments), args=call.arguments, source="proxy")
                  for call in turn.calls]
        text = turn.text_command()
        if text is not None:
            starts.append(ToolStart(session=session, call_id=TEXT_CALL_PREFIX + request_id, tool_name=TEXT_TOOL,
                                    at=at, harness=harness, command=text, args={"command": text},
                                    source="proxy"))
        if starts:
            calls = self._open.setdefault(session, {})
            self._open.move_to_end(session)
            for start in starts:
                calls[start.call_id] = _Open(at, text=start.call_id.startswith(TEXT_CALL_PREFIX))
            if len(self._open) > self._max_sessions:
                self._open.popitem(last=False)
        return starts

    def has_open(self, session: str) -> bool:
        """Whether a call of `session` waits for its result (else its requests need no reading)."""
        return session in self._open

    def ended(self, session: str, results: Results | None, at: float) -> list[ToolEnd]:
        """The open calls of `session` that the request arriving at `at` (with `results`) returns."""
        calls = self._open.get(session)
        if not calls or results is None:
            return []
        ends = []
        for call_id, call in list(calls.items()):
            result = results.by_id.get(call_id)
            status: ToolStatus
            if result is not None:
                status, exit_code = outcome(result.text, result.is_error)
            elif call.text:
                status, exit_code = outcome(results.text, None)
            elif call_id in results.named:
                status, exit_code = "cancelled", None
            else:
                continue
            del calls[call_id]
            ended_at = max(at, call.started_at)
            ends.append(ToolEnd(session=session, call_id=call_id, at=ended_at, duration_s=ended_at - call.started_at,
                                status=status, exit_code=exit_code, source="proxy"))
        if not calls:
            del self._open[session]
        return ends

