"""A replica dying mid-answer, seen through the proxy with the real SDKs: the client gets one whole answer.

Two emulated replicas; the first sits behind a TCP relay that resets both connections once the response
has carried a given number of SSE events (or JSON bytes), as a SIGKILLed replica does. The answer the
client receives must equal what the healthy replica answers directly, in one well-formed stream.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anthropic
import openai
import pytest
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.proxy.routing import AffinityRouter
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario

MESSAGES: list[Any] = [{"role": "user", "content": "Fix the failing test, please."}]
BASH = {"name": "Bash", "description": "Run a command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
    "required": ["command"]}}

Serve = Callable[[Any], Awaitable[TestServer]]  # the `serve` fixture (tests/conftest.py)



def _reset(writer: asyncio.StreamWriter) -> None:
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()  # closing with linger 0 sends RST, as the kernel does for a killed process


@dataclass
class Cutter:
    """Relays TCP to a replica and resets the connection after the `after`-th `marker` of the response."""

    target: str
    marker: bytes
    after: int
    cuts: int = 0

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = urlsplit(self.target)
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)

        async def requests() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)

        forwarding = asyncio.create_task(requests())
        seen = bytearray()
        try:
            while data := await up_reader.read(65536):
                start = len(seen)
                seen += data
                cut = _end_of_nth(seen, self.marker, self.after)
                writer.write(bytes(seen[start:cut]) if cut is not None else data)
                await writer.drain()
                if cut is not None:
                    self.cuts += 1
                    _reset(writer)
                    _reset(up_writer)
                    return
        finally:
            forwarding.cancel()


def _end_of_nth(data: bytearray, marker: bytes, n: int) -> int | None:
    end = 0
    for _ in range(n):
        found = data.find(marker, end)
        if found < 0:
            return None
        end = found + len(marker)
    return end




def _replica_app() -> Any:
    return build_replica_app(ReplicaConfig(port=0, time_scale=10.0), load_scenario("swe-short"))


def _url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


@dataclass
class Fleet:
    proxy: str  # proxy root
    healthy: str  # the second replica, asked directly for the reference answer
    cutter: Cutter
    session: str  # a session the proxy routes to the cut replica first
    cutter_url: str  # the first replica, behind the cutter


async def _fleet(serve: Serve, marker: bytes, after: int) -> AsyncIterator[Fleet]:
    replicas = [_url(await serve(_replica_app())) for _ in range(2)]
    cutter = Cutter(replicas[0], marker, after)
    relay = await asyncio.start_server(cutter.relay, "127.0.0.1", 0)
    specs = (ReplicaSpec(id="a", base_url=f"http://127.0.0.1:{relay.sockets[0].getsockname()[1]}"),
             ReplicaSpec(id="b", base_url=replicas[1]))
    router = AffinityRouter(specs)
    session = next(f"s{i}" for i in range(100) if router.pick(f"s{i}").id == "a")
    proxy = await serve(build_proxy_app(ProxyConfig(port=0), specs))
    yield Fleet(_url(proxy), replicas[1], cutter, session, specs[0].base_url)
    relay.close()


@pytest.fixture(params=[3, 12], ids=["early", "late"])
async def sse_fleet(serve: Serve, request: pytest.FixtureRequest) -> AsyncIterator[Fleet]:
    """Cut after the role chunk (or message_start) and a few content events."""
    async for fleet in _fleet(serve, b"\n\n", request.param):
        yield fleet


def _openai(url: str, session: str = "direct") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0,
                              default_headers={"x-session-id": session})


async def _chat_stream(client: openai.AsyncOpenAI) -> list[Any]:
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, max_tokens=60, stream=True, stream_options={"include_usage": True},
        extra_body={"ignore_eos": True})
    return [chunk async for chunk in stream]


def _finish(chunk: Any) -> str | None:
    return chunk.choices[0].finish_reason if chunk.choices else None


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_an_openai_stream_cut_mid_answer_is_finished_by_the_other_replica(sse_fleet: Fleet) -> None:
    reference = await _chat_stream(_openai(sse_fleet.healthy))
    chunks = await _chat_stream(_openai(sse_fleet.proxy, sse_fleet.session))
    assert sse_fleet.cutter.cuts == 1
    assert _text(chunks) == _text(reference) and len(_text(chunks)) > 100
    assert len({c.id for c in chunks}) == 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    finishes = [_finish(c) for c in chunks if _finish(c)]
    # vLLM ends a run that reaches max_tokens "length", with ignore_eos too
    assert finishes == [_finish(c) for c in reference if _finish(c)] == ["length"]
    usage, expected = chunks[-1].usage, reference[-1].usage
    assert usage is not None and expected is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (expected.prompt_tokens, 60)
    # The proxy asked the replicas for usage on every chunk (exact counts at the cut); the client, which
    # asked for the closing usage only, gets only that, as from vLLM directly.
    assert [c for c in chunks if c.usage is not None] == [chunks[-1]]
    assert [c for c in reference if c.usage is not None] == [reference[-1]]


async def _messages_stream(url: str, session: str) -> tuple[list[Any], Any]:
    client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0,
                                      default_headers={"x-session-id": session})
    async with client.messages.stream(model="m", max_tokens=400, messages=MESSAGES, tools=[BASH]) as stream:
        events = [event async for event in stream]
        return events, await stream.get_final_message()


async def test_an_anthropic_stream_cut_mid_text_goes_on_to_its_tool_call(sse_fleet: Fleet) -> None:
    _, reference = await _messages_stream(sse_fleet.healthy, "direct")
    events, message = await _messages_stream(sse_fleet.proxy, sse_fleet.session)
    assert sse_fleet.cutter.cuts == 1
    assert [e.type for e in events].count("message_start") == 1
    assert [e.index for e in events if e.type == "content_block_start"] == [0, 1]
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == reference.content[0].text and len(message.content[0].text) > 100
    assert (message.content[1].name, message.content[1].input) == ("Bash", reference.content[1].input)
    assert message.stop_reason == "tool_use" and message.id == events[0].message.id
    assert message.usage.output_tokens == reference.usage.output_tokens


async def test_a_failure_before_the_first_content_is_retried_unseen(serve: Serve) -> None:
    async for fleet in _fleet(serve, b"\n\n", 1):  # only the role chunk came: it never reached the client
        chunks = await _chat_stream(_openai(fleet.proxy, fleet.session))
        assert fleet.cutter.cuts == 1
        assert _text(chunks) == _text(await _chat_stream(_openai(fleet.healthy)))
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1


async def test_a_whole_body_cut_midway_is_retried(serve: Serve) -> None:
    async for fleet in _fleet(serve, b'"content"', 1):
        client = _openai(fleet.proxy, fleet.session)
        answer = await client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=30,
                                                      extra_body={"ignore_eos": True})
        assert fleet.cutter.cuts == 1
        assert answer.usage is not None and answer.usage.completion_tokens == 30


async def _tool_call_then_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    call = {"index": 0, "id": "t1", "type": "function", "function": {"name": "bash", "arguments": ""}}
    chunks = [{"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
              {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}]
    body = b"".join(b"data: %s\n\n" % json.dumps(c).encode() for c in chunks)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                 + b"%x\r\n%s\r\n" % (len(body), body))
    await writer.drain()
    await asyncio.sleep(0.05)
    _reset(writer)


async def test_a_stream_cut_inside_a_tool_call_ends_with_an_error_event(serve: Serve) -> None:
    dying = await asyncio.start_server(_tool_call_then_reset, "127.0.0.1", 0)
    healthy = await serve(_replica_app())
    specs = (ReplicaSpec(id="a", base_url=f"http://127.0.0.1:{dying.sockets[0].getsockname()[1]}"),
             ReplicaSpec(id="b", base_url=_url(healthy)))
    session = next(f"s{i}" for i in range(100) if AffinityRouter(specs).pick(f"s{i}").id == "a")
    proxy = await serve(build_proxy_app(ProxyConfig(port=0), specs))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    async with aiohttp.ClientSession() as http, http.post(_url(proxy) + "/v1/chat/completions", json=body,
                                                          headers={"x-session-id": session}) as response:
        text = await response.text()
    dying.close()
    events = [line for line in text.split("\n\n") if line]
    assert len(events) == 3 and '"tool_calls"' in events[1]  # the cut call, then the error: never a retry
    assert "failed mid-response" in events[2] and '"error"' in events[2]


async def test_every_attempt_is_reported_and_the_last_one_says_what_the_client_got(
        serve: Serve, stub_coordinator: Any) -> None:  # stub_coordinator: tests/proxy/conftest.py
    async for fleet in _fleet(serve, b"\n\n", 12):
        specs = {"a": fleet.cutter_url, "b": fleet.healthy}
        coordinator = await stub_coordinator(specs)
        reports = coordinator.reports
        config = ProxyConfig(port=0, coordinator_url=coordinator.url, admission_leases=False)
        proxy = _url(await serve(build_proxy_app(config, tuple(ReplicaSpec(id=r, base_url=u) for r, u in specs.items()))))
        reference = await _chat_stream(_openai(fleet.healthy))
        chunks = await _chat_stream(_openai(proxy, "s"))
        for _ in range(100):
            if len(reports) == 2:
                break
            await asyncio.sleep(0.05)
    assert fleet.cutter.cuts == 1 and _text(chunks) == _text(reference)
    cut, continued = reports
    assert (cut["attempt"], cut["replica"], cut["status"], cut.get("answer")) == (1, "a", "error", None)
    # Exact counts, not a re-tokenized estimate: what the cut replica generated and what the other one
    # generated add up to what the client was told.
    assert cut["completion_tokens"] + continued["completion_tokens"] == chunks[-1].usage.completion_tokens == 60
    assert (continued["attempt"], continued["replica"], continued["status"]) == (2, "b", "ok")
    # The continuation's own prompt holds the answer sent before the cut; the client's usage does not.
    usage, expected = chunks[-1].usage, reference[-1].usage
    assert continued["prompt_tokens"] > expected.prompt_tokens
    answer = continued["answer"]
    assert (answer["status"], answer["replica"], answer["attempts"]) == ("ok", "b", 2)
    assert (answer["prompt_tokens"], answer["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert answer["ttft_s"] is not None and answer["ttft_s"] < cut["latency_s"] < answer["latency_s"]
