"""What each agent itself saw of its tool calls, read from its own output, for the e2e checks.

- Claude Code: `--output-format stream-json` (tool_use / tool_result messages with their timestamps;
  task_started / task_updated / task_notification for background jobs and Monitor watches), or, when it
  prints no stream, its session transcript file (the same messages; job ends as queued notices);
- OpenCode: `--format json` (`tool_use` parts with `state.time`, `state.metadata.exit`, output);
- mini-SWE-agent: its trajectory file (`-o`): tool calls, `extra.returncode`, `extra.exception_type`,
  `extra.timestamp`, and the environment timeout in `info.config`;
- Codex CLI: `codex exec --json` (`command_execution` items: the command as run, `exit_code`, `status`;
  no timestamps, and item ids of its own, not the model's call ids).
Parsed independently of the shims (plain field reads), so a shim bug cannot hide in both.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass
class SeenJob:
    """A background job / watch as the harness reported it."""

    task_id: str
    status: str | None = None  # the harness's own word: completed, failed, killed, ...
    ended: float | None = None
    exit_code: int | None = None


@dataclass
class SeenCall:
    call_id: str
    tool: str
    command: str | None
    input: dict[str, Any]
    # The agent's own clock: when it issued the call and when the result came back (None: not reported).
    issued: float | None = None
    returned: float | None = None
    exit_code: int | None = None
    timed_out: bool = False  # stopped by the harness's own tool timeout
    failed: bool = False
    deadline_s: float | None = None  # the harness's tool deadline that applied, in seconds
    job: SeenJob | None = None


@dataclass
class Transcript:
    calls: dict[str, SeenCall] = field(default_factory=dict)

    def by_command(self, command: str) -> SeenCall:
        found = [c for c in self.calls.values() if c.command == command]
        assert len(found) == 1, f"{command!r}: {found}"
        return found[0]


def _iso(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


_TAG = re.compile(r"<(task-id|status|summary)>(.*?)</\1>", re.DOTALL)


def claude_stream(path: Path) -> Transcript:
    """Claude Code's stream-json output, or its session transcript (`~/.claude/projects/<cwd>/<id>.jsonl`:
    the same message records; a job's end is the notice it queues for the model)."""
    seen = Transcript()
    jobs: dict[str, SeenJob] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        kind, subtype = record.get("type"), record.get("subtype")
        if kind == "queue-operation" and record.get("operation") == "enqueue":
            tags = dict(_TAG.findall(str(record.get("content"))))
            job = jobs.get(tags.get("task-id", ""))
            if job is not None and "status" in tags and job.status is None:
                job.status, job.ended = tags["status"], _iso(record["timestamp"])
                match = re.search(r"exit(?: code)? (\d+)", tags.get("summary", ""))
                job.exit_code = int(match.group(1)) if match else None
            continue
        if kind == "user" and isinstance(record.get("toolUseResult"), dict):  # the transcript's tool result
            result = record["toolUseResult"]
            task_id = result.get("backgroundTaskId") or result.get("taskId")
            for part in record["message"]["content"]:
                if isinstance(part, dict) and part.get("type") == "tool_result" and task_id:
                    seen.calls[part["tool_use_id"]].job = jobs.setdefault(task_id, SeenJob(task_id))
        if kind == "assistant":
            for part in record["message"]["content"]:
                if part.get("type") == "tool_use":
                    tool_input = part.get("input") or {}
                    timeout = tool_input.get("timeout")
                    seen.calls[part["id"]] = SeenCall(
                        part["id"], part["name"], tool_input.get("command"), tool_input,
                        issued=_iso(record["timestamp"]),
                        deadline_s=timeout / 1000 if isinstance(timeout, int) else None)
        elif kind == "user":
            for part in record["message"]["content"]:
                if not isinstance(part, dict) or part.get("type") != "tool_result":
                    continue
                call = seen.calls[part["tool_use_id"]]
                call.returned = _iso(record["timestamp"])
                text = _text(part.get("content"))
                call.failed = part.get("is_error") is True
                match = re.match(r"Exit code (\d+)", text)
                if match:
                    call.exit_code = int(match.group(1))
                elif not call.failed and call.tool == "Bash" and not call.input.get("run_in_background"):
                    call.exit_code = 0
                call.timed_out = "Command timed out" in text
        elif kind == "system" and subtype == "task_started" and record.get("is_backgrounded"):
            job = jobs.setdefault(record["task_id"], SeenJob(record["task_id"]))
            seen.calls[record["tool_use_id"]].job = job
        elif kind == "system" and subtype == "task_updated" and record["task_id"] in jobs:
            patch = record.get("patch") or {}
            job = jobs[record["task_id"]]
            job.status = patch.get("status", job.status)
            if isinstance(patch.get("end_time"), (int, float)):
                job.ended = patch["end_time"] / 1000
        elif kind == "system" and subtype == "task_notification" and record["task_id"] in jobs:
            match = re.search(r"exit(?: code)? (\d+)", record.get("summary", ""))
            if match:
                jobs[record["task_id"]].exit_code = int(match.group(1))
    return seen


OPENCODE_TIMED_OUT = "terminated command after exceeding timeout"


def opencode_json(path: Path) -> Transcript:
    seen = Transcript()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        part = record.get("part") or {}
        if part.get("type") != "tool":
            continue
        state = part["state"]
        metadata = state.get("metadata") or {}
        tool_input = state.get("input") or {}
        timeout = tool_input.get("timeout")
        call = SeenCall(part["callID"], part["tool"], tool_input.get("command"), tool_input,
                        issued=state["time"]["start"] / 1000, returned=state["time"]["end"] / 1000,
                        deadline_s=timeout / 1000 if isinstance(timeout, int) else None)
        call.exit_code = metadata.get("exit") if isinstance(metadata.get("exit"), int) else None
        call.timed_out = OPENCODE_TIMED_OUT in str(metadata.get("output") or state.get("output") or "")
        call.failed = state.get("status") == "error"
        seen.calls[call.call_id] = call
    return seen


def mini_trajectory(path: Path) -> Transcript:
    data = json.loads(path.read_text())
    deadline = data["info"]["config"]["environment"]["timeout"]
    seen = Transcript()
    for message in data["messages"]:
        for tool_call in message.get("tool_calls") or []:
            arguments = json.loads(tool_call["function"]["arguments"])
            seen.calls[tool_call["id"]] = SeenCall(tool_call["id"], tool_call["function"]["name"],
                                                   arguments.get("command"), arguments, deadline_s=deadline)
        if message.get("role") == "tool" and message.get("tool_call_id") in seen.calls:
            call, extra = seen.calls[message["tool_call_id"]], message.get("extra") or {}
            call.returned = extra.get("timestamp")
            call.timed_out = extra.get("exception_type") == "TimeoutExpired"
            code = extra.get("returncode")
            call.exit_code = code if isinstance(code, int) and code >= 0 else None
            call.failed = bool(extra.get("exception_info"))
    return seen


def codex_json(path: Path) -> Transcript:
    """Codex's JSONL events; a call is keyed by its item id and found by its command (`bash -lc CMD` → CMD)."""
    seen = Transcript()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        item = record.get("item") or {}
        if record.get("type") != "item.completed" or item.get("type") != "command_execution":
            continue
        words = shlex.split(item["command"])
        command = words[-1] if len(words) == 3 and words[1] == "-lc" else item["command"]
        call = SeenCall(item["id"], "exec_command", command, {"cmd": command})
        call.exit_code = item.get("exit_code") if isinstance(item.get("exit_code"), int) else None
        call.failed = item.get("status") == "failed"
        seen.calls[call.call_id] = call
    return seen
