"""The scripted agents' tool events: kept and sent again when the coordinator does not take them, as the
shims' spool does; counted as lost only when refused as invalid or never accepted."""

from __future__ import annotations

import math
from typing import Any

import aiohttp
from aiohttp import web

from tao_harness.fleet.session import Endpoints, _post_event


def coordinator(answers: list[int]) -> tuple[web.Application, list[dict[str, Any]]]:
    """A coordinator stand-in answering /v1/events with `answers` in turn (the last one from then on)."""
    received: list[dict[str, Any]] = []

    async def events(request: web.Request) -> web.Response:
        received.append(await request.json())
        status = answers[min(len(received), len(answers)) - 1]
        return web.json_response({"ok": status < 400}, status=status)

    app = web.Application()
    app.router.add_post("/v1/events", events)
    return app, received


async def test_an_event_not_taken_is_sent_again_until_accepted(serve: Any) -> None:
    app, received = coordinator([503, 503, 200])
    server = await serve(app)
    latencies: list[float] = []
    endpoints = Endpoints(("http://unused",), str(server.make_url("")).rstrip("/"), event_latencies=latencies,
                          event_resends=5)
    async with aiohttp.ClientSession() as http:
        await _post_event(http, endpoints, {"type": "tool_start", "session": "s", "call_id": "c"})
    assert len(received) == 3 and endpoints.events_lost == 0
    assert latencies == [math.inf]  # the first delivery failed: a shim would have spooled it
    assert endpoints.event_failures == {"HTTP 503": 2}


async def test_an_invalid_event_is_not_resent_and_counts_as_lost(serve: Any) -> None:
    app, received = coordinator([422])
    server = await serve(app)
    endpoints = Endpoints(("http://unused",), str(server.make_url("")).rstrip("/"), event_latencies=[],
                          event_resends=5)
    async with aiohttp.ClientSession() as http:
        await _post_event(http, endpoints, {"type": "tool_start"})
    assert len(received) == 1 and endpoints.events_lost == 1 and endpoints.event_failures == {"HTTP 422": 1}


async def test_an_event_still_failing_after_its_resends_is_lost(serve: Any) -> None:
    app, received = coordinator([500])
    server = await serve(app)
    endpoints = Endpoints(("http://unused",), str(server.make_url("")).rstrip("/"), event_resends=1)
    async with aiohttp.ClientSession() as http:
        await _post_event(http, endpoints, {"type": "tool_end"})
    assert len(received) == 2 and endpoints.events_lost == 1
