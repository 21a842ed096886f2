"""The real-tools workload: recorded tool calls replayed in order with their measured durations.

Most tests build a small `tao history export` file in tmp_path; one reads the real development data
when it is present next to the repository.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tao_harness.cli.main import main
from tao_harness.sim.trace import TraceSession, TraceTool, read_trace
from tao_harness.sim.workloads import REAL_TOOLS, WorkloadError, generate
from tao_harness.sim.workloads.catalog import SWE_LITE, TERMINAL_BENCH
from tao_harness.sim.workloads.real_tools import RecordedSession, generate_real_tools, read_recorded_sessions
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.transfer import write_csv, write_jsonl

REAL_DATA = Path(__file__).resolve().parents[2] / "../shared/data/real-tool-calls/dev.jsonl"

# mini-SWE-agent: three sequential calls, written out of start order; the harness deadline is env_timeout_s.
_MINI = [
    ToolCallRecord("m2", "mini/1", "mini_swe_agent", "bash", command="pytest -q", env_timeout_s=30.0,
                   started_at=120.0, duration_s=30.01),
    ToolCallRecord("m1", "mini/1", "mini_swe_agent", "bash", command="ls -la", env_timeout_s=30.0,
                   started_at=100.0, duration_s=0.04),
    ToolCallRecord("m3", "mini/1", "mini_swe_agent", "bash", command="git diff", env_timeout_s=30.0,
                   started_at=160.0, duration_s=0.2),
]
# Claude Code: two Globs and a Bash started together (one reply), then a Read; one call never finished.
_CLAUDE = [
    ToolCallRecord("c1", "cc/1", "claude_code", "Glob", command="Glob pattern=*.py", args={"pattern": "*.py"},
                   started_at=10.0, duration_s=0.2),
    ToolCallRecord("c2", "cc/1", "claude_code", "Bash", command="make test", args={"command": "make test"},
                   timeout_s=300.0, started_at=10.0, duration_s=42.5),
    ToolCallRecord("c3", "cc/1", "claude_code", "Glob", command="Glob pattern=*.md", args={"pattern": "*.md"},
                   started_at=10.0, duration_s=0.3),
    ToolCallRecord("c4", "cc/1", "claude_code", "Read", command="Read file_path=a.py",
                   args={"file_path": "a.py"}, started_at=60.0, duration_s=0.05),
    ToolCallRecord("c5", "cc/1", "claude_code", "Bash", command="sleep 999", started_at=70.0),
]
# A single-call Codex session: left out.
_CODEX = [ToolCallRecord("x1", "codex/1", "codex", "shell", command="ls", started_at=5.0, duration_s=0.1)]

MINI_TOOLS = (
    TraceTool("bash", "ls -la", 0.04, 30.0),
    TraceTool("bash", "pytest -q", 30.01, 30.0),
    TraceTool("bash", "git diff", 0.2, 30.0),
)
CLAUDE_TOOLS = (
    TraceTool("Bash", "make test", 42.5, 300.0, {"command": "make test"}),  # the longest of the three
    TraceTool("Read", "Read file_path=a.py", 0.05, None, {"file_path": "a.py"}),
)


def _write_export(path: Path, records: list[ToolCallRecord]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        write_jsonl(records, out)
    return path


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    return _write_export(tmp_path / "calls.jsonl", [*_MINI, *_CLAUDE, *_CODEX])


def _tools(session: TraceSession) -> tuple[TraceTool, ...]:
    return tuple(turn.tool for turn in session.turns if turn.tool is not None)


def _source(session: TraceSession) -> str:
    return session.session.split(":", 1)[1]


def test_reads_sessions_with_parallel_calls_merged_and_short_ones_left_out(export_file: Path) -> None:
    recorded = read_recorded_sessions(export_file)
    assert recorded == [
        RecordedSession("mini/1", "mini_swe_agent", MINI_TOOLS),
        RecordedSession("cc/1", "claude_code", CLAUDE_TOOLS),
    ]


def test_a_csv_export_reads_the_same(export_file: Path, tmp_path: Path) -> None:
    csv_file = tmp_path / "calls.csv"
    with csv_file.open("w", encoding="utf-8", newline="") as out:
        write_csv([*_MINI, *_CLAUDE, *_CODEX], out)
    assert read_recorded_sessions(csv_file) == read_recorded_sessions(export_file)


def test_sessions_replay_the_recorded_calls_in_order(export_file: Path) -> None:
    sessions = generate(REAL_TOOLS, 2, seed=0, tool_calls=export_file)
    assert sorted(_source(s) for s in sessions) == ["cc/1", "mini/1"]
    expected = {"mini/1": MINI_TOOLS, "cc/1": CLAUDE_TOOLS}
    for session in sessions:
        assert _tools(session) == expected[_source(session)]
        assert session.turns[-1].tool is None
        assert len(session.turns) == len(expected[_source(session)]) + 1


def test_token_counts_come_from_the_harness_spec(export_file: Path) -> None:
    by_source = {_source(s): s for s in generate(REAL_TOOLS, 2, seed=0, tool_calls=export_file)}
    mini, claude = by_source["mini/1"], by_source["cc/1"]
    assert (mini.prefix_group, mini.shared_prefix_tokens) == ("mini_swe_agent", SWE_LITE.shared_prefix_tokens)
    assert (claude.prefix_group, claude.shared_prefix_tokens) == (
        "claude_code",
        TERMINAL_BENCH.shared_prefix_tokens,
    )
    for session in (mini, claude):
        assert session.turns[0].input_tokens > session.shared_prefix_tokens  # prefix + task text
        assert all(turn.output_tokens > 0 for turn in session.turns)


def test_same_seed_same_trace_and_sessions_cycle_through_a_permutation(export_file: Path) -> None:
    first = generate(REAL_TOOLS, 5, seed=3, tool_calls=export_file)
    assert generate(REAL_TOOLS, 5, seed=3, tool_calls=export_file) == first
    assert generate(REAL_TOOLS, 2, seed=3, tool_calls=export_file) == first[:2]  # session k is stable
    assert generate(REAL_TOOLS, 5, seed=4, tool_calls=export_file) != first
    sources = [_source(s) for s in first]
    assert sorted(sources[:2]) == ["cc/1", "mini/1"]  # every recorded session once before any repeats
    assert sources[2:] == [*sources[:2], sources[0]]
    assert _tools(first[2]) == _tools(first[0]) and first[2].turns != first[0].turns  # fresh tokens


def test_a_session_stops_at_the_context_limit(tmp_path: Path) -> None:
    reads = [
        ToolCallRecord(f"r{k}", "long/1", "claude_code", "Read", command=f"Read file_path=f{k}",
                       started_at=float(k), duration_s=0.01)
        for k in range(1000)  # ≈ 1000 · 1k tokens: far past the terminal-bench spec's 200k context
    ]
    recorded = read_recorded_sessions(_write_export(tmp_path / "long.jsonl", reads))
    (session,) = generate_real_tools(recorded, 1, seed=0)
    assert 2 <= len(session.turns) < 1000
    assert session.total_tokens <= TERMINAL_BENCH.max_context_tokens
    assert _tools(session) == recorded[0].tools[: len(session.turns) - 1]  # a prefix, in order


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "session_id": "s", "started_at": 1, "duration_s": 1}\n{"id": "b", oops\n',
         "bad.jsonl: line 2: not JSON"),
        ('{"id": "a", "session_id": "s", "duration_s": "slow"}\n', "bad.jsonl: line 1: field 'duration_s'"),
        ('{"id": "a", "session_id": "s", "started_at": 1, "duration_s": -2}\n',
         "bad.jsonl: call 'a' has a negative duration_s"),
        ('{"id": "a", "session_id": "s", "started_at": 1, "duration_s": 2}\n',
         "bad.jsonl: no session has 2 or more timed tool calls"),
    ],
)
def test_bad_tool_call_files_name_the_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    with pytest.raises(WorkloadError, match="^" + str(tmp_path)) as caught:
        generate(REAL_TOOLS, 1, seed=0, tool_calls=bad)
    assert message in str(caught.value)


def test_the_file_goes_with_real_tools_only(export_file: Path) -> None:
    with pytest.raises(WorkloadError, match="tool-call file"):
        generate(REAL_TOOLS, 1, seed=0)
    with pytest.raises(WorkloadError, match="tool-call file"):
        generate("swe-lite", 1, seed=0, tool_calls=export_file)


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_cli_generates_a_trace_that_stats_and_sim_accept(
    export_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "real.jsonl"
    generate_args = ["trace", "generate", "--workload", REAL_TOOLS, "--tool-calls", str(export_file)]
    assert main([*generate_args, "--sessions", "3", "--seed", "1", "-o", str(out)]) == 0
    assert read_trace(out) == generate(REAL_TOOLS, 3, seed=1, tool_calls=export_file)
    capsys.readouterr()
    assert main(["trace", "stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["sessions"] == 3 and stats["tool_calls"] == sum(len(_tools(s)) for s in read_trace(out))
    assert main(["sim", "--trace", str(out), "--policy", "tao", "--replicas", "1", "--workers", "2",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["admissions"] == 3


def test_cli_errors_are_one_line_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.jsonl"
    assert main(["trace", "generate", "--workload", REAL_TOOLS, "--tool-calls", str(missing),
                 "--sessions", "2"]) == 2
    assert f"cannot read tool calls {missing}" in _error_line(capsys)
    assert main(["trace", "generate", "--workload", REAL_TOOLS, "--sessions", "2"]) == 2
    assert "tool-call file" in _error_line(capsys)


def _merged_durations_from_raw(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Per session, (tool name, longest duration) per distinct start time: read without the module."""
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        calls[call["session_id"]].append(call)
    merged: dict[str, list[tuple[str, float]]] = {}
    for session_id, rows in calls.items():
        rows.sort(key=lambda row: row["started_at"])
        groups = [list(group) for _, group in itertools.groupby(rows, key=lambda row: row["started_at"])]
        longest = [max(group, key=lambda row: row["duration_s"]) for group in groups]
        merged[session_id] = [(row["tool_name"], row["duration_s"]) for row in longest]
    return merged


@pytest.mark.skipif(not REAL_DATA.exists(), reason=f"real tool-call data absent ({REAL_DATA})")
def test_real_data_replays_its_recorded_durations() -> None:
    expected = _merged_durations_from_raw(REAL_DATA)
    sessions = generate(REAL_TOOLS, 96, seed=0, tool_calls=REAL_DATA)
    assert len({_source(s) for s in sessions}) == 96  # fewer than the recorded sessions: no repeats
    for session in sessions:
        replayed = [(tool.name, tool.duration_s) for tool in _tools(session)]
        assert len(replayed) >= 2
        assert replayed == expected[_source(session)][: len(replayed)]
    full = sum(len(_tools(s)) == len(expected[_source(s)]) for s in sessions)
    assert full >= 90  # only sessions that outgrow the context limit lose their tail
