"""Synthetic workloads: deterministic, valid traces, honest hints, statistics near the published targets."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from tao_harness.readiness.hints import parse_hints
from tao_harness.sim.trace import TraceSession, read_trace, write_trace
from tao_harness.sim.trace_stats import TraceStats, trace_stats
from tao_harness.sim.workloads import WORKLOADS, WorkloadError, generate

SAMPLE = 200  # sessions per workload for the statistics (fixed seed: deterministic)


@cache
def _sample(workload: str) -> tuple[TraceSession, ...]:
    return tuple(generate(workload, SAMPLE, seed=11))


@cache
def _stats(workload: str) -> TraceStats:
    return trace_stats(_sample(workload))


@pytest.mark.parametrize("workload", WORKLOADS)
def test_same_seed_same_trace_and_prefix_stable(workload: str) -> None:
    first = generate(workload, 12, seed=3)
    assert generate(workload, 12, seed=3) == first
    assert generate(workload, 5, seed=3) == first[:5]  # session k does not depend on how many follow
    assert generate(workload, 12, seed=4) != first


@pytest.mark.parametrize("workload", WORKLOADS)
def test_generated_sessions_are_valid_and_round_trip(workload: str, tmp_path: Path) -> None:
    sessions = generate(workload, 20, seed=5)
    path = tmp_path / "w.jsonl"
    write_trace(sessions, path)
    assert read_trace(path) == sessions  # read_trace validates every rule of the format
    assert len({s.session for s in sessions}) == 20
    for session in sessions:
        assert session.turns[0].input_tokens > session.shared_prefix_tokens
        assert all(turn.tool is not None for turn in session.turns[:-1])


@pytest.mark.parametrize("workload", WORKLOADS)
def test_readiness_hints_agree_with_durations(workload: str) -> None:
    # What the live hint parser reads from a command (a `sleep N` lower bound, `timeout N` or the harness
    # deadline as upper bound) must hold for the generated duration, or the trace would lie to it.
    bounded = 0
    for session in generate(workload, 60, seed=13):
        for tool in (turn.tool for turn in session.turns if turn.tool is not None):
            hints = parse_hints(tool.name, tool.command, tool.args, env_timeout_s=tool.timeout_s)
            if hints.min_s is not None:
                assert tool.duration_s >= hints.min_s, tool
                bounded += 1
            if hints.max_s is not None:
                assert tool.duration_s <= hints.max_s + 1e-9, tool
            if tool.command and re.match(r"(sleep|timeout) \d+", tool.command):
                assert hints.min_s is not None or hints.max_s is not None, tool.command
    assert bounded > 0 or workload != "terminal-bench"


def test_swe_lite_matches_published_statistics() -> None:
    stats = _stats("swe-lite")
    # TraceLab per call: p50 0.3 s, p90 13.6 s; mini-SWE-agent kills calls at 60 s.
    assert 0.15 <= stats.tool_duration_s.p50 <= 0.6
    assert 6.0 <= stats.tool_duration_s.p90 <= 25.0
    assert stats.tool_duration_s.max <= 60.0
    # Table 1 (16 workers, 113 s per task, 93.1% in tools): ≈ 105 s of tools, ≈ 6.6k output tokens per task.
    assert 70.0 <= stats.tool_time_per_session_s.mean <= 150.0
    assert 4500 <= stats.output_tokens_per_session.mean <= 9000
    # mini-SWE-agent SWE-bench trajectories usually stay under 20k tokens.
    assert stats.context_tokens_per_session.p50 < 20_000
    assert 18 <= stats.turns_per_session.p50 <= 32
    assert stats.families[0].family == "bash:pytest"  # test runs dominate tool time


def test_swe_verified_is_longer_than_lite() -> None:
    lite, verified = _stats("swe-lite"), _stats("swe-verified")
    assert verified.turns_per_session.mean > lite.turns_per_session.mean
    assert verified.tool_time_per_session_s.mean > lite.tool_time_per_session_s.mean


def test_terminal_bench_matches_published_statistics() -> None:
    stats = _stats("terminal-bench")
    # Terminal-Bench mean task time 356–438 s (mostly tools); long builds give a minutes-long tail.
    assert 250.0 <= stats.tool_time_per_session_s.mean <= 500.0
    assert 0.1 <= stats.tool_duration_s.p50 <= 0.6
    assert 60.0 <= stats.tool_duration_s.p99 <= 600.0
    assert stats.prefix_groups == (("claude-code-system", SAMPLE),)
    assert {"Read", "Write", "Grep"} <= {f.family for f in stats.families}
    assert {"bash:sleep", "bash:make", "bash:apt-get"} <= {f.family for f in stats.families}
    # Claude Code reports a Bash deadline only when the model passes one (builds), never its 2-min default.
    bash = [
        t.tool
        for s in _sample("terminal-bench")
        for t in s.turns
        if t.tool is not None and t.tool.name == "Bash"
    ]
    assert {t.timeout_s for t in bash} == {None, 600.0}
    assert max(t.duration_s for t in bash if t.timeout_s is None) <= 120.0


def test_automation_uses_structured_api_tools() -> None:
    sessions = _sample("automation")
    tools = [t.tool for s in sessions for t in s.turns if t.tool is not None]
    assert all(t.command is None and t.args for t in tools)
    assert all(re.fullmatch(r"[a-z]+_[a-z_]+", t.name) for t in tools)
    assert _stats("automation").tool_duration_s.p90 < 5.0  # simulated SaaS APIs answer fast


def test_mixed_follows_the_papers_300_to_89_split() -> None:
    groups = dict(_stats("mixed").prefix_groups)
    share = groups["claude-code-system"] / SAMPLE
    assert abs(share - 89 / 389) < 0.06
    assert groups["mini-swe-agent-swebench"] + groups["claude-code-system"] == SAMPLE


def test_tool_share_is_higher_for_coding_than_automation() -> None:
    assert _stats("swe-lite").tool_share > 0.5
    assert (
        _stats("terminal-bench").tool_share > _stats("swe-lite").tool_share > _stats("automation").tool_share
    )


@pytest.mark.parametrize(
    ("workload", "sessions", "seed", "message"),
    [("swe", 5, 0, "unknown workload 'swe'"), ("swe-lite", 0, 0, "at least 1"), ("swe-lite", 3, -1, "seed")],
)
def test_bad_requests_are_workload_errors(workload: str, sessions: int, seed: int, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        generate(workload, sessions, seed)
