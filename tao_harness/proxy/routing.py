"""Pinning headers and the proxy's local fallback routing.

`pin_headers` is the one place that turns a replica choice into request headers; the coordinator sends
its result with each admission and the proxy uses it directly when it routes on its own.

`AffinityRouter` is what the proxy does while the coordinator is unreachable: a session goes back to
the replica it last ran on (its KV cache is there), a new session to a stable hash of its id, skipping
replicas that refused a connection for this request. No admission control happens in this mode.
"""

from __future__ import annotations

import hashlib

from tao_harness.config import ReplicaSpec

DP_RANK_HEADER = "X-data-parallel-rank"
SESSION_HEADER = "X-Session-ID"


def pin_headers(replica: ReplicaSpec, session: str) -> dict[str, str]:
    headers = dict(replica.headers)
    headers[SESSION_HEADER] = session
    if replica.dp_rank is not None:
        headers[DP_RANK_HEADER] = str(replica.dp_rank)
    return headers


def _stable_index(key: str, size: int) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") % size


class AffinityRouter:
    """Session -> last replica memory, bounded so long runs do not grow it without limit."""

    def __init__(self, replicas: tuple[ReplicaSpec, ...], max_sessions: int = 100_000) -> None:
        self._replicas = {replica.id: replica for replica in replicas}
        self._last: dict[str, str] = {}
        self._max_sessions = max_sessions

    @property
    def replicas(self) -> tuple[ReplicaSpec, ...]:
        return tuple(self._replicas.values())

    def learn_replica(self, replica: ReplicaSpec) -> None:
        self._replicas.setdefault(replica.id, replica)

    def remember(self, session: str, replica_id: str) -> None:
        self._last.pop(session, None)
        self._last[session] = replica_id
        if len(self._last) > self._max_sessions:
            self._last.pop(next(iter(self._last)))

    def forget(self, session: str) -> None:
        self._last.pop(session, None)

    def pick(self, session: str, exclude: tuple[str, ...] = ()) -> ReplicaSpec | None:
        last = self._last.get(session)
        if last is not None and last not in exclude and last in self._replicas:
            return self._replicas[last]
        candidates = sorted(rid for rid in self._replicas if rid not in exclude)
        if not candidates:
            return None
        return self._replicas[candidates[_stable_index(session, len(candidates))]]
