"""`GET /v1/channel`: one WebSocket per proxy for the messages on every request's path.

A proxy sends completion reports and lease notices here instead of one HTTP request each (the HTTP
routes stay for everything else), and receives the lease table as it changes. Messages of one channel
are applied in the order sent. An admission that a proxy asks for over HTTP names the channel and the
sequence number of that session's last message (`channel`, `after_seq`), and waits until the channel
has applied it, so a report can never be overtaken by the next request's admission.

A proxy connects with `?proxy=ID`, its instance id: while one of its channels is open the requests it
forwards are alive; when none has been for the proxy grace, they are ended (coordinator.owners).
A malformed message is logged and dropped; it never closes the channel.

Proxy → coordinator: `{"seq": n, "type": "done"|"leased"|"events", "body": {...}}` (bodies as in the
HTTP API: `events` is a `POST /v1/events` body, the tool calls the proxy read from the traffic), or a list
of them in one frame (applied in order).
Coordinator → proxy: `{"type": "hello", "channel": id}` first, then `{"type": "leases", ...}` (a
`LeaseUpdate`), the whole table first and changes after.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from tao_harness import fastjson
from tao_harness.coordinator.inputs import BadRequest, parse_admit, parse_request_done
from tao_harness.coordinator.records import SessionStateError
from tao_harness.coordinator.service import Coordinator
from tao_harness.events import events_from_body

log = logging.getLogger(__name__)

LEASE_POLL_S = 30.0
# Pings that find a proxy whose host vanished without closing the connection (no pong: closed).
HEARTBEAT_S = 10.0
MAX_PROXY_ID = 200
# Longest an admission waits for its session's earlier channel messages before going ahead anyway.
APPLY_WAIT_S = 5.0


@dataclass
class ChannelLink:
    ws: web.WebSocketResponse
    # The proxy's instance id (None: a proxy that gave none); it owns the requests it tells about here.
    proxy: str | None = None
    # Sequence number of the last message applied.
    applied: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class ChannelBook:
    """The open channels and how far each has been applied."""

    def __init__(self) -> None:
        self._links: dict[str, ChannelLink] = {}
        self._ids = itertools.count(1)

    def open(self, ws: web.WebSocketResponse, proxy: str | None) -> tuple[str, ChannelLink]:
        channel = str(next(self._ids))
        self._links[channel] = link = ChannelLink(ws, proxy)
        return channel, link

    async def close_all(self) -> None:
        """At shutdown: a channel would otherwise hold the server open until its shutdown timeout."""
        await asyncio.gather(*(link.ws.close(code=WSCloseCode.GOING_AWAY, message=b"coordinator stopping")
                               for link in list(self._links.values())), return_exceptions=True)

    def close(self, channel: str) -> None:
        link = self._links.pop(channel, None)
        if link is not None:
            link.changed.set()  # nothing more will be applied: release any admission waiting on it

    async def wait_applied(self, channel: str | None, seq: int, timeout_s: float = APPLY_WAIT_S) -> None:
        """Until the channel applied message `seq`, it closed, or `timeout_s` passed."""
        link = self._links.get(channel) if channel is not None else None
        while link is not None and link.applied < seq and channel in self._links:
            try:
                await asyncio.wait_for(link.changed.wait(), timeout_s)
            except asyncio.TimeoutError:
                log.warning("channel %s did not apply message %d in %.1f s; admitting anyway", channel, seq,
                            timeout_s)
                return

    def applied(self, link: ChannelLink, seq: int) -> None:
        link.applied = seq
        link.changed.set()
        link.changed = asyncio.Event()


async def serve_channel(request: web.Request, coordinator: Coordinator, book: ChannelBook) -> web.WebSocketResponse:
    proxy = request.query.get("proxy") or None
    if proxy is not None and (len(proxy) > MAX_PROXY_ID or not proxy.isprintable()):
        raise BadRequest(f"proxy: expected a printable id of at most {MAX_PROXY_ID} characters")
    ws = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=16 * 1024 * 1024)
    await ws.prepare(request)
    channel, link = book.open(ws, proxy)
    if proxy is not None:
        coordinator.owners.opened(proxy, time.monotonic())
    try:
        await ws.send_json({"type": "hello", "channel": channel})
        pusher = asyncio.create_task(_push_leases(ws, coordinator))
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT:
                    seq = link.applied
                    for item in _messages(message.data):
                        seq = await _apply(coordinator, item, seq + 1, proxy)
                    book.applied(link, seq)
        finally:
            pusher.cancel()
    finally:
        book.close(channel)
        if proxy is not None:
            coordinator.owners.closed(proxy, time.monotonic())
    return ws


def _messages(text: str) -> list[Any]:
    """The messages of one frame: a proxy sends those it queued meanwhile together, as a list."""
    try:
        parsed = fastjson.loads(text)
    # OverflowError: numbers like 10**400; RecursionError: JSON nested deeper than the parser goes.
    except (ValueError, OverflowError, RecursionError) as exc:
        log.warning("channel frame dropped: %s", exc)
        return [None]  # counts as one message applied
    return parsed if isinstance(parsed, list) else [parsed]


async def _apply(coordinator: Coordinator, message: Any, expected_seq: int, proxy: str | None) -> int:
    """Apply one message; returns its sequence number (a malformed one counts as applied: it never will be)."""
    seq = expected_seq
    try:
        if not isinstance(message, dict) or type(message.get("seq")) is not int:
            raise BadRequest("seq: expected an integer")
        seq, kind, body = message["seq"], message["type"], message["body"]
        if not isinstance(body, dict):
            raise BadRequest("body: expected a JSON object")
        if kind == "done":
            coordinator.request_done(parse_request_done(body, coordinator.registry.ids))
        elif kind == "leased":
            given = parse_admit(body, coordinator.registry.ids)
            if given.leased is None:
                raise BadRequest("leased: missing field")
            await coordinator.admit(given.session, given.request_id, given.estimate, (), 0.0, given.leased,
                                    given.proxy or proxy, identified_by=given.identity_source)
        elif kind == "events":
            for event in events_from_body(body):
                try:
                    coordinator.tool_event(event)
                except SessionStateError as exc:  # the others of the batch still apply
                    log.warning("tool event for %s not applied: %s", event.session, exc)
        else:
            raise BadRequest(f"type: expected done, leased or events, got {kind!r}")
    # OverflowError: numbers like 10**400; RecursionError: JSON nested deeper than the parser goes.
    # EventError is a ValueError.
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError, BadRequest, SessionStateError) as exc:
        log.warning("channel message %d dropped: %s", seq, exc)
    return seq


async def _push_leases(ws: web.WebSocketResponse, coordinator: Coordinator) -> None:
    leases, seq = coordinator.leases, -1
    try:
        while not ws.closed:
            update = await leases.wait(seq, leases.instance if seq >= 0 else None, LEASE_POLL_S)
            if update.leases or update.reset:
                await ws.send_json({"type": "leases", **update.to_json()})
            seq = update.seq
    except (ConnectionResetError, RuntimeError):  # the proxy went away; the reader loop ends the channel
        pass
