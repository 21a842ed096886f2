"""The proxy's coordinator channel sends what was posted in one event-loop turn as one frame, in order,
and hands what it could not send back for the HTTP API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.proxy.channel import CoordinatorChannel, Message
from tao_harness.proxy.leases import LeaseTable

Serve = Callable[[Any], Awaitable[TestServer]]


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def _coordinator(serve: Serve, frames: list[Any]) -> str:
    """A stand-in coordinator's channel that keeps every frame it reads; returns its root URL."""

    async def channel(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "channel": "1"})
        async for message in ws:
            frames.append(json.loads(message.data))
        return ws

    app = web.Application()
    app.router.add_get("/v1/channel", channel)
    return str((await serve(app)).make_url("")).rstrip("/")


async def _open(http: aiohttp.ClientSession, url: str, handed_back: list[Message]) -> tuple[CoordinatorChannel,
                                                                                             asyncio.Task[None]]:
    link = CoordinatorChannel(url, http, {}, LeaseTable(), "proxy-1", handed_back.append)
    following = asyncio.create_task(link.run())
    await _until(lambda: link.id is not None)
    return link, following


async def test_messages_of_one_loop_turn_share_a_frame_and_keep_their_order(serve: Serve) -> None:
    frames: list[Any] = []
    url = await _coordinator(serve, frames)
    handed_back: list[Message] = []
    async with aiohttp.ClientSession() as http:
        assert not CoordinatorChannel(url, http, {}, LeaseTable(), "p", handed_back.append).post("done", "s0", {})
        link, following = await _open(http, url, handed_back)
        assert all(link.post("done", f"s{i}", {"n": i}) for i in range(3))
        await link.flushed("s2")
        assert link.post("leased", "s0", {"n": 3})  # a later turn: a frame of its own
        await link.flushed()
        await _until(lambda: len(frames) == 2)
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
    assert frames[0] == [{"seq": i + 1, "type": "done", "body": {"n": i}} for i in range(3)]
    assert frames[1] == {"seq": 4, "type": "leased", "body": {"n": 3}}
    assert link.position("s0") == (None, 0)  # closed: admissions no longer wait on it
    assert not link.post("done", "s0", {"n": 5}) and handed_back == []


async def test_what_a_failed_connection_did_not_write_is_handed_back_in_order(serve: Serve) -> None:
    async def reset(_: str) -> None:
        raise ConnectionResetError("reset by peer")

    frames: list[Any] = []
    url = await _coordinator(serve, frames)
    handed_back: list[Message] = []
    async with aiohttp.ClientSession() as http:
        link, following = await _open(http, url, handed_back)
        link._ws.send_str = reset  # type: ignore[union-attr, method-assign]
        assert link.post("done", "s", {"n": 0}) and link.post("leased", "s", {"n": 1})
        await asyncio.wait_for(link.flushed("s"), 5)  # handed back counts as settled
        assert not link.post("done", "s", {"n": 2})  # down now: the caller uses HTTP
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
    assert frames == [] and handed_back == [("s", "done", {"n": 0}), ("s", "leased", {"n": 1})]
