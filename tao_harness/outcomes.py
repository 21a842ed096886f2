"""How a tool call ended: one vocabulary for every harness, with the real exit code where it is known.

    status      meaning                                                  exit_code
    ok          the tool did its job (a shell command exited 0)          0 for shell commands
    error       it failed: a shell command exited non-zero, the tool     the command's own code
                refused its input, the harness raised
    timeout     a deadline stopped it: the harness's own tool timeout    the harness's code when it
                (Claude Code `timeout`, OpenCode `timeout`, mini-SWE-     gives one (Claude Code 143),
                agent `environment.timeout`) or GNU `timeout` (exit      124 for GNU `timeout`
                124)
    killed      a signal ended the command (exit 128+N, e.g. 137 for     128+N
                SIGKILL) without a deadline behind it
    cancelled   the user or the harness stopped the call (Ctrl-C, an     none
                interrupt, the session ended while it ran)

A `timeout` or `cancelled` call was stopped before its work ended: its duration is a censored sample
(the work would have taken at least that long), never a plain duration for the statistics.

What each harness reports, and how it is read (checked with Claude Code 2.1.328, OpenCode 1.18.33,
mini-SWE-agent 2.4.6):
- Claude Code: PostToolUse -> ok (0 for Bash). PostToolUseFailure's `error` text starts with
  "Exit code N" for a shell command; "Command timed out after ..." on a following line marks its own
  timeout (then N is 143); `is_interrupt: true` -> cancelled. No numeric field exists.
- OpenCode: every finished bash part is `completed`; `state.metadata.exit` is the exit code, null when
  its own timeout killed the command (the output then says "terminated command after exceeding
  timeout"). An `error` part is a tool failure (error) or an abort (cancelled).
- mini-SWE-agent: `execute` returns `returncode`; a `TimeoutExpired` exception (returncode -1, a
  placeholder: the process group was SIGKILLed) is its timeout; the submit command raises `Submitted`
  after exiting 0.
The mini-SWE-agent launcher runs in the agent's own interpreter and gets a copy of this module, so it
must stay standard-library only.
"""

from __future__ import annotations

import re
from typing import Literal, cast

ToolStatus = Literal["ok", "error", "timeout", "killed", "cancelled"]
TOOL_STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "killed", "cancelled")
# Older shims (and their spool files) said "interrupted" for what is now "cancelled".
LEGACY_STATUSES = {"interrupted": "cancelled"}

# Statuses whose duration is not the work's length but a lower bound of it (a censored sample).
CENSORED_STATUSES: tuple[str, ...] = ("timeout", "cancelled")
GNU_TIMEOUT_EXIT = 124
_SIGNAL_BASE = 128
_MAX_SIGNAL = 64
_CLAUDE_EXIT = re.compile(r"^\s*(?:Error:\s*)?Exit code (-?\d+)\b")
_CLAUDE_TIMED_OUT = re.compile(r"^\s*Command timed out after\b", re.MULTILINE)


def status_of_exit(exit_code: int) -> ToolStatus:
    """The status a shell command's exit code alone implies."""
    if exit_code == 0:
        return "ok"
    if exit_code == GNU_TIMEOUT_EXIT:
        return "timeout"
    if _SIGNAL_BASE < exit_code <= _SIGNAL_BASE + _MAX_SIGNAL:
        return "killed"
    return "error"


def normalize_status(status: str) -> ToolStatus | None:
    """A status from the wire in this vocabulary (legacy names mapped), or None if it is not one."""
    status = LEGACY_STATUSES.get(status, status)
    return cast(ToolStatus, status) if status in TOOL_STATUSES else None


def is_censored(status: str | None) -> bool:
    """True when the call was stopped before its work ended: its duration is only a lower bound."""
    return status in CENSORED_STATUSES


def claude_failure(error: object, interrupted: bool) -> tuple[ToolStatus, int | None]:
    """(status, exit code) of a Claude Code PostToolUseFailure from its `error` text and `is_interrupt`."""
    if interrupted:
        return "cancelled", None
    text = error if isinstance(error, str) else ""
    match = _CLAUDE_EXIT.match(text)
    exit_code = int(match.group(1)) if match else None
    if _CLAUDE_TIMED_OUT.search(text):
        return "timeout", exit_code
    if exit_code is None:
        return "error", None
    status = status_of_exit(exit_code)
    # A failure hook with "Exit code 0" does not happen; if it did, the harness still called it a failure.
    return ("error" if status == "ok" else status), exit_code
