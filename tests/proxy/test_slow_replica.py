"""A replica slow to accept connections is busy, not dead: the proxy keeps connecting to it (for
`connect_patience_s`) instead of answering 503 "no replica available" once its connects time out."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario

Serve = Callable[[Any], Awaitable[TestServer]]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


async def test_connect_timeouts_are_waited_out_not_answered_503(serve: Serve,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    # A listener that never accepts, its queue full: the kernel drops further SYNs, so connects time out.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = socket.create_connection(("127.0.0.1", port))
    config = ProxyConfig(port=0, connect_timeout_s=0.2, connect_patience_s=120.0)
    proxy = await serve(build_proxy_app(config, (ReplicaSpec(id="r0", base_url=f"http://127.0.0.1:{port}"),)))
    replica_app = build_replica_app(ReplicaConfig(port=0, time_scale=50.0), load_scenario("swe-short"))
    replica = TestServer(replica_app, host="127.0.0.1", port=port)
    async with aiohttp.ClientSession() as http:

        async def ask() -> tuple[int, Any]:
            async with http.post(str(proxy.make_url("/v1/chat/completions")), json=CHAT) as response:
                return response.status, await response.json()

        caplog.set_level(logging.INFO, "tao_harness.proxy.app")
        answer = asyncio.create_task(ask())
        try:
            # Bounded: were the kernel to accept these connects after all, no attempt would ever time out.
            deadline = time.monotonic() + 30
            while not answer.done() and sum("timed out" in r.message for r in caplog.records) < 3:
                assert time.monotonic() < deadline, "the proxy's connects to the listener never timed out"
                await asyncio.sleep(0.05)
            assert not answer.done(), answer.result()  # three connect attempts timed out, and it still waits
        finally:
            queued.close()
            listener.close()
        await replica.start_server()  # the replica is up at last, on the same port
        try:
            status, payload = await asyncio.wait_for(answer, 60)
        finally:
            answer.cancel()
            await replica.close()
    assert status == 200, payload
    assert payload["choices"][0]["message"]["content"]
