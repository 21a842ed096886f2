"""Tool telemetry from the traffic alone, end to end on loopback: the real openai and anthropic SDKs run
small agent loops (their tools are subprocesses) through `tao proxy` against an emulated replica playing
a script, with a real coordinator and history store.

Each check compares what the loop itself saw — its call ids, exit codes, and when it had the response and
when it sent the result, on the machine's one clock — with the recorded rows: a span read from the
traffic must contain the tool's run (it starts at the response's end, before the loop has it, and ends
at the next request's arrival, after the loop sent it).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from sqlalchemy import select

from tao_harness.config import ReplicaConfig, load_config
from tao_harness.coordinator.embedded import EmbeddedCluster
from tao_harness.coordinator.records import Phase
from tao_harness.replica.app import build_app as build_replica
from tao_harness.replica.scenario import parse_scenario
from tao_harness.serving import start_site
from tao_harness.store.engine import open_store
from tao_harness.proxy import telemetry
from tao_harness.proxy.turns import TurnReader
from tao_harness.store.models import LLMRequest, ToolCall

SCENARIO = parse_scenario("""
name: proxy-telemetry
turns:
  - bash: sleep 0.3
    timeout_s: 30
  - bash: exit 3
  - answer: Done.
""", "test")
BASH = {"type": "function", "function": {"name": "bash", "description": "Run a shell command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"]}}}
ANTHROPIC_BASH = {"name": "Bash", "description": "Run a shell command", "input_schema": BASH["function"]["parameters"]}
WAIT_S = 30.0  # for the coordinator to apply what the proxy reported (milliseconds normally)


@dataclass
class Seen:
    """One tool call as the loop saw it."""

    call_id: str
    command: str
    had_response: float  # the loop had the response naming the call
    sent_result: float  # the loop had sent the request carrying its result
    exit_code: int


def _run(command: str) -> int:
    return subprocess.run(command, shell=True, check=False).returncode


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedCluster, str]]:
    replica, replica_url = await start_site(build_replica(ReplicaConfig(port=0, time_scale=100.0), SCENARIO))
    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    config = load_config(None, {"store.url": db_url, "cluster.replicas": [{"id": "r0", "base_url": replica_url}]})
    try:
        async with EmbeddedCluster(config) as embedded:
            yield embedded, db_url
    finally:
        await replica.cleanup()


def _rows(db_url: str) -> list[ToolCall]:
    with open_store(db_url) as store, store.engine.connect() as conn:
        return list(conn.execute(select(ToolCall)))


def _openai_loop(client: openai.OpenAI, stream: bool, seen: list[Seen]) -> None:
    """A home-grown agent loop: no session header, no shim; results as "Exit code: N" (Codex's form)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You run commands."},
                                      {"role": "user", "content": "Run the cases."}]
    pending: list[Seen] = []
    sent = 0.0  # when the loop sent its last request
    while True:
        if stream:
            calls: dict[int, dict[str, Any]] = {}
            for chunk in client.chat.completions.create(model="m", messages=messages, tools=[BASH], stream=True):
                for piece in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    call = calls.setdefault(piece.index, {"id": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    call["arguments"] += (piece.function.arguments or "") if piece.function else ""
            tool_calls = [(c["id"], c["arguments"]) for _, c in sorted(calls.items())]
        else:
            message = client.chat.completions.create(model="m", messages=messages, tools=[BASH]).choices[0].message
            tool_calls = [(c.id, c.function.arguments) for c in message.tool_calls or []]
        for item in pending:  # the request that carried their results has been sent (and answered)
            item.sent_result = sent
        seen.extend(pending)
        if not tool_calls:
            return
        had = time.time()
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "bash", "arguments": a}} for i, a in tool_calls]})
        pending = []
        for call_id, arguments in tool_calls:
            command = json.loads(arguments)["command"]
            code = _run(command)
            pending.append(Seen(call_id, command, had, 0.0, code))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": f"Exit code: {code}\n"})
        sent = time.time()


async def test_three_threads_sharing_one_client_are_three_sessions_with_every_call(
        cluster: tuple[EmbeddedCluster, str]) -> None:
    embedded, db_url = cluster
    client = openai.OpenAI(base_url=embedded.proxy_url + "/v1", api_key="dummy", max_retries=0)
    seen: list[list[Seen]] = [[], [], []]
    threads = [threading.Thread(target=_openai_loop, args=(client, index == 1, seen[index])) for index in range(3)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        await asyncio.sleep(0.05)
    assert embedded.coordinator is not None
    rows = {row.id: row for row in _rows_after_flush(embedded, db_url)}
    sessions = set()
    for own in seen:
        assert [s.exit_code for s in own] == [0, 3]
        owners = {rows[s.call_id].session_id for s in own}
        assert len(owners) == 1  # all of a loop's calls under one session ...
        sessions |= owners
        for item in own:
            row = rows[item.call_id]
            assert (row.command, row.source, row.tool_name) == (item.command, "proxy", "bash")
            assert (row.status, row.exit_code) == (("ok", 0) if item.exit_code == 0 else ("error", 3))
            assert row.started_at <= item.had_response and row.ended_at >= item.sent_result  # contains the run
            assert row.duration_s == pytest.approx(row.ended_at - row.started_at)
        assert rows[own[0].call_id].timeout_s == 30.0 and rows[own[0].call_id].family == "bash:sleep"
    assert len(sessions) == 3 and len(rows) == 6  # ... and each loop its own session, nothing else recorded
    assert {embedded.coordinator.identified_by(s) for s in sessions} == {"conversation"}


def _rows_after_flush(embedded: EmbeddedCluster, db_url: str) -> list[ToolCall]:
    assert embedded.coordinator is not None and embedded.coordinator.writer is not None
    embedded.coordinator.writer.flush()
    return _rows(db_url)


async def test_a_session_is_in_a_tool_as_soon_as_its_response_names_one(cluster: tuple[EmbeddedCluster, str]) -> None:
    embedded, _ = cluster
    assert embedded.coordinator is not None
    client = openai.AsyncOpenAI(base_url=embedded.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": "acting"})
    response = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}],
                                                    tools=[BASH])
    assert response.choices[0].message.tool_calls  # `sleep 0.3`: nothing ran it, no shim said anything
    state = embedded.coordinator.state
    deadline = time.monotonic() + WAIT_S
    while state.predicted_return("acting") is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert state.phase("acting") is Phase.ACTING
    assert state.predicted_return("acting") is not None  # with its readiness prediction (the sleep's 0.3 s)
    await client.close()


