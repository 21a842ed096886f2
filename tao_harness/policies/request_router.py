"""Shared mechanism of the request-level routers (vllm-rr, vllm-ca, dynamo, sglang-ca, smetric).

As in the real systems these routers do no admission control: every waiting session whose request has
arrived is placed at once, in arrival order, on the node its rule picks; the engine queues or preempts.
Sessions without a request (admitted-ahead candidates) are invisible to them. While one plan is built,
each placement is added to a working copy of the node loads, so a burst spreads the way the live
router's counters would make it spread. A subclass supplies only `pick`.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

from tao_harness.config import PlannerConfig
from tao_harness.policies.common import arrival_order, assignment, make_plan
from tao_harness.types import NodeState, Plan, SessionView, Snapshot


@dataclass(slots=True)
class NodeLoad:
    """Working copy of one node's load while a plan is built (never shared between plans)."""

    running: int
    waiting: int
    active_tokens: int
    pending_prefill_tokens: int
    kv_usage: float

    @classmethod
    def of(cls, node: NodeState) -> NodeLoad:
        return cls(node.running_requests, node.waiting_requests, node.active_tokens, 0, node.kv_usage)

    @property
    def requests(self) -> int:
        return self.running + self.waiting

    def add(self, session: SessionView, overlap: int) -> None:
        self.waiting += 1
        self.active_tokens += session.tokens
        self.pending_prefill_tokens += session.tokens - overlap


def overlap_tokens(session: SessionView, node_id: str) -> int:
    """Prefix tokens the router believes are cached for `session` on the node (no decay: routers' trees
    keep an entry until it is evicted)."""
    entry = session.cache.get(node_id)
    return 0 if entry is None else min(entry.tokens, session.tokens)


class RequestRouter:
    admission_control = False
    plans_on_timer = False

    def __init__(self, config: PlannerConfig, *, name: str) -> None:
        self.name = name
        self.config = config

    def pick(self, snapshot: Snapshot, session: SessionView, nodes: list[NodeState],
             loads: dict[str, NodeLoad]) -> str:
        raise NotImplementedError

    def plan(self, snapshot: Snapshot) -> Plan:
        start = perf_counter()
        loads = {node.id: NodeLoad.of(node) for node in snapshot.nodes}
        chosen = []
        for session in arrival_order(s for s in snapshot.waiting if s.has_request):
            nodes = [node for node in snapshot.nodes if session.may_use(node.id)]
            if not nodes:
                continue
            node_id = self.pick(snapshot, session, nodes, loads)
            loads[node_id].add(session, overlap_tokens(session, node_id))
            chosen.append(assignment(snapshot, session, node_id))
        return make_plan(self.name, self.name, chosen, solve_ms=(perf_counter() - start) * 1000)


def least_loaded(nodes: list[NodeState], loads: dict[str, NodeLoad]) -> str:
    """Fewest requests (running + queued), then fewest active tokens, then snapshot order."""
    ranked = [(loads[node.id].requests, loads[node.id].active_tokens, b) for b, node in enumerate(nodes)]
    return nodes[min(ranked)[2]].id
