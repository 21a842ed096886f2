"""Claude Code hook bodies -> tool events.

Claude Code POSTs each hook's input JSON to the relay (`type: "http"` hooks). Fields used:
`hook_event_name`, `session_id` (equals the `X-Claude-Code-Session-Id` of its LLM requests),
`tool_name`, `tool_input` (Bash: `command`, `timeout` in ms, `run_in_background`; Monitor: `command`,
`timeout_ms`, `persistent`), `tool_use_id`, and on PostToolUse / PostToolUseFailure `duration_ms`
(the harness-measured duration) and `is_interrupt`. The relay's clock stamps `at`: hooks are sent
synchronously around the tool, so receipt time is start/end time to within the hook's own latency.
`Stop` closes calls that never got a Post hook (a tool the user interrupted) as interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tao_harness.events import ToolEnd, ToolEvent, ToolStart

HARNESS = "claude-code"
# Where the relay receives Claude Code hook requests.
CLAUDE_HOOK_PATH = "/hooks/claude-code"


@dataclass(frozen=True, slots=True)
class HookOutcome:
    events: tuple[ToolEvent, ...] = ()
    # Claude Code's own session id, when the body carried one.
    harness_session_id: str | None = None


def _duration_s(body: Mapping[str, Any]) -> float | None:
    value = body.get("duration_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return value / 1000.0


class ClaudeHookTranslator:
    """Stateful per run: remembers open calls so `Stop` can close the ones left without a Post hook."""

    def __init__(self, session: str) -> None:
        self.session = session
        self._open: dict[str, float] = {}

    def translate(self, body: Mapping[str, Any], at: float) -> HookOutcome:
        kind = body.get("hook_event_name")
        harness_session = body.get("session_id") if isinstance(body.get("session_id"), str) else None
        call_id = body.get("tool_use_id")
        events: tuple[ToolEvent, ...] = ()
        if kind == "PreToolUse" and isinstance(call_id, str) and call_id:
            tool_input = body.get("tool_input") if isinstance(body.get("tool_input"), Mapping) else {}
            command = tool_input.get("command")
            events = (ToolStart(
                session=self.session, call_id=call_id, tool_name=str(body.get("tool_name") or "unknown"),
                at=at, harness=HARNESS, command=command if isinstance(command, str) else None,
                args=dict(tool_input)),)
            self._open[call_id] = at
        elif kind in ("PostToolUse", "PostToolUseFailure") and isinstance(call_id, str) and call_id:
            if kind == "PostToolUse":
                status = "ok"
            else:
                status = "interrupted" if body.get("is_interrupt") is True else "error"
            self._open.pop(call_id, None)
            events = (ToolEnd(session=self.session, call_id=call_id, at=at, duration_s=_duration_s(body),
                              status=status),)
        elif kind == "Stop":
            events = tuple(ToolEnd(session=self.session, call_id=c, at=at, status="interrupted")
                           for c in self._open)
            self._open.clear()
        return HookOutcome(events, harness_session)


TOOL_HOOKS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
SESSION_HOOKS: tuple[str, ...] = ("Stop", "SessionEnd")


def hook_settings(relay_hook_url: str, timeout_s: int) -> dict[str, Any]:
    """The `hooks` block of a Claude Code settings file that sends every hook above to the relay."""
    entry = {"type": "http", "url": relay_hook_url, "timeout": timeout_s}
    hooks: dict[str, Any] = {name: [{"matcher": "*", "hooks": [entry]}] for name in TOOL_HOOKS}
    hooks.update({name: [{"hooks": [entry]}] for name in SESSION_HOOKS})
    return hooks
