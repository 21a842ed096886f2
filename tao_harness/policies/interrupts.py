"""TAO's interrupt rule at tool boundaries: make room for ready sessions, lowest value first.

DESIGN.md §3: when ready sessions in the waiting pool do not fit, ACTING sessions are interrupted
(their reservation released), lowest value first, by the same value triple. The rule, precisely:

1. Only sessions that need the GPU now trigger interrupts: waiting sessions left out of the admission
   plan whose request has arrived or (when readiness is used) whose `ready` is 1. They are served in
   decreasing order of their best value triple.
2. On a node b, the release order is the acting sessions holding b, ascending by their own value triple
   on b (k on b, r, t; ties by id): a session whose credit decayed during a long tool, or whose tool is
   not about to return, goes first. The shortest prefix of that order whose reservations, added to b's
   room left after the plan, fit the waiting session is the candidate release on b. Nothing is released
   where it would not make the session fit (no interrupt without an admission).
3. Among the nodes with a candidate release, the one whose highest released triple is smallest wins,
   then fewer releases, then snapshot node order. Released sessions are listed in `Plan.interrupts`, the
   waiting session is admitted there (after the DP's assignments), and the freed room is used up.

A released session's reservation is taken to be its admission cost (tokens + reserve_tokens).
"""

from __future__ import annotations

from typing import Callable

from tao_harness.planner.problem import Problem, Value
from tao_harness.types import SessionView, Snapshot

ValueView = Callable[[SessionView, str], Value]


def plan_interrupts(
    snapshot: Snapshot,
    problem: Problem,
    placement: dict[int, int],
    waiting: tuple[SessionView, ...],
    view: ValueView,
    use_readiness: bool,
) -> tuple[list[tuple[SessionView, str]], list[str]]:
    """Extra admissions (session, node) and the acting sessions to release for them, in order."""
    if not any(s.state == "acting" for s in snapshot.sessions) or len(placement) == len(waiting):
        return [], []
    quantum = snapshot.params.quantum_tokens
    free = {n.id: n.free_tokens for n in snapshot.nodes}
    used = dict.fromkeys(problem.node_ids, 0)  # quanta taken by the plan's admissions
    for i, b in placement.items():
        used[problem.node_ids[b]] += problem.size[i]
    acting = {
        node_id: sorted((s for s in snapshot.holding(node_id) if s.state == "acting"),
                        key=lambda s, node_id=node_id: (view(s, node_id), s.id))
        for node_id in problem.node_ids
    }
    best = [max((v for v in row if v is not None), default=None) for row in problem.values]
    needy = [
        (i, s) for i, s in enumerate(waiting)
        if i not in placement and (s.has_request or (use_readiness and s.ready == 1)) and best[i] is not None
    ]
    needy.sort(key=lambda pair: (tuple(-x for x in best[pair[0]] or ()), pair[1].id))
    released: set[str] = set()
    admitted: list[tuple[SessionView, str]] = []
    interrupts: list[str] = []

    def room(node_id: str, extra_tokens: int) -> int:
        return (free[node_id] + extra_tokens) // quantum - used[node_id]

    for i, session in needy:
        size = problem.size[i]
        options = []
        for order, node_id in enumerate(problem.node_ids):
            if not session.may_use(node_id):
                continue
            chosen: list[SessionView] = []
            extra = 0
            for holder in acting[node_id]:
                if room(node_id, extra) >= size:
                    break
                if holder.id in released:
                    continue
                chosen.append(holder)
                extra += holder.cost(snapshot.params)
            if chosen and room(node_id, extra) >= size:
                options.append((view(chosen[-1], node_id), len(chosen), order, node_id, chosen, extra))
        if not options:
            continue
        _, _, _, node_id, chosen, extra = min(options, key=lambda o: o[:3])
        for holder in chosen:
            released.add(holder.id)
            interrupts.append(holder.id)
        free[node_id] += extra
        used[node_id] += size
        admitted.append((session, node_id))
    return admitted, interrupts
