"""The TAO policy on small snapshots with every number drawn from its whole valid range: quanta of 1-4096
tokens, capacities and contexts from 0 to the 2^40 tokens a snapshot allows, used tokens above capacity or
below what the holders reserve, cache entries larger than the context or observed in the future, half-lives
from a millisecond to days, eligibility subsets (empty ones too), acting and reasoning holders. Sizes past
every room beside rooms of a few quanta are where the planner's subset-sum bitsets, knapsacks and DP tables
once grew as long as the numbers (tests/planner/fuzzed: memory errors and plans of minutes). Whatever is
drawn, a plan is made, it keeps every node's admissions within what the node has (its releases freeing at
most what it reports used), admits only waiting sessions that may use the node, and its bound holds.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao_harness.config import PlannerConfig
from tao_harness.policies.tao import TaoPolicy
from tao_harness.types import MAX_TOKENS, CacheEntry, NodeState, Plan, PlannerParams, SessionView, Snapshot

NOW = 1_000.0
POLICY = TaoPolicy(PlannerConfig(deadline_clock="cpu"))

RETURNS = [None, NOW - 1, NOW + 5, NOW + 1e5]  # an acting session's predicted return
tokens = st.one_of(st.integers(0, 4_096), st.integers(0, 1 << 20), st.integers(1 << 30, MAX_TOKENS))


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    params = PlannerParams(half_life_s=draw(st.sampled_from([1e-3, 10.0, 1e6])),
                           quantum_tokens=draw(st.sampled_from([1, 16, 256, 4096])),
                           reserve_tokens=draw(st.sampled_from([0, 512, 1 << 24])),
                           max_wait_s=draw(st.sampled_from([None, 1e-3, 60.0])))
    node_ids = [f"r{b}" for b in range(draw(st.integers(1, 4)))]
    nodes = tuple(NodeState(id=node_id, capacity_tokens=draw(tokens), used_tokens=draw(tokens))
                  for node_id in node_ids)
    sessions = []
    for i in range(draw(st.integers(0, 9))):
        cached = draw(st.lists(st.sampled_from(node_ids), unique=True, max_size=len(node_ids)))
        cache = {node_id: CacheEntry(draw(tokens), NOW - draw(st.sampled_from([-5.0, 0.0, 0.5, 30.0, 3e4])))
                 for node_id in cached}
        state = draw(st.sampled_from(["waiting", "waiting", "acting", "reasoning"]))
        size = draw(tokens)
        sessions.append(SessionView(
            id=f"s{i}", tokens=size, shared_tokens=draw(st.integers(0, size)), ready=draw(st.integers(0, 1)),
            cache=cache, turn=draw(st.integers(0, 40)), state=state,
            node=None if state == "waiting" else draw(st.sampled_from(node_ids)),
            eligible=draw(st.one_of(st.none(), st.lists(st.sampled_from(node_ids), unique=True).map(tuple))),
            arrived_at=NOW - draw(st.sampled_from([0.0, 30.0, 9_000.0])),
            has_request=draw(st.booleans()), shared_resident=draw(st.booleans()),
            returns_at=draw(st.sampled_from(RETURNS)) if state == "acting" else None,
            prefix_group=draw(st.sampled_from([None, "g0", "g1"]))))
    return Snapshot(now=NOW, params=params, nodes=nodes, sessions=tuple(sessions))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_any_valid_snapshot_is_planned_within_every_room(snapshot: Snapshot) -> None:
    assert_plan_holds(snapshot, POLICY.plan(snapshot))


def assert_plan_holds(snapshot: Snapshot, plan: Plan) -> None:
    """Each admission a waiting session's, once, on a node it may use; each interrupt an acting session's;
    every node's admissions within what it has, a release freeing at most what the node reports used; the
    bound at or above the objective."""
    sessions = {s.id: s for s in snapshot.sessions}
    cost = {s.id: s.cost(snapshot.params) for s in snapshot.sessions}
    admitted = [a.session for a in plan.assignments]
    assert len(admitted) == len(set(admitted))
    assert all(sessions[i].state == "acting" for i in plan.interrupts)
    for a in plan.assignments:
        assert sessions[a.session].state == "waiting" and sessions[a.session].may_use(a.node)
    for node in snapshot.nodes:
        released = sum(cost[i] for i in plan.interrupts if sessions[i].node == node.id)
        taken = sum(cost[a.session] for a in plan.assignments if a.node == node.id)
        assert taken <= max(0, node.capacity_tokens - max(0, node.used_tokens - released)), node.id
    assert plan.bound is not None and plan.bound >= plan.objective
