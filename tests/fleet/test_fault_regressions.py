"""Proxy behaviour the fault campaign found wrong, pinned with upstreams that fail on purpose.

A raw TCP server stands in for a replica that dies: it resets the connection (RST) either before any
response header or after the first streamed chunk. The healthy replica is the real emulated one.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec
from tao_harness.fleet.faults.scale import frozen_heap
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.proxy.routing import AffinityRouter
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8,
        "stream": True, "ignore_eos": True}
FIRST_CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "partial"}}]}\n\n'

Serve = Callable[[Any], Awaitable[TestServer]]  # the `serve` fixture (tests/conftest.py)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
    writer.transport.abort()


async def _dying_replica(after_headers: bool) -> tuple[asyncio.Server, str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if after_headers:
            chunk = b"%x\r\n%s\r\n" % (len(FIRST_CHUNK), FIRST_CHUNK)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + chunk)
            await writer.drain()
            await asyncio.sleep(0.05)
        _reset(writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"






def _url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def test_reset_before_the_headers_is_retried_on_another_replica(serve: Serve) -> None:
    dying, dying_url = await _dying_replica(after_headers=False)
    healthy = await serve(build_replica_app(ReplicaConfig(port=0, time_scale=50.0), load_scenario("swe-short")))
    replicas = (ReplicaSpec(id="a", base_url=dying_url), ReplicaSpec(id="b", base_url=_url(healthy)))
    router = AffinityRouter(replicas)
    session = next(f"s{i}" for i in range(100) if router.pick(f"s{i}").id == "a")  # the dying one first
    proxy = await serve(build_proxy_app(ProxyConfig(port=0), replicas))
    async with aiohttp.ClientSession() as http, http.post(_url(proxy) + "/v1/chat/completions", json=CHAT,
                                                          headers={"x-session-id": session}) as response:
        text = await response.text()
    dying.close()
    assert response.status == 200, text
    assert "data: [DONE]" in text and '"error"' not in text


async def test_a_stream_cut_by_the_replica_ends_with_an_error_event(serve: Serve) -> None:
    dying, dying_url = await _dying_replica(after_headers=True)
    proxy = await serve(build_proxy_app(ProxyConfig(port=0), (ReplicaSpec(id="a", base_url=dying_url),)))
    async with aiohttp.ClientSession() as http, http.post(_url(proxy) + "/v1/chat/completions", json=CHAT,
                                                          headers={"x-session-id": "cut"}) as response:
        text = await response.text()
    dying.close()
    assert text.startswith(FIRST_CHUNK.decode())
    assert '"error"' in text and "failed mid-response" in text  # never a reply that merely stops early


def test_the_scale_soak_driver_keeps_its_heap_out_of_the_collectors_way() -> None:
    # The driver times the agents' tool events: its own collector pauses must not count as latency.
    gc.unfreeze()
    with frozen_heap():
        assert gc.get_freeze_count() > 10_000
    assert gc.get_freeze_count() == 0
