"""The session state machine shared by the live coordinator and the simulator: pure, clock-agnostic.

Every method takes `now` from its caller (wall clock live, virtual time in the simulator) and does no
I/O; events in, a frozen `Snapshot` out for the policy, a `Plan` back in through `apply`.

Lifecycle (DESIGN.md §3):
    NEW → WAITING → ADMITTED(b) → REASONING(b) → ACTING(b) → REASONING(b) → ... → ENDED
                  ↘ (admitted with its request) REASONING(b)
    ACTING(b) / ADMITTED(b) → INTERRUPTED (plan interrupt, admission given back, node down) → WAITING → ...
    REASONING(b) → INTERRUPTED when its request ends, if a plan interrupted it while that request ran
    any holding phase → IDLE (`release`: client gone, replica failed); WAITING → IDLE (request withdrawn);
    IDLE → WAITING at the next request.
With request-level routing (`admission_control=False`) a finished request leaves the session IDLE (holds
nothing) and each new request waits in the pool until the router places it; capacity is never checked.

Invariant: for every node b, `used[b]` equals the sum of `reserved` over the sessions whose phase is in
HOLDING_PHASES with `node == b`, and only those sessions hold a reservation. Every transition goes through
`_hold` / `_release`, so a session end, an interrupt or a give-back always returns its tokens.

A prefix group's shared prefix (an agent's system prompt, ~15k tokens for Claude Code) is reserved once
per node, as the engine's prefix cache keeps one copy for every request that starts with it: the group's
first holder there (its keeper) carries it, the others reserve their context without it. Counted once
per session instead, ten holders of a 270k-token replica reserved 135k tokens for copies that do not
exist, and the pool waited for room the engine had. When the keeper leaves, the next holder carries it.

Plan signatures: a session's `version` changes whenever it enters or leaves the pool or changes node
(not when a request arrives for a session already in the pool, nor on tool or cache events). `apply`
drops plan entries whose session's version differs from the one captured with the snapshot, then admits
the longest prefix of the remaining assignments that fits live capacity.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping

from tao_harness.config import PlannerConfig, ReadinessConfig, SessionsConfig
from tao_harness.coordinator.prediction import ToolPredictor
from tao_harness.coordinator.records import (
    HOLDING_PHASES,
    POOL_PHASES,
    Admission,
    ApplyResult,
    NodeLoad,
    OpenCall,
    Phase,
    Session,
    SessionStateError,
    StateCounters,
    ToolStart,
    UsageLike,
)
from tao_harness.coordinator.views import node_state, session_view
from tao_harness.readiness.state import refresh, start_execution
from tao_harness.types import CacheEntry, NodeState, PlannerParams, Plan, Snapshot

Signatures = Mapping[str, int]


class ClusterState:
    """Sessions, the waiting pool and per-node reservations; see the module docstring for the invariant."""

    def __init__(
        self,
        nodes: Iterable[tuple[str, int]],
        predictor: ToolPredictor,
        *,
        planner: PlannerConfig = PlannerConfig(),
        readiness: ReadinessConfig = ReadinessConfig(),
        sessions: SessionsConfig = SessionsConfig(),
        admission_control: bool = True,
    ) -> None:
        self._capacity: dict[str, int] = {}
        for node_id, capacity in nodes:
            if node_id in self._capacity:
                raise ValueError(f"duplicate node id {node_id!r}")
            self._capacity[node_id] = int(capacity)
        if not self._capacity:
            raise ValueError("a cluster needs at least one node")
        self._used = dict.fromkeys(self._capacity, 0)
        self._load = {node_id: NodeLoad() for node_id in self._capacity}
        self._node_memo: dict[str, tuple[tuple[int, int, NodeLoad], NodeState]] = {}  # see `_node_state`
        self._down: set[str] = set()
        self._sessions: dict[str, Session] = {}
        self._in_pool = 0  # sessions whose phase is in POOL_PHASES, kept by `_set_phase`
        # Sessions admitted ahead of their request (ADMITTED), kept by `_set_phase`: expiry looks at them only.
        self._ahead: dict[str, Session] = {}
        # (node, prefix group) -> its holders there, in holding order; the first carries the shared prefix.
        self._sharing: dict[tuple[str, str], dict[str, Session]] = {}
        # Sessions whose phase (and so perhaps holder) changed since `take_phase_changes`; None until
        # `watch_phases` (the simulator never reads them).
        self._phase_changes: set[str] | None = None
        self._predictor = predictor
        self._params = PlannerParams.from_config(planner)
        self._readiness = readiness
        self._admission_control = admission_control
        self._admission_ttl_s = sessions.admission_ttl_s
        self._counters = StateCounters()

    # ------------------------------------------------------------------ reading

    @property
    def admission_control(self) -> bool:
        return self._admission_control

    @property
    def counters(self) -> StateCounters:
        return self._counters

    def watch_phases(self) -> None:
        """Start recording which sessions change phase (every holder change is one: `node` changes only
        on admission), for `take_phase_changes`."""
        self._phase_changes = set()

    def take_phase_changes(self) -> set[str]:
        """Sessions whose phase changed since the last call (ended ones included); empty unless watched."""
        if self._phase_changes is None:
            return set()
        changed, self._phase_changes = self._phase_changes, set()
        return changed

    def has_session(self, session_id: str) -> bool:
        return session_id in self._sessions

    def phase(self, session_id: str) -> Phase:
        return self._get(session_id).phase

    def node_of(self, session_id: str) -> str | None:
        """The node the session holds, or None."""
        session = self._get(session_id)
        return session.node if session.phase in HOLDING_PHASES else None

    def used_tokens(self, node_id: str) -> int:
        return self._used[node_id]

    def free_tokens(self, node_id: str) -> int:
        return self._capacity[node_id] - self._used[node_id]

    def holding_count(self) -> int:
        return sum(1 for s in self._sessions.values() if s.phase in HOLDING_PHASES)

    def pool_size(self) -> int:
        return self._in_pool

    def over_capacity(self) -> bool:
        """Some up node's reservations exceed its capacity (contexts grew after admission)."""
        return any(self._used[n] > c for n, c in self._capacity.items() if n not in self._down)

    def needs_plan(self) -> bool:
        """A plan could change something: sessions wait in the pool, or a node is over-reserved (a policy
        may interrupt acting sessions to bring it back under capacity)."""
        return self.pool_size() > 0 or self.over_capacity()

    def predicted_return(self, session_id: str) -> float | None:
        """Predicted end of the session's running tool calls (the latest one), or None without any."""
        calls = self._get(session_id).calls.values()
        return max((c.execution.predicted_completion for c in calls), default=None)

    def signatures(self) -> dict[str, int]:
        """Capture together with `snapshot`; pass to `apply` with the plan made from that snapshot."""
        return {s.id: s.version for s in self._sessions.values()}

    def snapshot(self, now: float) -> Snapshot:
        """Frozen view for the policy: the pool (FCFS by pool entry) then the sessions holding nodes.

        Not a pure read: an overdue tool's one-time probe (r = 1 once) is spent by the snapshot that
        offers it, so each overdue call gets exactly one planning round (readiness.state.consume_probe).
        """
        nodes = tuple(self._node_state(node_id, capacity)
                      for node_id, capacity in self._capacity.items() if node_id not in self._down)
        pool = sorted((s for s in self._sessions.values() if s.phase in POOL_PHASES), key=lambda s: s.pool_since)
        holding = [s for s in self._sessions.values() if s.phase in HOLDING_PHASES and s.node not in self._down]
        node_ids = tuple(node.id for node in nodes)
        floors: dict[str, int | None] = {}  # per prefix group, for this snapshot's pool sessions
        views = tuple(session_view(s, now, self._readiness, self._down, node_ids,
                                   self._shared_resident(s, node_ids, floors))
                      for s in (*pool, *holding))
        return Snapshot(now=now, params=self._params, nodes=nodes, sessions=views)

    def _node_state(self, node_id: str, capacity: int) -> NodeState:
        """The node's `NodeState`, the last one again while its inputs are unchanged: a plan at cluster
        scale builds one per node, and most nodes' reservations and load did not change since the last."""
        key = (capacity, self._used[node_id], self._load[node_id])
        memo = self._node_memo.get(node_id)
        if memo is None or memo[0] != key:
            memo = self._node_memo[node_id] = (key, node_state(node_id, *key))
        return memo[1]

    # ------------------------------------------------------------------ events

    def on_session_start(
        self, session_id: str, now: float, *, prefix_group: str | None = None, shared_tokens: int = 0
    ) -> None:
        if session_id in self._sessions:
            raise SessionStateError(f"session {session_id!r} already started")
        self._sessions[session_id] = Session(session_id, now, prefix_group, shared_tokens, pool_since=now)

    def set_shared_prefix(self, session_id: str, prefix_group: str, shared_tokens: int) -> None:
        """Names the prompt prefix the session shares with others (learnt from its requests). A session
        holding a node keeps what it holds by until it leaves it: its reservation was made with the old."""
        session = self._get(session_id)
        unchanged = (session.prefix_group, session.shared_tokens) == (prefix_group, shared_tokens)
        if unchanged or session.phase in HOLDING_PHASES:
            return  # every admission the proxy asks for names it: the memo stays unless it changed
        session.prefix_group, session.shared_tokens = prefix_group, shared_tokens
        session.view_memo = None  # the memo's key leaves these out: they change only here

    def on_request(self, session_id: str, tokens: int, now: float, avoid: Iterable[str] = ()) -> str | None:
        """An LLM request arrived. Returns the node to send it to now, or None: it waits for a plan.

        `avoid`: nodes that already failed this request (a retry); plans place it elsewhere while any
        other node is up.
        """
        session = self._get(session_id)
        if session.phase in (Phase.REASONING, Phase.WAITING):
            raise SessionStateError(f"session {session_id!r} already has a request in flight")
        others_up = {n for n in self._capacity if n not in self._down} - set(avoid)
        session.avoid = frozenset(avoid) if others_up else frozenset()
        if session.calls:  # the harness did not report the end; the request proves the tools returned
            session.calls.clear()
            session.tool_done_at = now
        session.turn += 1
        session.tokens = tokens
        session.request_at = now
        if session.reply_done_at is not None:
            gap = now - session.reply_done_at
            session.gap_s = gap if session.gap_s is None else (session.gap_s + gap) / 2
            session.reply_done_at = None
        if session.phase in HOLDING_PHASES:
            self._set_phase(session, Phase.REASONING)
            session.admitted_at = None
            self._resize(session, tokens + self._params.reserve_tokens)
            return session.node
        if session.phase is not Phase.INTERRUPTED:  # NEW / IDLE enter the pool now
            session.pool_since = now
            session.version += 1
        self._set_phase(session, Phase.WAITING)
        return None

    def on_request_done(self, session_id: str, usage: UsageLike, now: float) -> None:
        """The reply finished: the session's whole context is now resident on its node."""
        session = self._get(session_id)
        if session.phase is not Phase.REASONING or session.node is None:
            raise SessionStateError(f"session {session_id!r} has no request in flight")
        prompt = usage.prompt_tokens if usage.prompt_tokens is not None else session.tokens
        session.tokens = prompt + (usage.completion_tokens or 0)
        # vLLM hashes generated tokens too, so prompt + reply is what the next turn can reuse there.
        session.cache[session.node] = CacheEntry(session.tokens, now)
        session.cache_stamp += 1
        session.tool_done_at = None
        session.reply_done_at = now
        if self._admission_control and session.release_at_reply:
            self._to_pool(session, now)
            self._bump(interrupts=1)
        elif self._admission_control:
            self._set_phase(session, Phase.ACTING)
            self._resize(session, session.tokens + self._params.reserve_tokens)
        else:
            self._release(session)
            self._set_phase(session, Phase.IDLE)
            session.version += 1

    def on_tool_start(self, session_id: str, start: ToolStart, now: float) -> None:
        session = self._get(session_id)
        if not start.session:
            start = replace(start, session=session_id)
        family, hints = self._predictor.describe(start)
        execution = start_execution(now, self._predictor.predict(start, family, hints))
        session.calls[start.call_id] = OpenCall(start, family, hints, execution)
        session.tool_done_at = None

    def on_tool_end(self, session_id: str, call_id: str, now: float, duration_s: float | None = None,
                    censored: bool = False) -> bool:
        """Feeds the duration history; a `censored` duration (the call was stopped before its work ended: a
        timeout or a cancel) counts as a lower bound only. False for a call never reported as started."""
        session = self._get(session_id)
        call = session.calls.pop(call_id, None)
        if call is None:
            return False
        elapsed = now - call.execution.started_at
        self._predictor.observe(call.start, call.family, duration_s if duration_s is not None else elapsed,
                                censored=censored)
        if not session.calls:
            session.tool_done_at = now
        return True

    def on_cache_observation(self, session_id: str, node_id: str, tokens: int, now: float) -> None:
        """Evidence (e.g. engine-reported cached tokens) that `tokens` of the session are cached on a node."""
        self._check_node(node_id)
        session = self._get(session_id)
        session.cache[node_id] = CacheEntry(int(tokens), now)
        session.cache_stamp += 1

    def on_node_load(self, node_id: str, load: NodeLoad) -> None:
        self._check_node(node_id)
        self._load[node_id] = load

    def set_capacity(self, node_id: str, capacity_tokens: int) -> None:
        self._check_node(node_id)
        self._capacity[node_id] = int(capacity_tokens)

    def set_node_down(self, node_id: str, down: bool, now: float) -> None:
        """A down node leaves snapshots and plans; sessions holding it without a running request go back
        to the pool (a request in flight there ends through `on_request_done` or `release`)."""
        self._check_node(node_id)
        if not down:
            self._down.discard(node_id)
            return
        self._down.add(node_id)
        for session in self._sessions.values():
            if session.node == node_id and session.phase in (Phase.ADMITTED, Phase.ACTING):
                self._to_pool(session, now)

    def release(self, session_id: str, now: float) -> None:
        """Drop the session's hold at once (client gone, replica failed); its next request waits in the pool."""
        session = self._get(session_id)
        if session.phase in HOLDING_PHASES:
            self._release(session)
            self._set_phase(session, Phase.IDLE)
            session.admitted_at = None
            session.version += 1

    def on_request_withdrawn(self, session_id: str, now: float) -> bool:
        """A waiting request was given up by its client: the session leaves the pool (IDLE) until the next.
        Returns False when the session had no waiting request."""
        session = self._get(session_id)
        if session.phase is not Phase.WAITING:
            return False
        self._set_phase(session, Phase.IDLE)
        session.version += 1
        return True

    def on_session_end(self, session_id: str, now: float) -> None:
        session = self._get(session_id)
        self._release(session)
        self._set_phase(session, Phase.ENDED)
        del self._sessions[session_id]

    # ------------------------------------------------------------------ housekeeping

    def refresh_predictions(self, now: float) -> None:
        """Re-predict running tools that are not overdue (history may have learned; keeps them fresh).

        Overdue calls keep their single probe. (Re-predicting them from a distribution conditioned on the
        longer elapsed time was tried: in `scripts/readiness_sim.py` on real calls it delayed the
        sessions of long tools — tool end to first token 0.94 → 1.41 s — since a call that outlived its
        history is, by the Lindy tail, never within H again until it returns.)"""
        for session in self._sessions.values():
            for call in session.calls.values():
                if call.execution.predicted_completion > now:
                    prediction = self._predictor.predict(call.start, call.family, call.hints)
                    call.execution = refresh(call.execution, prediction, now)

    def next_expiry(self) -> float | None:
        """When the earliest admission made ahead of its request runs out, if any."""
        times = [s.admitted_at for s in self._ahead.values() if s.admitted_at is not None]
        return min(times) + self._admission_ttl_s if times else None

    def expire_admissions(self, now: float) -> tuple[str, ...]:
        """Give back reservations of sessions admitted ahead whose request did not come in time."""
        expired = []
        for session in list(self._ahead.values()):
            if session.admitted_at is not None:
                if session.admitted_at + self._admission_ttl_s <= now:
                    self._to_pool(session, now)
                    expired.append(session.id)
        self._bump(expirations=len(expired))
        return tuple(expired)

    # ------------------------------------------------------------------ plans

    def apply(self, plan: Plan, signatures: Signatures, now: float) -> ApplyResult:
        """Revalidate, interrupt, then admit the longest feasible prefix of the remaining assignments."""
        discarded: list[str] = []
        interrupted: list[str] = []
        for session_id in plan.interrupts:
            session = self._valid(session_id, signatures, (Phase.ACTING, Phase.ADMITTED, Phase.REASONING))
            if session is None:
                discarded.append(session_id)
            elif session.phase is Phase.REASONING:
                # Its next request came between the snapshot and now (a short tool; plans take time):
                # the interrupt takes effect when that request ends instead of being lost.
                session.release_at_reply = True
            else:
                self._to_pool(session, now)
                interrupted.append(session_id)
        candidates: list[tuple[Session, str]] = []
        for assignment in plan.assignments:
            self._check_node(assignment.node)
            session = self._valid(assignment.session, signatures, POOL_PHASES)
            if session is None or assignment.node in self._down:
                discarded.append(assignment.session)
            else:
                candidates.append((session, assignment.node))
        admitted: list[Admission] = []
        deferred: list[str] = []
        for index, (session, node_id) in enumerate(candidates):
            cost = session.tokens + self._params.reserve_tokens - self.shared_credit(session, node_id)
            if self._admission_control and cost > self.free_tokens(node_id):
                deferred = [s.id for s, _ in candidates[index:]]
                break
            admitted.append(self._admit(session, node_id, now))
        self._bump(
            admissions=len(admitted),
            interrupts=len(interrupted),
            discards=len(discarded),
            deferrals=len(deferred),
            plans=1,
            plans_discarded=1 if discarded else 0,
        )
        return ApplyResult(tuple(admitted), tuple(interrupted), tuple(discarded), tuple(deferred))

    def _valid(self, session_id: str, signatures: Signatures, phases: Iterable[Phase]) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None or signatures.get(session_id) != session.version or session.phase not in phases:
            return None
        return session

    def _admit(self, session: Session, node_id: str, now: float) -> Admission:
        dispatch = session.phase is Phase.WAITING
        self._set_phase(session, Phase.REASONING if dispatch else Phase.ADMITTED)
        session.admitted_at = None if dispatch else now
        session.node = node_id
        session.version += 1
        self._hold(session, session.tokens + self._params.reserve_tokens)
        return Admission(session.id, node_id, dispatch)

    # ------------------------------------------------------------------ reservations

    def _set_phase(self, session: Session, phase: Phase) -> None:
        self._in_pool += (phase in POOL_PHASES) - (session.phase in POOL_PHASES)
        if phase is Phase.ADMITTED:
            self._ahead[session.id] = session
        elif session.phase is Phase.ADMITTED:
            del self._ahead[session.id]
        session.phase = phase
        if self._phase_changes is not None:
            self._phase_changes.add(session.id)

    def _to_pool(self, session: Session, now: float) -> None:
        self._release(session)
        self._set_phase(session, Phase.INTERRUPTED)
        session.admitted_at = None
        session.pool_since = now
        session.version += 1

    def _shared_resident(self, session: Session, node_ids: tuple[str, ...], floors: dict[str, int | None]) -> bool:
        """Its shared prefix is carried by another holder on its node, or (in the pool) on every node it may use.

        `floors` caches, per prefix group, `_keeper_floor` over `node_ids` for the pool sessions of one
        snapshot: with hundreds waiting on tens of nodes, asking every node for every session was a fifth
        of a cluster-scale snapshot."""
        if session.prefix_group is None or not session.shared_tokens:
            return False
        if session.phase in HOLDING_PHASES:
            return session.node is not None and self.shared_credit(session, session.node) > 0
        if session.avoid:
            usable = [n for n in node_ids if n not in session.avoid]
            return bool(usable) and all(self.shared_credit(session, n) > 0 for n in usable)
        if session.prefix_group not in floors:
            floors[session.prefix_group] = self._keeper_floor(session.prefix_group, node_ids)
        floor = floors[session.prefix_group]
        # shared_credit > 0 on a node exactly when a keeper there (never a pool session) carries this much
        shared = min(session.shared_tokens, session.tokens)
        return floor is not None and 0 < shared <= floor

    def _keeper_floor(self, prefix_group: str, node_ids: tuple[str, ...]) -> int | None:
        """The least shared prefix the group's keepers carry over `node_ids`; None if a node has no keeper."""
        floor: int | None = None
        for node_id in node_ids:
            holders = self._sharing.get((node_id, prefix_group))
            if not holders:
                return None
            keeper = next(iter(holders.values()))
            carried = min(keeper.shared_tokens, keeper.tokens)
            floor = carried if floor is None else min(floor, carried)
        return floor

    def shared_credit(self, session: Session, node_id: str) -> int:
        """Tokens of the session's shared prefix that another holder of its group carries on `node_id`."""
        if session.prefix_group is None:
            return 0
        holders = self._sharing.get((node_id, session.prefix_group))
        keeper = next(iter(holders.values())) if holders else None
        shared = min(session.shared_tokens, session.tokens)
        if keeper is None or keeper is session or min(keeper.shared_tokens, keeper.tokens) < shared:
            return 0
        return shared

    def _hold(self, session: Session, tokens: int) -> None:
        """Reserve `tokens` (the whole context) less the shared prefix another holder carries."""
        assert session.node is not None and session.reserved == 0
        if session.prefix_group is not None:
            self._sharing.setdefault((session.node, session.prefix_group), {})[session.id] = session
        session.reserved = tokens - self.shared_credit(session, session.node)
        self._used[session.node] += session.reserved

    def _resize(self, session: Session, tokens: int) -> None:
        if session.node is not None and session.phase in HOLDING_PHASES:
            self._set_reserved(session, tokens - self.shared_credit(session, session.node))

    def _set_reserved(self, session: Session, tokens: int) -> None:
        assert session.node is not None
        self._used[session.node] += tokens - session.reserved
        session.reserved = tokens

    def _release(self, session: Session) -> None:
        if session.reserved and session.node is not None:
            self._used[session.node] -= session.reserved
        session.reserved = 0
        session.release_at_reply = False
        if session.node is None or session.prefix_group is None:
            return
        key = (session.node, session.prefix_group)
        holders = self._sharing.get(key, {})
        if holders.pop(session.id, None) is None:
            return
        if not holders:
            del self._sharing[key]
            return
        for other in holders.values():  # a new keeper carries the prefix now; others may lose their credit
            whole = other.tokens + self._params.reserve_tokens
            self._set_reserved(other, whole - self.shared_credit(other, session.node))

    def _bump(self, **deltas: int) -> None:
        values = {name: getattr(self._counters, name) + delta for name, delta in deltas.items()}
        self._counters = StateCounters(**{**_as_dict(self._counters), **values})

    def _get(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionStateError(f"unknown session {session_id!r}") from None

    def _check_node(self, node_id: str) -> None:
        if node_id not in self._capacity:
            raise SessionStateError(f"unknown node {node_id!r} (known: {', '.join(self._capacity)})")


def _as_dict(counters: StateCounters) -> dict[str, int]:
    return {name: getattr(counters, name) for name in StateCounters.__dataclass_fields__}
