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
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterable, TypeVar

from tao_harness.config import ReplicaSpec, TaoConfig
from tao_harness.coordinator import records
from tao_harness.coordinator.leases import Lease, LeaseBook
from tao_harness.coordinator.owners import OwnerBook
from tao_harness.coordinator.policy_loading import LoadingPolicy
from tao_harness.coordinator.replicas import ReplicaRegistry
from tao_harness.coordinator.state import ClusterState
from tao_harness.events import ToolEnd, ToolEvent, ToolStart
from tao_harness.log_summary import SummarizedWarning
from tao_harness.outcomes import is_censored
from tao_harness.policies.base import Policy
from tao_harness.proxy.messages import RequestReport
from tao_harness.proxy.routing import pin_headers
from tao_harness.proxy.tool_spans import TEXT_CALL_PREFIX
from tao_harness.proxy.usage import Usage
from tao_harness.coordinator.recording import tool_call_record
from tao_harness.snapshot_dump import snapshot_dump
from tao_harness.store.records import LLMAttemptRecord, LLMRequestRecord, PlanRecord, SessionRecord
from tao_harness.store.writer import StoreWriter
from tao_harness.types import Plan, Snapshot

log = logging.getLogger(__name__)

# Tool events older than this for a session the coordinator does not know are history only (e.g.
# delivered late from a shim's spool): recorded in the store, not replayed into the live state.
STALE_EVENT_S = 60.0
# Requests or sessions a sweep ends between two returns to the event loop: ending the 2,000 requests of a
# killed proxy in one go stalled a loaded coordinator for 8 s, past every client's timeout.
SWEEP_SLICE = 64
_UNPOLLED = "nobody polls its admission any more"

_T = TypeVar("_T")


async def _in_slices(items: Iterable[_T]) -> AsyncIterator[_T]:
    """`items`, returning to the event loop after every `SWEEP_SLICE` of them."""
    for index, item in enumerate(items):
        if index and index % SWEEP_SLICE == 0:
            await asyncio.sleep(0)
        yield item


@dataclass(frozen=True, slots=True)
class AdmitAnswer:
    # The replica chosen, or None while the session still waits in the pool.
    replica: ReplicaSpec | None
    # Pinning headers for the upstream request (empty while waiting).
    headers: dict[str, str]
    # Seconds this request has waited for admission so far.
    queue_wait_s: float


@dataclass
class _Pending:
    request_id: str
    since: float
    future: asyncio.Future[str]
    # Long-polls waiting on it now, and since when (monotonic) none has: a waiting request nobody asks
    # about any more (its client and proxy went away) is withdrawn after the proxy grace.
    polls: int = 0
    unpolled_since: float = field(default_factory=time.monotonic)


@dataclass
class _SessionSize:
    """What the coordinator knows of a session's size, to estimate the next request's prompt."""

    tokens: int = 0  # engine-reported prompt + completion of the last finished request
    estimate: int = 0  # the proxy's size estimate of that request (tokens)
    last_seen: float = 0.0  # last request, report or tool event (for the idle timeout)
    # The request that moves the session through its lifecycle; others sent meanwhile ride along.
    main_request: str | None = None
    # The proxy forwarding the main request (None: a client that gave no proxy id), and when it came.
    owner: str | None = None
    main_started: float = 0.0
    # Seconds the main request waited in the pool when a plan admitted it: told to the poll that comes
    # after the admission, when none was waiting at that moment (a long-poll had just timed out).
    main_waited: float = 0.0
    # How the proxy identified the session (proxy.identity's rule), from its first admission.
    identified_by: str | None = None
    # Calls a shim reported: the proxy's reading of the same call (same id) leaves the live state alone.
    shim_calls: set[str] = field(default_factory=set)
    # A shim reports this session's calls (it announced the session, or sent a tool event).
    shimmed: bool = False


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
    bound: tuple[int, int, int, int] | None = None  # the plan's certified bound on (K, R, T, N)
    gap: str = "-"  # its proven gap (Plan.gap_text)


