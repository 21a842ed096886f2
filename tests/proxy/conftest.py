"""A stand-in coordinator for proxy tests: admits every request to the first replica not excluded and
keeps the proxy's request reports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


@dataclass
class StubCoordinator:
    url: str  # root URL, for ProxyConfig.coordinator_url
    reports: list[dict[str, Any]] = field(default_factory=list)  # each /v1/requests/done body, in order


StartStub = Callable[[dict[str, str]], Awaitable[StubCoordinator]]


@pytest.fixture
def stub_coordinator(serve: Any) -> StartStub:
    """`await stub_coordinator({replica id: base URL, ...})` starts one on loopback."""

    async def start(replicas: dict[str, str]) -> StubCoordinator:
        reports: list[dict[str, Any]] = []

        async def admit(request: web.Request) -> web.Response:
            excluded = (await request.json()).get("exclude") or []
            replica = next(r for r in replicas if r not in excluded)
            return web.json_response({"status": "admitted", "replica": replica, "base_url": replicas[replica]})

        async def done(request: web.Request) -> web.Response:
            reports.append(await request.json())
            return web.json_response({"status": "ok"})

        app = web.Application()
        app.router.add_post("/v1/admit", admit)
        app.router.add_post("/v1/requests/done", done)
        return StubCoordinator(str((await serve(app)).make_url("")).rstrip("/"), reports)

    return start
