"""A client that leaves: once it has its whole answer the request is "ok", before that "cancelled".

The SDKs close the connection as soon as they read `[DONE]` (or Anthropic's `message_stop`), which can be
before the proxy has ended the response: against real vLLM a completed stream was stored as cancelled
(and the coordinator then never learnt whether that replica reports cached tokens). Here the replica
pauses before its closing event and after it, so the client always leaves first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaSpec
from tao_harness.proxy.app import build_app as build_proxy_app

Serve = Callable[[Any], Awaitable[TestServer]]  # the `serve` fixture (tests/conftest.py)
LINGER_S = 3.0  # how long the replica keeps the response open after its closing event

OPENAI_EVENTS = [
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Done."},'
    b'"finish_reason":"stop"}]}',
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[],'
    b'"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}',
    b"data: [DONE]",
]
ANTHROPIC_EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":'
    b'"assistant","content":[],"usage":{"input_tokens":7,"output_tokens":0}}}',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"text","text":""}}',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"Done."}}',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}',
    b'event: message_stop\ndata: {"type":"message_stop"}',
]
ROUTES = {"/v1/chat/completions": OPENAI_EVENTS, "/v1/messages": ANTHROPIC_EVENTS}


def _lingering_replica() -> web.Application:
    """Streams the route's events with a pause of LINGER_S before the closing one and after it."""

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        *answer, closing = ROUTES[request.path]
        await response.write(b"".join(event + b"\n\n" for event in answer))
        await asyncio.sleep(LINGER_S)
        await response.write(closing + b"\n\n")
        await asyncio.sleep(LINGER_S)
        await response.write_eof()
        return response

    app = web.Application()
    for path in ROUTES:
        app.router.add_post(path, stream)
    return app


async def _proxy_reporting_to(serve: Serve, stub_coordinator: Any) -> tuple[str, list[dict[str, Any]]]:
    replica = str((await serve(_lingering_replica())).make_url("")).rstrip("/")
    coordinator = await stub_coordinator({"r": replica})
    config = ProxyConfig(port=0, coordinator_url=coordinator.url, admission_leases=False)
    proxy = await serve(build_proxy_app(config, (ReplicaSpec(id="r", base_url=replica),)))
    return str(proxy.make_url("")).rstrip("/"), coordinator.reports


async def _read_until(proxy: str, path: str, marker: bytes) -> bytes:
    """POSTs a streamed request and drops the connection as soon as `marker` has arrived."""
    body = {"model": "m", "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    seen = b""
    async with aiohttp.ClientSession() as http:
        response = await http.post(proxy + path, json=body, headers={"X-TAO-Session": "s"})
        async for chunk in response.content.iter_any():
            seen += chunk
            if marker in seen:
                break
        response.connection.transport.abort()  # type: ignore[union-attr]
        response.release()
    return seen


@pytest.mark.parametrize(("path", "marker", "status"), [
    ("/v1/chat/completions", b"[DONE]", "ok"),
    ("/v1/messages", b"message_stop", "ok"),
    ("/v1/chat/completions", b'"usage"', "cancelled"),  # left before [DONE]
    ("/v1/messages", b"message_delta", "cancelled"),
], ids=["openai-done", "anthropic-stop", "openai-early", "anthropic-early"])
async def test_a_client_leaving_after_its_whole_answer_counts_it_as_answered(
        serve: Serve, stub_coordinator: Any, path: str, marker: bytes, status: str) -> None:
    proxy, reports = await _proxy_reporting_to(serve, stub_coordinator)
    assert marker in await _read_until(proxy, path, marker)
    for _ in range(int(4 * LINGER_S / 0.05)):
        if reports:
            break
        await asyncio.sleep(0.05)
    [report] = reports
    assert report["status"] == status
    if status == "ok":
        assert (report["prompt_tokens"], report["completion_tokens"]) == (7, 2)
