"""TAO's interrupt rule at tool boundaries: make room for ready sessions, lowest value first.

DESIGN.md §3: when ready sessions in the waiting pool do not fit, ACTING sessions are interrupted
(their reservation released), lowest value first, by the same value triple. The rule, precisely:

0. First, on every node where the reservations of the reasoning sessions alone (the requests the
   engine is running) exceed its capacity, every acting session is released — with or without anyone
   waiting — so that their next requests wait in the pool instead of adding to the engine's preemptions.
   Reservations outgrowing capacity only because acting sessions' contexts grew release nothing.
1. Only sessions that need the GPU now trigger interrupts: waiting sessions left out of the admission
   plan whose request has arrived or (when readiness is used) whose `ready` is 1. They are served in
   decreasing order of their best value triple.
2. On a node b, the release order is the acting sessions holding b, ascending by their own value triple
   on b (k on b, r, t; ties by id), with k decayed to the predicted return of their tools (`returns_at`):
   a session whose credit decays during a long tool, or whose tool is not about to return, goes first.
   The shortest prefix of that order whose reservations, added to b's room left after the plan, fit
   the waiting session is the candidate release on b. Nothing is released where it would not make the
   session fit (no interrupt without an admission), nor where the released triples, summed
   component-wise, are not lexicographically below the waiting session's triple on b: an interrupt
   exchanges held value for admitted value and must raise Σ v, the DP's own objective.
   Without that, a cold ready session displaces a warm holder, which comes back cold and displaces
   the next one: a release/re-admit loop that recomputes whole contexts (issue 7).
3. Among the nodes with a candidate release, the one whose highest released triple is smallest wins,
   then fewer releases, then snapshot node order. Released sessions are listed in `Plan.interrupts`, the
   waiting session is admitted there (after the DP's assignments), and the freed room is used up.

A released session's reservation is taken to be its admission cost (tokens + reserve_tokens).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable

from tao_harness.planner import Problem, Value
from tao_harness.policies.tool_time import release_order
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
    kept = kept_value(snapshot, view)
    holding: dict[str, list[SessionView]] = {node_id: [] for node_id in problem.node_ids}
    for s in snapshot.sessions:
        if s.node is not None:
            holding[s.node].append(s)
    acting: dict[str, list[SessionView]] = {}
    kept_on_node: dict[str, Value] = {}  # per acting holder, its kept triple on its node
    for node_id, holders in holding.items():
        on_tools = [s for s in holders if s.state == "acting"]
        kept_on_node.update((s.id, kept(s, node_id)) for s in on_tools)
        acting[node_id] = sorted(on_tools, key=lambda s: (kept_on_node[s.id], s.id))
    free, releasable, interrupts, released = _restore_capacity(snapshot, holding, acting)
    priced = snapshot.params.tool_time_release
    if priced:
        acting = {node_id: release_order(snapshot, holders) for node_id, holders in acting.items()}
    if len(placement) == len(waiting):
        return [], interrupts
    quantum = snapshot.params.quantum_tokens
    used = dict.fromkeys(problem.node_ids, 0)  # quanta taken by the plan's admissions
    for i, b in placement.items():
        used[problem.node_ids[b]] += problem.size[i]
    needy = []  # (its best triple, index, session), for the sessions left out that need the GPU now
    for i, s in enumerate(waiting):
        if i not in placement and (s.has_request or (use_readiness and s.ready == 1)):
            best = max((v for v in problem.values[i] if v is not None), default=None)
            if best is not None:
                needy.append((best, i, s))
    needy.sort(key=lambda need: (tuple(-x for x in need[0]), need[2].id))
    pending = {node_id: _Releases.of([h for h in holders if h.id not in released], kept_on_node, snapshot)
               for node_id, holders in acting.items()}
    admitted: list[tuple[SessionView, str]] = []
    for _, i, session in needy:
        size = problem.size[i]
        options = []
        for order, node_id in enumerate(problem.node_ids):
            value = problem.values[i][order]
            if value is None:  # not eligible
                continue
            releases = pending[node_id]
            count = releases.shortest(free[node_id], (used[node_id] + size) * quantum, releasable[node_id])
            if count and (priced or releases.lost[count] < value):
                options.append((kept_on_node[releases.holders[count - 1].id], count, order, node_id))
        if not options:
            continue
        _, count, _, node_id = min(options)
        releases = pending[node_id]
        interrupts += [holder.id for holder in releases.holders[:count]]
        release_room(free, releasable, node_id, releases.freed[count])
        used[node_id] += size
        pending[node_id] = _Releases.of(releases.holders[count:], kept_on_node, snapshot)
        admitted.append((session, node_id))
    return admitted, interrupts


@dataclass(frozen=True, slots=True)
class _Releases:
    """A node's acting holders not released yet, in release order, with running sums: the shortest prefix
    that frees enough room is found by bisection (a snapshot of 160 waiting and ~100 acting sessions on 8
    nodes summed the holders' triples again for every waiting session and node: ~6 ms a plan)."""

    holders: list[SessionView]
    freed: list[int]  # freed[j]: tokens the first j holders release (freed[0] = 0)
    lost: list[Value]  # lost[j]: the first j holders' kept triples, summed component-wise

    @classmethod
    def of(cls, holders: list[SessionView], kept_on_node: dict[str, Value], snapshot: Snapshot) -> _Releases:
        freed, lost = [0], [(0, 0, 0)]
        for holder in holders:
            (k, r, t), total = kept_on_node[holder.id], lost[-1]
            freed.append(freed[-1] + holder.cost(snapshot.params))
            lost.append((total[0] + k, total[1] + r, total[2] + t))
        return cls(holders, freed, lost)

    def shortest(self, free: int, needed: int, releasable: int) -> int | None:
        """The fewest first holders whose release leaves at least `needed` tokens of room on the node, which
        has `free` (negative while over-reserved: no room): 0 when it has them already, None when
        releasing them all does not. Releases free at most `releasable` tokens in all
        (`Snapshot.releasable_tokens`)."""
        if max(0, free) >= needed:
            return 0
        if free + releasable < needed:
            return None
        count = bisect_left(self.freed, needed - free)
        return count if count < len(self.freed) else None


def release_room(free: dict[str, int], releasable: dict[str, int], node_id: str, reserved: int) -> None:
    """Add to `node_id`'s free tokens what releasing holders that reserve `reserved` tokens frees: at most
    what the node still reports used by its acting holders (`releasable`, from `Snapshot.releasable_tokens`),
    which goes down by as much."""
    freed = min(reserved, releasable[node_id])
    free[node_id] += freed
    releasable[node_id] -= freed


def kept_value(snapshot: Snapshot, view: ValueView) -> ValueView:
    """A holder's triple on its node as releasing it would lose it: credit decayed to its return."""
    def kept(holder: SessionView, node_id: str) -> Value:
        return _at_return(snapshot, holder, node_id, view(holder, node_id))
    return kept


def _restore_capacity(snapshot: Snapshot, holding: dict[str, list[SessionView]],
                      acting: dict[str, list[SessionView]]
                      ) -> tuple[dict[str, int], dict[str, int], list[str], set[str]]:
    """Release the acting sessions of nodes whose running requests alone outgrew their capacity.

    Contexts grow after admission (each reply is added to the reservation), so a node's reservations can
    exceed its capacity. While that is due to acting sessions it costs nothing yet: their KV is cache the
    engine may evict, and with tools taking most of the time they rarely all run at once. Releasing one
    then, to cover a few thousand tokens of growth, sends a whole context back through the pool, cold
    (issue 7: Terminal-Bench, ~53k-token contexts). Once the reasoning sessions' reservations alone exceed
    capacity the engine must preempt, and an acting session's next request there would make it worse.
    Returns the exact free tokens per node afterwards (negative while over-reserved), the tokens further
    releases may still free there (`Snapshot.releasable_tokens`), the released sessions in order, and their
    ids. `holding`: every node's holders; `acting`: its acting ones, in release order.
    """
    free = {n.id: n.capacity_tokens - n.used_tokens for n in snapshot.nodes}
    releasable = snapshot.releasable_tokens()
    interrupts: list[str] = []
    for node in snapshot.nodes:
        running = sum(s.cost(snapshot.params) for s in holding[node.id] if s.state == "reasoning")
        if running > node.capacity_tokens:
            release_room(free, releasable, node.id, sum(h.cost(snapshot.params) for h in acting[node.id]))
            interrupts += [holder.id for holder in acting[node.id]]
    return free, releasable, interrupts, set(interrupts)


def _at_return(snapshot: Snapshot, holder: SessionView, node_id: str, value: Value) -> Value:
    """A holder's triple with its credit decayed to its tool's predicted return: what releasing it loses.

    A warm holder about to come back keeps its credit; one whose tool runs for minutes will find its
    cache cold anyway (h = 10 s), so keeping its node buys nothing a ready session could not use now.
    """
    k, r, t = value
    if k == 0 or holder.returns_at is None or holder.returns_at <= snapshot.now:
        return value
    return holder.credit_on(node_id, holder.returns_at, snapshot.params), r, t
