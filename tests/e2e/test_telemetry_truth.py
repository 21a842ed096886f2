"""Every recorded tool call against what the agent itself saw, for each outcome class and harness.

Five real agent sessions run at once through `tao-run` (the real CLI, a child process) on one coordinator,
each playing the `telemetry-cases` scenario on an emulated replica: Claude Code with Monitor offered
directly (`ENABLE_TOOL_SEARCH=false`), Claude Code with its default deferred tools (the scripted model
loads Monitor with a ToolSearch call first), Claude Code printing one JSON result (no stream: job ends
come from its session transcript alone), OpenCode, mini-SWE-agent (environment timeout 5 s). Each agent's own output (stream-json, OpenCode JSON, mini's trajectory; see transcripts.py)
is the reference (Claude Code without a stream: its session transcript): call ids, exit codes, the harness's own timeout, background job ends and the agent's
own timestamps. Durations are checked against the agent's own clock, never against a wall-clock guess.

Cases: a sleep hint, a command that exits 3, a GNU `timeout` kill, a tool-timeout kill, a background
launch (`run_in_background`, Claude Code only; elsewhere the harness runs it in the foreground), a
trailing `&`, Monitor in both Claude Code configurations (a shell call elsewhere), and the sessions' attribution with five sessions at once.
The proxy reads every call from the traffic as well (tool telemetry is on): the rows must still be one
per call with the shim's values, and the proxy's own spans, captured as they reach the coordinator, must
hold the shim's; how much longer they are is printed.
All in one test, so `make test`'s xdist workers run the agents once; it prints the case x harness table.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from sqlalchemy import select

from tao_harness.config import ReplicaConfig, load_config
from tao_harness.coordinator.embedded import EmbeddedCluster
from tao_harness.events import ToolEvent, ToolStart
from tao_harness.outcomes import status_of_exit
from tao_harness.replica.app import build_app as build_replica
from tao_harness.replica.scenario import load_scenario
from tao_harness.serving import start_site
from tao_harness.store.engine import open_store
from tao_harness.store.models import LLMRequest, ToolCall

from .agent_env import agent_environment, run_agent
from .transcripts import SeenCall, SeenJob, Transcript, claude_stream, mini_trajectory, opencode_json

REPO = Path(__file__).resolve().parents[2]
AGENTS_BIN = REPO / ".tools" / "agents" / "node_modules" / ".bin"
MINI_BIN = REPO / ".tools" / "mini" / "bin"
TASK = "Run the telemetry cases."
MINI_TIMEOUT_S = 5
# Slack between two readings of one event on the agent's and the shim's side (same machine clock).
CLOCK_SLACK_S = 0.25
RUN_TIMEOUT_S = 200  # minutes on a loaded machine, within the suite's per-test limit (300 s)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@dataclass(frozen=True)
class Agent:
    name: str
    harness: str
    argv: Callable[[Path], list[str]]  # the agent command, given its private directory
    env: dict[str, str]
    read: Callable[[Path], Transcript]  # the agent's own report, from its private directory


def _claude(output_format: str) -> Callable[[Path], list[str]]:
    return lambda directory: [str(AGENTS_BIN / "claude"), "-p", TASK, "--dangerously-skip-permissions",
                              "--output-format", output_format, "--verbose"]


def _stdout(directory: Path) -> Path:
    return directory / "stdout.jsonl"


def _claude_transcript(directory: Path) -> Path:
    [path] = (directory / "home" / ".claude" / "projects").glob("*/*.jsonl")
    return path


AGENTS = (
    Agent("claude", "claude-code", _claude("stream-json"), {"ENABLE_TOOL_SEARCH": "false"},
          lambda d: claude_stream(_stdout(d))),
    Agent("claude-toolsearch", "claude-code", _claude("stream-json"), {}, lambda d: claude_stream(_stdout(d))),
    # No stream on stdout: job ends come from the session transcript alone (as in interactive use).
    Agent("claude-text", "claude-code", _claude("json"), {"ENABLE_TOOL_SEARCH": "false"},
          lambda d: claude_stream(_claude_transcript(d))),
    Agent("opencode", "opencode",
          lambda d: [str(AGENTS_BIN / "opencode"), "run", "--model", "tao/m", "--format", "json",
                     "--dangerously-skip-permissions", "--", TASK],
          {}, lambda d: opencode_json(_stdout(d))),
    Agent("mini", "mini-swe-agent",
          lambda d: [str(MINI_BIN / "mini"), "-m", "openai/m", "-t", TASK, "-y", "--exit-immediately",
                     "-o", str(d / "trajectory.json"), "-c", "mini.yaml",
                     "-c", f"environment.timeout={MINI_TIMEOUT_S}"],
          {}, lambda d: mini_trajectory(d / "trajectory.json")),
)


@dataclass
class Session:
    agent: Agent
    code: int
    seen: Transcript
    calls: dict[str, ToolCall]
    requests: int
    stderr: str
    # The proxy's own reading of each call from the traffic (it runs too): call id -> (start, end or None).
    proxy_spans: dict[str, tuple[float, float | None]]

    def recorded(self, seen: SeenCall) -> ToolCall:
        assert seen.call_id in self.calls, (seen, sorted(self.calls), self.stderr[-2000:])
        return self.calls[seen.call_id]


def _installed() -> bool:
    return (AGENTS_BIN / "claude").exists() and (AGENTS_BIN / "opencode").exists() and (MINI_BIN / "mini").exists()


async def _run(agent: Agent, directory: Path, coordinator: str, proxy: str) -> tuple[int, str]:
    directory.mkdir()
    argv = [sys.executable, "-m", "tao_harness.cli.run", "--coordinator", coordinator, "--proxy", proxy,
            "--session", f"truth-{agent.name}", "--harness", agent.harness, "--", *agent.argv(directory)]
    return await run_agent(argv, directory, agent_environment(directory, agent.env), RUN_TIMEOUT_S)


async def _run_all(root: Path) -> dict[str, Session]:
    replica, replica_url = await start_site(build_replica(ReplicaConfig(port=0, time_scale=50.0),
                                                          load_scenario("telemetry-cases")))
    db_url = f"sqlite:///{root / 'history.db'}"
    try:
        config = load_config(None, {"store.url": db_url,
                                    "cluster.replicas": [{"id": "r0", "base_url": replica_url}]})
        async with EmbeddedCluster(config) as cluster:
            spans = _capture_proxy_spans(cluster)
            results = await asyncio.gather(*(
                _run(agent, root / agent.name, cluster.coordinator_url, cluster.proxy_url) for agent in AGENTS))
    finally:
        await replica.cleanup()
    sessions = {}
    with open_store(db_url) as store, store.engine.connect() as conn:
        for agent, (code, stderr) in zip(AGENTS, results):
            session = f"truth-{agent.name}"
            calls = {c.id: c for c in conn.execute(select(ToolCall).where(ToolCall.session_id == session))}
            requests = len(list(conn.execute(select(LLMRequest.id).where(LLMRequest.session_id == session))))
            seen = agent.read(root / agent.name) if code == 0 else Transcript()
            sessions[agent.name] = Session(agent, code, seen, calls, requests, stderr, spans.get(session, {}))
    return sessions


def _capture_proxy_spans(cluster: EmbeddedCluster) -> dict[str, dict[str, tuple[float, float | None]]]:
    """The tool events the proxy reports from the traffic, as they reach the coordinator, per session."""
    coordinator = cluster.coordinator
    assert coordinator is not None
    spans: dict[str, dict[str, tuple[float, float | None]]] = {}
    apply = coordinator.tool_event

    def capture(event: ToolEvent) -> None:
        if event.source == "proxy":
            calls = spans.setdefault(event.session, {})
            if isinstance(event, ToolStart):
                calls[event.call_id] = (event.at, None)
            elif event.call_id in calls:
                calls[event.call_id] = (calls[event.call_id][0], event.at)
        apply(event)

    coordinator.tool_event = capture  # type: ignore[method-assign]
    return spans


def _expected_status(seen: SeenCall) -> str:
    """The outcome the agent's own report means, in tao_harness.outcomes' vocabulary."""
    if seen.timed_out:
        return "timeout"
    if seen.exit_code is not None:
        return status_of_exit(seen.exit_code)
    return "error" if seen.failed else "ok"


def _job_status(job: SeenJob) -> str:
    if job.exit_code is not None:
        return status_of_exit(job.exit_code)
    return {"completed": "ok", "failed": "error"}.get(job.status or "", "cancelled")


def _outcome(status: str | None, exit_code: int | None, duration_s: float | None = None) -> str:
    text = f"{status}/{'-' if exit_code is None else exit_code}"
    return text if duration_s is None else f"{text} {duration_s:.2f}s"


def _check_span(recorded: ToolCall, seen: SeenCall) -> None:
    """The recorded duration lies inside what the agent saw: it ends no later than the agent had the
    result and starts no earlier than the agent issued the call (OpenCode: the part's running state),
    all on the agent's own clock."""
    assert recorded.duration_s is not None and recorded.ended_at is not None and recorded.started_at is not None
    if seen.returned is not None:
        assert recorded.ended_at <= seen.returned + CLOCK_SLACK_S, "ended after the agent had the result"
    if seen.issued is not None:
        measured_from = recorded.ended_at - recorded.duration_s
        assert measured_from >= seen.issued - CLOCK_SLACK_S, "measured from before the agent issued it"


def _checked(session: Session, command: str) -> tuple[SeenCall, ToolCall]:
    """The call the agent made with `command` and its recorded row, after the checks every call passes:
    outcome and exit code as the agent saw them, timing inside the agent's own span."""
    seen = session.seen.by_command(command)
    recorded = session.recorded(seen)
    assert (recorded.status, recorded.exit_code) == (_expected_status(seen), seen.exit_code)
    _check_span(recorded, seen)
    return seen, recorded


Row = tuple[str, str]  # (expected, recorded), for the case x harness table


def sleep_hint(session: Session) -> Row:
    seen, recorded = _checked(session, "sleep 1")
    assert recorded.family == "bash:sleep" and recorded.duration_s >= 1.0  # a sleep 1 cannot end sooner
    assert recorded.hints == {"min_s": 1.0, "max_s": seen.deadline_s, "background": False}
    assert recorded.timeout_s == seen.deadline_s  # 30 s (30000 ms) for Claude Code / OpenCode, 5 s for mini
    return (f"{_outcome(_expected_status(seen), seen.exit_code)} min 1 max {seen.deadline_s:g}",
            f"{_outcome(recorded.status, recorded.exit_code)} min {recorded.hints['min_s']:g} "
            f"max {recorded.timeout_s:g}")


def _plain(command: str, minimum_s: float, timeout_s: float | None = None) -> Callable[[Session], Row]:
    def check(session: Session) -> Row:
        seen, recorded = _checked(session, command)
        assert recorded.duration_s >= minimum_s - 0.05
        if timeout_s is not None:
            assert recorded.timeout_s == timeout_s
        return (_outcome(_expected_status(seen), seen.exit_code),
                _outcome(recorded.status, recorded.exit_code, recorded.duration_s))
    return check


def tool_timeout(session: Session) -> Row:
    seen, recorded = _checked(session, "sleep 10")
    assert seen.timed_out and seen.deadline_s is not None
    # Stopped at the harness's deadline (2 s, or mini's 5 s): it ran at least that long.
    assert recorded.duration_s >= seen.deadline_s - 0.05 and recorded.timeout_s == seen.deadline_s
    return (f"{_outcome(_expected_status(seen), seen.exit_code)} at {seen.deadline_s:g}s",
            _outcome(recorded.status, recorded.exit_code, recorded.duration_s))


def _job(session: Session, seen: SeenCall, launch: ToolCall, family: str, minimum_s: float) -> Row:
    assert seen.job is not None and seen.job.ended is not None, "the harness reported no end for its job"
    job = session.calls[seen.call_id + ":job"]
    assert (job.family, job.status, job.exit_code) == (family, _job_status(seen.job), seen.job.exit_code)
    assert abs(job.ended_at - seen.job.ended) <= CLOCK_SLACK_S  # the harness's own end time
    assert job.started_at <= launch.ended_at and job.duration_s >= minimum_s
    issued = seen.issued or 0.0  # ends shown after the agent issued the launch, on its own clock
    return (f"launch ok + job {_outcome(_job_status(seen.job), seen.job.exit_code)} ends +{seen.job.ended - issued:.2f}s",
            f"{launch.family} {launch.status} + {job.family} {_outcome(job.status, job.exit_code)} "
            f"ends +{job.ended_at - issued:.2f}s")


def background(session: Session) -> Row:
    seen, recorded = _checked(session, "sleep 1.2")
    if not seen.input.get("run_in_background"):
        # OpenCode's and mini-SWE-agent's bash tools have no background flag: it ran in the foreground.
        assert (recorded.family, recorded.background) == ("bash:sleep", False) and recorded.duration_s >= 1.2
        assert seen.call_id + ":job" not in session.calls
        return "foreground (no flag)", f"{recorded.family} {_outcome(recorded.status, recorded.exit_code)}"
    assert (recorded.family, recorded.background) == ("bash:sleep@launch", True)
    return _job(session, seen, recorded, "bash:sleep@job", 1.2)


def trailing_ampersand(session: Session) -> Row:
    seen, recorded = _checked(session, "sleep 0.7 >/dev/null 2>&1 &")
    assert (recorded.family, recorded.background) == ("bash:sleep@launch", True)
    assert recorded.hints is not None and recorded.hints["min_s"] is None  # the shell does not wait for it
    return (f"launch {_outcome(_expected_status(seen), seen.exit_code)}",
            f"{recorded.family} {_outcome(recorded.status, recorded.exit_code)}")


def monitor(session: Session) -> Row:
    seen, recorded = _checked(session, MONITOR_COMMAND)
    if session.agent.harness != "claude-code":
        # No Monitor tool: the scripted model runs the command with the shell tool, in the foreground.
        assert not recorded.background and recorded.duration_s >= 0.9
        return (f"{seen.tool} {_outcome(_expected_status(seen), seen.exit_code)}",
                f"{recorded.family} {_outcome(recorded.status, recorded.exit_code, recorded.duration_s)}")
    assert seen.tool == "Monitor"  # offered directly, or loaded through ToolSearch (default settings)
    searches = [c for c in session.seen.calls.values() if c.tool == "ToolSearch"]
    assert len(searches) == (0 if session.agent.env.get("ENABLE_TOOL_SEARCH") == "false" else 1)
    for search in searches:
        assert session.recorded(search).family == "ToolSearch"
    assert (recorded.family, recorded.background) == ("Monitor@launch", True)
    assert session.calls[seen.call_id + ":job"].timeout_s == seen.input["timeout_ms"] / 1000
    expected, got = _job(session, seen, recorded, "Monitor@job", 0.9)
    via = " via ToolSearch" if searches else ""
    return expected + via, got


def attribution(session: Session) -> Row:
    own = set(session.seen.calls)
    jobs = {f"{c.call_id}:job" for c in session.seen.calls.values() if c.job is not None}
    # every call it made, nothing from the other sessions, and once though the proxy read them all too
    assert set(session.calls) == own | jobs
    assert all(c.harness == session.agent.harness and c.ended_at is not None for c in session.calls.values())
    assert {c.source for c in session.calls.values()} == {"shim"}  # the shim's values kept
    assert session.requests >= len(own)  # one LLM request per tool result at least, attributed to it
    return f"{len(own)} calls + {len(jobs)} jobs", f"{len(session.calls)} rows, {session.requests} requests"


def proxy_beside_shim(session: Session) -> Row:
    """The proxy read every call from the traffic as well, and its span holds the shim's: it starts at
    the response's end, before the harness launched the tool, and ends at the request that carried the
    result. How much longer it is is printed (the distribution over all harnesses after the table)."""
    assert set(session.proxy_spans) == set(session.seen.calls)
    longer, before, after = [], [], []
    for call_id, (start, end) in session.proxy_spans.items():
        row = session.calls[call_id]
        assert start <= row.started_at + CLOCK_SLACK_S
        if end is not None:  # None: the agent's last call, no request followed (mini-SWE-agent's submit)
            assert end >= row.ended_at - CLOCK_SLACK_S
            longer.append((end - start) - row.duration_s)
            before.append(row.ended_at - row.duration_s - start)  # response end -> the harness launched it
            after.append(end - row.ended_at)  # it returned -> the harness sent the next request
    DURATION_GAPS.extend(longer)
    within = sum(gap <= 0.5 for gap in longer)
    return (f"{len(session.seen.calls)} calls", f"{len(session.proxy_spans)} read, {within}/{len(longer)} "
            f"within 0.5 s of the shim, max +{max(longer):.2f}s (median {statistics.median(before):.2f}s "
            f"before the launch, {statistics.median(after):.2f}s after the return)")


MONITOR_COMMAND = "for i in 1 2 3; do echo tick $i; sleep 0.3; done"
CASES: dict[str, Callable[[Session], Row]] = {
    "sleep hint": sleep_hint,
    "exit 3": _plain("exit 3", 0.0),
    "GNU timeout kill": _plain("timeout 1 sleep 5", 1.0, timeout_s=1.0),
    "tool-timeout kill": tool_timeout,
    "background command": background,
    "trailing &": trailing_ampersand,
    "Monitor": monitor,
    "5 sessions at once": attribution,
    "proxy beside shim": proxy_beside_shim,
}
# The proxy's span minus the shim's duration of the same call, over every harness (proxy_beside_shim).
DURATION_GAPS: list[float] = []


def test_recorded_calls_match_what_each_agent_saw(tmp_path: Path) -> None:
    """One test (one xdist worker, one set of agent runs); the case x harness table is printed."""
    if not _installed():
        pytest.skip("needs Claude Code, OpenCode and mini-SWE-agent: run `make agents`")
    sessions = asyncio.run(_run_all(tmp_path))
    for session in sessions.values():
        assert session.code == 0, (session.agent.name, session.stderr[-3000:])
    failures, table = [], []
    for case, check in CASES.items():
        for name, session in sessions.items():
            try:
                expected, recorded = check(session)
                table.append(f"{case:<20} {name:<18} seen: {expected:<44} recorded: {recorded}")
            except (AssertionError, KeyError) as exc:
                failures.append(f"{case} / {name}: {type(exc).__name__}: {exc}")
                table.append(f"{case:<20} {name:<18} FAILED")
    print("\n".join(table))
    if DURATION_GAPS:
        gaps = sorted(DURATION_GAPS)
        print(f"proxy span - shim duration over {len(gaps)} calls: median {statistics.median(gaps):+.3f} s, "
              f"p90 {gaps[int(0.9 * (len(gaps) - 1))]:+.3f} s, max {gaps[-1]:+.3f} s, "
              f"within 0.5 s: {sum(abs(g) <= 0.5 for g in gaps)}/{len(gaps)}")
    assert not failures, "\n".join(failures + table)
