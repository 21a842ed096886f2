"""Bounded waiting: no request waits in the pool past `max_wait_s`; from half of it, it goes first.

The paper's objective (K, R, T) has no notion of time spent waiting. A cold session (k = 0) loses every
plan to warm ones, and it may interrupt no holder whose decayed credit still rounds above zero (the
interrupt rule must raise Σ v): measured live, ~5% of requests waited minutes, and a request behind a
holder that sends no tool events waited without end (issue 17). The bound is applied before the value
triple, so the objective keeps deciding every admission that is not overdue:

1. Overdue: a waiting session whose request is here (`has_request`) and has waited at least half of
   `params.max_wait_s` (since `waiting_since`, else `arrived_at`). Served oldest first. The bound is the
   limit, half of it is where the bound starts to act: the other half is the time it may take to find
   room without a release chain (rule 2).
2. On each eligible node whose capacity can hold it, the candidate release is the shortest prefix of
   that node's acting holders, lowest kept value first (interrupts.py's order), after which it fits;
   no release where it already fits. Value does not veto the release: the bound outranks the triple.
   A holder predicted back soon is protected, for a while: released, it would wait for its own room and
   become the next overdue request, which releases the next holder — measured in the simulator, that
   loop turned ~100 interrupts into ~3,450 and the prefix hit rate from 0.97 into 0.55. Protecting it
   for good (`returns_at` within ±bound) stopped the loop but broke the bound: behind holders that all
   come back within a minute a request waited 1,149 s (terminal-bench, 64 workers, 2 replicas). So the
   protection shrinks as the request's wait grows: at wait w the holders predicted back within
   ±(bound − w) are kept, none once w reaches the bound. The longer a request has waited, the sooner
   a holder it may displace comes back: one due back within seconds yields only to a request that
   waited nearly the bound, so chains of displacements are slow and rare. Hence the hard limit: no
   request waits past the bound plus, on a node full of running requests, the time they take to finish
   (rule 4). Until issue 17's tail work the bound began to act at `max_wait_s` and the protection ended
   at 2·`max_wait_s`: the waits of interrupted sessions piled up just under twice the configured figure
   (swe-lite, 64 workers, bound 60 s: p99 TTFT 113 s; live, 32 workers: p99 65 s, above the cache-aware
   router's 42 s). The same mechanism at half the scale is what the setting now names.
3. The node with the fewest released tokens wins, then the highest credit, then snapshot order.
4. An overdue session that fits nowhere, even with every acting holder released (the node is full of
   running requests), reserves its best node: its acting holders are released all the same, and no
   other session is planned onto it until it fits, so neither a stream of smaller sessions nor holders
   that go straight back to reasoning (short tools, on their leases) can keep it out. Running requests
   finish, and the plans after release their sessions for it.

`admit_overdue` returns these admissions and releases, and the snapshot the objective then plans on:
the overdue sessions placed on their nodes as if already running, the released holders gone, reserved
nodes ineligible for everyone else. A request larger than every node is not this module's business
(the coordinator sends it on unscheduled).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tao_harness.policies.interrupts import ValueView, release_room
from tao_harness.policies.tool_time import release_order
from tao_harness.types import NodeState, SessionView, Snapshot


@dataclass(frozen=True, slots=True)
class Aged:
    """What the bound decided, and the snapshot left for the objective."""

    admitted: tuple[tuple[SessionView, str], ...]  # overdue sessions and their nodes, oldest first
    interrupts: tuple[str, ...]  # acting holders released for them, in order
    rest: Snapshot  # what the objective plans on


def waited(snapshot: Snapshot, session: SessionView) -> float:
    """Seconds the session's request has waited in the pool at the snapshot's time."""
    since = session.arrived_at if session.waiting_since is None else session.waiting_since
    return snapshot.now - since


def overdue(snapshot: Snapshot) -> list[SessionView]:
    """Waiting sessions with a request that waited half the bound, longest wait first (ties by id)."""
    bound = snapshot.params.max_wait_s
    if bound is None:
        return []
    late = [s for s in snapshot.waiting if s.has_request and waited(snapshot, s) >= bound / 2]
    return sorted(late, key=lambda s: (-waited(snapshot, s), s.id))


def admit_overdue(snapshot: Snapshot, kept: ValueView) -> Aged:
    """Place the overdue sessions first (module docstring); the snapshot is returned as is if none are."""
    late = overdue(snapshot)
    if not late:
        return Aged((), (), snapshot)
    params = snapshot.params
    free = {n.id: n.capacity_tokens - n.used_tokens for n in snapshot.nodes}
    capacity = {n.id: n.capacity_tokens for n in snapshot.nodes}
    releasable = snapshot.releasable_tokens()
    holders = {node_id: [s for s in snapshot.holding(node_id) if s.state == "acting"] for node_id in free}
    if params.tool_time_release:  # only holders whose tool leaves time to pay for their reload, longest first
        acting = {node_id: release_order(snapshot, on_node) for node_id, on_node in holders.items()}
    else:
        acting = {node_id: sorted(on_node, key=lambda s, node_id=node_id: (kept(s, node_id), s.id))
                  for node_id, on_node in holders.items()}
    released: list[SessionView] = []
    admitted: list[tuple[SessionView, str]] = []
    reserved: set[str] = set()
    for session in late:
        cost = session.cost(params)
        wait = waited(snapshot, session)
        options = []
        for order, node_id in enumerate(free):
            if not session.may_use(node_id) or node_id in reserved or cost > capacity[node_id]:
                continue
            chosen, room, left = [], free[node_id], releasable[node_id]
            for holder in acting[node_id]:
                if room >= cost:
                    break
                if _protected(snapshot, holder, wait):
                    continue
                chosen.append(holder)
                freed = min(holder.cost(params), left)  # at most what the node reports used
                room, left = room + freed, left - freed
            credit = session.credit_on(node_id, snapshot.now, params)
            options.append((room < cost, sum(h.cost(params) for h in chosen), -credit, order, node_id, chosen))
        if not options:
            continue
        short, _, _, _, node_id, chosen = min(options, key=lambda o: o[:4])
        for holder in chosen:
            acting[node_id].remove(holder)
            release_room(free, releasable, node_id, holder.cost(params))
        released += chosen
        if short:  # even releasing every acting holder leaves it outside: hold the node for it
            reserved.add(node_id)
            continue
        free[node_id] -= cost
        admitted.append((session, node_id))
    rest = _rest(snapshot, admitted, released, reserved, free)
    return Aged(tuple(admitted), tuple(h.id for h in released), rest)


def _rest(snapshot: Snapshot, admitted: list[tuple[SessionView, str]], released: list[SessionView],
          reserved: set[str], free: dict[str, int]) -> Snapshot:
    """The snapshot after the bound's decisions: what the objective may still use."""
    gone = {h.id for h in released} | {s.id for s, _ in admitted}
    placed = [replace(s, state="reasoning", node=node_id, waiting_since=None) for s, node_id in admitted]
    sessions = []
    for s in snapshot.sessions:
        if s.id in gone:
            continue
        if reserved and s.state == "waiting":
            allowed = tuple(n.id for n in snapshot.nodes if s.may_use(n.id) and n.id not in reserved)
            s = replace(s, eligible=allowed)
        sessions.append(s)
    nodes = tuple(_with_free(n, free[n.id]) for n in snapshot.nodes)
    return replace(snapshot, nodes=nodes, sessions=(*sessions, *placed))


def _with_free(node: NodeState, free_tokens: int) -> NodeState:
    used = node.capacity_tokens - free_tokens
    return node if used == node.used_tokens else replace(node, used_tokens=max(0, used))


def _protected(snapshot: Snapshot, holder: SessionView, wait: float) -> bool:
    """Kept from a request that has waited `wait` s: predicted back within ±(bound − wait) (rule 2)."""
    bound = snapshot.params.max_wait_s
    if bound is None or holder.returns_at is None:
        return False
    window = bound - wait
    return -window <= holder.returns_at - snapshot.now < window
