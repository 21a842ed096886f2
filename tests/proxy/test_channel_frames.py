"""The proxy's coordinator channel sends the messages of one event-loop turn as one frame."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.proxy.channel import CoordinatorChannel
from tao_harness.proxy.leases import LeaseTable

Serve = Callable[[Any], Awaitable[TestServer]]


async def test_messages_of_one_loop_turn_share_a_frame_and_keep_their_order(serve: Serve) -> None:
    frames: list[Any] = []

    async def channel(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "channel": "1"})
        async for message in ws:
            frames.append(json.loads(message.data))
        return ws

    app = web.Application()
    app.router.add_get("/v1/channel", channel)
    url = str((await serve(app)).make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as http:
        link = CoordinatorChannel(url, http, {}, LeaseTable(), "proxy-1")
        following = asyncio.create_task(link.run())
        for _ in range(500):
            if link.id is not None:
                break
            await asyncio.sleep(0.01)
        sent = await asyncio.gather(*(link.send("done", f"s{i}", {"n": i}) for i in range(3)))
        assert await link.send("leased", "s0", {"n": 3})  # a later turn: a frame of its own
        for _ in range(500):
            if len(frames) == 2:
                break
            await asyncio.sleep(0.01)
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
    assert sent == [True, True, True]
    assert frames[0] == [{"seq": i + 1, "type": "done", "body": {"n": i}} for i in range(3)]
    assert frames[1] == {"seq": 4, "type": "leased", "body": {"n": 3}}
    assert link.position("s0") == (None, 0)  # closed: admissions no longer wait on it
