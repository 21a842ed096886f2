"""A session's messages to the coordinator arrive in the order sent, and its next admission after them,
whether they go over HTTP (no channel) or one is still on its way when the next is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.proxy.coordinator_client import CoordinatorClient
from tao_harness.proxy.messages import AdmitRequest, RequestReport
from tao_harness.proxy.usage import Usage

Serve = Callable[[Any], Awaitable[TestServer]]


def _done(session: str, request_id: str) -> RequestReport:
    return RequestReport(session, request_id, "r0", "ok", Usage(), None, 0.1, 0.0, 0.0)


async def test_a_sessions_messages_keep_their_order_and_the_next_admission_waits_for_them(serve: Serve) -> None:
    seen: list[str] = []
    slow = asyncio.Event()

    async def done(request: web.Request) -> web.Response:
        body = await request.json()
        if body["request_id"] == "first":
            await slow.wait()  # still on its way when the others are sent
        seen.append(body["request_id"])
        return web.json_response({"status": "ok"})

    async def admit(request: web.Request) -> web.Response:
        seen.append("admit " + (await request.json())["request_id"])
        return web.json_response({"status": "admitted", "replica": "r0", "base_url": "http://127.0.0.1:1"})

    app = web.Application()
    app.router.add_post("/v1/requests/done", done)
    app.router.add_post("/v1/admit", admit)
    url = str((await serve(app)).make_url(""))
    async with aiohttp.ClientSession() as http:
        client = CoordinatorClient(url, http, poll_s=1.0, grace_s=5.0)
        client.report(_done("s", "first"))
        client.report(_done("s", "second"))  # chained behind `first`
        client.report(_done("t", "other session"))  # another session's does not wait
        admission = asyncio.create_task(client.admit(AdmitRequest("s", "next", "openai", "/v1/chat/completions", 1)))
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert seen == ["other session"]
        slow.set()
        assert (await admission) is not None
        await client.close(1.0)
    assert seen == ["other session", "first", "second", "admit next"]
