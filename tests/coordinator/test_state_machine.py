"""The shared session state machine, driven by hand-built events (no simulator, no HTTP)."""

from __future__ import annotations

import pytest

from tao_harness.config import PlannerConfig, ReadinessConfig, SessionsConfig
from tao_harness.coordinator.prediction import HistoryPredictor
from tao_harness.coordinator.records import NodeLoad, Phase, SessionStateError, ToolStart
from tao_harness.coordinator.state import ClusterState
from tao_harness.proxy.usage import Usage
from tao_harness.readiness.estimator import DurationHistory
from tao_harness.types import Assignment, Plan

RESERVE = PlannerConfig().reserve_tokens


def make_state(capacity: int = 100_000, nodes: int = 2, **kwargs: object) -> ClusterState:
    return ClusterState(
        [(f"r{i}", capacity) for i in range(nodes)], HistoryPredictor(DurationHistory()), **kwargs  # type: ignore[arg-type]
    )


def plan_of(*pairs: tuple[str, str], interrupts: tuple[str, ...] = ()) -> Plan:
    assignments = tuple(Assignment(session, node, (0, 1, 0)) for session, node in pairs)
    return Plan(policy="hand", solver="hand", objective=(0, len(pairs), 0, len(pairs)),
                assignments=assignments, interrupts=interrupts)


def admit(state: ClusterState, session: str, node: str, now: float) -> None:
    result = state.apply(plan_of((session, node)), state.signatures(), now)
    assert [a.session for a in result.admitted] == [session]


def acting(state: ClusterState, session: str, node: str, tokens: int, now: float) -> None:
    """Start `session`, admit it on `node`, finish its first reply: it is ACTING there."""
    state.on_session_start(session, now)
    assert state.on_request(session, tokens, now) is None
    admit(state, session, node, now)
    state.on_request_done(session, Usage(prompt_tokens=tokens, cached_tokens=0, completion_tokens=100), now)


def test_full_lifecycle_keeps_reservations_and_cache() -> None:
    state = make_state()
    state.on_session_start("s1", 0.0, prefix_group="g", shared_tokens=1000)
    assert state.phase("s1") is Phase.NEW
    assert state.on_request("s1", 3000, 0.0) is None
    assert state.phase("s1") is Phase.WAITING
    view = state.snapshot(0.0).session("s1")
    assert (view.state, view.has_request, view.ready, view.turn, view.shared_tokens) == ("waiting", True, 1, 1, 1000)

    result = state.apply(plan_of(("s1", "r1")), state.signatures(), 0.1)
    assert result.admitted[0].dispatch and result.admitted[0].node == "r1"
    assert state.phase("s1") is Phase.REASONING
    assert state.used_tokens("r1") == 3000 + RESERVE and state.used_tokens("r0") == 0

    state.on_request_done("s1", Usage(prompt_tokens=3000, cached_tokens=0, completion_tokens=200), 2.0)
    assert state.phase("s1") is Phase.ACTING
    assert state.used_tokens("r1") == 3200 + RESERVE
    view = state.snapshot(2.0).session("s1")
    assert (view.state, view.node, view.tokens) == ("acting", "r1", 3200)
    assert view.cache["r1"].tokens == 3200 and view.cache["r1"].observed_at == 2.0

    state.on_tool_start("s1", ToolStart("c1", "bash", "pytest -q"), 2.0)
    assert state.on_tool_end("s1", "c1", 6.0) is True
    # A holding session's next request goes straight to its node.
    assert state.on_request("s1", 3700, 6.0) == "r1"
    assert state.phase("s1") is Phase.REASONING and state.used_tokens("r1") == 3700 + RESERVE
    state.on_session_end("s1", 8.0)
    assert state.used_tokens("r1") == 0
    with pytest.raises(SessionStateError, match="unknown session 's1'"):
        state.phase("s1")
    assert state.counters.admissions == 1