@dataclass
class CoordinatorCounters:
    plans: int = 0
    fallbacks: int = 0
    proven_optimal: int = 0  # plans whose certified bound equals their objective
    k_unproven: int = 0  # plans whose K is not proven optimal (bound's K above theirs)
    worst_k_gap: float = 0.0  # the largest proven relative gap in K so far
    # Requests a proxy sent on an admission lease (no admission round trip).
    leased_requests: int = 0
    # Of those, requests sent on a lease revoked just before: they ran unscheduled.
    lease_races: int = 0
    solve_ms: deque[float] = field(default_factory=lambda: deque(maxlen=4096))
    # Pool waits of answered requests (scheduler clock seconds; 0 for those sent at once), recent ones,
    # the longest, and how many passed the bound.
    pool_waits: deque[float] = field(default_factory=lambda: deque(maxlen=4096))
    waits_over_bound: int = 0
    max_pool_wait_s: float = 0.0


class Coordinator:
    def __init__(self, config: TaoConfig, policy: Policy, registry: ReplicaRegistry, state: ClusterState,
                 writer: StoreWriter | None, clock: Callable[[], float] = time.time,
                 tick_s: float = 0.5, idle_timeout_s: float = 900.0, time_scale: float = 1.0) -> None:
        self.config = config
        self.policy = policy
        self._dump = snapshot_dump(config.planner.dump_snapshots)
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
        self._swept_at = float("-inf")
        # One line a minute at most: under overload every admission may be past the bound (the soak logged
        # thousands); tao_pool_waits_over_bound counts them all.
        self._over_bound = SummarizedWarning(
            log, f"%d request(s) waited in the pool past the {config.planner.max_wait_s} s bound (longest %.1f s)")
        # Every request of such a session is one: one line per session's request flooded the demo's output
        self._oversized_sent = SummarizedWarning(
            log, "%d request(s) needed more tokens than any replica holds (the largest %d): sent unscheduled")
        self.leases = LeaseBook(self._describe_lease)
        state.watch_phases()  # lease publication follows the sessions that changed, not all of them
        self.owners = OwnerBook(config.sessions.proxy_grace_s, config.sessions.unowned_request_ttl_s)

    @property
    def planner_ready(self) -> bool:
        """False while the policy's compiled kernels load, when plans are best-fit-decreasing
        (coordinator/policy_loading.py)."""
        return not isinstance(self.policy, LoadingPolicy) or self.policy.ready.is_set()

    # ------------------------------------------------------------------ sessions and requests

    def _ensure_session(self, session: str, now: float, harness: str | None = None,
                        labels: dict[str, str] | None = None) -> None:
        if session in self._sizes:
            if harness or labels:
                self._submit(SessionRecord(id=session, harness=harness, labels=labels or None))
            return
        self.state.on_session_start(session, now)
        self._sizes[session] = _SessionSize(last_seen=self.clock())
        self._submit(SessionRecord(id=session, harness=harness, started_at=now, labels=labels or None,
                                   time_scale=self.time_scale))

    def start_session(self, session: str, harness: str | None, labels: dict[str, str], at: float) -> None:
        """A shim (`tao-run`'s relay) announced the session: its shim reports the session's calls."""
        self._ensure_session(session, at, harness, labels)
        self._sizes[session].shimmed = True

    def identified_by(self, session: str) -> str | None:
        """How the proxy identified a live session (proxy.identity's rule), if it said."""
        size = self._sizes.get(session)
        return size.identified_by if size is not None else None

    def end_session(self, session: str, ended_at: float | None = None) -> bool:
        """End `session` now; its history row records `ended_at`, when it ended (default: now), which a
        late delivery (a shim's retry or spool) gives."""
        if session not in self._sizes:
            return False
        now = self.clock()
        pending = self._pending.pop(session, None)
        if pending is not None and not pending.future.done():
            pending.future.cancel()
        self.state.on_session_end(session, now)
        self.owners.disown(self._sizes.pop(session).owner, session)
        self._submit(SessionRecord(id=session, ended_at=now if ended_at is None else ended_at))
        self.wake()
        return True

    def _estimate_tokens(self, session: str, estimate: int) -> int:
        """Known size of the last turn plus what the request grew by; the proxy's estimate alone at first."""
        size = self._sizes[session]
        if size.tokens == 0:
            return max(1, estimate)
        return size.tokens + max(0, estimate - size.estimate)

    async def admit(self, session: str, request_id: str, estimate: int, exclude: tuple[str, ...],
                    wait_s: float, leased: str | None = None, proxy: str | None = None,
                    prefix_group: str | None = None, shared_tokens: int = 0,
                    identified_by: str | None = None) -> AdmitAnswer:
        """Long-poll for an admission; the proxy calls again with the same request id while waiting.

        `leased` names the replica a proxy already sent the request to on an admission lease: the
        coordinator records the request and never makes it wait. `proxy` is the instance id of the proxy
        forwarding it (coordinator.owners): its requests end if it goes away without reporting them.
        `prefix_group` / `shared_tokens`: the prompt prefix the proxy found in the request (its system prompt
        and tools) and its size; the session reserves that prefix once per replica with the rest of its group.
        `identified_by`: the proxy's identity rule that named the session (shown in /v1/state).
        """
        now = self.clock()
        if proxy is not None:
            self.owners.heard(proxy, time.monotonic())
        self._ensure_session(session, now)
        if identified_by is not None and self._sizes[session].identified_by is None:
            self._sizes[session].identified_by = identified_by
            log.info("session %s identified by %s", session, identified_by)
        if prefix_group is not None:
            self.state.set_shared_prefix(session, prefix_group, shared_tokens)
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
            self._set_main(session, request_id, proxy)
            if leased is not None:
                return self._leased(session, leased, node, now)
            if node is not None and node not in exclude:
                return self._answer(session, node, 0.0)
            oversized = self._oversized(tokens, exclude)
            if oversized is not None:
                # No plan can ever admit it: send it on (the engine rejects or truncates it, as vLLM
                # would without us) rather than let it wait forever.
                self._oversized_sent.occurred(tokens)
                self.state.on_request_withdrawn(session, now)
                return self._answer(session, oversized, 0.0)
            pending = _Pending(request_id, now, asyncio.get_running_loop().create_future())
            self._pending[session] = pending
            self.wake()
        return await self._await_admission(session, pending, wait_s)

    async def _await_admission(self, session: str, pending: _Pending, wait_s: float) -> AdmitAnswer:
        pending.polls += 1
        try:
            node = await asyncio.wait_for(asyncio.shield(pending.future), wait_s)
        except asyncio.TimeoutError:
            return AdmitAnswer(None, {}, self.clock() - pending.since)
        except asyncio.CancelledError:
            if pending.future.cancelled():  # the session ended or the waiting request was withdrawn
                return AdmitAnswer(None, {}, self.clock() - pending.since)
            raise
        finally:
            pending.polls -= 1
            pending.unpolled_since = time.monotonic()
        return self._answer(session, node, self.clock() - pending.since)

    def _set_main(self, session: str, request_id: str, proxy: str | None) -> None:
        size = self._sizes[session]
        if size.main_request is not None:
            self.owners.disown(size.owner, session)
        size.main_request, size.owner, size.main_started, size.main_waited = request_id, proxy, time.time(), 0.0
        self.owners.own(proxy, session, request_id, time.monotonic())

    def _record_wait(self, waited: float) -> None:
        counters, bound = self.counters, self.config.planner.max_wait_s
        counters.pool_waits.append(waited)
        counters.max_pool_wait_s = max(counters.max_pool_wait_s, waited)
        if bound is not None and waited > bound:
            counters.waits_over_bound += 1
            self._over_bound.occurred(waited)

    def oldest_wait(self) -> float:
        """Seconds the longest-waiting request in the pool has waited so far (0 with none)."""
        now = self.clock()
        return max((now - p.since for p in self._pending.values()), default=0.0)

    def _side_request(self, session: str, request_id: str, leased: str | None,
                      exclude: tuple[str, ...]) -> AdmitAnswer | None:
        """A request sent while another of the session is in flight (Claude Code's side requests share
        the session id): it runs beside it on the session's replica and leaves the lifecycle alone.
        The main request itself polling again was dispatched between two of its long-polls: it gets its
        replica. Not when it comes back after a replica failed (`exclude`): that one is placed anew."""
        node = self.state.node_of(session)
        if self.state.phase(session) is not records.Phase.REASONING or node is None or node in exclude:
            return None
        size = self._sizes[session]
        if size.main_request == request_id:
            return None if exclude else self._answer(session, node, size.main_waited)
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
        self._record_wait(waited)
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

    def request_done(self, done: RequestReport) -> None:
        now = self.clock()
        if done.attempt:
            self._attempt_done(done, now)
        if done.answer is not None:
            answer = done.answer
            started_at = self._on_own_clock_at(done.started_at, now)
            latency_s = self._on_own_clock_s(answer.latency_s)
            self._submit(LLMRequestRecord(
                id=done.request_id, session_id=done.session, replica=answer.replica,
                prompt_tokens=answer.prompt_tokens, cached_tokens=answer.cached_tokens,
                completion_tokens=answer.completion_tokens, queue_wait_s=answer.queue_wait_s,
                ttft_s=self._on_own_clock_s(answer.ttft_s), latency_s=latency_s, started_at=started_at,
                ended_at=started_at + latency_s if latency_s is not None else now,
                status=answer.status, attempts=answer.attempts,
            ))
        self.wake()

    def _attempt_done(self, done: RequestReport, now: float) -> None:
        pending = self._pending.get(done.session)
        size = self._sizes.get(done.session)
        if size is not None and size.main_request == done.request_id:
            self.owners.disown(size.owner, done.session)
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
        if done.status == "ok" and done.replica in self.registry.ids and done.usage.prompt_tokens is not None:
            self.registry.record_cache_report(done.replica, done.usage.cached_tokens is not None)
        started_at, latency_s = self._on_own_clock_at(done.started_at, now), self._on_own_clock_s(done.latency_s)
        self._submit(LLMAttemptRecord(
            id=f"{done.request_id}#{done.attempt}", request_id=done.request_id, attempt=done.attempt,
            session_id=done.session, replica=done.replica, prompt_tokens=done.usage.prompt_tokens,
            cached_tokens=done.usage.cached_tokens, completion_tokens=done.usage.completion_tokens,
            ttft_s=self._on_own_clock_s(done.ttft_s), latency_s=latency_s, started_at=started_at,
            # When the attempt ended, not when its report arrived (reports travel in batches).
            ended_at=started_at + latency_s if latency_s is not None else now, status=done.status,
        ))

    # The proxy measures a request on the wall clock; an emulated fleet's coordinator clock runs
    # `time_scale` times faster. Its records are put on the coordinator's clock, as tool events already
    # are, so that every record of a run is on one clock (sessions.time_scale says which).

    def _on_own_clock_s(self, wall_s: float | None) -> float | None:
        return wall_s * self.time_scale if wall_s is not None else None

    def _on_own_clock_at(self, wall_at: float, now: float) -> float:
        if self.time_scale == 1.0:
            return wall_at  # the same clock (or a test's clock that the proxy shares)
        return now - (time.time() - wall_at) * self.time_scale

    # ------------------------------------------------------------------ tool events

    def tool_event(self, event: ToolEvent) -> None:
        now = self.clock()
        size = self._sizes.get(event.session)
        if event.source == "proxy" and size is not None and size.shimmed \
                and event.call_id.startswith(TEXT_CALL_PREFIX):
            return  # the shim reports this text action under an id of its own: it would count twice
        live = event.session in self._sizes or now - event.at < STALE_EVENT_S
        if live:
            self._ensure_session(event.session, min(event.at, now),
                                 event.harness if isinstance(event, ToolStart) else None)
            self._sizes[event.session].last_seen = now
        if isinstance(event, ToolStart):
            # A background job or watch holds no turn: it is history only, never an open call. A call the
            # proxy read from the traffic that a shim reported too keeps the shim's start (exact).
            if live and event.source == "shim":
                self._sizes[event.session].shim_calls.add(event.call_id)
                self._sizes[event.session].shimmed = True
            elif live and event.call_id in self._sizes[event.session].shim_calls:
                live = False
            if live and event.kind == "call":
                self.state.on_tool_start(event.session, records.ToolStart(
                    call_id=event.call_id, name=event.tool_name, command=event.command, args=event.args,
                    env_timeout_s=event.env_timeout_s, harness=event.harness), event.at)
            self._submit(tool_call_record(event))
        else:
            self._on_tool_end(event, live)
        self.wake()

    def _on_tool_end(self, event: ToolEnd, live: bool) -> None:
        if live:
            self.state.on_tool_end(event.session, event.call_id, event.at, event.duration_s,
                                   censored=is_censored(event.status))
        self._submit(tool_call_record(event))

    # ------------------------------------------------------------------ planning

    def wake(self) -> None:
        self.publish_leases()
        self._wake.set()

    def publish_leases(self) -> None:
        """Every state change passes here (through `wake` or a plan): proxies learn holder changes at once.
        O(sessions changed since the last call), whatever the number of live sessions."""
        state = self.state
        self.leases.update({session: state.node_of(session) if state.has_session(session) else None
                            for session in state.take_phase_changes()})

    def _describe_lease(self, session: str, node: str) -> Lease:
        spec = self.registry.spec(node)
        return Lease(session, node, spec.base_url, tuple(pin_headers(spec, session).items()))

    async def planning_loop(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for swallows a cancellation that comes with a wake
            try:
                async with asyncio.timeout(self._next_wait()):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            started = time.monotonic()
            try:
                await self.plan_once()
            except Exception:  # a planning bug must not stop admissions forever
                log.exception("planning failed; retrying at the next event")
            # A plan costs O(sessions) and every event wakes the loop: with thousands of sessions, planning
            # once per event would leave no time for the events. Rest as long as the plan took (planning
            # gets at most half the time); what arrives meanwhile is planned together.
            await asyncio.sleep(time.monotonic() - started)

    def _next_wait(self) -> float:
        """Wall seconds until the next tick or admission expiry."""
        expiry = self.state.next_expiry()
        if expiry is None:
            return self.tick_s
        return max(0.001, min(self.tick_s, (expiry - self.clock()) / self.time_scale))

    async def end_lost_requests(self) -> list[str]:
        """End the requests nobody will report (coordinator.owners): their proxy is gone, an unowned one ran
        out, or a waiting admission nobody polls any more. Returns their sessions. Yields to the event loop
        as it goes (a dead proxy may leave thousands): each request is checked again when its turn comes."""
        now = time.monotonic()
        lost = [(item.session, item.request_id, f"proxy {item.proxy} is gone" if item.proxy else "unowned, expired")
                for item in self.owners.gone(now)]
        lost += [(session, pending.request_id, _UNPOLLED)
                 for session, pending in self._pending.items()
                 if pending.polls == 0 and now - pending.unpolled_since > self.owners.grace_s]
        ended, reasons = [], Counter[str]()
        async for session, request_id, why in _in_slices(lost):
            size = self._sizes.get(session)
            if size is None or size.main_request != request_id:
                continue  # reported or replaced meanwhile
            pending = self._pending.get(session)
            waiting = pending is not None and pending.request_id == request_id
            if why == _UNPOLLED and pending is not None and pending.polls:
                continue  # polled again meanwhile
            if not waiting and self.state.phase(session) is not records.Phase.REASONING:
                continue
            log.debug("request %s of session %s ended unreported: %s", request_id, session, why)
            self.request_done(RequestReport(session, request_id, self.state.node_of(session), "lost", Usage(),
                                            None, None, 0.0, size.main_started))
            ended.append(session)
            reasons[why] += 1
        for why, count in reasons.items():  # one line per cause: a dead proxy may leave thousands
            log.warning("%d request(s) ended unreported (%s), e.g. of session %s", count, why,
                        next(session for session, _, reason in lost if reason == why))
        return ended

    async def end_idle_sessions(self, now: float) -> list[str]:
        """End sessions silent for `idle_timeout_s` with no request waiting: harnesses that vanished."""
        idle = [sid for sid, size in self._sizes.items()
                if now - size.last_seen > self.idle_timeout_s and sid not in self._pending]
        ended = []
        async for session in _in_slices(idle):
            size = self._sizes.get(session)
            if size is None or now - size.last_seen <= self.idle_timeout_s or session in self._pending:
                continue  # ended, or heard from, meanwhile
            log.info("session %s idle for %.0f s: ended", session, now - size.last_seen)
            self.end_session(session)
            ended.append(session)
        return ended

    async def plan_once(self) -> Plan | None:
        """Run on every wake-up: what it does besides planning must not grow with the live sessions
        (an event costs O(1)); the sweeps over all sessions run once per tick."""
        now = self.clock()
        if time.monotonic() - self._swept_at >= self.tick_s:
            self._swept_at = time.monotonic()
            await self.end_idle_sessions(now)
            await self.end_lost_requests()
        if self.state.expire_admissions(now):
            log.info("gave back admissions whose requests did not come in time")
            self.publish_leases()
        if not self.state.needs_plan():
            return None
        self.state.refresh_predictions(now)  # the snapshot's readiness reads them (readiness.state)
        snapshot = self.state.snapshot(now)
        signatures = self.state.signatures()
        started = time.perf_counter()
        plan = await asyncio.to_thread(self._plan, snapshot)
        solve_ms = (time.perf_counter() - started) * 1e3
        applied_at = self.clock()
        result = self.state.apply(plan, signatures, applied_at)
        self.publish_leases()
        for admission in result.admitted:
            pending = self._pending.get(admission.session)
            if admission.dispatch and pending is not None and not pending.future.done():
                pending.future.set_result(admission.node)
                del self._pending[admission.session]
                self._sizes[admission.session].main_waited = applied_at - pending.since
        self._record_plan(plan, snapshot.now, solve_ms, len(snapshot.sessions), result)
        return plan

    def _plan(self, snapshot: Snapshot) -> Plan:
        """In a worker thread: record the snapshot (with `planner.dump_snapshots`), then plan it."""
        if self._dump is not None:
            self._dump.write(snapshot)
        return self.policy.plan(snapshot)

    def _record_plan(self, plan: Plan, at: float, solve_ms: float, waiting: int,
                     result: records.ApplyResult) -> None:
        self.counters.plans += 1
        self.counters.fallbacks += int(plan.fallback)
        gap = plan.gap
        if gap is not None:
            term, share = gap
            self.counters.proven_optimal += int(not term)
            if term == "K":
                self.counters.k_unproven += 1
                self.counters.worst_k_gap = max(self.counters.worst_k_gap, share)
        self.counters.solve_ms.append(solve_ms)
        self.recent_plans.append(PlanSummary(
            at=at, solver=plan.solver, solve_ms=solve_ms, waiting=waiting,
            assigned=tuple((a.session, a.node) for a in result.admitted), interrupts=result.interrupted,
            discarded=result.discarded, fallback=plan.fallback, bound=plan.bound, gap=plan.gap_text,
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
