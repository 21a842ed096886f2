"""Property: whatever events and plans arrive, reservations equal the holding sessions' costs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tao_harness.config import PlannerConfig, SessionsConfig
from tao_harness.coordinator.leases import Lease, LeaseBook
from tao_harness.coordinator.prediction import HistoryPredictor
from tao_harness.coordinator.records import Phase, SessionStateError, ToolStart
from tao_harness.coordinator.state import ClusterState
from tao_harness.proxy.usage import Usage
from tao_harness.readiness.estimator import DurationHistory
from tao_harness.types import Assignment, Plan

RESERVE = PlannerConfig().reserve_tokens
NODES = ("r0", "r1")
SESSIONS = ("a", "b", "c", "d")

step = st.tuples(
    st.sampled_from(["start", "request", "done", "tool", "tool_end", "end", "plan", "stale_plan", "expire",
                     "release", "withdraw", "down", "up"]),
    st.sampled_from(SESSIONS),
    st.sampled_from(NODES),
    st.integers(100, 9000),
)


def check_invariant(state: ClusterState, now: float, admission_control: bool) -> None:
    snapshot = state.snapshot(now)
    for node in snapshot.nodes:
        holders = snapshot.holding(node.id)
        assert node.used_tokens == sum(v.tokens + RESERVE for v in holders)
    for view in snapshot.sessions:
        assert (view.node is not None) == (view.state != "waiting")
    assert state.pool_size() == len(snapshot.waiting)
    if not admission_control:
        assert all(v.state != "acting" for v in snapshot.sessions)


@settings(max_examples=80, deadline=None)
@given(st.lists(step, max_size=60), st.booleans())
def test_reservations_always_match_holders(steps: list[tuple[str, str, str, int]], admission_control: bool) -> None:
    state = ClusterState([(n, 12_000) for n in NODES], HistoryPredictor(DurationHistory()),
                         admission_control=admission_control,
                         sessions=SessionsConfig(admission_ttl_s=2.0))
    state.watch_phases()
    leases = LeaseBook(lambda session, node: Lease(session, node))
    old_signatures = state.signatures()
    now = 0.0
    for kind, session, node, tokens in steps:
        now += 0.7
        try:
            if kind == "start":
                state.on_session_start(session, now)
            elif kind == "request":
                state.on_request(session, tokens, now)
            elif kind == "done":
                state.on_request_done(session, Usage(tokens, tokens // 2, 64), now)
            elif kind == "tool":
                state.on_tool_start(session, ToolStart(f"{session}-call", "bash", f"sleep {tokens % 7}"), now)
            elif kind == "tool_end":
                state.on_tool_end(session, f"{session}-call", now)
            elif kind == "end":
                state.on_session_end(session, now)
            elif kind == "expire":
                state.expire_admissions(now)
            elif kind == "release":
                state.release(session, now)
            elif kind == "withdraw":
                state.on_request_withdrawn(session, now)
            elif kind in ("down", "up"):
                state.set_node_down(node, kind == "down", now)
            else:
                signatures = old_signatures if kind == "stale_plan" else state.signatures()
                plan = Plan("hand", "hand", (0, 0, 0, 1), (Assignment(session, node, (0, 0, 0)),),
                            interrupts=tuple(s for s in SESSIONS if s != session))
                before = {s: _phase(state, s) for s in SESSIONS}
                result = state.apply(plan, signatures, now)
                for admitted in result.admitted:
                    assert before[admitted.session] in (Phase.WAITING, Phase.INTERRUPTED)
                    if admission_control:
                        assert state.used_tokens(admitted.node) <= 12_000
                old_signatures = signatures
        except SessionStateError:
            pass  # events out of lifecycle order are rejected without changing anything
        check_invariant(state, now, admission_control)
        # Leases published from the phase changes alone (O(changes)) equal the whole holder table.
        leases.update({s: state.node_of(s) if state.has_session(s) else None for s in state.take_phase_changes()})
        holders = {s: state.node_of(s) for s in SESSIONS if state.has_session(s) and state.node_of(s) is not None}
        assert {lease.session: lease.replica for lease in leases.since(-1).leases} == holders


def _phase(state: ClusterState, session: str) -> Phase | None:
    try:
        return state.phase(session)
    except SessionStateError:
        return None
