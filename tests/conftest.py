"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

Serve = Callable[[Any], Awaitable[TestServer]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Starts aiohttp apps on real loopback ports (handler cancellation on, as in production); closes
    them in reverse order at the end of the test."""
    servers: list[TestServer] = []

    async def start(app: Any) -> TestServer:
        server = TestServer(app, host="127.0.0.1", port=0, handler_cancellation=True)
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        await server.close()
