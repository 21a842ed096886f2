"""TAO's interrupt rule at tool boundaries: make room for ready sessions, lowest value first.

DESIGN.md §3: when ready sessions in the waiting pool do not fit, ACTING sessions are interrupted
(their reservation released), lowest value first, by the same value triple. The rule, precisely:

0. First, on every node whose reservations exceed its capacity (contexts grew since admission), acting
   sessions are released lowest value first until it is back within capacity — with or without anyone
   waiting — so the engine never has to preempt running requests to make room.
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
    if not any(s.state == "acting" for s in snapshot.sessions):
        return [], []
    acting = {
        node_id: sorted((s for s in snapshot.holding(node_id) if s.state == "acting"),
                        key=lambda s, node_id=node_id: (view(s, node_id), s.id))
        for node_id in problem.node_ids
    }
    free, interrupts, released = _restore_capacity(snapshot, acting)
    if len(placement) == len(waiting):
        return [], interrupts
    quantum = snapshot.params.quantum_tokens
    used = dict.fromkeys(problem.node_ids, 0)  # quanta taken by the plan's admissions
    for i, b in placement.items():
        used[problem.node_ids[b]] += problem.size[i]
    best = [max((v for v in row if v is not None), default=None) for row in problem.values]
    needy = [
        (i, s) for i, s in enumerate(waiting)
        if i not in placement and (s.has_request or (use_readiness and s.ready == 1)) and best[i] is not None
    ]
    needy.sort(key=lambda pair: (tuple(-x for x in best[pair[0]] or ()), pair[1].id))
    admitted: list[tuple[SessionView, str]] = []

    def room(node_id: str, extra_tokens: int) -> int:
        return max(0, free[node_id] + extra_tokens) // quantum - used[node_id]

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


def _restore_capacity(snapshot: Snapshot, acting: dict[str, list[SessionView]],
                      ) -> tuple[dict[str, int], list[str], set[str]]:
    """Release acting sessions, lowest value first, on nodes whose reservations outgrew their capacity.

    Contexts grow after admission (each reply is added to the reservation), so a node can end up
    holding more than it has; the engine would then preempt running requests. Σ w_i ≤ C_b applies to
    the sessions a node holds as much as to new admissions, so it is restored here first. Returns the
    exact free tokens per node afterwards (negative while reasoning sessions alone overfill it), the
    released sessions in order, and their ids.
    """
    free = {n.id: n.capacity_tokens - n.used_tokens for n in snapshot.nodes}
    interrupts: list[str] = []
    for node_id, holders in acting.items():
        for holder in holders:
            if free[node_id] >= 0:
                break
            free[node_id] += holder.cost(snapshot.params)
            interrupts.append(holder.id)
    return free, interrupts, set(interrupts)
