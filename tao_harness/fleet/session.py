"""One scripted agent session replayed over real HTTP, the way a harness would drive it.

Each trace turn is a real streaming chat request carrying the session's whole, growing message list
(so prefix caching is real on the replica), with `max_tokens` = the turn's output and vLLM's
`ignore_eos` so the reply has exactly that length. Each tool call is a real wait of the trace's
duration divided by the time scale, reported as `tool_start` / `tool_end` events when the router
takes them (TAO's coordinator). Sessions identify themselves as OpenCode does (`x-session-id`,
`x-session-affinity`), so every router sees what it would see in production; behind ThunderAgent they
also send `program_id` in the body (what its README's `extra_body={"program_id": ...}` puts there) and
release the program (`POST /programs/release`) when they end, as its API expects.

Times in the results are emulated seconds (wall seconds × time scale).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tao_harness.clock import ScaledClock
from tao_harness.proxy.usage import UsageTracker
from tao_harness.replica.agent import reasoning_text as filler_text
from tao_harness.shims.delivery import INVALID_STATUSES
from tao_harness.sim.trace import TraceSession

@dataclass
class Endpoints:
    # OpenAI-compatible roots (no /v1); several = the client balances round-robin per request.
    llm_urls: tuple[str, ...]
    # Coordinator root for tool events and session end; None for routers that take none.
    events_url: str | None = None
    # Transport failures (connection refused or cut) a turn retries, a second apart, as harnesses do.
    retries: int = 0
    # When a list: wall seconds each tool event's first delivery took to be accepted (a failed one counts as
    # inf: a shim would have spooled the event), and why deliveries failed ("HTTP 503", "TimeoutError", ...).
    event_latencies: list[float] | None = None
    event_failures: Counter[str] = field(default_factory=Counter)
    # A tool event the coordinator did not take (transport failure, timeout, 5xx) is kept and sent again a
    # second later, up to this many times, as the shims keep it in their spool and replay it.
    event_resends: int = 0
    # Tool events never accepted: refused as invalid, or still failing after the resends.
    events_lost: int = 0
    # ThunderAgent's root when it is the router: requests carry the session as `program_id`, and a session
    # that ends releases its program there; None for routers that know no programs.
    programs_url: str | None = None
    # Releases ThunderAgent did not confirm ({"released": true}), with what it answered instead.
    release_failures: Counter[str] = field(default_factory=Counter)
    _turn: itertools.count = field(default_factory=itertools.count, repr=False)

    def next_llm_url(self) -> str:
        return self.llm_urls[next(self._turn) % len(self.llm_urls)]


@dataclass(frozen=True, slots=True)
class TurnResult:
    started_at: float  # wall clock (time.time())
    ttft_s: float | None  # emulated seconds
    latency_s: float  # emulated seconds
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    # Emulated seconds from the end of the previous tool call to this turn's first token.
    tool_end_to_first_token_s: float | None
    ok: bool
    # Why the request failed, as the server said it (None when ok).
    error: str | None = None


@dataclass
class SessionResult:
    session: str
    started_at: float = 0.0
    ended_at: float = 0.0
    turns: list[TurnResult] = field(default_factory=list)
    error: str | None = None
    # Attempts that failed on the transport and were sent again (Endpoints.retries).
    retries: int = 0


async def _post_event(http: aiohttp.ClientSession, endpoints: Endpoints, event: dict[str, Any]) -> None:
    if endpoints.events_url is None:
        return
    for attempt in range(endpoints.event_resends + 1):
        if attempt:
            await asyncio.sleep(1.0)
        outcome = await _deliver_event(http, endpoints, event)
        if attempt == 0 and endpoints.event_latencies is not None:
            endpoints.event_latencies.append(outcome if isinstance(outcome, float) else float("inf"))
        if isinstance(outcome, float):
            return
        endpoints.event_failures[outcome] += 1
        if outcome in _REFUSED:  # invalid input: sending it again would be refused again
            break
    endpoints.events_lost += 1


# Answers that mean the event itself is invalid: the shims drop those too (shims/delivery.py), with a warning.
_REFUSED = frozenset(f"HTTP {status}" for status in INVALID_STATUSES)


async def _deliver_event(http: aiohttp.ClientSession, endpoints: Endpoints, event: dict[str, Any]) -> float | str:
    """Wall seconds until the coordinator accepted `event`, or why it did not."""
    started = time.monotonic()
    try:
        async with http.post(f"{endpoints.events_url}/v1/events", json=event,
                             timeout=aiohttp.ClientTimeout(total=5)) as response:
            await response.read()
            return time.monotonic() - started if response.status < 400 else f"HTTP {response.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:  # telemetry fails open, as the shims do
        return type(exc).__name__


async def _turn(http: aiohttp.ClientSession, endpoints: Endpoints, session: str,
                messages: list[dict[str, str]], max_tokens: int, time_scale: float,
                tool_ended_at: float | None) -> tuple[TurnResult, str]:
    body = {"model": "tao-replica", "messages": messages, "max_tokens": max(1, max_tokens), "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0}
    if endpoints.programs_url is not None:
        body["program_id"] = session
    headers = {"x-session-id": session, "x-session-affinity": session, "Authorization": "Bearer dummy"}
    tracker = UsageTracker("openai", streaming=True)
    started_wall, started = time.time(), time.monotonic()
    first: float | None = None
    text: list[str] = []
    async with http.post(endpoints.next_llm_url() + "/v1/chat/completions", json=body, headers=headers) as response:
        status = response.status
        async for chunk in response.content.iter_any():
            if tracker.feed(chunk) and first is None:
                first = time.monotonic()
            text.append(chunk.decode("utf-8", "replace"))
    usage = tracker.finish()
    done = time.monotonic()
    error = _refusal(status, "".join(text)) if status != 200 else tracker.error
    return TurnResult(
        started_at=started_wall,
        ttft_s=(first - started) * time_scale if first is not None else None,
        latency_s=(done - started) * time_scale,
        prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
        completion_tokens=usage.completion_tokens,
        tool_end_to_first_token_s=(first - tool_ended_at) * time_scale
        if first is not None and tool_ended_at is not None else None,
        ok=error is None, error=error,
    ), _content_of("".join(text))


def _refusal(status: int, body: str) -> str:
    """`HTTP 400: <the server's message>` from an error answer (JSON `{"error": {"message"}}` or text)."""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    text = str(message) if message else (body.strip().splitlines() or ["(no body)"])[0]
    return f"HTTP {status}: {text[:300]}"


def _content_of(sse: str) -> str:
    parts = []
    for line in sse.splitlines():
        if line.startswith("data:") and line.strip() != "data: [DONE]":
            try:
                chunk = json.loads(line[5:])
            except ValueError:
                continue
            for choice in chunk.get("choices") or ():
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


async def replay_session(http: aiohttp.ClientSession, endpoints: Endpoints, trace: TraceSession,
                         clock: ScaledClock, result: SessionResult | None = None) -> SessionResult:
    """Replays `trace`, recording into `result` as it goes (a caller that cancels it keeps the turns done)."""
    time_scale = clock.time_scale
    result = result or SessionResult(trace.session)
    result.started_at = time.time()
    group_seed = zlib.crc32((trace.prefix_group or trace.session).encode())
    first_input = trace.turns[0].input_tokens
    shared = min(trace.shared_prefix_tokens, first_input)
    messages = [{"role": "system", "content": filler_text(shared, group_seed)},
                {"role": "user", "content": f"Session {trace.session}. "
                 + filler_text(first_input - shared, zlib.crc32(trace.session.encode()))}]
    tool_ended_at: float | None = None
    try:
        for index, turn in enumerate(trace.turns):
            if index > 0:
                messages.append({"role": "user", "content": filler_text(turn.input_tokens, index)})
            for attempt in range(endpoints.retries + 1):
                try:
                    outcome, reply = await _turn(http, endpoints, trace.session, messages, turn.output_tokens,
                                                 time_scale, tool_ended_at)
                    break
                except (aiohttp.ClientError, TimeoutError):
                    if attempt == endpoints.retries:
                        raise
                    result.retries += 1
                    await asyncio.sleep(1.0)
            result.turns.append(outcome)
            messages.append({"role": "assistant", "content": reply})
            if turn.tool is None:
                continue
            call_id = f"{trace.session}-t{index}"
            # The tool runs while its start event travels, as behind a harness's relay; one clock reading
            # per event, so the reported duration is exactly end minus start.
            started = clock.now()
            announced = asyncio.create_task(_post_event(http, endpoints, {
                "type": "tool_start", "session": trace.session, "call_id": call_id, "tool_name": turn.tool.name,
                "command": turn.tool.command, "args": dict(turn.tool.args or {}),
                "harness": "fleet", "at": started}))
            await asyncio.sleep(turn.tool.duration_s / time_scale)
            tool_ended_at, ended = time.monotonic(), clock.now()
            await announced  # the start is delivered before the end
            await _post_event(http, endpoints, {
                "type": "tool_end", "session": trace.session, "call_id": call_id, "at": ended,
                "duration_s": ended - started})
    except (aiohttp.ClientError, TimeoutError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.ended_at = time.time()
        if endpoints.events_url is not None:
            try:
                async with http.post(f"{endpoints.events_url}/v1/sessions/{trace.session}/end",
                                     json={"ended_at": clock.now()},
                                     timeout=aiohttp.ClientTimeout(total=5)) as response:
                    await response.read()
            except (aiohttp.ClientError, TimeoutError):
                pass
        if endpoints.programs_url is not None:
            await _release_program(http, endpoints, trace.session)
    return result


async def _release_program(http: aiohttp.ClientSession, endpoints: Endpoints, session: str) -> None:
    """ThunderAgent's `POST /programs/release`; an answer but `released: true` is counted, not hidden."""
    try:
        async with http.post(f"{endpoints.programs_url}/programs/release", json={"program_id": session},
                             timeout=aiohttp.ClientTimeout(total=5)) as response:
            answer = await response.json(content_type=None) if response.status == 200 else None
            if not (isinstance(answer, dict) and answer.get("released") is True):
                endpoints.release_failures[f"HTTP {response.status}: {answer}"[:200]] += 1
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        endpoints.release_failures[type(exc).__name__] += 1

