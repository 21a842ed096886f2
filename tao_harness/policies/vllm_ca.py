"""vLLM cache-aware routing: the longest cached prefix wins, the least loaded breaks ties.

Source: DESIGN.md §5 (vLLM production-stack / router prefix-aware routing). Simplification: the prefix
match is the session's observed cached tokens on each replica, without decay.
"""

from __future__ import annotations

from tao_harness.policies.request_router import NodeLoad, RequestRouter, overlap_tokens
from tao_harness.types import NodeState, SessionView, Snapshot


class CacheAwarePolicy(RequestRouter):
    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        return min(
            enumerate(nodes),
            key=lambda p: (-overlap_tokens(session, p[1].id), loads[p[1].id].requests,
                           loads[p[1].id].active_tokens, p[0]),
        )[1].id