async def test_a_shims_report_of_the_same_call_wins_and_nothing_counts_twice(
        cluster: tuple[EmbeddedCluster, str]) -> None:
    """An Anthropic streaming loop whose "shim" reports each call itself (exact times, exit code) while
    the proxy reads the same calls from the traffic."""
    embedded, db_url = cluster
    client = anthropic.AsyncAnthropic(base_url=embedded.proxy_url, api_key="dummy", max_retries=0,
                                      default_headers={"X-TAO-Session": "shimmed"})
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the cases."}]
    shim: dict[str, tuple[float, float, int]] = {}
    async with aiohttp.ClientSession() as http:
        while True:
            async with client.messages.stream(model="m", max_tokens=256, messages=messages,  # type: ignore[arg-type]
                                              tools=[ANTHROPIC_BASH]) as stream:  # type: ignore[list-item]
                message = await stream.get_final_message()
            uses = [block for block in message.content if block.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
            results = []
            for use in uses:
                started = time.time()
                code = await asyncio.to_thread(_run, use.input["command"])  # type: ignore[index]
                ended = time.time()
                shim[use.id] = (started, ended, code)
                events = [{"type": "tool_start", "session": "shimmed", "call_id": use.id, "tool_name": "Bash",
                           "harness": "claude-code", "at": started, "command": use.input["command"]},  # type: ignore[index]
                          {"type": "tool_end", "session": "shimmed", "call_id": use.id, "at": ended,
                           "duration_s": ended - started, "status": "ok" if code == 0 else "error", "exit_code": code}]
                async with http.post(embedded.coordinator_url + "/v1/events", json={"events": events}) as answer:
                    assert answer.status == 200
                results.append({"type": "tool_result", "tool_use_id": use.id, "is_error": code != 0,
                                "content": f"Exit code {code}" if code else "done"})
            messages.append({"role": "user", "content": results})
    rows = _rows_after_flush(embedded, db_url)
    assert sorted(row.id for row in rows) == sorted(shim)  # one row per call
    for row in rows:
        started, ended, code = shim[row.id]
        assert (row.session_id, row.source, row.harness) == ("shimmed", "shim", "claude-code")
        assert (row.started_at, row.ended_at, row.duration_s, row.exit_code) == (started, ended, ended - started, code)
    await client.close()


async def test_telemetry_that_fails_costs_the_request_nothing(cluster: tuple[EmbeddedCluster, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in reading the traffic (here: every turn and every result read raises) loses the telemetry
    only: answers, streamed or whole, arrive whole, and each request is still recorded with its usage."""
    embedded, db_url = cluster

    def broken(*args: Any) -> None:
        raise RuntimeError("a bug in the reader")

    monkeypatch.setattr(TurnReader, "_event", broken)
    monkeypatch.setattr(TurnReader, "_body", broken)
    monkeypatch.setattr(telemetry, "read_results", broken)
    client = openai.AsyncOpenAI(base_url=embedded.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": "failing"})
    messages: list[Any] = [{"role": "user", "content": "go"}]
    whole = await client.chat.completions.create(model="m", messages=messages, tools=[BASH])
    [call] = whole.choices[0].message.tool_calls or []
    messages += [whole.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Exit code: 0"}]
    pieces = [chunk async for chunk in await client.chat.completions.create(
        model="m", messages=messages, tools=[BASH], stream=True, stream_options={"include_usage": True})]
    assert any(c.choices and c.choices[0].finish_reason == "tool_calls" for c in pieces)
    assert pieces[-1].usage is not None and pieces[-1].usage.prompt_tokens > 0
    await client.close()
    assert embedded.coordinator is not None and embedded.coordinator.writer is not None
    deadline = time.monotonic() + WAIT_S
    requests: list[Any] = []
    while len(requests) < 2 and time.monotonic() < deadline:  # the last report may still be on its way
        await asyncio.sleep(0.05)
        embedded.coordinator.writer.flush()
        with open_store(db_url) as store, store.engine.connect() as conn:
            requests = list(conn.execute(select(LLMRequest).where(LLMRequest.session_id == "failing")))
    assert len(requests) == 2 and all(r.status == "ok" and r.prompt_tokens for r in requests)
    assert _rows(db_url) == []  # no telemetry, and nothing half-read recorded
