"""The proxy's end of the coordinator channel (`GET /v1/channel`, see `tao_harness.coordinator.channel`).

One WebSocket carries the messages on every request's path — completion reports and lease notices —
so each costs a frame instead of an HTTP request, and brings the lease table back. Messages sent in
one turn of the event loop go out together, as one frame holding their list (a group commit: under
load a leased request's two messages and its neighbours' share a frame, so the proxy writes and the
coordinator reads and wakes once for them). `send` returns once its frame is written, False while the
channel is down or if that write failed; callers then use the HTTP API. The channel reconnects in the
background for as long as the proxy runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp

from tao_harness import fastjson
from tao_harness.proxy.leases import LeaseTable

log = logging.getLogger(__name__)

RECONNECT_S = 2.0
# Sessions whose last message number is remembered; older ones were applied long ago.
REMEMBERED_SESSIONS = 65536


@dataclass(slots=True)
class _Frame:
    ws: aiohttp.ClientWebSocketResponse
    messages: list[dict[str, Any]]
    written: asyncio.Future[bool]  # True once the frame is on the socket, False if that failed


class CoordinatorChannel:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, headers: dict[str, str],
                 leases: LeaseTable, proxy_id: str) -> None:
        # The proxy's instance id: the coordinator ends its requests once no channel of it is open.
        self._url = base_url.rstrip("/") + "/v1/channel?proxy=" + proxy_id
        self._http = http
        self._headers = headers
        self.leases = leases
        # The coordinator's name for this channel while it is open.
        self.id: str | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._seq = 0
        self._last: OrderedDict[str, int] = OrderedDict()
        # The frame collecting this loop turn's messages, and frames being written.
        self._frame: _Frame | None = None
        self._writing: set[asyncio.Task[None]] = set()

    def position(self, session: str) -> tuple[str | None, int]:
        """(channel id, number of the session's last message) for an admission to wait on."""
        if self.id is None:
            return None, 0
        return self.id, self._last.get(session, 0)

    async def send(self, kind: str, session: str, body: dict[str, Any]) -> bool:
        ws = self._ws
        if ws is None or ws.closed:
            return False
        self._seq += 1
        self._last[session] = self._seq
        self._last.move_to_end(session)
        if len(self._last) > REMEMBERED_SESSIONS:
            self._last.popitem(last=False)
        frame = self._frame
        if frame is None or frame.ws is not ws:  # the first message of this loop turn (on this connection)
            self._frame = frame = _Frame(ws, [], asyncio.get_running_loop().create_future())
            task = asyncio.create_task(self._write(frame))  # its first step runs in the loop's next turn
            self._writing.add(task)  # a strong reference until done: the loop keeps only weak ones
            task.add_done_callback(self._writing.discard)
        frame.messages.append({"seq": self._seq, "type": kind, "body": body})
        return await asyncio.shield(frame.written)

    async def _write(self, frame: _Frame) -> None:
        """Write a loop turn's messages as one frame (a lone message as itself)."""
        if self._frame is frame:
            self._frame = None
        messages = frame.messages
        sent = False
        try:
            await frame.ws.send_str(fastjson.dumps(messages[0] if len(messages) == 1 else messages))
            sent = True
        except (ConnectionResetError, RuntimeError, aiohttp.ClientError):
            pass
        finally:
            frame.written.set_result(sent)

    async def run(self) -> None:
        """Connect, follow, reconnect; until cancelled."""
        while True:
            try:
                async with self._http.ws_connect(self._url, headers=self._headers, heartbeat=30.0,
                                                 max_msg_size=64 * 1024 * 1024) as ws:
                    hello = await ws.receive_json(timeout=5.0)
                    self._seq, self._last, self._ws = 0, OrderedDict(), ws
                    self.id = str(hello["channel"])
                    log.info("coordinator channel %s open", self.id)
                    async for message in ws:
                        if message.type is aiohttp.WSMsgType.TEXT:
                            self._receive(fastjson.loads(message.data))
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.debug("coordinator channel unavailable: %r", exc)
            finally:
                task = asyncio.current_task()
                if self.id is not None and task is not None and task.cancelling():
                    log.info("coordinator channel %s closed: the proxy is stopping", self.id)
                elif self.id is not None:
                    log.warning("coordinator channel %s closed; admissions only until it reopens", self.id)
                self._ws, self.id = None, None
                self.leases.clear()
            await asyncio.sleep(RECONNECT_S)

    def _receive(self, message: dict[str, Any]) -> None:
        if message.get("type") == "leases":
            self.leases.apply(message)