def test_plan_for_changed_session_is_discarded() -> None:
    state = make_state()
    for sid in ("a", "b"):
        state.on_session_start(sid, 0.0)
        state.on_request(sid, 1000, 0.0)
    signatures = state.signatures()
    admit(state, "a", "r0", 0.5)  # "a" changed after the snapshot the next plan was made from
    result = state.apply(plan_of(("a", "r1"), ("b", "r1")), signatures, 1.0)
    assert result.discarded == ("a",)
    assert [a.session for a in result.admitted] == ["b"]
    assert state.node_of("a") == "r0"
    assert state.counters.discards == 1 and state.counters.plans_discarded == 1 and state.counters.plans == 2


def test_request_arriving_after_snapshot_does_not_invalidate_admission() -> None:
    state = make_state()
    acting(state, "s", "r0", 2000, 0.0)
    state.on_tool_start("s", ToolStart("c", "bash", "sleep 3"), 0.0)
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 0.0)
    signatures = state.signatures()
    assert state.on_request("s", 2500, 3.0) is None  # tool returned; still in the pool
    result = state.apply(plan_of(("s", "r1")), signatures, 3.0)
    assert result.admitted[0].dispatch is True and state.phase("s") is Phase.REASONING


def test_longest_feasible_prefix_stops_at_first_misfit() -> None:
    state = make_state(capacity=10_000)
    for sid, tokens in (("a", 4000), ("b", 4000), ("c", 500), ("d", 6000)):
        state.on_session_start(sid, 0.0)
        state.on_request(sid, tokens, 0.0)
    result = state.apply(plan_of(("a", "r0"), ("b", "r0"), ("c", "r0"), ("d", "r1")), state.signatures(), 0.0)
    # a + b use 9024 of 10000; c needs 1012 and does not fit, so c and everything after it wait.
    assert [a.session for a in result.admitted] == ["a", "b"]
    assert result.deferred == ("c", "d")
    assert state.phase("d") is Phase.WAITING and state.counters.deferrals == 2


def test_interrupt_releases_acting_session_and_defers_a_reasoning_one() -> None:
    state = make_state(capacity=10_000, nodes=1)
    acting(state, "a", "r0", 4000, 0.0)
    state.on_session_start("b", 0.0)
    state.on_request("b", 4000, 0.0)
    admit(state, "b", "r0", 0.0)  # b is REASONING: released only when its request ends
    state.on_session_start("c", 1.0)
    state.on_request("c", 4000, 1.0)
    assert state.free_tokens("r0") < 4000 + RESERVE
    result = state.apply(plan_of(("c", "r0"), interrupts=("a", "b")), state.signatures(), 1.0)
    assert result.interrupted == ("a",) and result.discarded == ()
    assert [x.session for x in result.admitted] == ["c"] and state.phase("b") is Phase.REASONING
    assert state.phase("a") is Phase.INTERRUPTED and state.node_of("a") is None
    assert state.counters.interrupts == 1
    # The interrupted session's next request waits for a plan instead of going to r0.
    assert state.on_request("a", 4300, 2.0) is None and state.phase("a") is Phase.WAITING
    view = state.snapshot(2.0).session("a")
    assert view.cache["r0"].tokens == 4100  # its cache evidence survives the interrupt


def test_an_interrupt_that_finds_its_session_reasoning_releases_it_when_the_request_ends() -> None:
    state = make_state()
    acting(state, "s", "r0", 1000, 0.0)
    signatures = state.signatures()  # the plan was made while "s" was acting ...
    assert state.on_request("s", 1200, 1.0) == "r0"  # ... and its next request came before it applied
    result = state.apply(plan_of(interrupts=("s",)), signatures, 1.1)
    assert result.interrupted == () and result.discarded == () and state.phase("s") is Phase.REASONING
    state.on_request_done("s", Usage(prompt_tokens=1200, cached_tokens=0, completion_tokens=50), 3.0)
    assert state.phase("s") is Phase.INTERRUPTED and state.used_tokens("r0") == 0
    assert state.counters.interrupts == 1
    acting(state, "t", "r0", 1000, 4.0)  # a later reply of another session is not affected
    assert state.phase("t") is Phase.ACTING


