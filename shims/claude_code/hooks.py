"""Claude Code hook bodies -> tool events.

Claude Code POSTs each hook's input JSON to the relay (`type: "http"` hooks). Fields used:
`hook_event_name`, `session_id` (equals the `X-Claude-Code-Session-Id` of its LLM requests),
`transcript_path`, `tool_name`, `tool_input` (Bash: `command`, `timeout` in ms, `run_in_background`;
Monitor: `command`, `timeout_ms`, `persistent`), `tool_use_id`, on PostToolUse / PostToolUseFailure
`duration_ms` (the harness-measured duration), on PostToolUse `tool_response` (`backgroundTaskId` of a
background Bash, `taskId` of a Monitor watch), on PostToolUseFailure `error` ("Exit code N", plus
"Command timed out after ..." for its own timeout) and `is_interrupt`; outcomes are read by
`tao_harness.outcomes.claude_failure`. The relay's clock stamps `at`: hooks are sent synchronously
around the tool, so receipt time is start/end time to within the hook's own latency.
A call that leaves work running (a background Bash, a Monitor) also opens a job (`kind: "job"`, call id
`<tool_use_id>:job`) from the launch; no hook reports its end: `transcript.py` reads it from the
session transcript. `Stop` closes calls that never got a Post hook (a tool the user interrupted) as
cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tao_harness.events import ToolEnd, ToolEvent, ToolStart
from tao_harness.outcomes import claude_failure
from tao_harness.readiness.family import is_shell_tool

HARNESS = "claude-code"
# Where the relay receives Claude Code hook requests.
CLAUDE_HOOK_PATH = "/hooks/claude-code"
JOB_SUFFIX = ":job"
# Launch arguments that describe the launch, not the job's own work.
_LAUNCH_ONLY_ARGS = ("run_in_background",)


@dataclass(frozen=True, slots=True)
class HookOutcome:
    events: tuple[ToolEvent, ...] = ()
    # Claude Code's own session id, when the body carried one.
    harness_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class OpenJob:
    """Background work a call launched, waiting for its end in the transcript."""

    call_id: str  # the job's own id: `<tool_use_id>:job`
    tool_name: str
    started_at: float
    # Monitor's `timeout_ms` in seconds: the watch expires then unless its command ends first.
    expires_after_s: float | None


def _duration_s(body: Mapping[str, Any]) -> float | None:
    value = body.get("duration_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return value / 1000.0


def _task_id(body: Mapping[str, Any]) -> str | None:
    response = body.get("tool_response")
    if not isinstance(response, Mapping):
        return None
    value = response.get("backgroundTaskId") or response.get("taskId")
    return value if isinstance(value, str) and value else None


def _expiry_s(tool_input: Mapping[str, Any]) -> float | None:
    value = tool_input.get("timeout_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value / 1000.0


class ClaudeHookTranslator:
    """Stateful per run: remembers open calls so `Stop` can close the ones left without a Post hook,
    and open jobs (by Claude Code task id) so the transcript reader can close them."""

    def __init__(self, session: str) -> None:
        self.session = session
        self._open: dict[str, ToolStart] = {}
        self.jobs: dict[str, OpenJob] = {}
        # The session transcript Claude Code writes (from the hook bodies), where job ends are read.
        self.transcript_path: str | None = None

    def translate(self, body: Mapping[str, Any], at: float) -> HookOutcome:
        kind = body.get("hook_event_name")
        harness_session = body.get("session_id") if isinstance(body.get("session_id"), str) else None
        if isinstance(body.get("transcript_path"), str) and body["transcript_path"]:
            self.transcript_path = body["transcript_path"]
        call_id = body.get("tool_use_id")
        events: tuple[ToolEvent, ...] = ()
        if kind == "PreToolUse" and isinstance(call_id, str) and call_id:
            tool_input = body.get("tool_input") if isinstance(body.get("tool_input"), Mapping) else {}
            command = tool_input.get("command")
            start = ToolStart(
                session=self.session, call_id=call_id, tool_name=str(body.get("tool_name") or "unknown"),
                at=at, harness=HARNESS, command=command if isinstance(command, str) else None,
                args=dict(tool_input))
            events = (start,)
            self._open[call_id] = start
        elif kind == "PostToolUse" and isinstance(call_id, str) and call_id:
            launch = self._open.pop(call_id, None)
            task_id = _task_id(body)
            # A foreground shell command that succeeded exited 0; a launch's own work has not ended.
            ran = launch is not None and task_id is None and is_shell_tool(launch.tool_name)
            events = (ToolEnd(session=self.session, call_id=call_id, at=at, duration_s=_duration_s(body),
                              status="ok", exit_code=0 if ran else None),)
            if task_id is not None and launch is not None:
                events += (self._open_job(task_id, launch),)
        elif kind == "PostToolUseFailure" and isinstance(call_id, str) and call_id:
            self._open.pop(call_id, None)
            status, exit_code = claude_failure(body.get("error"), body.get("is_interrupt") is True)
            events = (ToolEnd(session=self.session, call_id=call_id, at=at, duration_s=_duration_s(body),
                              status=status, exit_code=exit_code),)
        elif kind == "Stop":
            events = tuple(ToolEnd(session=self.session, call_id=c, at=at, status="cancelled")
                           for c in self._open)
            self._open.clear()
        return HookOutcome(events, harness_session)

    def _open_job(self, task_id: str, launch: ToolStart) -> ToolStart:
        job = OpenJob(launch.call_id + JOB_SUFFIX, launch.tool_name, launch.at, _expiry_s(launch.args))
        self.jobs[task_id] = job
        args = {k: v for k, v in launch.args.items() if k not in _LAUNCH_ONLY_ARGS}
        return ToolStart(session=self.session, call_id=job.call_id, tool_name=launch.tool_name,
                         at=launch.at, harness=HARNESS, command=launch.command,
                         args={**args, "task_id": task_id}, kind="job")


TOOL_HOOKS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
SESSION_HOOKS: tuple[str, ...] = ("Stop", "SessionEnd")


def hook_settings(relay_hook_url: str, timeout_s: int) -> dict[str, Any]:
    """The `hooks` block of a Claude Code settings file that sends every hook above to the relay."""
    entry = {"type": "http", "url": relay_hook_url, "timeout": timeout_s}
    hooks: dict[str, Any] = {name: [{"matcher": "*", "hooks": [entry]}] for name in TOOL_HOOKS}
    hooks.update({name: [{"hooks": [entry]}] for name in SESSION_HOOKS})
    return hooks
