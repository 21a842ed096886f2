"""Ends of Claude Code background jobs (background Bash, Monitor watches), read from its transcript.

No hook fires when such a job ends. Claude Code does append a `queue-operation` record to the session
transcript (`transcript_path` of every hook body) when it queues the job's notification for the model:

    {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-11-30T16:25:42.225Z",
     "content": "<task-notification>\\n<task-id>b4h6aj1rv</task-id>\\n<tool-use-id>toolu_…</tool-use-id>
     ...<status>failed</status>\\n<summary>Background command \\"x\\" failed with exit code 3</summary>..."}

Checked with 2.1.328: terminal statuses are completed, failed, killed and stopped; the summary carries the
exit code as "(exit code N)" / "failed with exit code N" (background Bash) or "(exit N)" (Monitor). A
Monitor whose `timeout_ms` passes gets no status line, only the event "[Monitor expired after Ns ...]".
The same lifecycle appears in `--output-format stream-json` (task_started, task_updated with status and
`end_time` in ms, task_notification with status and summary). The transcript is written in every output
mode, so it is always read; when the agent prints stream-json, `tao-run` passes its stdout through and
feeds the lines here too: its `end_time` is the job's exact end, while the transcript's notice is queued
a little later (0.4 s behind on a loaded machine).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from tao_harness.events import ToolEnd
from tao_harness.outcomes import ToolStatus, status_of_exit
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator, OpenJob

log = logging.getLogger(__name__)
_TAG = re.compile(r"<(task-id|status|summary|event)>(.*?)</\1>", re.DOTALL)
_EXIT = re.compile(r"\(exit(?: code)? (-?\d+)\)|with exit code (-?\d+)")
_EXPIRED = "[Monitor expired after"
# A stopped watch that ran this close to its timeout was stopped by the timeout.
_EXPIRY_SLACK_S = 0.25


@dataclass(frozen=True, slots=True)
class JobEnd:
    task_id: str
    at: float  # Unix seconds, Claude Code's own timestamp
    state: str  # completed, failed, killed, stopped, expired
    exit_code: int | None


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def job_end(line: str) -> JobEnd | None:
    """The job end a transcript line reports, if it reports one."""
    if "task-notification" not in line:
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "queue-operation" \
            or record.get("operation") != "enqueue" or not isinstance(record.get("content"), str):
        return None
    at = _timestamp(record.get("timestamp"))
    tags = {name: value.strip() for name, value in _TAG.findall(record["content"])}
    task_id = tags.get("task-id")
    if at is None or not task_id:
        return None
    state = tags.get("status") or ("expired" if tags.get("event", "").startswith(_EXPIRED) else None)
    if state is None:
        return None  # a Monitor event: the watch goes on
    return JobEnd(task_id, at, state, _exit_code(tags.get("summary", "")))


def _exit_code(summary: str) -> int | None:
    found = _EXIT.search(summary)
    return int(found.group(1) or found.group(2)) if found else None


def stream_job_event(line: str) -> tuple[str, float | None, JobEnd | None] | None:
    """(task id, exact end time, terminal end) from a stream-json line about a task, if it is one."""
    if '"task_' not in line:
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "system" or not isinstance(record.get("task_id"), str):
        return None
    task_id = record["task_id"]
    if record.get("subtype") == "task_updated":
        patch = record.get("patch") if isinstance(record.get("patch"), dict) else {}
        end_ms = patch.get("end_time")
        valid = isinstance(end_ms, (int, float)) and not isinstance(end_ms, bool)
        return task_id, end_ms / 1000 if valid else None, None
    if record.get("subtype") == "task_notification" and isinstance(record.get("status"), str):
        summary = record.get("summary") if isinstance(record.get("summary"), str) else ""
        return task_id, None, JobEnd(task_id, time.time(), record["status"], _exit_code(summary))
    return None


def job_status(end: JobEnd, job: OpenJob) -> ToolStatus:
    if end.state == "expired":
        return "timeout"
    if end.state in ("killed", "stopped"):
        expiry = job.expires_after_s
        ran_out = expiry is not None and end.at - job.started_at >= expiry - _EXPIRY_SLACK_S
        return "timeout" if ran_out else "cancelled"
    if end.exit_code is not None:
        status = status_of_exit(end.exit_code)
        return "error" if end.state == "failed" and status == "ok" else status
    return "error" if end.state == "failed" else "ok"


class JobFollower:
    """Reads new transcript lines and closes the translator's open jobs with what they report."""

    def __init__(self, translator: ClaudeHookTranslator, submit: Callable[[ToolEnd], None]) -> None:
        self._translator = translator
        self._submit = submit
        self._offset = 0
        self._partial = b""
        # Ends read before their job was opened (a job that ended within its own launch hook).
        self._early: dict[str, JobEnd] = {}
        # Exact end times from stream-json `task_updated`, by task id.
        self._end_times: dict[str, float] = {}

    def _new_lines(self, path: str) -> list[str]:
        try:
            with open(path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return []
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in lines]

    def feed_stream_line(self, line: str) -> None:
        """One line of the agent's stream-json output (never raises)."""
        event = stream_job_event(line)
        if event is None:
            return
        task_id, end_time, end = event
        if end_time is not None:
            self._end_times[task_id] = end_time
        if end is not None:
            self._early.setdefault(task_id, end)
            self.poll()

    def poll(self) -> None:
        """Read the transcript's new lines and close the jobs they end. Never raises: telemetry fails open."""
        try:
            path = self._translator.transcript_path
            if path is not None:
                for line in self._new_lines(path):
                    end = job_end(line)
                    if end is not None:
                        self._early.setdefault(end.task_id, end)
            self._close_ended()
        except Exception:  # noqa: BLE001 - a transcript we cannot read must not stop the run
            log.exception("reading the Claude Code transcript failed; background job ends may be missing")

    def _close_ended(self) -> None:
        jobs = self._translator.jobs
        for task_id in [t for t in jobs if t in self._early]:
            job, end = jobs.pop(task_id), self._early.pop(task_id)
            at = self._end_times.pop(task_id, end.at)
            self._submit(ToolEnd(session=self._translator.session, call_id=job.call_id, at=at,
                                 duration_s=max(0.0, at - job.started_at), status=job_status(end, job),
                                 exit_code=end.exit_code))

    def close(self, at: float) -> None:
        """The agent has exited: read what is left; jobs it never reported ended with the session."""
        self.poll()
        jobs = self._translator.jobs
        for job in list(jobs.values()):
            self._submit(ToolEnd(session=self._translator.session, call_id=job.call_id, at=at,
                                 duration_s=max(0.0, at - job.started_at), status="cancelled"))
        jobs.clear()

    async def run(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.poll()