def test_admission_ahead_of_request_is_given_back_after_ttl() -> None:
    state = make_state(sessions=SessionsConfig(admission_ttl_s=3.0))
    acting(state, "s", "r0", 2000, 0.0)
    state.on_tool_start("s", ToolStart("c", "bash", "sleep 10"), 0.0)
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 0.0)
    view = state.snapshot(9.5).session("s")
    assert (view.has_request, view.ready) == (False, 1)  # sleep 10 predicted to return within H
    result = state.apply(plan_of(("s", "r1")), state.signatures(), 9.5)
    assert result.admitted[0].dispatch is False and state.phase("s") is Phase.ADMITTED
    assert state.used_tokens("r1") == 2100 + RESERVE
    assert state.next_expiry() == pytest.approx(12.5)
    assert state.expire_admissions(12.4) == ()
    assert state.expire_admissions(12.5) == ("s",)
    assert state.phase("s") is Phase.INTERRUPTED and state.used_tokens("r1") == 0
    assert state.counters.expirations == 1 and state.next_expiry() is None


def test_admitted_session_whose_request_comes_in_time_keeps_its_node() -> None:
    state = make_state(sessions=SessionsConfig(admission_ttl_s=3.0))
    acting(state, "s", "r0", 2000, 0.0)
    state.on_tool_start("s", ToolStart("c", "bash", "sleep 10"), 0.0)
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 0.0)
    admit(state, "s", "r1", 9.5)
    state.on_tool_end("s", "c", 10.0)
    assert state.on_request("s", 2600, 10.2) == "r1"
    assert state.expire_admissions(20.0) == () and state.used_tokens("r1") == 2600 + RESERVE


def test_readiness_horizon_probe_and_staleness() -> None:
    state = make_state()
    acting(state, "s", "r0", 1000, 0.0)
    state.on_tool_start("s", ToolStart("c", "bash", "sleep 10"), 0.0)
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 0.0)

    def ready(now: float) -> int:
        return state.snapshot(now).session("s").ready

    assert ready(5.0) == 0  # predicted return (10 s) is beyond H = 1 s
    assert ready(9.2) == 1  # within H
    assert ready(10.5) == 1  # overdue: the one-time probe ...
    assert ready(10.6) == 0  # ... is spent by the snapshot that offered it
    state.on_tool_end("s", "c", 11.0)
    assert ready(11.0) == 1  # completion observed


def test_long_tool_prediction_goes_stale_unless_refreshed() -> None:
    stale, fresh = make_state(), make_state()
    for state in (stale, fresh):
        acting(state, "s", "r0", 1000, 0.0)
        state.on_tool_start("s", ToolStart("c", "bash", "sleep 60"), 0.0)
        state.apply(plan_of(interrupts=("s",)), state.signatures(), 0.0)
    fresh.refresh_predictions(45.0)
    assert stale.snapshot(59.5).session("s").ready == 0  # predicted 59.5 s ago: older than 30 s
    assert fresh.snapshot(59.5).session("s").ready == 1


def test_acting_view_carries_its_tools_predicted_return() -> None:
    state = make_state()
    acting(state, "s", "r0", 1000, 0.0)
    assert state.snapshot(1.0).session("s").returns_at == 2.0  # no tool reported yet: quiet 1 s, ~1 s more
    state.on_tool_start("s", ToolStart("c", "bash", "sleep 60"), 2.0)
    assert state.snapshot(3.0).session("s").returns_at == state.predicted_return("s") >= 62.0
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 4.0)
    assert state.snapshot(5.0).session("s").returns_at is None  # in the pool it holds nothing to keep


