"""Continuum's router side: FCFS by arrival, program-level admission, placement by cache affinity.

Continuum itself is engine-side (it pins a program's KV for a TTL after a tool call; the simulator's
engine model does that). Its router needs a rule too, so here: waiting programs in arrival order; each
is admitted on the node, among those where its cost (tokens + reserve) still fits, with the most cached
prefix tokens, then the most free room. Strict FCFS: the first program that fits nowhere stops the
queue (head-of-line blocking, like the engine's waiting queue).
"""

from __future__ import annotations

from time import perf_counter

from tao_harness.config import PlannerConfig
from tao_harness.policies.common import arrival_order, assignment, make_plan
from tao_harness.policies.request_router import overlap_tokens
from tao_harness.types import Plan, Snapshot


class ContinuumPolicy:
    admission_control = True
    plans_on_timer = False

    def __init__(self, config: PlannerConfig, *, name: str = "continuum") -> None:
        self.name = name
        self.config = config

    def plan(self, snapshot: Snapshot) -> Plan:
        start = perf_counter()
        free = {node.id: node.free_tokens for node in snapshot.nodes}
        chosen = []
        for session in arrival_order(snapshot.waiting):
            cost = session.cost(snapshot.params)
            fits = [(i, node.id) for i, node in enumerate(snapshot.nodes)
                    if session.may_use(node.id) and free[node.id] >= cost]
            if not fits:
                break
            _, node_id = min(fits, key=lambda p: (-overlap_tokens(session, p[1]), -free[p[1]], p[0]))
            free[node_id] -= cost
            chosen.append(assignment(snapshot, session, node_id))
        return make_plan(self.name, "fcfs", chosen, solve_ms=(perf_counter() - start) * 1000)
