"""SMETRIC-style multi-turn routing: turn 1 to the least loaded replica, later turns follow the cache.

Source: DESIGN.md §5. A session's first turn (turn ≤ 1) goes to the least loaded replica. A later turn
goes to the replica holding the most cached prefix, unless that replica is overloaded or nothing is
cached anywhere (evicted), in which case it is re-placed on the least loaded replica. Simplification
(thresholds are ours): overloaded = KV usage ≥ 0.95 or more than twice the least loaded replica's
requests plus 4.
"""

from __future__ import annotations

from tao_harness.policies.request_router import NodeLoad, RequestRouter, least_loaded, overlap_tokens
from tao_harness.types import NodeState, SessionView, Snapshot

OVERLOAD_KV_USAGE = 0.95
OVERLOAD_FACTOR = 2
OVERLOAD_SLACK = 4


class SmetricPolicy(RequestRouter):
    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        fallback = least_loaded(nodes, loads)
        if session.turn <= 1:
            return fallback
        home = min(enumerate(nodes), key=lambda p: (-overlap_tokens(session, p[1].id), p[0]))[1]
        if overlap_tokens(session, home.id) == 0:
            return fallback
        load = loads[home.id]
        floor = loads[fallback].requests
        if load.kv_usage >= OVERLOAD_KV_USAGE or load.requests > OVERLOAD_FACTOR * floor + OVERLOAD_SLACK:
            return fallback
        return home.id
