"""The live system end to end on loopback: real SDK clients → proxy → coordinator → emulated replicas."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from live_agents import ANTHROPIC_BASH, BASH_TOOL, openai_session


async def llm_rows(cluster: Any, expected: int) -> list[tuple[str, str, int | None, str]]:
    """The request log, once `expected` rows are in (the proxy reports just after the client is answered)."""
    path = cluster.db_url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 5
    while True:
        cluster.coordinator.writer.flush(5)
        with sqlite3.connect(path) as db:
            rows = db.execute("select session_id, replica, cached_tokens, status from llm_requests "
                              "order by started_at").fetchall()
        if len(rows) >= expected or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.05)


async def one_request(cluster: Any, session: str, content: str, timeout: float = 60) -> str:
    """One plain chat request of `session` through the proxy (a generic OpenAI client: no tool events)."""
    client = openai.AsyncOpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": session})
    reply = await asyncio.wait_for(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": content}]), timeout=timeout)
    await client.close()
    return reply.choices[0].message.content or ""


async def test_sessions_pinned_recorded_and_cache_reused(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=2)
    turns = await asyncio.gather(*(openai_session(cluster, f"s{i}", stream=i % 2 == 0) for i in range(4)))
    assert all(t >= 3 for t in turns)
    rows = await llm_rows(cluster, sum(turns))
    assert len(rows) == sum(turns)
    assert {status for *_, status in rows} == {"ok"}
    for session in (f"s{i}" for i in range(4)):
        replicas = {replica for sid, replica, *_ in rows if sid == session}
        assert len(replicas) == 1, f"{session} moved between replicas: {replicas}"
        cached = [c for sid, _, c, _ in rows if sid == session]
        assert max(c or 0 for c in cached) > 500, "later turns must hit the prefix cache"
    # Both replicas got work: the planner spreads sessions.
    assert {replica for _, replica, *_ in rows} == {"r0", "r1"}


async def test_anthropic_sdk_through_the_proxy(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=1, scenario="sleep-then-answer")
    client = anthropic.AsyncAnthropic(base_url=cluster.proxy_url, api_key="dummy", max_retries=0,
                                      default_headers={"X-Claude-Code-Session-Id": "cc-1"})
    messages: list[dict[str, Any]] = [{"role": "user", "content": "wait then answer"}]
    first = await client.messages.create(model="m", max_tokens=256, messages=messages, tools=[ANTHROPIC_BASH])
    tool_use = next(block for block in first.content if block.type == "tool_use")
    messages += [{"role": "assistant", "content": [block.model_dump() for block in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "ok"}]}]
    async with client.messages.stream(model="m", max_tokens=256, messages=messages, tools=[ANTHROPIC_BASH]) as s:
        final = await s.get_final_message()
    assert final.stop_reason == "end_turn"
    await client.close()
    rows = await llm_rows(cluster, 2)
    assert [(sid, status) for sid, _, _, status in rows] == [("cc-1", "ok"), ("cc-1", "ok")]
    assert (rows[1][2] or 0) > 0


async def test_interrupt_under_pressure_admits_the_ready_session(start_cluster: Any) -> None:
    # One replica with room for one session: A holds it while its (long) tool runs; B arrives ready.
    cluster = await start_cluster(replicas=1, capacity_tokens=3200, scenario="sleep-then-answer")
    async with aiohttp.ClientSession() as http:
        client = openai.AsyncOpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                    default_headers={"X-TAO-Session": "A"})
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x " * 2000}],
                                             tools=[BASH_TOOL])
        await client.close()
        event = {"type": "tool_start", "session": "A", "call_id": "a1", "tool_name": "Bash",
                 "command": "sleep 600", "at": time.time()}
        async with http.post(cluster.coordinator_url + "/v1/events", json=event) as response:
            assert response.status == 200
        assert cluster.coordinator.state.node_of("A") == "r0"
        started = time.monotonic()
        turns = await openai_session(cluster, "B", stream=False)
        assert turns >= 2
        assert time.monotonic() - started < 5
        assert cluster.coordinator.state.counters.interrupts >= 1
        assert cluster.coordinator.state.node_of("A") != "r0" or cluster.coordinator.state.phase("A").value != "acting"


async def test_a_request_behind_a_silent_holder_is_served_at_the_wait_bound(start_cluster: Any) -> None:
    """Issue 16 #3: A is a generic OpenAI client (no tool events) holding the only room; B was never served
    while A stayed quiet. With a 2 s bound B is admitted after 1 to 2 s (the bound acts from half of it),
    and the state says so. (The paper's release rule: the tool-time rule releases quiet A at once,
    tests/coordinator/test_quiet_holders.py.)"""
    cluster = await start_cluster(replicas=1, capacity_tokens=3200,
                                  overrides={"planner.max_wait_s": 2.0, "planner.tool_time_release": False})
    assert await one_request(cluster, "A", "x " * 2000)
    # A's report (its real prompt size) reaches the coordinator after the client has its answer; before
    # it, A's reservation is the proxy's estimate from the body size, and B would fit beside it.
    for _ in range(200):
        if cluster.coordinator.state.phase("A").value == "acting":
            break
        await asyncio.sleep(0.05)
    assert cluster.coordinator.state.phase("A").value == "acting"
    assert cluster.coordinator.state.node_of("A") == "r0"
    assert await one_request(cluster, "B", "y " * 2000, timeout=30)
    assert cluster.coordinator.state.node_of("B") == "r0" and cluster.coordinator.state.node_of("A") is None
    async with aiohttp.ClientSession() as http:
        async with http.get(cluster.coordinator_url + "/v1/state") as response:
            waits = (await response.json())["pool_wait"]
        async with http.get(cluster.coordinator_url + "/metrics") as response:
            metrics = await response.text()
    assert waits["bound_s"] == 2.0 and waits["max_s"] >= 1.0 and waits["oldest_s"] == 0.0
    assert "tao_pool_wait_bound_seconds 2.0" in metrics and "tao_pool_waits_over_bound" in metrics


async def test_replica_down_mid_run_loses_no_request(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=2)
    await cluster.replicas["r0"].close()
    turns = await asyncio.gather(*(openai_session(cluster, f"d{i}", stream=i % 2 == 0) for i in range(4)))
    assert all(t >= 3 for t in turns)
    rows = await llm_rows(cluster, sum(turns))
    assert {replica for _, replica, _, status in rows if status == "ok"} == {"r1"}
    assert sum(1 for *_, status in rows if status == "ok") == sum(turns)


async def test_coordinator_killed_mid_run_clients_still_served(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=2)
    first = await openai_session(cluster, "k0", stream=False)
    await cluster.coordinator_server.close()
    started = time.monotonic()
    turns = await asyncio.gather(*(openai_session(cluster, f"k{i}", stream=i % 2 == 0) for i in range(1, 4)))
    assert first >= 3 and all(t >= 3 for t in turns)
    assert time.monotonic() - started < 20


async def test_client_disconnect_frees_capacity_within_a_second(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=1, time_scale=1.0)
    body = {"model": "m", "stream": True, "max_tokens": 4000,
            "messages": [{"role": "user", "content": "write a long answer " * 50}]}
    async with aiohttp.ClientSession() as http:
        response = await http.post(cluster.proxy_url + "/v1/chat/completions", json=body,
                                   headers={"X-TAO-Session": "gone"})
        await response.content.readany()
        assert cluster.coordinator.state.used_tokens("r0") > 0
        response.close()
    deadline = time.monotonic() + 1.0
    while cluster.coordinator.state.used_tokens("r0") > 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert cluster.coordinator.state.used_tokens("r0") == 0


async def test_bad_input_gets_4xx_json(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=1)
    cases = [
        ("/v1/admit", b"{not json", 400, "body"),
        ("/v1/admit", json.dumps({"session": "s", "request_id": 5}).encode(), 400, "request_id"),
        ("/v1/events", json.dumps({"events": [{"type": "tool_end", "session": "s", "call_id": "c"}]}).encode(),
         400, "events[0].at"),
        ("/v1/requests/done", json.dumps({"session": "s", "request_id": "r", "status": "weird"}).encode(), 400,
         "status"),
        ("/v1/sessions", json.dumps([1, 2]).encode(), 400, "body"),
    ]
    async with aiohttp.ClientSession() as http:
        for path, data, status, field in cases:
            async with http.post(cluster.coordinator_url + path, data=data) as response:
                assert response.status == status, path
                payload = await response.json()
                assert payload["error"]["message"].startswith(field), payload
        async with http.get(cluster.coordinator_url + "/metrics") as response:
            text = await response.text()
            assert "tao_pool_sessions" in text and "tao_plan_solve_ms_bucket" in text
        async with http.get(cluster.coordinator_url + "/v1/state") as response:
            state = await response.json()
            assert state["policy"] == "tao" and state["replicas"][0]["id"] == "r0"
            assert 0.0 <= state["replicas"][0]["load_age_s"] < 60.0  # polled: the sample's age, not None


async def test_a_session_larger_than_every_replica_is_served_not_starved(start_cluster: Any) -> None:
    # Capacity as the coordinator knows it: 1500 tokens; this prompt alone is ~2000.
    cluster = await start_cluster(replicas=1, capacity_tokens=1500)
    assert await one_request(cluster, "big", "word " * 2000, timeout=10)
    assert cluster.coordinator.state.pool_size() == 0
