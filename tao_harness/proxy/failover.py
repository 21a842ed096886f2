"""The client's side of one generation request across replica attempts: nothing is lost to a dying replica.

Invariant: the client only ever receives bytes that a later attempt can extend into one well-formed
answer. So
1. status, headers and the stream's preamble (OpenAI role chunk, Anthropic `message_start`) wait in
   the proxy until the first content-bearing event, and a whole JSON body until its end: a replica that
   fails before that is simply replaced, as if it had refused the connection. The first content event
   goes out at once (TTFT is unchanged).
2. only complete SSE events are forwarded, and the forwarded bytes of a resumable stream are kept: when
   the replica fails after content went out, they tell what the client has, and another replica is
   asked to continue that text (splice_openai, splice_anthropic). A stream that cannot be continued
   (cut in a tool call or reasoning, /v1/completions) ends with an in-band error event, never silently.

The relay also keeps the request's record as its client saw it (`answer`): attempts, the time of the
first content the client got, and the usage its answer reported (a continued stream's is read from the
bytes the client received, as the splice rewrote them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from tao_harness.proxy.running_usage import strip_running_usage, with_running_usage
from tao_harness.proxy.splice import (CONTINUE_PATH, Continuation, Splice, Unresumable, complete_length,
                                      count, encode_event)
from tao_harness.proxy.splice_anthropic import messages_continuation
from tao_harness.proxy.messages import RequestAnswer
from tao_harness.proxy.splice_openai import chat_continuation
from tao_harness.proxy.usage import ApiKind, Usage, UsageTracker

# An attempt's status → the request's, as its client saw it (a refused connection ended in an error).
_ANSWER_STATUS = {"ok": "ok", "cancelled": "cancelled"}
# Streams that can be continued on another replica, by path.
_CONTINUATIONS: dict[str, Callable[[dict[str, Any], bytes], Continuation | str]] = {
    "/v1/chat/completions": chat_continuation,
    "/v1/messages": messages_continuation,
}
TOKENIZE_TIMEOUT_S = 10.0


class Retry(Exception):
    """The replica failed and another one may take over (afresh, or continuing the answer)."""


class Relay:
    """Forwards the responses of successive upstream attempts as one response to the client."""

    def __init__(self, api: ApiKind | None, path: str, query: str, body: Any, streaming: bool,
                 clock0: float) -> None:
        self.api = api
        self.streaming = streaming
        self._path = path + (f"?{query}" if query else "")
        self._body = body if isinstance(body, dict) else None
        self._hold = api is not None
        self._plan = _CONTINUATIONS.get(path) if streaming and self._body is not None else None
        # Exact counts for the continuation: vLLM is asked for usage on every chunk, the client gets
        # only the closing usage it asked for (running_usage).
        running = with_running_usage(self._body) if self._plan is chat_continuation and self._body else None
        # The first attempt's body when it is not the client's; then per-chunk usage is stripped.
        self._upstream_body: bytes | None = None
        if running is not None:
            self._body, self._upstream_body = running
        self._response: web.StreamResponse | None = None
        self._unsent = bytearray()  # complete events (or body bytes) not yet sent
        self._tail = bytearray()  # the start of an event not complete yet
        # Every event a resumable stream sent to the client, with the per-chunk usage it may not get.
        self._seen = bytearray()
        self._continuation: Continuation | None = None  # what the next attempt must continue
        self.unresumable = ""  # why the answer could not be continued, when it could not
        self._splice: Splice | None = None  # rewriting of the attempt in flight
        self._clock0 = clock0  # time.monotonic() of the request's arrival
        self.attempts = 0  # upstream attempts begun
        self._queue_wait_s = 0.0  # their admission waits, added up
        self._ttft_s: float | None = None  # the first content the client got, from the request's arrival
        self._client: UsageTracker | None = None  # reads the client's bytes once the answer is continued

    @property
    def response(self) -> web.StreamResponse:
        assert self._response is not None, "no upstream answered yet"
        return self._response

    def begin_attempt(self, queue_wait_s: float) -> int:
        """Counts an upstream attempt; returns its number (1, 2, ...)."""
        self.attempts += 1
        self._queue_wait_s += queue_wait_s
        return self.attempts

    @property
    def upstream_api(self) -> ApiKind:
        """The API the next attempt's answer speaks: continuations are chat completions."""
        return "openai" if self._continuation is not None or self.api is None else self.api

    def answer(self, status: str, replica: str | None, usage: Usage | None) -> RequestAnswer:
        """The request's record as its client saw it, after the attempt on `replica` ended with `status`
        and `usage` (the attempt's own)."""
        seen = self._client.finish() if self._client is not None else usage or Usage()
        return RequestAnswer(
            status=_ANSWER_STATUS.get(status, "error"), replica=replica, prompt_tokens=seen.prompt_tokens,
            cached_tokens=seen.cached_tokens, completion_tokens=seen.completion_tokens, ttft_s=self._ttft_s,
            latency_s=time.monotonic() - self._clock0, attempts=self.attempts, queue_wait_s=self._queue_wait_s,
        )

    @property
    def started(self) -> bool:
        """Bytes (at least the status line) went to the client: a new attempt can only continue them."""
        return self._response is not None and self._response.prepared

    async def next_request(self, http: aiohttp.ClientSession, base_url: str, headers: dict[str, str],
                           raw: bytes) -> tuple[str, bytes]:
        """Path (with query) and body of the next attempt on `base_url`: the request, or its continuation.

        The continuation needs the token count of the text already sent (for max_tokens and usage); the
        replica's vLLM `/tokenize` gives it in its own tokenizer.
        """
        if self._continuation is None:
            return self._path, self._upstream_body if self._upstream_body is not None else raw
        done = self._continuation.done(await _count_tokens(http, base_url, headers, self._continuation))
        body = self._continuation.request(done)
        self._splice = self._continuation.splice(done)
        return CONTINUE_PATH, json.dumps(body).encode()

    async def open(self, request: web.Request, response: web.StreamResponse,
                   upstream: aiohttp.ClientResponse) -> None:
        """Takes an attempt's answer; `response` carries its status and headers unless the client has one."""
        if self.started:
            encoding = upstream.headers.get("Content-Encoding")  # a splice rewrites events: plain text only
            if upstream.status != 200 or encoding:
                raise Unresumable(f"the continuation came back with HTTP {upstream.status} {encoding or ''}")
            return
        self._response = response
        if not self._hold:
            await response.prepare(request)

    async def write(self, request: web.Request, chunk: bytes, content_seen: bool) -> None:
        """Forwards `chunk` now, or holds it until content (streams) or the end (whole bodies)."""
        if not self._hold:
            await self.response.write(chunk)
            return
        self._tail += chunk
        end = complete_length(self._tail) if self.streaming else 0
        if end:
            events = bytes(self._tail[:end])
            del self._tail[:end]
            self._unsent += self._splice.rewrite(events) if self._splice is not None else events
        if content_seen and self._ttft_s is None:
            self._ttft_s = time.monotonic() - self._clock0
        if content_seen or self.started:
            await self._flush(request)

    async def finish(self, request: web.Request) -> None:
        rest = bytes(self._tail)
        self._tail.clear()
        self._unsent += self._splice.rewrite(rest) if self._splice is not None and rest else rest
        await self._flush(request)
        await self.response.write_eof()

    async def _flush(self, request: web.Request) -> None:
        if not self.response.prepared:
            await self.response.prepare(request)
        if self._unsent:
            unsent = bytes(self._unsent)
            await self.response.write(strip_running_usage(unsent) if self._upstream_body is not None else unsent)
            if self._plan is not None:
                self._seen += self._unsent
            if self._client is not None:
                self._client.feed(bytes(self._unsent))
            self._unsent.clear()

    def failed(self) -> bool:
        """The attempt's replica failed; True if another attempt may go on (see `Retry`)."""
        self._tail.clear()
        self._splice = None
        if not self.started:
            self._unsent.clear()
            self._response = None
            return True
        if self._plan is None or self._body is None:
            self.unresumable = f"{self._path} answers cannot be continued"
            return False
        plan = self._plan(self._body, bytes(self._seen))
        self._continuation = plan if isinstance(plan, Continuation) else None
        self.unresumable = plan if isinstance(plan, str) else ""
        if self._continuation is not None and self._client is None and self.api is not None:
            self._client = UsageTracker(self.api, streaming=True)
            self._client.feed(bytes(self._seen))
        return self._continuation is not None

    async def give_up(self, request: web.Request, message: str,
                      unstarted: web.StreamResponse) -> web.StreamResponse:
        """Ends a started answer so the client sees an error, never a reply that merely stops early;
        `unstarted` is the answer when nothing was sent yet (an HTTP error)."""
        if not self.started:
            return unstarted
        try:
            if self.streaming and self.api is not None:  # an in-band error event, as vLLM and Anthropic send
                if self.api == "anthropic":
                    await self.response.write(encode_event(
                        {"type": "error", "error": {"type": "api_error", "message": message}}, "error"))
                else:
                    await self.response.write(encode_event(
                        {"error": {"message": message, "type": "proxy_error", "code": 502}}))
                await self.response.write_eof()
            elif request.transport is not None:
                request.transport.close()  # the body is incomplete: the client gets a payload error
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass
        return self.response


async def _count_tokens(http: aiohttp.ClientSession, base_url: str, headers: dict[str, str],
                        continuation: Continuation) -> int:
    body = {"model": continuation.model, "prompt": continuation.text, "add_special_tokens": False}
    sent = {k: v for k, v in headers.items() if k.lower() not in ("accept-encoding", "content-type")}
    async with http.post(base_url.rstrip("/") + "/tokenize", json=body, headers=sent, auto_decompress=True,
                         timeout=aiohttp.ClientTimeout(total=TOKENIZE_TIMEOUT_S)) as response:
        try:
            answer = await response.json(content_type=None) if response.status == 200 else None
        except (ValueError, aiohttp.ClientPayloadError):
            answer = None
    tokens = count(answer.get("count")) if isinstance(answer, dict) else None
    if tokens is None:
        raise Unresumable(f"the replica's /tokenize answered HTTP {response.status} without a token count")
    return tokens
