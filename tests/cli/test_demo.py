"""`tao demo` (the README's main job) end to end: replicas as child processes, coordinator, proxy, agents."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tao_harness.cli.main import main

pytestmark = pytest.mark.slow


def test_demo_drives_sessions_through_the_live_system(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-m", "tao_harness.cli.main", "demo", "--sessions", "3", "--workers", "2",
         "--time-scale", "100", "--workload", "swe-lite", "--db", f"sqlite:///{db}", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["sessions"] == 3 and summary["failed_sessions"] == 0 and summary["failed_requests"] == 0
    assert summary["admissions"] >= 3 and summary["requests"] > 3
    assert summary["prefix_hit_rate"] > 0.5
    with sqlite3.connect(db) as conn:
        requests = conn.execute("select count(*) from llm_requests where status = 'ok'").fetchone()[0]
        calls = conn.execute("select count(*) from tool_calls where duration_s is not null").fetchone()[0]
        clocks = conn.execute("select distinct time_scale from sessions").fetchall()
        first, last = conn.execute("select min(started_at), max(ended_at) from sessions").fetchone()
        spans = conn.execute("select started_at, ended_at, latency_s from llm_requests union all "
                             "select started_at, ended_at, duration_s from tool_calls").fetchall()
    assert requests == summary["requests"]
    assert calls == summary["requests"] - summary["sessions"]  # every turn but the last calls a tool
    assert summary["failures"] == {} and summary["time_scale"] == 100 and summary["wall_s"] > 0
    # the coordinator's own account of pool waits (the summary printed "-" for them)
    assert 0.0 <= summary["p99_pool_wait_s"] <= summary["max_pool_wait_s"] and summary["waits_over_bound"] >= 0
    # Every record of the run is on its one (emulated) clock, and the database says which. Before,
    # requests started on the wall clock and ended on the emulated one, ~99x the run's wall time apart;
    # a minute of (emulated) slack is far below that and above any report's delay.
    assert clocks == [(100.0,)]
    for started, ended, length in spans:
        assert first - 60 <= started <= ended <= last + 60
        assert abs((ended - started) - length) < 1.0


def test_the_demo_keeps_its_history_and_prints_the_command_that_reads_it(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"  # the user data directory; a cwd outside the venv
    elsewhere.mkdir()
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    env.pop("TAO_DB_URL", None)
    done = subprocess.run([sys.executable, "-m", "tao_harness.cli.main", "demo", "--sessions", "2", "--workers", "2",
                           "--time-scale", "200"], capture_output=True, text=True, timeout=300, env=env, cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    db = data / "tao_harness" / "demo-history.db"
    lines = done.stdout.splitlines()
    at = lines.index(f"Tool-duration history recorded during the run, kept in {db}:")
    command = shlex.split(lines[at + 1].removeprefix("$ "))
    assert command == [str(Path(sys.executable).with_name("tao")), "history", "tools", "--db", str(db)]
    again = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and again.stdout.startswith("family"), again.stderr[-2000:]
    assert again.stdout in done.stdout  # the table the demo printed, read back from the kept database


@pytest.mark.parametrize("db", ["foo://bar", "postgresql+psycopg://u@127.0.0.1:1/x?connect_timeout=2"])
def test_demo_with_an_unusable_database_is_one_line_and_exit_2(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--db", db]) == 2  # checked before any replica starts
    out, err = capsys.readouterr()
    status, error = err.splitlines()  # what it set out to do, at once; then why it cannot
    assert status.startswith("tao demo: 12 swe-lite sessions, 6 at a time, on 2 emulated replicas"), err
    assert out == "" and error.startswith("tao demo: error: "), err


def test_demo_rejects_bad_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--workers", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err


def test_the_default_replica_memory_holds_the_largest_session() -> None:
    from tao_harness.cli.demo import BLOCK_TOKENS, blocks_to_hold
    from tao_harness.sim.workloads import generate

    trace = generate("swe-lite", 12, 0)  # what `make demo` runs
    largest = max(session.total_tokens for session in trace)
    assert largest < blocks_to_hold(trace) * BLOCK_TOKENS < 1.5 * largest


def test_a_failed_request_says_why() -> None:
    from tao_harness.fleet.driver import failure_reasons
    from tao_harness.fleet.session import SessionResult, TurnResult, _refusal

    body = '{"error": {"message": "prompt of 50000 tokens can never fit: the KV cache holds 48000 tokens"}}'
    reason = _refusal(400, body)
    assert reason == "HTTP 400: prompt of 50000 tokens can never fit: the KV cache holds 48000 tokens"
    assert _refusal(502, "Bad Gateway\n<html>") == "HTTP 502: Bad Gateway"
    failed = TurnResult(0.0, None, 0.1, None, None, None, None, ok=False, error=reason)
    fine = TurnResult(0.0, 0.1, 0.2, 10, 0, 5, None, ok=True)
    results = [SessionResult("a", turns=[fine, failed]), SessionResult("b", turns=[failed], error="TimeoutError: ")]
    assert failure_reasons(results) == {reason: 2, "TimeoutError: ": 1}


def test_the_summary_does_not_call_a_rate_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    from tao_harness.cli.demo import _print_summary

    _print_summary({"makespan_s": 600.0, "decode_tok_s": 120.0, "wall_s": 24.0, "time_scale": 25.0,
                    "failures": {}, "db": "x.db"})
    note = capsys.readouterr().out.split("\n\n", 1)[1]
    assert note.startswith("Times ending in _s, startup_s and wall_s aside, are emulated seconds (decode_tok_s "
                           "is a rate, tokens per emulated second)")


def test_failures_differing_only_in_a_prompt_size_are_one_line() -> None:
    from tao_harness.cli.demo import alike_failures

    refused = "HTTP 400: prompt of {} tokens can never fit: the KV cache holds 24000 tokens (1500 blocks of 16)"
    failures = {refused.format(24_010 + 263 * i): 1 for i in range(54)} | {"TimeoutError: ": 2}
    assert alike_failures(failures) == [
        (54, "HTTP 400: prompt of 24010-37949 tokens can never fit: the KV cache holds 24000 tokens "
             "(1500 blocks of 16)"),
        (2, "TimeoutError: "),
    ]


def test_the_closing_sentence_reads_the_makespan_at_the_time_scale(capsys: pytest.CaptureFixture[str]) -> None:
    from tao_harness.cli.demo import _print_summary

    # the run: 1,045 emulated s at 25x is 42 s; the 108 s of wall_s include start-up
    _print_summary({"makespan_s": 1045.0, "time_scale": 25.0, "startup_s": 12.0, "wall_s": 108.0,
                    "failures": {}, "db": "sqlite://"})
    out = capsys.readouterr().out
    assert "makespan of 1045 emulated s took 42 s on the wall clock; wall_s, 108 s, also counts starting" in out
    assert "same --seed" in out  # why two runs differ


async def test_requests_too_large_for_every_replica_are_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    from tao_harness.config import load_config
    from tao_harness.coordinator.embedded import build_coordinator

    config = load_config(overrides={"cluster.replicas": [{"id": "r0", "base_url": "http://127.0.0.1:9",
                                                          "capacity_tokens": 100_000}]}, environ={})
    coordinator = build_coordinator(config, "vllm-rr", use_store=False)
    for index in range(3):  # one line per request flooded the demo's progress bar
        answer = await coordinator.admit(f"s{index}", f"q{index}", 200_000 + index, (), 0.1)
        assert answer.replica is not None and answer.replica.id == "r0"
    assert [r.getMessage() for r in caplog.records if "more tokens" in r.getMessage()] == [
        "1 request(s) needed more tokens than any replica holds (the largest 200000): sent unscheduled"]