@pytest.mark.parametrize("estimator", ["neighbors", "bernstein"])
def test_history_learned_from_finished_tools_drives_predictions(estimator: str) -> None:
    readiness = ReadinessConfig(estimator=estimator)  # type: ignore[arg-type]
    state = ClusterState([("r0", 10_000)], HistoryPredictor(DurationHistory(readiness), readiness))
    acting(state, "s", "r0", 1000, 0.0)
    for k, duration in enumerate((20.0, 21.0, 22.0)):
        state.on_tool_start("s", ToolStart(f"c{k}", "bash", "make -j8"), 0.0)
        state.on_tool_end("s", f"c{k}", duration)
    state.on_tool_start("s", ToolStart("c9", "bash", "make test"), 100.0)
    if estimator == "neighbors":  # from the session's `make` runs: 20.5 or 21.5 s, within 0.5 s of two of three
        assert state.predicted_return("s") in (120.5, 121.5)
    else:  # the bash:make family bound is above its 22 s maximum
        assert state.predicted_return("s") > 122.0


def test_a_timed_out_call_is_not_learned_as_a_duration() -> None:
    history = DurationHistory()
    state = ClusterState([("r0", 100_000)], HistoryPredictor(history))
    acting(state, "s", "r0", 1000, 0.0)
    state.on_tool_start("s", ToolStart("t", "bash", "make"), 0.0)
    assert state.on_tool_end("s", "t", 3.0, censored=True)  # the deadline, not make's length
    state.on_tool_start("s", ToolStart("c", "bash", "make"), 5.0)
    state.on_tool_end("s", "c", 9.0)
    assert len(history) == 1


def test_timeout_arguments_use_the_harness_unit() -> None:
    state = make_state()
    acting(state, "s", "r0", 1000, 0.0)
    # mini-SWE-agent's seconds: a 5 s deadline, not 5 ms
    state.on_tool_start("s", ToolStart("m", "bash", "sleep 3", {"timeout": 5}, harness="mini-swe-agent"), 0.0)
    assert state.predicted_return("s") == pytest.approx(3.0)


def test_request_level_routing_admits_past_capacity_and_releases_per_request() -> None:
    state = make_state(capacity=5_000, nodes=1, admission_control=False)
    for sid in ("a", "b"):
        state.on_session_start(sid, 0.0)
        state.on_request(sid, 4000, 0.0)
    result = state.apply(plan_of(("a", "r0"), ("b", "r0")), state.signatures(), 0.0)
    assert len(result.admitted) == 2 and all(a.dispatch for a in result.admitted)
    state.on_request_done("a", Usage(4000, 0, 50), 1.0)
    assert state.phase("a") is Phase.IDLE and state.used_tokens("r0") == 4000 + RESERVE
    assert all(v.id != "a" for v in state.snapshot(1.0).sessions)  # idle sessions are not in the pool
    assert state.on_request("a", 4100, 2.0) is None  # every request is routed by a plan
    assert state.phase("a") is Phase.WAITING


def test_node_load_and_capacity_reach_the_snapshot() -> None:
    state = make_state(capacity=8000, nodes=1)
    state.on_node_load("r0", NodeLoad(running_requests=3, waiting_requests=2, kv_usage=0.4, active_tokens=900))
    state.set_capacity("r0", 9000)
    node = state.snapshot(0.0).node("r0")
    assert (node.capacity_tokens, node.running_requests, node.waiting_requests, node.kv_usage,
            node.active_tokens) == (9000, 3, 2, 0.4, 900)


def test_bad_events_raise_clear_errors() -> None:
    state = make_state()
    state.on_session_start("s", 0.0)
    with pytest.raises(SessionStateError, match="already started"):
        state.on_session_start("s", 0.0)
    state.on_request("s", 100, 0.0)
    with pytest.raises(SessionStateError, match="already has a request"):
        state.on_request("s", 100, 0.0)
    with pytest.raises(SessionStateError, match="no request in flight"):
        state.on_request_done("s", Usage(100, 0, 1), 0.0)
    with pytest.raises(SessionStateError, match="unknown node 'r9'"):
        state.apply(plan_of(("s", "r9")), state.signatures(), 0.0)
    with pytest.raises(SessionStateError, match="unknown session"):
        state.on_tool_start("nope", ToolStart("c", "bash"), 0.0)
    assert state.on_tool_end("s", "never-started", 1.0) is False
    with pytest.raises(ValueError, match="duplicate node"):
        ClusterState([("r0", 1), ("r0", 1)], HistoryPredictor(DurationHistory()))


