"""The coordinator's edges an adversarial probe found weak: token parsing and malformed channel messages."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tao_harness.auth import bearer_token
from tao_harness.config import TaoConfig, load_config
from tao_harness.coordinator.api import build_app
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.service import Coordinator

TOKEN = "s3cret-token"
Serve = Callable[[Any], Awaitable[TestServer]]


def _config() -> TaoConfig:
    # A replica nobody listens on: polls fail (logged), which these tests do not need.
    return load_config(overrides={"cluster.replicas": [{"id": "r0", "base_url": "http://127.0.0.1:9",
                                                        "capacity_tokens": 100_000}]}, environ={})


async def _coordinator(serve: Serve, token: str | None = None) -> tuple[Coordinator, str]:
    coordinator = build_coordinator(_config(), use_store=False, tick_s=0.05)
    server = await serve(build_app(coordinator, token))
    return coordinator, str(server.make_url("")).rstrip("/")


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"),
    ("abc", None), ("Basic abc", None), ("Bearer", None), ("Bearer ", None), ("", None),
])
def test_bearer_scheme_is_required_and_case_insensitive(header: str, token: str | None) -> None:
    assert bearer_token(header) == token


async def test_a_bare_token_is_refused_and_a_lower_case_scheme_accepted(serve: Serve) -> None:
    _, url = await _coordinator(serve, TOKEN)
    async with aiohttp.ClientSession() as http:
        statuses = {}
        for header in (TOKEN, f"bearer {TOKEN}", f"Bearer {TOKEN}", f"Bearer {TOKEN}x", f"Basic {TOKEN}"):
            async with http.get(url + "/v1/state", headers={"Authorization": header}) as response:
                statuses[header] = response.status
                if response.status == 401:
                    assert "token" in (await response.json())["error"]["message"]
        async with http.get(url + "/healthz") as response:
            assert response.status == 200
    assert statuses == {TOKEN: 401, f"bearer {TOKEN}": 200, f"Bearer {TOKEN}": 200, f"Bearer {TOKEN}x": 401,
                        f"Basic {TOKEN}": 401}


def _leased(session: str, seq: int) -> str:
    return json.dumps({"seq": seq, "type": "leased", "body": {
        "session": session, "request_id": f"{session}-req", "leased": "r0", "prompt_tokens_estimate": 10}})


async def test_malformed_channel_messages_are_dropped_and_the_channel_stays_open(serve: Serve) -> None:
    coordinator, url = await _coordinator(serve)
    deep = "[" * 100_000 + "]" * 100_000
    malformed = [
        '{"seq": 1e999, "type": "done", "body": {}}',
        json.dumps({"seq": 2, "type": "done", "body": {"session": "s", "request_id": "r", "status": "ok",
                                                       "started_at": 10**400}}),
        deep,
        '{"seq": 4, "type": "done", "body": {"session": "s", "request_id": "r", "status": "ok", "ttft_s": 1e999}}',
        '{"seq": true, "type": "done", "body": {}}',
        "[1, 2]",
    ]
    async with aiohttp.ClientSession() as http, http.ws_connect(url + "/v1/channel") as ws:
        assert (await ws.receive_json(timeout=5))["type"] == "hello"
        for text in malformed:
            await ws.send_str(text)
        await ws.send_str(_leased("after-the-bad-ones", 7))
        for _ in range(200):
            if "after-the-bad-ones" in coordinator._sizes:
                break
            await asyncio.sleep(0.01)
        assert not ws.closed, ws.close_code
        assert coordinator.counters.leased_requests == 1  # the valid message after them was applied


async def test_a_frame_holding_a_list_of_messages_applies_each_in_order(serve: Serve) -> None:
    coordinator, url = await _coordinator(serve)
    frame = "[" + ", ".join([_leased("first", 1), '{"seq": 2, "type": "nonsense", "body": {}}',
                             _leased("third", 3)]) + "]"
    async with aiohttp.ClientSession() as http, http.ws_connect(url + "/v1/channel") as ws:
        assert (await ws.receive_json(timeout=5))["type"] == "hello"
        await ws.send_str(frame)
        for _ in range(200):
            if coordinator.counters.leased_requests == 2:
                break
            await asyncio.sleep(0.01)
    assert coordinator.counters.leased_requests == 2  # the malformed one between them is dropped alone
    assert {"first", "third"} <= set(coordinator._sizes)


async def test_tool_events_from_the_proxy_are_checked_like_a_shims(serve: Serve) -> None:
    """A `source` that is neither shim nor proxy is a 400 naming it over HTTP; over the channel the bad
    events message is dropped alone and the proxy's good one after it applies."""
    coordinator, url = await _coordinator(serve)
    start = {"type": "tool_start", "session": "s", "call_id": "c1", "tool_name": "bash", "at": 1.0,
             "command": "sleep 1", "source": "proxy"}
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/events", json={"events": [start | {"source": "gateway"}]}) as response:
            assert response.status == 400
            assert "events[0].source" in (await response.json())["error"]["message"]
        async with http.ws_connect(url + "/v1/channel") as ws:
            assert (await ws.receive_json(timeout=5))["type"] == "hello"
            bad = {"seq": 1, "type": "events", "body": {"events": [start | {"source": 7}]}}
            good = {"seq": 2, "type": "events", "body": {"events": [start | {"at": time.time()}]}}
            await ws.send_str(json.dumps([bad, good]))
            for _ in range(200):
                if coordinator.state.has_session("s") and coordinator.state.predicted_return("s") is not None:
                    break
                await asyncio.sleep(0.01)
            assert not ws.closed
    assert coordinator.state.predicted_return("s") is not None  # the proxy's start opened the call
