"""`simulate(trace, config)`: agent sessions, the shared state machine, a policy and R engines in virtual time.

The simulator owns only the world: workers (closed loop), tool durations from the trace, synthetic token
ids and the clock. Admission, pool, readiness and reservations are `ClusterState` (the live
coordinator's state machine); placement is the registered policy; the replicas are `EngineCore`s. Each
handler returns nothing but pushes the events it causes onto the heap (`events.py` fixes tie order).

Planning runs when a session becomes ready (its request arrives, or its tool's predicted return is within
H), when capacity frees (a session ends, an admission is given back), when a session starts acting while
others wait (it becomes interruptible), and on a periodic tick, which also lets a policy relieve a node
whose holders' contexts outgrew their admission (`ClusterState.over_capacity`). Solve time is measured with `time.perf_counter` around
`policy.plan` and reported, but a plan is applied at the instant it was requested, so results do not
depend on the machine's speed and a run is deterministic for its seed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tao_harness.coordinator.records import NodeLoad, ToolStart
from tao_harness.coordinator.state import ClusterState
from tao_harness.engine.core import EngineConfig, EngineCore, EngineRequest, RequestOutput
from tao_harness.engine.hashing import extend_block_hashes
from tao_harness.policies.registry import get_policy
from tao_harness.snapshot_dump import snapshot_dump
from tao_harness.sim.config import SimConfig
from tao_harness.sim.events import (
    ANY, NONE, EventQueue, PlanNow, Priority, RequestIssued, SessionStart, StepDone, StepLaunch, Tick, ToolEnded,
)
from tao_harness.sim.metrics import MetricsRecorder, SimMetrics
from tao_harness.sim.predictors import SimPredictor
from tao_harness.sim.tokens import SessionTokens, TokenFactory
from tao_harness.sim.trace import TraceSession

STALL_LIMIT_S = 3600.0  # virtual seconds without any progress before a run is declared stuck


class SimError(RuntimeError):
    """A run that cannot proceed (a prompt larger than a replica's KV cache, a policy that never admits)."""


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run: the metrics, the running-requests timeline and every TTFT sample."""

    config: SimConfig
    metrics: SimMetrics
    timeline: tuple[tuple[float, int], ...]  # (virtual time, requests running on engines), at changes
    ttft_samples: tuple[float, ...]  # seconds, in completion order
    wait_samples: tuple[float, ...]  # pool (pause) waits, seconds, in dispatch order
    wall_s: float  # real time the run took
    events: int  # events processed


@dataclass(slots=True)
class _Live:
    trace: TraceSession
    tokens: SessionTokens
    turn: int = 0
    reply: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)  # chain of `tokens.ids`, extended per request
    replica: int | None = None  # replica running its current request
    tool_end: tuple[float, int] | None = None  # (time, seq) of its pending ToolEnded event


class Simulator:
    """One run; use `simulate()`."""

    def __init__(self, trace: Sequence[TraceSession], config: SimConfig,
                 on_session_end: Callable[[str], None] | None = None) -> None:
        self._on_session_end = on_session_end  # a progress bar's
        self._trace = sorted(trace, key=lambda s: s.arrival_s)  # stable: trace order breaks ties
        engine_config = EngineConfig(profile=config.profile, num_gpu_blocks=config.num_gpu_blocks,
                                     kv_offloading_size_gib=config.kv_offloading_size_gib)
        self._engines = [EngineCore(engine_config) for _ in range(config.replicas)]
        host_rate = self._engines[0].host_tokens_per_s
        if host_rate is not None and config.planner.host_tokens_per_s is None:  # the scheduler knows the tier
            config = config.model_copy(
                update={"planner": config.planner.model_copy(update={"host_tokens_per_s": host_rate})})
        self._config = config
        self._policy = get_policy(config.policy, config.planner)
        self._dump = snapshot_dump(config.planner.dump_snapshots)
        self._node_ids = [f"r{i}" for i in range(config.replicas)]
        self._node_index = {node_id: i for i, node_id in enumerate(self._node_ids)}
        capacity = self._engines[0].metrics().num_gpu_blocks * self._engines[0].metrics().block_size
        _check_fits(self._trace, capacity, config.planner.reserve_tokens)
        self._predictor = SimPredictor(config.readiness, oracle=config.oracle_readiness)
        self._state = ClusterState(
            [(node_id, capacity) for node_id in self._node_ids],
            self._predictor,
            planner=config.planner,
            readiness=config.readiness,
            sessions=config.sessions,
            admission_control=self._policy.admission_control,
        )
        self._queue = EventQueue(config.replicas)
        self._recorder = MetricsRecorder(config.planner.max_wait_s)
        self._tokens = TokenFactory(config.seed)
        self._live: dict[str, _Live] = {}
        self._by_request: dict[str, str] = {}
        self._active_tokens = [0] * config.replicas
        self._busy = [False] * config.replicas
        self._launch_pending = [False] * config.replicas
        self._plan_times: set[float] = set()
        self._next_start = 0
        self._running = 0
        self._last_progress = 0.0
        self._tick_reach = NONE if config.targeted_wakeups else ANY

    # ------------------------------------------------------------------ loop

    def run(self) -> SimResult:
        wall_start = time.perf_counter()
        for _ in range(min(self._config.workers, len(self._trace))):
            self._start_next(0.0)
        self._queue.push(0.0, Tick(), reach=self._tick_reach)
        handlers = {
            SessionStart: self._on_session_start,
            RequestIssued: self._on_request_issued,
            ToolEnded: self._on_tool_ended,
            StepLaunch: self._on_step_launch,
            StepDone: self._on_step_done,
            PlanNow: self._on_plan,
            Tick: self._on_tick,
        }
        events = 0
        while self._queue:
            now, event = self._queue.pop()
            events += 1
            handlers[type(event)](now, event)  # type: ignore[operator]
            if now - self._last_progress > STALL_LIMIT_S:
                raise SimError(
                    f"no progress for {STALL_LIMIT_S:.0f} s of simulated time at t={now:.1f} s "
                    f"({self._state.pool_size()} sessions waiting): policy {self._config.policy!r} admits nothing"
                )
        counters = self._state.counters
        metrics = self._recorder.finish(
            admissions=counters.admissions,
            interrupts=counters.interrupts,
            expirations=counters.expirations,
            plans_applied=counters.plans,
            plans_discarded=counters.plans_discarded,
            preemptions=sum(engine.metrics().num_preemptions for engine in self._engines),
        )
        return SimResult(
            config=self._config,
            metrics=metrics,
            timeline=tuple(self._recorder.timeline),
            ttft_samples=self._recorder.ttft_samples,
            wait_samples=self._recorder.wait_samples,
            wall_s=time.perf_counter() - wall_start,
            events=events,
        )

    def _unfinished(self) -> bool:
        return bool(self._live) or self._next_start < len(self._trace)

    def _start_next(self, now: float) -> None:
        if self._next_start < len(self._trace):
            session = self._trace[self._next_start]
            self._queue.push(max(now, session.arrival_s), SessionStart(self._next_start))
            self._next_start += 1

    def _want_plan(self, at: float, reason: str = "event") -> None:
        """Coalesced: one plan per instant, however many events asked for it."""
        if at not in self._plan_times:
            self._plan_times.add(at)
            self._queue.push(at, PlanNow(reason), Priority.PLAN)

    def _launch(self, replica: int, now: float) -> None:
        if not self._busy[replica] and not self._launch_pending[replica]:
            self._launch_pending[replica] = True
            self._queue.push(now, StepLaunch(replica), Priority.ENGINE)

    # ------------------------------------------------------------------ sessions and tools

    def _on_session_start(self, now: float, event: SessionStart) -> None:
        session = self._trace[event.index]
        tokens = self._tokens.session(session.session)
        shared = session.shared_prefix_tokens if session.prefix_group is not None else 0
        if shared:
            tokens.ids.extend(self._tokens.prefix(session.prefix_group, shared))  # type: ignore[arg-type]
        tokens.ids.extend(tokens.fresh(session.turns[0].input_tokens - shared))
        self._live[session.session] = _Live(session, tokens)
        self._state.on_session_start(session.session, now, prefix_group=session.prefix_group, shared_tokens=shared)
        self._recorder.session_started(session.session, now)
        self._last_progress = now
        self._on_request_issued(now, RequestIssued(session.session, 0))

    def _on_request_issued(self, now: float, event: RequestIssued) -> None:
        live = self._live[event.session]
        live.turn = event.turn
        self._recorder.request_issued(event.session, now, after_tool=event.turn > 0)
        node = self._state.on_request(event.session, len(live.tokens.ids), now)
        if node is not None:
            self._dispatch(event.session, node, now)
        else:
            self._want_plan(now)

    def _on_tool_ended(self, now: float, event: ToolEnded) -> None:
        live = self._live[event.session]
        live.tool_end = None
        if self._config.tool_events:
            call_id = _call_id(event.session, event.turn)
            self._state.on_tool_end(event.session, call_id, now)
            self._predictor.forget(call_id)
        self._last_progress = now
        live.tokens.ids.extend(live.tokens.fresh(live.trace.turns[event.turn + 1].input_tokens))
        self._on_request_issued(now, RequestIssued(event.session, event.turn + 1))

    def _start_tool(self, session: str, live: _Live, now: float) -> None:
        tool = live.trace.turns[live.turn].tool
        assert tool is not None
        if self._config.tool_events:
            call_id = _call_id(session, live.turn)
            self._predictor.reveal(call_id, tool.duration_s)
            start = ToolStart(call_id, tool.name, tool.command, tool.args, env_timeout_s=tool.timeout_s)
            self._state.on_tool_start(session, start, now)
        node = self._state.node_of(session) if self._config.targeted_wakeups else None
        reach = self._node_index[node] if node is not None else ANY
        ends_at = now + tool.duration_s
        live.tool_end = (ends_at, self._queue.push(ends_at, ToolEnded(session, live.turn), reach=reach))
        if self._state.admission_control:  # plan when its predicted return comes within H
            returns_at = self._state.predicted_return(session)
            if returns_at is not None and math.isfinite(returns_at):
                self._want_plan(max(now, returns_at - self._config.readiness.horizon_s), "tool-near-return")

    def _end_session(self, session: str, now: float) -> None:
        self._state.on_session_end(session, now)
        self._recorder.session_ended(session, now)
        del self._live[session]
        if self._on_session_end is not None:
            self._on_session_end(session)
        self._start_next(now)
        self._want_plan(now)

    # ------------------------------------------------------------------ engines

    def _dispatch(self, session: str, node_id: str, now: float) -> None:
        live = self._live[session]
        replica = self._node_index[node_id]
        turn = live.trace.turns[live.turn]
        live.reply = live.tokens.fresh(max(1, turn.output_tokens))
        live.replica = replica
        engine = self._engines[replica]
        request_id = _call_id(session, live.turn)
        request = EngineRequest(
            request_id=request_id,
            prompt_token_ids=live.tokens.ids,
            max_tokens=min(len(live.reply), self._config.max_turn_output_tokens),
            output_token_ids=live.reply,
            session_id=session,
            pin_ttl_s=self._pin_ttl(live),
            # Hashing only the new blocks here spares the engine comparing the whole context each turn.
            block_hashes=extend_block_hashes(live.tokens.ids, engine.block_size, live.block_hashes),
        )
        try:
            engine.add_request(request, now)
        except ValueError as exc:
            raise SimError(f"session {session!r} turn {live.turn + 1}: {exc}") from None
        self._by_request[request_id] = session
        self._active_tokens[replica] += len(live.tokens.ids)
        self._recorder.request_dispatched(session, now, pinned=request.pin_ttl_s is not None)
        self._running += 1
        self._recorder.running(now, self._running)
        self._report_load(replica)
        self._launch(replica, now)

    def _pin_ttl(self, live: _Live) -> float | None:
        tool = live.trace.turns[live.turn].tool
        if not self._config.pinning_enabled or tool is None:
            return None
        mean = self._predictor.family_mean(tool.name, tool.command)
        return self._config.pin_ttl_s if mean is not None and mean <= self._config.pin_max_mean_s else None

    def _on_step_launch(self, now: float, event: StepLaunch) -> None:
        replica = event.replica
        self._launch_pending[replica] = False
        engine = self._engines[replica]
        if self._busy[replica] or not engine.has_unfinished_requests():
            return
        # Every event that can reach this engine before `until` is already in the heap (a same-instant
        # launch elsewhere is itself in the heap and makes this a single step), so a macro-step never
        # runs past a request that should have joined it, except by the step already under way.
        until = self._queue.wake_time(replica, now)
        if self._config.max_macro_step_s is not None:
            until = min(until if until is not None else math.inf, now + self._config.max_macro_step_s)
        output = engine.step(now, until=until)
        if output.num_steps == 0:  # nothing runs until a Continuum pin runs out or a host-tier copy is done
            retry_at = engine.next_wakeup()
            if retry_at is not None:
                self._launch_pending[replica] = True
                self._queue.push(max(retry_at, now + 1e-6), StepLaunch(replica), Priority.ENGINE)
            return
        self._busy[replica] = True
        finishes = any(o.finished for o in output.outputs)
        reach = ANY if finishes or not self._config.targeted_wakeups else replica
        self._queue.push(now + output.duration_s, StepDone(replica, output), reach=reach)

    def _on_step_done(self, now: float, event: StepDone) -> None:
        replica = event.replica
        self._busy[replica] = False
        self._last_progress = now
        for output in event.output.outputs:
            session = self._by_request[output.request_id]
            if output.first_token:
                self._recorder.first_token(session, now)
            if output.finished:
                self._finish_request(session, replica, output, now)
        self._report_load(replica)
        if self._engines[replica].has_unfinished_requests():
            self._launch(replica, now)

    def _finish_request(self, session: str, replica: int, output: RequestOutput, now: float) -> None:
        live = self._live[session]
        del self._by_request[output.request_id]
        self._active_tokens[replica] -= output.prompt_tokens
        self._running -= 1
        self._recorder.running(now, self._running)
        self._recorder.request_finished(session, output.prompt_tokens, output.cached_tokens,
                                        output.completion_tokens)
        live.tokens.ids.extend(live.reply[: output.completion_tokens])
        self._state.on_request_done(session, output, now)
        if live.trace.turns[live.turn].tool is None:
            self._end_session(session, now)
            return
        self._start_tool(session, live, now)
        if self._state.pool_size():
            self._want_plan(now)  # an acting session can now be interrupted for a waiting one

    def _report_load(self, replica: int) -> None:
        metrics = self._engines[replica].metrics()
        load = NodeLoad(metrics.num_running, metrics.num_waiting, metrics.kv_cache_usage,
                        self._active_tokens[replica])
        self._state.on_node_load(self._node_ids[replica], load)

    # ------------------------------------------------------------------ planning

    def _on_plan(self, now: float, event: PlanNow) -> None:
        self._plan_times.discard(now)
        for session in self._state.expire_admissions(now):  # their reservations are free for this plan
            self._widen(session)
        if not self._needs_plan():
            return
        snapshot = self._state.snapshot(now)
        signatures = self._state.signatures()
        if self._dump is not None:
            self._dump.write(snapshot)
        started = time.perf_counter()
        plan = self._policy.plan(snapshot)
        self._recorder.plan_made((time.perf_counter() - started) * 1000.0, plan.fallback)
        result = self._state.apply(plan, signatures, now)
        for session in result.interrupted:
            self._widen(session)
        for admission in result.admitted:
            if admission.dispatch:
                self._dispatch(admission.session, admission.node, now)
        expiry = self._state.next_expiry()
        if expiry is not None:
            self._want_plan(expiry, "admission-expiry")

    def _needs_plan(self) -> bool:
        """A plan could change something, or the policy's real counterpart plans on its timer anyway."""
        return self._policy.plans_on_timer or self._state.needs_plan()

    def _widen(self, session: str) -> None:
        """The session lost its node: when its tool ends, its request may go anywhere."""
        live = self._live[session]
        if live.tool_end is not None:
            self._queue.widen(*live.tool_end)

    def _on_tick(self, now: float, event: Tick) -> None:
        self._state.refresh_predictions(now)
        if self._needs_plan():
            self._want_plan(now)
        if self._unfinished():
            self._queue.push(now + self._config.tick_s, Tick(), reach=self._tick_reach)


def _check_fits(trace: Sequence[TraceSession], capacity: int, reserve: int) -> None:
    """A session whose context outgrows a replica's KV cache could never finish: say so up front."""
    for session in trace:
        needed = session.total_tokens + reserve
        if needed > capacity:
            raise SimError(f"session {session.session!r} grows to {session.total_tokens} tokens (+{reserve} "
                           f"reserve) but a replica's KV cache holds {capacity} tokens; use more --num-gpu-blocks")


def _call_id(session: str, turn: int) -> str:
    return f"{session}/{turn}"


def simulate(trace: Sequence[TraceSession], config: SimConfig,
             on_session_end: Callable[[str], None] | None = None) -> SimResult:
    """Replay `trace` under `config`, calling `on_session_end` with each session that ends; ValueError for
    an unknown policy or profile, SimError if stuck."""
    if not trace:
        raise ValueError("the trace holds no sessions")
    return Simulator(trace, config, on_session_end).run()
