"""Admission leases: the coordinator's holders, published so proxies can skip the admission round trip.

A session that holds a reservation on replica b (admitted, reasoning or acting) would get b back from
`/v1/admit` at once, so its proxy may send the request to b straight away and tell the coordinator
afterwards. The coordinator publishes every change of holder (session → replica, or → none on an
interrupt, a give-back, a replica failure or a session end) as a sequenced log; proxies follow it by
long-polling `GET /v1/leases?after=SEQ`. A proxy that falls behind the log, or meets another coordinator
instance (a restart), gets the whole table again.

A request sent on a lease the coordinator revoked a moment earlier (the revocation was still on its
way) is a lease race: the coordinator counts it and lets the request run unscheduled, as it would
without TAO; it never refuses work a proxy already sent.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from itertools import takewhile
from dataclasses import dataclass
from typing import Callable, Mapping

# How many holder changes the log keeps for proxies that poll late; older ones get a full table.
LOG_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class Lease:
    session: str
    # The replica the session holds, or None: the lease is revoked.
    replica: str | None
    # Where to send the session's requests and the pinning headers to add (empty when revoked).
    base_url: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        if self.replica is None:
            return {"session": self.session, "replica": None}
        return {"session": self.session, "replica": self.replica, "base_url": self.base_url,
                "headers": dict(self.headers)}


@dataclass(frozen=True, slots=True)
class LeaseUpdate:
    # Identifies the coordinator process; a proxy that sees it change drops every lease it has.
    instance: str
    # Sequence number of the last change included; the proxy polls again with `after=seq`.
    seq: int
    # True when `leases` is the whole table (first poll, fell behind, or unknown seq), not a delta.
    reset: bool
    leases: tuple[Lease, ...]

    def to_json(self) -> dict[str, object]:
        return {"instance": self.instance, "seq": self.seq, "reset": self.reset,
                "leases": [lease.to_json() for lease in self.leases]}


class LeaseBook:
    """The published holder table and its change log (one per coordinator, event-loop only)."""

    def __init__(self, describe: Callable[[str, str], Lease]) -> None:
        # Builds the lease of (session, replica): base URL and pinning headers come from the registry.
        self._describe = describe
        self.instance = uuid.uuid4().hex
        self._holders: dict[str, Lease] = {}
        self._log: deque[tuple[int, Lease]] = deque(maxlen=LOG_LENGTH)
        self._seq = 0
        self._changed = asyncio.Event()

    def holder(self, session: str) -> str | None:
        lease = self._holders.get(session)
        return lease.replica if lease is not None else None

    def update(self, holders: Mapping[str, str | None]) -> int:
        """Publish the holders of the sessions in `holders` (None: holds nothing) that differ from the
        published ones; O(len(holders)), so callers pass only the sessions that may have changed."""
        changes = [Lease(session, None) if replica is None else self._describe(session, replica)
                   for session, replica in holders.items() if self.holder(session) != replica]
        for lease in changes:
            self._seq += 1
            self._log.append((self._seq, lease))
            if lease.replica is None:
                del self._holders[lease.session]
            else:
                self._holders[lease.session] = lease
        if changes:
            self._changed.set()
            self._changed = asyncio.Event()
        return len(changes)

    def since(self, after: int) -> LeaseUpdate:
        oldest = self._log[0][0] if self._log else self._seq + 1
        if after < 0 or after > self._seq or after + 1 < oldest:
            return LeaseUpdate(self.instance, self._seq, True, tuple(self._holders.values()))
        # Newest first, stopping at the first change the proxy has: O(changes), not O(log length).
        newer = [lease for _, lease in takewhile(lambda entry: entry[0] > after, reversed(self._log))]
        return LeaseUpdate(self.instance, self._seq, False, tuple(reversed(newer)))

    async def wait(self, after: int, instance: str | None, wait_s: float) -> LeaseUpdate:
        """Changes after `after`; waits up to `wait_s` for one when there are none yet."""
        if instance == self.instance and after == self._seq:
            try:
                await asyncio.wait_for(self._changed.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
        if instance not in (None, self.instance):
            after = -1
        return self.since(after)
