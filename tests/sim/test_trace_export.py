"""Export from a real SQLite history: a trace recorded into the store comes back as the same trace."""

from __future__ import annotations

from pathlib import Path

from tao_harness.store.engine import open_store
from tao_harness.store.records import LLMRequestRecord, SessionRecord, StoreRecord, ToolCallRecord
from tao_harness.store.upsert import write_batch

from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn, read_trace, write_trace
from tao_harness.sim.trace_export import export_trace
from tao_harness.sim.trace_records import trace_to_records
from tao_harness.sim.workloads import generate


def _store(tmp_path: Path, records: list[StoreRecord]):  # type: ignore[no-untyped-def]
    store = open_store(str(tmp_path / "history.db"))
    with store.engine.begin() as conn:
        write_batch(conn, records)
    return store


def _without_args(session: TraceSession) -> TraceSession:
    turns = tuple(
        TraceTurn(
            t.input_tokens,
            t.output_tokens,
            None
            if t.tool is None
            else TraceTool(t.tool.name, t.tool.command, t.tool.duration_s, t.tool.timeout_s),
        )
        for t in session.turns
    )
    return TraceSession(
        session.session, session.arrival_s, session.prefix_group, session.shared_prefix_tokens, turns
    )


def test_recorded_trace_exports_to_the_same_trace(tmp_path: Path) -> None:
    sessions = generate("swe-lite", 6, seed=2)
    with _store(tmp_path, trace_to_records(sessions)) as store:
        exported = export_trace(store)
    assert exported == [_without_args(s) for s in sessions]  # the store keeps no args for bash calls
    write_trace(exported, tmp_path / "replay.jsonl")
    assert read_trace(tmp_path / "replay.jsonl") == exported


def test_unfinished_sessions_trailing_and_parallel_calls(tmp_path: Path) -> None:
    t0 = 1000.0
    records: list[StoreRecord] = [
        SessionRecord("done", harness="claude_code", started_at=t0, ended_at=t0 + 50),
        LLMRequestRecord(
            "a",
            "done",
            prompt_tokens=1000,
            cached_tokens=0,
            completion_tokens=100,
            started_at=t0,
            ended_at=t0 + 1,
        ),
        # two parallel calls after the first reply: one tool spanning both
        ToolCallRecord("c1", "done", tool_name="Read", started_at=t0 + 1, ended_at=t0 + 1.5, duration_s=0.5),
        ToolCallRecord(
            "c2",
            "done",
            tool_name="Bash",
            command="make",
            timeout_s=120,
            started_at=t0 + 1.2,
            ended_at=t0 + 4.2,
            duration_s=3.0,
        ),
        # a compacted context: the prompt shrank
        LLMRequestRecord(
            "b", "done", prompt_tokens=600, completion_tokens=50, started_at=t0 + 5, ended_at=t0 + 6
        ),
        ToolCallRecord("c3", "done", tool_name="Bash", command="ls", started_at=t0 + 7, ended_at=t0 + 7.1),
        SessionRecord("running", harness="claude_code", started_at=t0),
        LLMRequestRecord(
            "x", "running", prompt_tokens=10, completion_tokens=1, started_at=t0, ended_at=t0 + 1
        ),
    ]
    with _store(tmp_path, records) as store:
        [session] = export_trace(store)
        assert export_trace(store, harness="opencode") == []
    assert session.session == "done"
    assert session.prefix_group == "claude_code"
    assert session.turns[0] == TraceTurn(1000, 100, TraceTool("Bash", "make", 3.2, 120.0))
    assert session.turns[1] == TraceTurn(0, 50, None)  # trailing call dropped, shrunk prompt appends nothing


def test_exported_trace_replays_in_the_simulator(tmp_path: Path) -> None:
    from tao_harness.sim.config import SimConfig
    from tao_harness.sim.simulator import simulate

    sessions = generate("automation", 2, seed=4)
    with _store(tmp_path, trace_to_records(sessions)) as store:
        exported = export_trace(store)
    result = simulate(exported, SimConfig(policy="vllm-rr", replicas=1, workers=2))
    assert result.metrics.sessions == 2
    assert result.metrics.requests == sum(len(s.turns) for s in sessions)
    assert result.metrics.makespan_s >= max(s.tool_time_s for s in sessions)
