"""Reservations cannot outlive the proxy that would report them (coordinator.owners)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.config import load_config
from tao_harness.coordinator.api import build_app
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.owners import LostRequest, OwnerBook
from tao_harness.coordinator.records import Phase
from tao_harness.coordinator.service import Coordinator

Serve = Callable[[Any], Awaitable[TestServer]]
GRACE_S = 0.3


def test_a_proxy_is_gone_after_the_grace_with_no_channel_open() -> None:
    book = OwnerBook(grace_s=10.0, unowned_ttl_s=100.0)
    book.opened("p", now=0.0)
    book.own("p", "a", "a-1", now=1.0)
    book.own("p", "b", "b-1", now=1.0)
    book.own(None, "c", "c-1", now=1.0)
    book.disown("p", "b")  # reported
    assert book.gone(now=50.0) == []  # its channel is open: alive however long
    book.closed("p", now=60.0)
    book.opened("p", now=65.0)  # reconnected within the grace
    book.closed("p", now=66.0)
    assert book.gone(now=75.0) == []
    assert book.gone(now=76.5) == [LostRequest("a", "a-1", "p")]
    assert book.gone(now=77.0) == []  # forgotten once returned
    assert book.gone(now=101.5) == [LostRequest("c", "c-1", None)]


def test_a_proxy_heard_over_http_stays_alive() -> None:
    book = OwnerBook(grace_s=10.0, unowned_ttl_s=100.0)
    book.own("p", "a", "a-1", now=0.0)
    book.heard("p", now=8.0)
    assert book.gone(now=15.0) == []
    assert [lost.session for lost in book.gone(now=18.5)] == ["a"]


def _metrics_only() -> web.Application:
    """A replica that answers its /metrics poll and nothing else (these tests forward no request)."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def _coordinator(serve: Serve) -> tuple[Coordinator, str]:
    replica = await serve(_metrics_only())
    config = load_config(overrides={
        "cluster.replicas": [{"id": "r0", "base_url": str(replica.make_url("")).rstrip("/"),
                              "capacity_tokens": 100_000}],
        "sessions.proxy_grace_s": GRACE_S, "sessions.unowned_request_ttl_s": 1.0}, environ={})
    coordinator = build_coordinator(config, use_store=False, tick_s=0.05)
    server = await serve(build_app(coordinator))
    return coordinator, str(server.make_url("")).rstrip("/")


def _admit(session: str, proxy: str | None, **extra: Any) -> dict[str, Any]:
    body = {"session": session, "request_id": f"{session}-1", "prompt_tokens_estimate": 100, "wait_s": 5}
    return body | ({"proxy": proxy} if proxy else {}) | extra


async def _until(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_requests_of_a_vanished_proxy_are_ended_and_a_connected_ones_kept(serve: Serve) -> None:
    coordinator, url = await _coordinator(serve)
    async with aiohttp.ClientSession() as http:
        dead = await http.ws_connect(url + "/v1/channel?proxy=dead")
        alive = await http.ws_connect(url + "/v1/channel?proxy=alive")
        for ws in (dead, alive):
            assert (await ws.receive_json(timeout=5))["type"] == "hello"
        # A session holding r0 between two requests, whose next request the dead proxy sends on its lease.
        async with http.post(url + "/v1/admit", json=_admit("leased", "alive")) as response:
            assert (await response.json())["status"] == "admitted"
        async with http.post(url + "/v1/requests/done", json={"session": "leased", "request_id": "leased-1",
                                                              "status": "ok", "prompt_tokens": 100}) as response:
            assert response.status == 200
        await dead.send_str(json.dumps({"seq": 1, "type": "leased",
                                        "body": _admit("leased", None, leased="r0", request_id="leased-2")}))
        for session, proxy in (("dead-http", "dead"), ("alive-http", "alive")):
            async with http.post(url + "/v1/admit", json=_admit(session, proxy)) as response:
                assert (await response.json())["status"] == "admitted"
        assert await _until(lambda: coordinator._sizes["leased"].main_request == "leased-2")
        held = ("leased", "dead-http", "alive-http")
        assert all(coordinator.state.phase(s) is Phase.REASONING for s in held)
        await dead.close()  # as a SIGKILL would, minus the close frame
        assert await _until(lambda: coordinator.state.phase("dead-http") is not Phase.REASONING, timeout_s=5.0)
        assert coordinator.state.phase("leased") is Phase.IDLE
        assert coordinator.state.phase("dead-http") is Phase.IDLE
        assert coordinator.state.phase("alive-http") is Phase.REASONING  # its proxy is still connected
        # The next request of a freed session is a main request again, not a side request.
        async with http.post(url + "/v1/admit", json=_admit("dead-http", "alive", request_id="dead-http-2")) as r:
            assert (await r.json())["status"] == "admitted"
        assert coordinator._sizes["dead-http"].main_request == "dead-http-2"
        await alive.close()


async def test_unowned_admissions_expire_and_unpolled_waits_are_withdrawn(serve: Serve) -> None:
    coordinator, url = await _coordinator(serve)
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/admit", json=_admit("anonymous", None)) as response:
            assert (await response.json())["status"] == "admitted"
        assert coordinator.state.phase("anonymous") is Phase.REASONING
        assert await _until(lambda: coordinator.state.phase("anonymous") is Phase.IDLE, timeout_s=5.0)
        assert coordinator.state.used_tokens("r0") == 0


async def test_a_waiting_admission_nobody_polls_is_withdrawn(serve: Serve) -> None:
    coordinator, url = await _coordinator(serve)
    coordinator.state.set_capacity("r0", 150)  # less than the request needs: it waits
    async with aiohttp.ClientSession() as http:
        with_poll = asyncio.create_task(http.post(url + "/v1/admit", json=_admit("waits", "p", wait_s=30)))
        assert await _until(lambda: "waits" in coordinator._pending)
        with_poll.cancel()  # the proxy's long-poll goes away and never comes back
        assert await _until(lambda: "waits" not in coordinator._pending, timeout_s=5.0)
        assert coordinator.state.phase("waits") is Phase.IDLE
