"""The live coordinator's mechanism: events in, plans run off the event loop, admissions out.

`Coordinator` wraps the pure `ClusterState` (shared with the simulator) with what only a live system
has: wall-clock time, admission futures the proxy long-polls on, a planning task woken by events and a
tick, replica polling, and the store. HTTP lives in `coordinator.api`; this module has no routes.

Planning: on every wake-up (a request waits, a tool ended, capacity freed, a replica changed) or tick,
take a snapshot and the session signatures together, solve with the policy in a worker thread, then
`ClusterState.apply` re-validates and applies the longest feasible prefix. Admissions that dispatch a
waiting request resolve that request's future with the replica.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from tao_harness.config import ReplicaSpec, TaoConfig
from tao_harness.coordinator import records
from tao_harness.coordinator.leases import Lease, LeaseBook
from tao_harness.coordinator.replicas import ReplicaRegistry
from tao_harness.coordinator.state import ClusterState
from tao_harness.events import ToolEnd, ToolEvent, ToolStart
from tao_harness.policies.base import Policy
from tao_harness.proxy.routing import pin_headers
from tao_harness.proxy.usage import Usage
from tao_harness.coordinator.recording import tool_call_record
from tao_harness.store.records import LLMRequestRecord, PlanRecord, SessionRecord
from tao_harness.store.writer import StoreWriter
from tao_harness.types import Plan

log = logging.getLogger(__name__)

# Tool events older than this for a session the coordinator does not know are history only (e.g.
# delivered late from a shim's spool): recorded in the store, not replayed into the live state.
STALE_EVENT_S = 60.0


@dataclass(frozen=True, slots=True)
class AdmitAnswer:
    # The replica chosen, or None while the session still waits in the pool.
    replica: ReplicaSpec | None
    # Pinning headers for the upstream request (empty while waiting).
    headers: dict[str, str]
    # Seconds this request has waited for admission so far.
    queue_wait_s: float


@dataclass(frozen=True, slots=True)
class RequestDone:
    session: str
    request_id: str
    replica: str | None
    status: str  # "ok", "error", "cancelled", "connect_error"
    usage: Usage
    ttft_s: float | None
    latency_s: float | None
    queue_wait_s: float
    started_at: float


@dataclass
class _Pending:
    request_id: str
    since: float
    future: asyncio.Future[str]


@dataclass
class _SessionSize:
    """What the coordinator knows of a session's size, to estimate the next request's prompt."""

    tokens: int = 0  # engine-reported prompt + completion of the last finished request
    estimate: int = 0  # the proxy's size estimate of that request (tokens)
    last_seen: float = 0.0  # last request, report or tool event (for the idle timeout)
    # The request that moves the session through its lifecycle; others sent meanwhile ride along.
    main_request: str | None = None


@dataclass(frozen=True, slots=True)
class PlanSummary:
    at: float
    solver: str
    solve_ms: float
    waiting: int
    assigned: tuple[tuple[str, str], ...]
    interrupts: tuple[str, ...]
    discarded: tuple[str, ...]
    fallback: bool


@dataclass
class CoordinatorCounters:
    plans: int = 0
    fallbacks: int = 0
    # Requests a proxy sent on an admission lease (no admission round trip).
    leased_requests: int = 0
    # Of those, requests sent on a lease revoked just before: they ran unscheduled.
    lease_races: int = 0
    solve_ms: deque[float] = field(default_factory=lambda: deque(maxlen=4096))


class Coordinator:
    def __init__(self, config: TaoConfig, policy: Policy, registry: ReplicaRegistry, state: ClusterState,
                 writer: StoreWriter | None, clock: Callable[[], float] = time.time,
                 tick_s: float = 0.5, idle_timeout_s: float = 900.0, time_scale: float = 1.0) -> None:
        self.config = config
        self.policy = policy
        self.registry = registry
        self.state = state
        self.writer = writer
        self.clock = clock
        self.tick_s = tick_s
        # `clock` runs this many times faster than the wall clock (emulated fleets); waits convert back.
        self.time_scale = time_scale
        self.idle_timeout_s = idle_timeout_s
        self.recent_plans: deque[PlanSummary] = deque(maxlen=20)
        self.counters = CoordinatorCounters()
        self._pending: dict[str, _Pending] = {}
        self._sizes: dict[str, _SessionSize] = {}
        self._wake = asyncio.Event()
        self.leases = LeaseBook(self._describe_lease)

    # ------------------------------------------------------------------ sessions and requests

    def _ensure_session(self, session: str, now: float, harness: str | None = None,
                        labels: dict[str, str] | None = None) -> None:
        if session in self._sizes:
            if harness or labels:
                self._submit(SessionRecord(id=session, harness=harness, labels=labels or None))
            return
        self.state.on_session_start(session, now)
        self._sizes[session] = _SessionSize(last_seen=self.clock())
        self._submit(SessionRecord(id=session, harness=harness, started_at=now, labels=labels or None))

    def start_session(self, session: str, harness: str | None, labels: dict[str, str], at: float) -> None:
        self._ensure_session(session, at, harness, labels)

    def end_session(self, session: str) -> bool:
        if session not in self._sizes:
            return False
        now = self.clock()
        pending = self._pending.pop(session, None)
        if pending is not None and not pending.future.done():
            pending.future.cancel()
        self.state.on_session_end(session, now)
        del self._sizes[session]
        self._submit(SessionRecord(id=session, ended_at=now))
        self.wake()
        return True

    def _estimate_tokens(self, session: str, estimate: int) -> int:
        """Known size of the last turn plus what the request grew by; the proxy's estimate alone at first."""
        size = self._sizes[session]
        if size.tokens == 0:
            return max(1, estimate)
        return size.tokens + max(0, estimate - size.estimate)

    async def admit(self, session: str, request_id: str, estimate: int, exclude: tuple[str, ...],
                    wait_s: float, leased: str | None = None) -> AdmitAnswer:
        """Long-poll for an admission; the proxy calls again with the same request id while waiting.

        `leased` names the replica a proxy already sent the request to on an admission lease: the
        coordinator records the request and never makes it wait.
        """
        now = self.clock()
        self._ensure_session(session, now)
        self._sizes[session].last_seen = now
        pending = self._pending.get(session)
        if pending is None or pending.request_id != request_id:
            if pending is not None:  # another request of the session waits: this one is admitted with it
                return await self._await_admission(session, pending, wait_s)
            side = self._side_request(session, request_id, leased, exclude)
            if side is not None:
                return side
            if exclude:
                self._release_holder(session, now)
            tokens = self._estimate_tokens(session, estimate)
            node = self.state.on_request(session, tokens, now, exclude)
            self._sizes[session].estimate = estimate
            self._sizes[session].main_request = request_id
            if leased is not None:
                return self._leased(session, leased, node, now)
            if node is not None and node not in exclude:
                return self._answer(session, node, 0.0)
            oversized = self._oversized(tokens, exclude)
            if oversized is not None:
                # No plan can ever admit it: send it on (the engine rejects or truncates it, as vLLM
                # would without us) rather than let it wait forever.
                log.warning("session %s needs %d tokens, more than any replica holds; sent to %s unscheduled",
                            session, tokens, oversized)
                self.state.on_request_withdrawn(session, now)
                return self._answer(session, oversized, 0.0)
            pending = _Pending(request_id, now, asyncio.get_running_loop().create_future())
            self._pending[session] = pending
            self.wake()
        return await self._await_admission(session, pending, wait_s)

    async def _await_admission(self, session: str, pending: _Pending, wait_s: float) -> AdmitAnswer:
        try:
            node = await asyncio.wait_for(asyncio.shield(pending.future), wait_s)
        except asyncio.TimeoutError:
            return AdmitAnswer(None, {}, self.clock() - pending.since)
        except asyncio.CancelledError:
            if pending.future.cancelled():  # the session ended or the waiting request was withdrawn
                return AdmitAnswer(None, {}, self.clock() - pending.since)
            raise
        return self._answer(session, node, self.clock() - pending.since)

    def _side_request(self, session: str, request_id: str, leased: str | None,
                      exclude: tuple[str, ...]) -> AdmitAnswer | None:
        """A request sent while another of the session is in flight (Claude Code's side requests share
        the session id): it runs beside it on the session's replica and leaves the lifecycle alone.
        Not the main request itself coming back after its replica failed: that one is placed anew."""
        node = self.state.node_of(session)
        if (self.state.phase(session) is not records.Phase.REASONING or node is None or node in exclude
                or self._sizes[session].main_request == request_id):
            return None
        if leased is not None:
            self.counters.leased_requests += 1
        return self._answer(session, leased or node, 0.0)

    def _leased(self, session: str, leased: str, node: str | None, now: float) -> AdmitAnswer:
        self.counters.leased_requests += 1
        if node != leased:
            # The revocation was still on its way to the proxy; the request already runs on `leased`.
            self.counters.lease_races += 1
            log.info("session %s sent on a revoked lease to %s (holds %s): runs unscheduled", session, leased, node)
            if node is None:
                self.state.on_request_withdrawn(session, now)
            else:
                self.state.release(session, now)
            self.wake()
        return self._answer(session, leased, 0.0)

    def _oversized(self, tokens: int, exclude: tuple[str, ...]) -> str | None:
        """The largest up replica when `tokens` (+ reserve) exceed every up replica's capacity, else None."""
        up = [(load.capacity_tokens or 0, spec.id) for spec in self.registry.up()
              if spec.id not in exclude for load in [self.registry.loads[spec.id]]]
        if not up or tokens + self.config.planner.reserve_tokens <= max(up)[0]:
            return None
        return max(up)[1]

    def _answer(self, session: str, node: str, waited: float) -> AdmitAnswer:
        spec = self.registry.spec(node)
        return AdmitAnswer(spec, pin_headers(spec, session), waited)

    def _abandon(self, session: str, pending: _Pending) -> None:
        if not pending.future.done():
            pending.future.cancel()
        self._pending.pop(session, None)
        self.state.on_request_withdrawn(session, self.clock())

    def _release_holder(self, session: str, now: float) -> None:
        if self.state.node_of(session) is not None:
            self.state.release(session, now)

    def request_done(self, done: RequestDone) -> None:
        now = self.clock()
        pending = self._pending.get(done.session)
        size = self._sizes.get(done.session)
        if pending is not None and pending.request_id == done.request_id:
            self._abandon(done.session, pending)  # cancelled while still waiting for admission
        elif size is not None and size.main_request != done.request_id:
            pass  # a side request: recorded below, the session's lifecycle follows its main request
        elif size is not None and self.state.node_of(done.session) is not None:
            if done.status == "ok":
                self.state.on_request_done(done.session, done.usage, now)
                if done.usage.prompt_tokens is not None:
                    size = self._sizes[done.session]
                    size.tokens = done.usage.prompt_tokens + (done.usage.completion_tokens or 0)
            else:
                # The client went away or the replica failed: free the reservation at once.
                self.state.release(done.session, now)
        if done.status == "connect_error" and done.replica is not None:
            if self.registry.record_failure(done.replica, "connection refused"):
                self.state.set_node_down(done.replica, True, now)
        self._submit(LLMRequestRecord(
            id=done.request_id, session_id=done.session, replica=done.replica,
            prompt_tokens=done.usage.prompt_tokens, cached_tokens=done.usage.cached_tokens,
            completion_tokens=done.usage.completion_tokens, queue_wait_s=done.queue_wait_s,
            ttft_s=done.ttft_s, latency_s=done.latency_s, started_at=done.started_at,
            ended_at=now, status=done.status,
        ))
        self.wake()

    # ------------------------------------------------------------------ tool events

    def tool_event(self, event: ToolEvent) -> None:
        now = self.clock()
        live = event.session in self._sizes or now - event.at < STALE_EVENT_S
        if live:
            self._ensure_session(event.session, min(event.at, now),
                                 event.harness if isinstance(event, ToolStart) else None)
            self._sizes[event.session].last_seen = now
        if isinstance(event, ToolStart):
            if live:
                self.state.on_tool_start(event.session, records.ToolStart(
                    call_id=event.call_id, name=event.tool_name, command=event.command, args=event.args,
                    env_timeout_s=event.env_timeout_s), event.at)
            self._submit(tool_call_record(event))
        else:
            self._on_tool_end(event, live)
        self.wake()

    def _on_tool_end(self, event: ToolEnd, live: bool) -> None:
        if live:
            self.state.on_tool_end(event.session, event.call_id, event.at, event.duration_s)
        self._submit(tool_call_record(event))

    # ------------------------------------------------------------------ planning

    def wake(self) -> None:
        self.publish_leases()
        self._wake.set()

    def publish_leases(self) -> None:
        """Every state change passes here (through `wake` or a plan): proxies learn holder changes at once."""
        node_of = self.state.node_of
        self.leases.sync({session: node for session in self._sizes if (node := node_of(session)) is not None})

    def _describe_lease(self, session: str, node: str) -> Lease:
        spec = self.registry.spec(node)
        return Lease(session, node, spec.base_url, tuple(pin_headers(spec, session).items()))

    async def planning_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self._next_wait())
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.plan_once()
            except Exception:  # a planning bug must not stop admissions forever
                log.exception("planning failed; retrying at the next event")

    def _next_wait(self) -> float:
        """Wall seconds until the next tick or admission expiry."""
        expiry = self.state.next_expiry()
        if expiry is None:
            return self.tick_s
        return max(0.001, min(self.tick_s, (expiry - self.clock()) / self.time_scale))

    def end_idle_sessions(self, now: float) -> list[str]:
        """End sessions silent for `idle_timeout_s` with no request waiting: harnesses that vanished."""
        idle = [sid for sid, size in self._sizes.items()
                if now - size.last_seen > self.idle_timeout_s and sid not in self._pending]
        for session in idle:
            log.info("session %s idle for %.0f s: ended", session, now - self._sizes[session].last_seen)
            self.end_session(session)
        return idle

    async def plan_once(self) -> Plan | None:
        now = self.clock()
        self.end_idle_sessions(now)
        if self.state.expire_admissions(now):
            log.info("gave back admissions whose requests did not come in time")
            self.publish_leases()
        self.state.refresh_predictions(now)
        if not self.state.needs_plan():
            return None
        snapshot = self.state.snapshot(now)
        signatures = self.state.signatures()
        started = time.perf_counter()
        plan = await asyncio.to_thread(self.policy.plan, snapshot)
        solve_ms = (time.perf_counter() - started) * 1e3
        result = self.state.apply(plan, signatures, self.clock())
        self.publish_leases()
        for admission in result.admitted:
            pending = self._pending.get(admission.session)
            if admission.dispatch and pending is not None and not pending.future.done():
                pending.future.set_result(admission.node)
                del self._pending[admission.session]
        self._record_plan(plan, snapshot.now, solve_ms, len(snapshot.sessions), result)
        return plan

    def _record_plan(self, plan: Plan, at: float, solve_ms: float, waiting: int,
                     result: records.ApplyResult) -> None:
        self.counters.plans += 1
        self.counters.fallbacks += int(plan.fallback)
        self.counters.solve_ms.append(solve_ms)
        self.recent_plans.append(PlanSummary(
            at=at, solver=plan.solver, solve_ms=solve_ms, waiting=waiting,
            assigned=tuple((a.session, a.node) for a in result.admitted), interrupts=result.interrupted,
            discarded=result.discarded, fallback=plan.fallback,
        ))
        if plan.assignments or plan.interrupts:
            self._submit(PlanRecord(
                created_at=at, policy=plan.policy, solver=plan.solver, solve_ms=solve_ms, n_waiting=waiting,
                n_assigned=len(result.admitted), fallback=plan.fallback, discarded=bool(result.discarded),
                objective=tuple(plan.objective[:3]),
            ))

    # ------------------------------------------------------------------ replicas

    async def poll_replicas(self, http: Any) -> None:
        changed = await self.registry.poll_once(http)
        now = self.clock()
        for spec in self.registry.specs:
            load = self.registry.loads[spec.id]
            if load.capacity_tokens:
                self.state.set_capacity(spec.id, load.capacity_tokens)
            self.state.on_node_load(spec.id, records.NodeLoad(
                running_requests=load.running_requests, waiting_requests=load.waiting_requests,
                kv_usage=load.kv_usage))
        for replica_id in changed:
            self.state.set_node_down(replica_id, self.registry.loads[replica_id].down, now)
            self.wake()

    def _submit(self, record: Any) -> None:
        if self.writer is not None:
            self.writer.submit(record)
