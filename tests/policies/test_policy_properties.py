"""Feasibility properties every policy must keep, on random snapshots (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao_harness.policies.registry import get_policy, policy_names
from tao_harness.types import CacheEntry, NodeState, PlannerParams, SessionView, Snapshot, objective_of

NODE_IDS = ("r0", "r1", "r2")


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    nodes = tuple(
        NodeState(id=node_id, capacity_tokens=draw(st.integers(0, 60000)),
                  used_tokens=draw(st.integers(0, 30000)),
                  running_requests=draw(st.integers(0, 100)), kv_usage=draw(st.floats(0, 1)))
        for node_id in NODE_IDS[: draw(st.integers(1, 3))]
    )
    ids = [n.id for n in nodes]
    sessions = []
    for i in range(draw(st.integers(0, 9))):
        tokens = draw(st.integers(0, 30000))
        state = draw(st.sampled_from(["waiting", "waiting", "acting", "reasoning"]))
        cache = {b: CacheEntry(draw(st.integers(0, tokens)), draw(st.floats(900, 1000)))
                 for b in draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))}
        eligible = draw(st.none() | st.lists(st.sampled_from(ids), min_size=1, unique=True).map(tuple))
        sessions.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=draw(st.integers(0, tokens)),
            ready=draw(st.integers(0, 1)),
            cache=cache, eligible=eligible, turn=draw(st.integers(0, 9)), state=state,
            node=draw(st.sampled_from(ids)) if state != "waiting" else None,
            arrived_at=draw(st.floats(0, 1000)), has_request=draw(st.booleans()),
        ))
    params = PlannerParams(quantum_tokens=draw(st.sampled_from([64, 256, 1000])))  # Δ=1: huge DPs
    return Snapshot(now=1000.0, params=params, nodes=nodes, sessions=tuple(sessions))


@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots())
def test_every_policy_returns_a_feasible_plan(snapshot: Snapshot) -> None:
    for name in policy_names():
        policy = get_policy(name)
        plan = policy.plan(snapshot)
        placed = [a.session for a in plan.assignments]
        assert len(placed) == len(set(placed)), f"{name}: a session placed twice"
        waiting = {s.id: s for s in snapshot.waiting}
        for a in plan.assignments:
            assert a.session in waiting, f"{name}: placed a session that is not waiting"
            assert waiting[a.session].may_use(a.node), f"{name}: ineligible node"
            assert a.value == snapshot.value(waiting[a.session], a.node)
        assert plan.objective == objective_of(plan.assignments)
        for sid in plan.interrupts:
            # ThunderAgent marks reasoning sessions for pause too; the state machine releases them when their
            # request ends, so they free no room in this plan.
            allowed = ("acting", "reasoning") if name == "thunderagent" else ("acting",)
            state = snapshot.session(sid).state
            assert state in allowed, f"{name}: interrupted a {state} session"
        if policy.admission_control:
            released = {sid: s for sid in plan.interrupts if (s := snapshot.session(sid)).state == "acting"}
            for node in snapshot.nodes:
                freed = sum(s.cost(snapshot.params) for s in released.values() if s.node == node.id)
                if name == "thunderagent":  # it may release into a node that was over capacity
                    room = node.capacity_tokens - node.used_tokens + freed
                else:
                    room = node.free_tokens + freed
                taken = sum(waiting[a.session].cost(snapshot.params)
                            for a in plan.assignments if a.node == node.id)
                assert taken <= max(room, 0), f"{name}: node {node.id} over capacity"
        else:
            assert set(placed) == {s.id for s in snapshot.waiting if s.has_request and s.eligible != ()}


@settings(max_examples=20, deadline=None)
@given(snapshot=snapshots())
def test_policies_are_deterministic_given_the_snapshot(snapshot: Snapshot) -> None:
    for name in policy_names():
        first, second = get_policy(name).plan(snapshot), get_policy(name).plan(snapshot)
        assert (first.assignments, first.interrupts, first.solver) == (second.assignments, second.interrupts,
                                                                       second.solver)
