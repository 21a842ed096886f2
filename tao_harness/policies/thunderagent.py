"""ThunderAgent (ThunderAgent-org/ThunderAgent at a7eef77), as its scheduler code behaves:
`MultiBackendRouter` in `ThunderAgent/scheduler/router.py` and `BackendState` in `backend/state.py`.

- Accounting (`BackendState.remaining_capacity`): a node's remaining capacity is its KV capacity less, for
  every program registered on it, its tokens (reasoning and acting alike: `--acting-token-weight` 1.0)
  plus `BUFFER_PER_PROGRAM` = 100. Shared prefixes are not credited: `shared_tokens` would be, but
  `update_shared_tokens` has no caller, so it stays 0. The node's measured KV usage is not read.
- Between scheduler ticks (`update_program_before_request`, `_select_backend_for_new_program`): a program's
  first request is placed at once when no program waits in its global queue, on the node with the fewest
  active program tokens among those with room for tokens + buffer; otherwise it joins the queue. A
  program that holds a node sends its next request without any check; a paused one waits for a tick.
- Every `--scheduler-interval` (5 s; `_scheduler_loop`, `_scheduled_check`): first resume, then pause.
  Resume (`_greedy_resume`): over the nodes with more than one buffer of room, the queued programs are
  taken in the order: paused with a request waiting (step > 1), new (step 1), paused without a request,
  each group smallest first, a program kept when the running total of tokens + buffer stays within the
  nodes' summed room; those kept go largest first to the node with the most room left (re-sorted after
  each placement; a node leaves once its room is at most one buffer), a program too large for that node
  is skipped. Pause (`_pause_until_safe`), per node whose remaining capacity is negative: acting
  programs smallest first until it is not; if pausing every acting program is not enough, every reasoning
  program on the node is marked for pause (`_mark_program_for_pause` does not change the remaining
  capacity the loop tests, so it marks them all) and is paused when its current request ends
  (`update_program_after_request`). Here that is an interrupt of a reasoning session, which the
  session state machine applies when its request ends.

Not modelled: the 30-minute wait after which `_wait_for_resume` resumes a program regardless of capacity,
and the optional 2^−t acting-token decay (off by default). The harness's own reservations bound every
admission as well (a plan the session state machine cannot hold is deferred); ThunderAgent, which counts
every program's whole context, is the stricter of the two except where shared prefixes are small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from time import perf_counter

from tao_harness.config import PlannerConfig
from tao_harness.policies.common import assignment, make_plan
from tao_harness.types import Assignment, Plan, SessionView, Snapshot

BUFFER_PER_PROGRAM = 100  # ThunderAgent/backend/state.py
SCHEDULER_INTERVAL_S = 5.0  # ThunderAgent/config.py, --scheduler-interval's default


def _is_new(session: SessionView) -> bool:
    """Its first request is the one waiting (ThunderAgent's step_count == 1)."""
    return session.turn <= 1 and session.has_request


def _resume_group(session: SessionView) -> int:
    """`_greedy_resume`'s priority: paused with a request waiting, new, paused without a request."""
    if _is_new(session):
        return 1
    return 0 if session.has_request else 2


@dataclass
class _Rooms:
    """Per node, ThunderAgent's remaining capacity and the harness's free reservation room."""

    remaining: dict[str, int]
    room: dict[str, int]

    def take(self, snapshot: Snapshot, session: SessionView, node_id: str) -> None:
        self.remaining[node_id] -= session.tokens + BUFFER_PER_PROGRAM
        self.room[node_id] -= session.cost(snapshot.params)

    def holds(self, snapshot: Snapshot, session: SessionView, node_id: str) -> bool:
        return (session.may_use(node_id) and self.remaining[node_id] >= session.tokens + BUFFER_PER_PROGRAM
                and self.room[node_id] >= session.cost(snapshot.params))


class ThunderAgentPolicy:
    admission_control = True
    plans_on_timer = True

    def __init__(self, config: PlannerConfig, *, name: str = "thunderagent",
                 scheduler_interval_s: float = SCHEDULER_INTERVAL_S) -> None:
        self.name = name
        self.config = config
        self.scheduler_interval_s = scheduler_interval_s
        self._next_tick = -math.inf  # the first plan is a tick
        self._queued: frozenset[str] = frozenset()  # sessions waiting at the previous plan: its global queue

    def plan(self, snapshot: Snapshot) -> Plan:
        start = perf_counter()
        rooms = _Rooms({n.id: n.capacity_tokens for n in snapshot.nodes},
                       {n.id: n.capacity_tokens - n.used_tokens for n in snapshot.nodes})
        for session in snapshot.holding():
            rooms.remaining[session.node] -= session.tokens + BUFFER_PER_PROGRAM  # type: ignore[index]
        chosen = self._place_new(snapshot, rooms)
        interrupts: list[str] = []
        if snapshot.now >= self._next_tick:
            placed = {a.session for a in chosen}
            chosen += _greedy_resume(snapshot, rooms, [s for s in snapshot.waiting if s.id not in placed])
            interrupts = _pause_until_safe(snapshot, rooms)
            # Its loop sleeps one interval after each check (`_scheduler_loop`), so the next tick is counted
            # from this one, late or not.
            self._next_tick = snapshot.now + self.scheduler_interval_s
        self._queued = frozenset(s.id for s in snapshot.waiting)
        return make_plan(self.name, "thunderagent", chosen, interrupts=interrupts,
                         solve_ms=(perf_counter() - start) * 1000)

    def _place_new(self, snapshot: Snapshot, rooms: _Rooms) -> list[Assignment]:
        """First requests that arrived since the last plan while the queue was empty, placed at once."""
        active = {n.id: 0 for n in snapshot.nodes}
        for session in snapshot.holding():
            active[session.node] += session.tokens  # type: ignore[index]
        queue_empty = not any(s.id in self._queued for s in snapshot.waiting)
        chosen = []
        for session in snapshot.waiting:
            if session.id in self._queued or not _is_new(session) or not queue_empty:
                queue_empty = False
                continue
            fits = [n.id for n in snapshot.nodes if rooms.holds(snapshot, session, n.id)]
            if not fits:
                queue_empty = False  # it joins the queue; later arrivals queue behind it
                continue
            node_id = min(fits, key=lambda n: active[n])  # the first of equals, as its strict `<` loop
            rooms.take(snapshot, session, node_id)
            active[node_id] += session.tokens
            chosen.append(assignment(snapshot, session, node_id))
        return chosen


def _greedy_resume(snapshot: Snapshot, rooms: _Rooms, queue: list[SessionView]) -> list[Assignment]:
    """`MultiBackendRouter._greedy_resume`: select by priority within the summed room, place largest first."""
    open_nodes = [n.id for n in snapshot.nodes if rooms.remaining[n.id] > BUFFER_PER_PROGRAM]
    total = sum(rooms.remaining[n] for n in open_nodes)
    selected, cumulative = [], 0
    for session in sorted(queue, key=lambda s: (_resume_group(s), s.tokens)):
        required = session.tokens + BUFFER_PER_PROGRAM
        if cumulative + required <= total:
            selected.append(session)
            cumulative += required
    selected.sort(key=lambda s: -s.tokens)
    smallest = min((s.tokens + BUFFER_PER_PROGRAM for s in selected), default=0)
    chosen = []
    for session in selected:
        open_nodes.sort(key=lambda n: -rooms.remaining[n])
        if not open_nodes or smallest > rooms.remaining[open_nodes[0]]:
            break
        # The node with the most room (the first of equals: both sorts are stable), or none: a session too
        # large for it (or not eligible there, or beyond the harness's room) is skipped.
        node_id = open_nodes[0]
        if not rooms.holds(snapshot, session, node_id):
            continue
        rooms.take(snapshot, session, node_id)
        chosen.append(assignment(snapshot, session, node_id))
        if rooms.remaining[node_id] <= BUFFER_PER_PROGRAM:
            open_nodes.remove(node_id)
    return chosen


def _pause_until_safe(snapshot: Snapshot, rooms: _Rooms) -> list[str]:
    """`MultiBackendRouter._pause_until_safe` on every node over capacity: acting smallest first, then every
    reasoning session (marked: it is released when its request ends)."""
    interrupts = []
    for node in snapshot.nodes:
        holders = snapshot.holding(node.id)
        for session in sorted((s for s in holders if s.state == "acting"), key=lambda s: s.tokens):
            if rooms.remaining[node.id] >= 0:
                break
            interrupts.append(session.id)
            rooms.remaining[node.id] += session.tokens + BUFFER_PER_PROGRAM
            rooms.room[node.id] += session.cost(snapshot.params)
        if rooms.remaining[node.id] < 0:
            interrupts += [s.id for s in holders if s.state == "reasoning"]
    return interrupts
