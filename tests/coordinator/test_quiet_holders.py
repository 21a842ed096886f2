"""Holders that send no tool events, and the pool-wait bound, through the shared state machine + TAO."""

from __future__ import annotations

from tao_harness.config import PlannerConfig
from tao_harness.coordinator.records import ToolStart
from tao_harness.coordinator.state import ClusterState
from tao_harness.policies.registry import get_policy
from tao_harness.proxy.usage import Usage
from test_state_machine import acting, make_state, plan_of


def finish(state: ClusterState, session: str, tokens: int, now: float) -> None:
    state.on_request_done(session, Usage(prompt_tokens=tokens, cached_tokens=0, completion_tokens=100), now)


def test_a_quiet_holder_is_expected_back_after_its_usual_gap_then_after_as_long_as_it_was_quiet() -> None:
    state = make_state()
    acting(state, "chat", "r0", 4000, 0.0)  # reply ends at 0
    assert state.snapshot(0.0).session("chat").returns_at == 0.0  # no gap seen yet: back at once
    assert state.on_request("chat", 4200, 6.0) == "r0"  # 6 s quiet, then its next request
    finish(state, "chat", 4200, 7.0)
    assert state.snapshot(9.0).session("chat").returns_at == 13.0  # usual gap 6 s after the reply at 7
    assert state.snapshot(27.0).session("chat").returns_at == 47.0  # quiet 20 s: about 20 s more


def test_a_holder_with_tool_events_keeps_its_tool_prediction() -> None:
    state = make_state()
    acting(state, "agent", "r0", 4000, 0.0)
    state.on_tool_start("agent", ToolStart("c1", "Bash", "sleep 30"), 0.5)
    returns_at = state.snapshot(1.0).session("agent").returns_at
    assert returns_at is not None and returns_at >= 30.0
    state.on_tool_end("agent", "c1", 31.0)
    assert state.snapshot(40.0).session("agent").returns_at is None  # its tools are done: about to send


def test_the_pool_wait_counts_from_the_request_not_from_the_interrupt() -> None:
    state = make_state()
    acting(state, "s", "r0", 4000, 0.0)
    state.apply(plan_of(interrupts=("s",)), state.signatures(), 1.0)
    assert state.on_request("s", 4200, 50.0) is None
    view = state.snapshot(60.0).session("s")
    assert (view.arrived_at, view.waiting_since) == (1.0, 50.0)


def test_a_request_behind_a_silent_holder_is_served_once_it_reaches_the_bound() -> None:
    """Issue 16 #3: a generic client holds the only room and never reports a tool; the cold request
    behind it waited without end. With the bound it is admitted before the bound, from half of it (the
    paper's release rule; the tool-time rule does not wait for the bound, see below)."""
    planner = PlannerConfig(max_wait_s=30.0, tool_time_release=False)
    state = make_state(capacity=9000, nodes=1, planner=planner)
    policy = get_policy("tao", planner)
    acting(state, "silent", "r0", 6000, 0.0)
    state.on_session_start("cold", 1.0)
    assert state.on_request("cold", 4000, 1.0) is None
    admitted_at = None
    for step in range(1, 80):
        now = 1.0 + step
        result = state.apply(policy.plan(state.snapshot(now)), state.signatures(), now)
        if result.admitted:
            admitted_at = now
            assert result.interrupted == ("silent",) and result.admitted[0].session == "cold"
            break
    assert admitted_at is not None and 15.0 <= admitted_at - 1.0 <= 30.0


def test_the_tool_time_rule_releases_a_silent_holder_for_a_waiting_request_at_once() -> None:
    # Quiet for 9 s, so expected back in about 9 s more: 6,000 tokens reload in 0.6 s, so its memory would
    # idle for 15 reload times. The default rule gives it to the waiting request without waiting for the bound.
    planner = PlannerConfig(max_wait_s=None)
    state = make_state(capacity=9000, nodes=1, planner=planner)
    acting(state, "silent", "r0", 6000, 0.0)
    state.on_session_start("cold", 1.0)
    state.on_request("cold", 4000, 1.0)
    result = state.apply(get_policy("tao", planner).plan(state.snapshot(10.0)), state.signatures(), 10.0)
    assert result.interrupted == ("silent",) and [a.session for a in result.admitted] == ["cold"]


def test_without_a_bound_the_same_request_waits_while_the_holder_keeps_credit() -> None:
    planner = PlannerConfig(max_wait_s=None, tool_time_release=False)  # the paper's rule: Σ v must rise
    state = make_state(capacity=9000, nodes=1, planner=planner)
    policy = get_policy("tao", planner)
    acting(state, "silent", "r0", 6000, 0.0)
    state.on_session_start("cold", 1.0)
    state.on_request("cold", 4000, 1.0)
    for now in (10.0, 31.0, 60.0):
        assert not state.apply(policy.plan(state.snapshot(now)), state.signatures(), now).admitted
