"""The proxy's end of the coordinator channel (`GET /v1/channel`, see `tao_harness.coordinator.channel`).

One WebSocket carries the messages on every request's path — completion reports and lease notices —
so each costs a frame instead of an HTTP request, and brings the lease table back. `send` returns
False while the channel is down; callers then use the HTTP API. The channel reconnects in the
background for as long as the proxy runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from typing import Any

import aiohttp

from tao_harness.proxy.leases import LeaseTable

log = logging.getLogger(__name__)

RECONNECT_S = 2.0
# Sessions whose last message number is remembered; older ones were applied long ago.
REMEMBERED_SESSIONS = 65536


class CoordinatorChannel:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, headers: dict[str, str],
                 leases: LeaseTable) -> None:
        self._url = base_url.rstrip("/") + "/v1/channel"
        self._http = http
        self._headers = headers
        self.leases = leases
        # The coordinator's name for this channel while it is open.
        self.id: str | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._seq = 0
        self._last: OrderedDict[str, int] = OrderedDict()

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
        try:
            await ws.send_str(json.dumps({"seq": self._seq, "type": kind, "body": body}))
        except (ConnectionResetError, RuntimeError, aiohttp.ClientError):
            return False
        return True

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
                            self._receive(json.loads(message.data))
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.debug("coordinator channel unavailable: %r", exc)
            finally:
                if self.id is not None:
                    log.warning("coordinator channel %s closed; admissions only until it reopens", self.id)
                self._ws, self.id = None, None
                self.leases.clear()
            await asyncio.sleep(RECONNECT_S)

    def _receive(self, message: dict[str, Any]) -> None:
        if message.get("type") == "leases":
            self.leases.apply(message)
