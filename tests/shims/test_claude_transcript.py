"""Ends of Claude Code background jobs read from its transcript (record shapes as 2.1.328 writes them)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tao_harness.events import ToolEnd
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator, OpenJob
from tao_harness.shims.claude_code.transcript import JobEnd, JobFollower, job_end, job_status

STAMP = "2026-11-30T16:25:42.225Z"
AT = datetime.fromisoformat(STAMP.replace("Z", "+00:00")).timestamp()


def _notification(body: str, stamp: str = STAMP) -> str:
    return json.dumps({"type": "queue-operation", "operation": "enqueue", "timestamp": stamp, "sessionId": "x",
                       "content": f"<task-notification>\n{body}\n</task-notification>"})


def _terminal(task: str, status: str, summary: str, stamp: str = STAMP) -> str:
    return _notification(f"<task-id>{task}</task-id>\n<tool-use-id>toolu_1</tool-use-id>\n<output-file>/tmp/"
                         f"{task}.output</output-file>\n<status>{status}</status>\n<summary>{summary}</summary>",
                         stamp)


@pytest.mark.parametrize(("line", "expected"), [
    (_terminal("b1", "completed", 'Background command "Run sleep" completed (exit code 0)'),
     JobEnd("b1", AT, "completed", 0)),
    (_terminal("b1", "failed", 'Background command "Run sleep" failed with exit code 3'),
     JobEnd("b1", AT, "failed", 3)),
    (_terminal("b1", "failed", 'Monitor "Run sleep" script failed (exit 3)'), JobEnd("b1", AT, "failed", 3)),
    (_terminal("b1", "completed", 'Monitor "Run for" stream ended'), JobEnd("b1", AT, "completed", None)),
    (_notification('<task-id>b1</task-id>\n<summary>Monitor event: "Run while"</summary>\n<event>[Monitor '
                   'expired after 2s with 4 events delivered. Re-arm it if you still need the watch.]</event>'),
     JobEnd("b1", AT, "expired", None)),
    # a Monitor event: the watch goes on
    (_notification('<task-id>b1</task-id>\n<summary>Monitor event: "Run for"</summary>\n<event>tick 1</event>'),
     None),
    (json.dumps({"type": "queue-operation", "operation": "remove", "timestamp": STAMP,
                 "content": "<task-notification><task-id>b1</task-id><status>completed</status>"}), None),
    ('{"type": "user", "message": "task-notification"', None),
])
def test_job_end_lines(line: str, expected: JobEnd | None) -> None:
    assert job_end(line) == expected


@pytest.mark.parametrize(("end", "expires_after_s", "status"), [
    (JobEnd("b", 13.0, "completed", 0), None, "ok"),
    (JobEnd("b", 13.0, "failed", 3), None, "error"),
    (JobEnd("b", 13.0, "failed", 124), None, "timeout"),
    (JobEnd("b", 13.0, "failed", None), None, "error"),
    (JobEnd("b", 13.0, "completed", None), None, "ok"),
    (JobEnd("b", 13.0, "expired", None), 3.0, "timeout"),
    (JobEnd("b", 12.9, "stopped", None), 3.0, "timeout"),  # ran until its timeout_ms
    (JobEnd("b", 11.0, "killed", None), 3.0, "cancelled"),  # stopped early (TaskStop)
    (JobEnd("b", 11.0, "killed", None), None, "cancelled"),
])
def test_job_status(end: JobEnd, expires_after_s: float | None, status: str) -> None:
    assert job_status(end, OpenJob("t:job", "Monitor", 10.0, expires_after_s)) == status


def test_follower_closes_jobs_from_new_lines_only(tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    translator = ClaudeHookTranslator("s1")
    translator.transcript_path = str(transcript)
    ended: list[ToolEnd] = []
    follower = JobFollower(translator, ended.append)
    follower.poll()  # no file yet
    early = _terminal("fast", "failed", 'Background command "x" failed with exit code 3')
    transcript.write_text(early + "\n" + _terminal("other", "completed", "y (exit code 0)")[:40])  # a partial line
    follower.poll()
    assert ended == []  # no job open yet: the end waits for its job
    translator.jobs["fast"] = OpenJob("toolu_a:job", "Bash", AT - 1.5, None)
    translator.jobs["slow"] = OpenJob("toolu_b:job", "Bash", AT - 1.0, None)
    follower.poll()
    assert [(e.call_id, e.status, e.exit_code, e.at, e.duration_s) for e in ended] == [
        ("toolu_a:job", "error", 3, AT, pytest.approx(1.5))]
    with transcript.open("a") as handle:  # the rest of the partial line, then the slow job's end
        handle.write(_terminal("other", "completed", "y (exit code 0)")[40:] + "\n")
        handle.write(_terminal("slow", "completed", "z (exit code 0)", "2026-11-30T16:25:44.225Z") + "\n")
    follower.poll()
    assert [(e.call_id, e.status, e.duration_s) for e in ended[1:]] == [("toolu_b:job", "ok", pytest.approx(3.0))]
    assert translator.jobs == {}


def test_jobs_never_reported_end_with_the_session(tmp_path: Path) -> None:
    translator = ClaudeHookTranslator("s1")
    translator.jobs["b"] = OpenJob("toolu_b:job", "Bash", 10.0, None)
    ended: list[ToolEnd] = []
    JobFollower(translator, ended.append).close(at=14.0)
    assert [(e.call_id, e.status, e.duration_s) for e in ended] == [("toolu_b:job", "cancelled", 4.0)]


def _stream(record: dict) -> str:
    return json.dumps({"type": "system", "uuid": "u", "session_id": "x", **record})


def test_stream_json_gives_the_exact_end_time(tmp_path: Path) -> None:
    # Claude Code queues the transcript notice after the job's end_time; stream-json has the end itself.
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(_terminal("b1", "completed", 'Monitor "Run for" stream ended') + "\n")
    translator = ClaudeHookTranslator("s1")
    translator.transcript_path = str(transcript)
    translator.jobs["b1"] = OpenJob("toolu_m:job", "Monitor", AT - 3.0, 10.0)
    ended: list[ToolEnd] = []
    follower = JobFollower(translator, ended.append)
    follower.feed_stream_line("not json")
    follower.feed_stream_line(_stream({"subtype": "task_updated", "task_id": "b1",
                                       "patch": {"status": "completed", "end_time": (AT - 0.45) * 1000}}))
    follower.poll()  # the transcript's notice: the job ends at the stream's end_time
    assert [(e.call_id, e.status, e.at, e.duration_s) for e in ended] == [
        ("toolu_m:job", "ok", pytest.approx(AT - 0.45), pytest.approx(2.55))]


def test_stream_json_alone_closes_a_job() -> None:
    translator = ClaudeHookTranslator("s1")
    translator.jobs["b2"] = OpenJob("toolu_w:job", "Monitor", 100.0, 2.0)
    ended: list[ToolEnd] = []
    follower = JobFollower(translator, ended.append)
    follower.feed_stream_line(_stream({"subtype": "task_updated", "task_id": "b2",
                                       "patch": {"status": "killed", "end_time": 102_050}}))
    assert ended == []  # the status line comes with the notification
    follower.feed_stream_line(_stream({"subtype": "task_notification", "task_id": "b2", "tool_use_id": "toolu_w",
                                       "status": "stopped", "summary": "Run while"}))
    assert [(e.status, e.at, e.exit_code) for e in ended] == [("timeout", 102.05, None)]  # its 2 s expiry
