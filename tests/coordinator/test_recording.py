"""Tool events -> history rows: units per harness, outcomes, and launches/jobs kept out of the foreground family."""

from __future__ import annotations

from tao_harness.coordinator.recording import tool_call_record
from tao_harness.events import ToolEnd, ToolStart


def _start(tool: str, command: str, args: dict, harness: str, **extra: object) -> ToolStart:
    return ToolStart(session="s", call_id="c", tool_name=tool, at=1.0, harness=harness, command=command,
                     args=args, **extra)  # type: ignore[arg-type]


def test_foreground_launch_and_job_get_their_own_families() -> None:
    foreground = tool_call_record(_start("Bash", "sleep 3", {"command": "sleep 3"}, "claude-code"))
    launch = tool_call_record(_start("Bash", "sleep 3", {"command": "sleep 3", "run_in_background": True},
                                     "claude-code"))
    job = tool_call_record(_start("Bash", "sleep 3", {"command": "sleep 3", "task_id": "b1"}, "claude-code",
                                  kind="job"))
    monitor = tool_call_record(_start("Monitor", "tail -f x", {"command": "tail -f x", "timeout_ms": 5000},
                                      "claude-code"))
    assert [r.family for r in (foreground, launch, job, monitor)] == [
        "bash:sleep", "bash:sleep@launch", "bash:sleep@job", "Monitor@launch"]
    assert (launch.background, job.background) == (True, False)
    assert job.hints is not None and job.hints["min_s"] == 3.0  # the job's own work
    assert monitor.timeout_s == 5.0


def test_mini_swe_agent_timeouts_are_seconds() -> None:
    # Spool files written before the launcher stopped putting the deadline into args.
    record = tool_call_record(_start("bash", "sleep 3", {"command": "sleep 3", "timeout": 5}, "mini-swe-agent",
                                     env_timeout_s=5.0))
    assert (record.timeout_s, record.hints) == (5.0, {"min_s": 3.0, "max_s": 5.0, "background": False})


def test_end_keeps_outcome_and_exit_code() -> None:
    record = tool_call_record(ToolEnd(session="s", call_id="c", at=4.0, duration_s=3.0, status="timeout",
                                      exit_code=143))
    assert (record.status, record.exit_code, record.duration_s) == ("timeout", 143, 3.0)