def test_release_and_withdrawn_request_leave_the_session_idle() -> None:
    state = make_state(capacity=10_000, nodes=1)
    acting(state, "a", "r0", 3000, 0.0)
    state.release("a", 1.0)  # e.g. the client went away
    assert state.phase("a") is Phase.IDLE and state.used_tokens("r0") == 0
    assert state.on_request("a", 3200, 2.0) is None and state.phase("a") is Phase.WAITING
    signatures = state.signatures()
    assert state.on_request_withdrawn("a", 3.0) is True
    assert state.phase("a") is Phase.IDLE and state.pool_size() == 0
    assert state.on_request_withdrawn("a", 3.0) is False
    assert state.apply(plan_of(("a", "r0")), signatures, 3.0).discarded == ("a",)


def test_down_node_leaves_snapshots_and_returns_its_holders_to_the_pool() -> None:
    state = make_state()
    acting(state, "a", "r0", 3000, 0.0)
    state.on_session_start("b", 0.0)
    state.on_request("b", 1000, 0.0)
    state.set_node_down("r0", True, 1.0)
    snapshot = state.snapshot(1.0)
    assert [n.id for n in snapshot.nodes] == ["r1"]
    assert "r0" not in snapshot.session("a").cache and snapshot.session("a").state == "waiting"
    assert state.used_tokens("r0") == 0 and state.counters.interrupts == 0
    result = state.apply(plan_of(("b", "r0")), state.signatures(), 1.0)
    assert result.discarded == ("b",) and not result.admitted
    state.set_node_down("r0", False, 2.0)
    assert [n.id for n in state.snapshot(2.0).nodes] == ["r0", "r1"]


def test_a_prefix_groups_shared_prefix_is_reserved_once_per_node() -> None:
    # The engine keeps one copy of a system prompt for every request that starts with it.
    state = make_state(capacity=20_000)
    for session in ("a", "b", "c"):
        state.on_session_start(session, 0.0, prefix_group="sys", shared_tokens=5000)
        state.on_request(session, 6000, 0.0)
    state.on_session_start("loner", 0.0)
    state.on_request("loner", 6000, 0.0)
    assert not state.snapshot(0.0).session("a").shared_resident  # nobody carries it yet
    admit(state, "a", "r0", 0.0)
    assert state.used_tokens("r0") == 6000 + RESERVE  # the keeper carries the whole context
    snapshot = state.snapshot(0.0)
    assert not snapshot.session("b").shared_resident  # r1 holds no copy: it could go there
    admit(state, "b", "r0", 0.0)
    admit(state, "c", "r0", 0.0)
    assert state.used_tokens("r0") == 6000 + RESERVE + 2 * (1000 + RESERVE)
    view = state.snapshot(0.0).session("b")
    assert view.shared_resident and view.cost(state.snapshot(0.0).params) == 1000 + RESERVE
    assert not state.snapshot(0.0).session("a").shared_resident

    state.on_request_done("a", Usage(prompt_tokens=6000, cached_tokens=0, completion_tokens=0), 1.0)
    state.apply(plan_of(interrupts=("a",)), state.signatures(), 1.0)  # the keeper leaves: "b" carries it
    assert state.used_tokens("r0") == 6000 + RESERVE + 1000 + RESERVE
    assert not state.snapshot(1.0).session("b").shared_resident and state.snapshot(1.0).session("c").shared_resident
    for session in ("b", "c"):
        state.release(session, 2.0)
    assert state.used_tokens("r0") == 0
    admit(state, "loner", "r0", 2.0)
    assert state.used_tokens("r0") == 6000 + RESERVE  # no group, no credit
