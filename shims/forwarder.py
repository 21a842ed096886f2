"""Background delivery of one run's records: live when the coordinator answers, spooled when not.

`submit` never waits (the relay answers the shim at once); it redacts a tool event's command and
arguments first, so no secret reaches the spool file or the wire in clear. A single task sends records
in submission order. When a delivery fails, the undelivered records are written to this run's spool
file and kept in memory; for `retry_s` new records are only appended there, then delivery is tried
again, oldest first, and the spool file is trimmed to what is still undelivered. `close` gives pending
records a last, bounded chance and leaves the rest in the spool for the next run or `tao spool flush`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from tao_harness.shims.delivery import EVENTS_PATH, CoordinatorPoster, Progress, deliver, outgoing_event
from tao_harness.shims.spool import SpoolRecord, SpoolWriter
from tao_harness.store.redact import Redactor

log = logging.getLogger(__name__)


@dataclass
class ForwarderStats:
    submitted: int = 0
    delivered: int = 0
    rejected: int = 0


class Forwarder:
    def __init__(self, poster: CoordinatorPoster | None, spool: SpoolWriter, batch_max: int,
                 retry_s: float, redactor: Redactor | None = None) -> None:
        # poster None: no coordinator at all, everything is spooled.
        self._poster = poster
        self._redactor = redactor or Redactor()
        self._spool = spool
        self._batch_max = batch_max
        self._retry_s = retry_s
        self._pending: list[SpoolRecord] = []  # undelivered, oldest first; mirrored in the spool file
        self._incoming: list[SpoolRecord] = []  # submitted, not yet attempted
        self._wake = asyncio.Event()
        self._down_until = 0.0
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.stats = ForwarderStats()

    def submit(self, path: str, body: dict[str, Any]) -> None:
        self.stats.submitted += 1
        if path == EVENTS_PATH:
            body = outgoing_event(body, self._redactor)
        self._incoming.append(SpoolRecord(path, body, time.time()))
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="tao-forwarder")

    def _take_incoming(self) -> list[SpoolRecord]:
        taken, self._incoming = self._incoming, []
        self._wake.clear()
        return taken

    async def _attempt(self, fresh: list[SpoolRecord]) -> None:
        if self._poster is None or time.monotonic() < self._down_until:
            self._spool.append(fresh)
            self._pending += fresh
            return
        had_backlog = bool(self._pending)
        records = self._pending = self._pending + fresh
        progress = Progress()
        try:
            await deliver(records, self._poster, self._batch_max, progress)
        finally:
            # Also on cancellation (close's deadline): only the request in flight may be sent twice.
            self.stats.delivered += progress.delivered
            self.stats.rejected += progress.rejected
            self._pending = records[progress.done:]
            if self._pending:
                if not had_backlog:
                    log.warning("coordinator unreachable; spooling tool events to %s", self._spool.path)
                self._down_until = time.monotonic() + self._retry_s
                self._spool.replace(self._pending)
            elif had_backlog:
                self._spool.replace([])

    async def _run(self) -> None:
        while not self._closing:
            if self._pending and self._poster is not None:
                # Retry the backlog when the back-off ends, or sooner if new records arrive.
                # (asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancellation.)
                waiter = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait({waiter}, timeout=max(0.0, self._down_until - time.monotonic()))
                finally:
                    waiter.cancel()
            else:
                await self._wake.wait()
            if not self._closing:
                await self._attempt(self._take_incoming())

    async def close(self, timeout_s: float) -> None:
        """Let a delivery in flight finish, try once more, leave whatever is left in the spool.

        Bounded by `timeout_s`; a request cut off by the deadline is the only one that may be sent twice.
        """
        deadline = time.monotonic() + max(timeout_s, 0.001)
        self._closing = True
        self._wake.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=timeout_s)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._down_until = 0.0
        remaining = deadline - time.monotonic()
        if remaining > 0:
            try:
                await asyncio.wait_for(self._attempt(self._take_incoming()), timeout=remaining)
            except asyncio.TimeoutError:
                pass
        else:
            fresh = self._take_incoming()
            self._spool.append(fresh)
            self._pending += fresh
        if self._pending:
            log.warning("%d record(s) left in %s for later delivery", len(self._pending), self._spool.path)
        self._spool.close()

    @property
    def pending(self) -> int:
        return len(self._pending)
