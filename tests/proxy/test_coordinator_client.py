"""The proxy fails open only when the coordinator is gone, not when it is slow: a slow coordinator's
long-poll is polled again (failing open would send every waiting request to the replicas at once)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.proxy.coordinator_client import CoordinatorClient
from tao_harness.proxy.messages import AdmitRequest

Serve = Callable[[Any], Awaitable[TestServer]]
ASK = AdmitRequest(session="s", request_id="r", api="openai", path="/v1/chat/completions",
                   prompt_tokens_estimate=10)
ADMITTED = {"status": "admitted", "replica": "r0", "base_url": "http://127.0.0.1:1", "headers": {}}


def _coordinator(slow_polls: int) -> tuple[web.Application, list[str]]:
    """A coordinator whose first `slow_polls` admission long-polls never answer in time."""
    seen: list[str] = []

    async def admit(request: web.Request) -> web.Response:
        seen.append((await request.json())["request_id"])
        if len(seen) <= slow_polls:
            await asyncio.sleep(3600)
        return web.json_response(ADMITTED)

    app = web.Application()
    app.router.add_post("/v1/admit", admit)
    return app, seen


async def test_a_slow_admission_is_polled_again_not_failed_open(serve: Serve) -> None:
    app, seen = _coordinator(slow_polls=2)
    server = await serve(app)
    async with aiohttp.ClientSession() as http:
        client = CoordinatorClient(str(server.make_url("")), http, poll_s=0.1, grace_s=0.1)
        admission = await asyncio.wait_for(client.admit(ASK), 60)
    assert admission is not None and admission.replica == "r0"
    assert seen == ["r", "r", "r"]  # the same request kept its place in the pool
    assert client.available


async def test_a_coordinator_silent_past_unresponsive_s_fails_open(serve: Serve) -> None:
    app, _ = _coordinator(slow_polls=10**6)
    server = await serve(app)
    async with aiohttp.ClientSession() as http:
        client = CoordinatorClient(str(server.make_url("")), http, poll_s=0.1, grace_s=0.1,
                                   unresponsive_s=0.5)
        assert await asyncio.wait_for(client.admit(ASK), 60) is None
    assert not client.available


async def test_a_refused_connection_fails_open_at_once() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with aiohttp.ClientSession() as http:
        client = CoordinatorClient(url, http, poll_s=10.0, grace_s=10.0)
        assert await asyncio.wait_for(client.admit(ASK), 60) is None
    assert not client.available
