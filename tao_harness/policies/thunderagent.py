"""ThunderAgent (ThunderAgent-org/ThunderAgent, `scheduler/router.py`), as its public code behaves.

- Capacity: a node's remaining capacity is capacity − reservations. While it is negative, ACTING
  programs on it are paused smallest first (`_pause_until_safe`). It would then mark REASONING programs
  for pause at their next request; a plan cannot release a running request, so that step is left out.
- Resume (`_greedy_resume`): waiting programs sorted by tokens ascending, grouped as reasoning-paused
  with step > 1 (here: request arrived, turn > 1) > new (turn ≤ 1) > acting-paused (no request yet).
  Each goes to the first node, in descending order of remaining capacity taken once before the loop,
  whose remaining capacity still holds tokens + buffer (the buffer is reserve_tokens); programs that do
  not fit are skipped. Only nodes with more than one buffer of room take part.
- No cache or readiness term; the optional 2^−t acting-token decay is off (its default).
"""

from __future__ import annotations

from time import perf_counter

from tao_harness.config import PlannerConfig
from tao_harness.policies.common import assignment, make_plan
from tao_harness.types import Plan, SessionView, Snapshot


def _resume_class(session: SessionView) -> int:
    if session.turn <= 1:
        return 1
    return 0 if session.has_request else 2


class ThunderAgentPolicy:
    admission_control = True

    def __init__(self, config: PlannerConfig, *, name: str = "thunderagent") -> None:
        self.name = name
        self.config = config

    def plan(self, snapshot: Snapshot) -> Plan:
        start = perf_counter()
        buffer = snapshot.params.reserve_tokens
        remaining = {node.id: node.capacity_tokens - node.used_tokens for node in snapshot.nodes}
        interrupts = []
        for node in snapshot.nodes:
            acting = sorted((s for s in snapshot.holding(node.id) if s.state == "acting"),
                            key=lambda s: (s.tokens, s.id))
            for session in acting:
                if remaining[node.id] >= 0:
                    break
                interrupts.append(session.id)
                remaining[node.id] += session.tokens + buffer
        order = [node.id for node in snapshot.nodes if remaining[node.id] > buffer]
        order.sort(key=lambda node_id: -remaining[node_id])
        waiting = sorted(snapshot.waiting, key=lambda s: (_resume_class(s), s.tokens, s.id))
        chosen = []
        for session in waiting:
            required = session.tokens + buffer
            for node_id in order:
                if session.may_use(node_id) and remaining[node_id] >= required:
                    remaining[node_id] -= required
                    chosen.append(assignment(snapshot, session, node_id))
                    break
        return make_plan(self.name, "thunderagent", chosen, interrupts=interrupts,
                         solve_ms=(perf_counter() - start) * 1000)
