"""The proxy's end of the coordinator channel (`GET /v1/channel`, see `tao_harness.coordinator.channel`).

One WebSocket carries the messages on every request's path — completion reports and lease notices —
so each costs part of a frame instead of an HTTP request, and brings the lease table back. `post` only
queues a message (no task, no future: it is on every request's path); one writer per connection sends
what is queued as one frame, a list of messages: a group commit, so the proxy writes, and the
coordinator reads and wakes, once for many. A message waits up to `LINGER_S` for company: on this kind
of machine a socket write that wakes another process costs ~0.1 ms, more than the rest of a message's
handling, and under load many requests' messages share a frame anyway. What must not wait goes out at
once: a message posted `urgent`, and what `flushed` asks for (an admission that follows a session's
messages, the proxy stopping). Messages the channel could not write (the connection failed) are handed to
`undelivered` in the order posted; the proxy sends them over the HTTP API. The channel reconnects in the
background for as long as the proxy runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import aiohttp

from tao_harness import fastjson
from tao_harness.proxy.leases import LeaseTable

log = logging.getLogger(__name__)

RECONNECT_S = 2.0
# How long a message may wait for others to share its frame: the coordinator learns of a request's start
# and end that much later at most, short beside any LLM request, tool call and the planner's tick. (A
# session it interrupts before its lease notice arrived is a lease race: counted, and harmless.)
LINGER_S = 0.005
# Sessions whose last message number is remembered; older ones were applied long ago.
REMEMBERED_SESSIONS = 65536

# A queued message: its session, kind ("done", "leased") and body, as posted.
Message = tuple[str, str, dict[str, Any]]


class CoordinatorChannel:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, headers: dict[str, str],
                 leases: LeaseTable, proxy_id: str, undelivered: Callable[[Message], None]) -> None:
        # The proxy's instance id: the coordinator ends its requests once no channel of it is open.
        self._url = base_url.rstrip("/") + "/v1/channel?proxy=" + proxy_id
        self._http = http
        self._headers = headers
        self.leases = leases
        self._undelivered = undelivered
        # The coordinator's name for this channel while it is open.
        self.id: str | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        # The number of the last message posted; it keeps counting across connections, so what waits
        # for a number (`flushed`) is never confused by a reconnect.
        self._seq = 0
        self._last: OrderedDict[str, int] = OrderedDict()  # session -> number of its last message here
        self._queue: list[tuple[Message, int]] = []  # posted, not written yet: (message, its number)
        self._written = 0  # messages up to this number are written (or handed back)
        self._urgent = False  # the queue goes out without lingering (an urgent message, or a flush)
        # Resolved when the writer has something to write (while it waits), and when it wrote a frame.
        self._wakeup: asyncio.Future[None] | None = None
        self._progress: asyncio.Future[None] | None = None

    def position(self, session: str) -> tuple[str | None, int]:
        """(channel id, number of the session's last message) for an admission to wait on."""
        if self.id is None:
            return None, 0
        return self.id, self._last.get(session, 0)

    def post(self, kind: str, session: str, body: dict[str, Any], urgent: bool = False) -> bool:
        """Queue a message for the next frame (`urgent`: without lingering); False while the channel is
        down (nothing is queued)."""
        ws = self._ws
        if ws is None or ws.closed:
            return False
        self._seq = seq = self._seq + 1
        last = self._last
        last[session] = seq
        last.move_to_end(session)
        if len(last) > REMEMBERED_SESSIONS:
            last.popitem(last=False)
        queue = self._queue
        queue.append(((session, kind, body), seq))
        if urgent:
            self._urgent = True
            self._wake()
        elif len(queue) == 1:  # the writer was idle: its linger starts now
            self._wake()
        return True

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def flushed(self, session: str | None = None) -> None:
        """Until the messages posted so far (of `session`, or all) are written or handed back; they go
        out at once, without lingering."""
        seq = self._seq if session is None else self._last.get(session, 0)
        if self._queue and self._written < seq:
            self._urgent = True
            self._wake()
        while self._written < seq:
            if self._progress is None or self._progress.done():
                self._progress = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._progress)

    def _settle(self, upto: int) -> None:
        self._written = max(self._written, upto)
        if self._progress is not None and not self._progress.done():
            self._progress.set_result(None)

    async def _write_frames(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """The connection's writer: each frame holds every message queued when it starts."""
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                await self._sleep(None)
                continue
            deadline = loop.time() + LINGER_S
            while not self._urgent and loop.time() < deadline:
                await self._sleep(deadline - loop.time())
            # Once more to the back of the loop's queue: what was ready with the message goes first.
            # That is a request's own upstream write (aiohttp writes a body in a task of its own), which
            # a frame written first would delay.
            await asyncio.sleep(0)
            batch, self._queue, self._urgent = self._queue, [], False
            frame = [{"seq": seq, "type": kind, "body": body} for (_, kind, body), seq in batch]
            try:
                await ws.send_str(fastjson.dumps(frame[0] if len(frame) == 1 else frame))
            except (ConnectionResetError, RuntimeError, aiohttp.ClientError):
                self._queue = batch + self._queue  # handed back when the connection closes
                await ws.close()
                return
            except asyncio.CancelledError:  # the connection ended mid-write: the frame did not arrive
                self._queue = batch + self._queue
                raise
            self._settle(batch[-1][1])

    async def _sleep(self, timeout_s: float | None) -> None:
        """Until `post` wakes the writer, or `timeout_s` passed."""
        loop = asyncio.get_running_loop()
        self._wakeup = wakeup = loop.create_future()
        timer = loop.call_later(timeout_s, _resolve, wakeup) if timeout_s is not None else None
        try:
            await wakeup
        finally:
            if timer is not None:
                timer.cancel()

    def _hand_back(self) -> None:
        """The connection is gone: what it did not write goes to `undelivered`, in order."""
        queue, self._queue = self._queue, []
        for message, _ in queue:
            self._undelivered(message)
        self._settle(self._seq)

    async def run(self) -> None:
        """Connect, follow, reconnect; until cancelled."""
        while True:
            writer: asyncio.Task[None] | None = None
            try:
                async with self._http.ws_connect(self._url, headers=self._headers, heartbeat=30.0,
                                                 max_msg_size=64 * 1024 * 1024) as ws:
                    hello = await ws.receive_json(timeout=5.0)
                    self._last, self._ws = OrderedDict(), ws
                    self.id = str(hello["channel"])
                    log.info("coordinator channel %s open", self.id)
                    writer = asyncio.create_task(self._write_frames(ws))
                    async for message in ws:
                        if message.type is aiohttp.WSMsgType.TEXT:
                            self._receive(fastjson.loads(message.data))
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.debug("coordinator channel unavailable: %r", exc)
            finally:
                if writer is not None:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)  # its unwritten batch is queued again
                task = asyncio.current_task()
                if self.id is not None and task is not None and task.cancelling():
                    log.info("coordinator channel %s closed: the proxy is stopping", self.id)
                elif self.id is not None:
                    log.warning("coordinator channel %s closed; admissions only until it reopens", self.id)
                self._ws, self.id = None, None
                self._hand_back()
                self.leases.clear()
            await asyncio.sleep(RECONNECT_S)

    def _receive(self, message: dict[str, Any]) -> None:
        if message.get("type") == "leases":
            self.leases.apply(message)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
