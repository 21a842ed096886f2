"""SGLang cache-aware router (sgl-router `cache_aware` policy, thresholds 64 / 1.5 / 0.3).

If the load is imbalanced — (max − min) > 64 and max > 1.5 · min, load = running + queued requests — the
request goes to the least loaded worker. Otherwise, if the best prefix match rate (matched / request
tokens) exceeds 0.3 it goes to the best-matching worker; else to the worker with the smallest tree,
approximated here by the lowest KV usage (ties: least loaded, then snapshot order).
"""

from __future__ import annotations

from tao_harness.policies.request_router import NodeLoad, RequestRouter, least_loaded, overlap_tokens
from tao_harness.types import NodeState, SessionView, Snapshot

BALANCE_ABS_THRESHOLD = 64
BALANCE_REL_THRESHOLD = 1.5
CACHE_THRESHOLD = 0.3


class SglangCacheAwarePolicy(RequestRouter):
    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        counts = [loads[node.id].requests for node in nodes]
        high, low = max(counts), min(counts)
        if high - low > BALANCE_ABS_THRESHOLD and high > BALANCE_REL_THRESHOLD * low:
            return least_loaded(nodes, loads)
        best = min(enumerate(nodes), key=lambda p: (-overlap_tokens(session, p[1].id), p[0]))[1]
        if session.tokens and overlap_tokens(session, best.id) / session.tokens > CACHE_THRESHOLD:
            return best.id
        ranked = [(loads[node.id].kv_usage, loads[node.id].requests, b) for b, node in enumerate(nodes)]
        return nodes[min(ranked)[2]].id
