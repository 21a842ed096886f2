"""TAO's own choices: credit first, readiness next, ablations, and the interrupt rule."""

from __future__ import annotations

from typing import Any, Callable

from tao_harness.policies.registry import get_policy
from tao_harness.types import Snapshot

Snap = Callable[..., Snapshot]
Q = 256  # quantum; sizes below are whole quanta minus the 512-token reserve so nothing rounds


def tokens(quanta: int) -> int:
    return quanta * Q - 512


def cached(node: str, amount: int, age: float = 0.0) -> dict[str, Any]:
    return {node: {"tokens": amount, "observed_at": 1000.0 - age}}


def acting(session_id: str, quanta: int, cache: dict[str, Any]) -> dict[str, Any]:
    return {"id": session_id, "tokens": tokens(quanta), "state": "acting", "node": "r0", "cache": cache}


def test_credit_beats_readiness_and_readiness_beats_size(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q}, {"id": "r1", "capacity_tokens": 10 * Q}]
    snapshot = snap(nodes=nodes, sessions=[
        {"id": "credited", "tokens": tokens(10), "cache": cached("r1", 500)},
        {"id": "ready", "tokens": tokens(10), "ready": 1},
        {"id": "big", "tokens": tokens(10)},
    ])
    plan = get_policy("tao").plan(snapshot)
    assert plan.admitted == {"credited": "r1", "ready": "r0"}
    assert plan.objective == (500, 1, 2 * tokens(10), 2)
    assert plan.solver == "dp" and not plan.fallback


def test_ablations_drop_exactly_their_term(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q}]
    snapshot = snap(nodes=nodes, sessions=[
        {"id": "credited-small", "tokens": tokens(10) - 200, "cache": cached("r0", 300)},
        {"id": "ready-larger", "tokens": tokens(10), "ready": 1},
        {"id": "larger", "tokens": tokens(10)},
    ])
    assert get_policy("tao").plan(snapshot).admitted == {"credited-small": "r0"}
    assert get_policy("tao-no-cache").plan(snapshot).admitted == {"ready-larger": "r0"}
    assert get_policy("tao-no-readiness").plan(snapshot).admitted == {"credited-small": "r0"}
    snapshot = snap(nodes=nodes, sessions=[
        {"id": "ready-small", "tokens": tokens(10) - 200, "ready": 1},
        {"id": "larger", "tokens": tokens(10)},
    ])
    assert get_policy("tao").plan(snapshot).admitted == {"ready-small": "r0"}
    assert get_policy("tao-no-readiness").plan(snapshot).admitted == {"larger": "r0"}


def test_tao_bfd_can_miss_what_the_dp_finds(snap: Snap) -> None:
    # Rooms 7 and 6 quanta; sessions 6, 4 (ready), 3, 4. BFD puts the ready 4 in the tighter room 6 and
    # then only the 6 fits; the DP puts it in room 7 next to the 3, and the 6 fills room 6.
    nodes = [{"id": "a", "capacity_tokens": 7 * Q}, {"id": "b", "capacity_tokens": 6 * Q}]
    sessions = [{"id": "six", "tokens": tokens(6)}, {"id": "ready-four", "tokens": tokens(4), "ready": 1},
                {"id": "three", "tokens": tokens(3)}, {"id": "four", "tokens": tokens(4)}]
    snapshot = snap(nodes=nodes, sessions=sessions)
    dp = get_policy("tao").plan(snapshot)
    bfd = get_policy("tao-bfd").plan(snapshot)
    assert dp.admitted == {"ready-four": "a", "three": "a", "six": "b"}
    assert bfd.solver == "bfd" and bfd.objective[3] == 2 and dp.objective > bfd.objective


def test_interrupts_release_acting_sessions_lowest_value_first(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 20 * Q, "used_tokens": 20 * Q}]
    sessions = [
        acting("stale", 6, cached("r0", 9000, 120)),
        acting("staler", 4, cached("r0", 9000, 200)),
        acting("fresh", 10, cached("r0", 9000, 1)),
        {"id": "back", "tokens": tokens(8), "ready": 1, "cache": cached("r0", 4000, 2)},
    ]
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    assert plan.interrupts == ("staler", "stale")  # 4 + 6 quanta ≥ 8; "fresh" (highest value) stays
    assert plan.admitted == {"back": "r0"}


def test_interrupts_only_for_sessions_that_need_the_gpu_and_only_if_they_then_fit(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    holder = acting("holder", 10, cached("r0", 5000, 1))
    not_ready = {"id": "not-ready", "tokens": tokens(4), "has_request": False}
    too_big = {"id": "too-big", "tokens": tokens(11), "ready": 1}
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[holder, not_ready, too_big]))
    assert plan.interrupts == () and plan.assignments == ()
    ready = {"id": "ready", "tokens": tokens(4), "ready": 1}
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[holder, not_ready, ready]))
    assert plan.interrupts == ("holder",) and plan.admitted == {"ready": "r0"}
    quiet = dict(ready, has_request=False)
    plan = get_policy("tao-no-readiness").plan(snap(nodes=nodes, sessions=[holder, quiet]))
    assert plan.interrupts == ()  # without readiness only an arrived request proves need


def test_credit_less_sessions_spread_over_nodes(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 40 * Q}, {"id": "r1", "capacity_tokens": 40 * Q}]
    sessions = [{"id": f"s{i}", "tokens": tokens(5)} for i in range(4)]
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    assert sorted(plan.admitted.values()) == ["r0", "r0", "r1", "r1"]


def test_plan_lists_admissions_highest_value_first(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 100 * Q}]
    sessions = [{"id": "plain", "tokens": tokens(5)}, {"id": "ready", "tokens": tokens(5), "ready": 1},
                {"id": "warm", "tokens": tokens(5), "cache": cached("r0", 100)}]
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    assert [a.session for a in plan.assignments] == ["warm", "ready", "plain"]


def test_an_over_reserved_node_releases_lowest_value_acting_sessions_with_nobody_waiting() -> None:
    from tao_harness.policies.registry import get_policy
    from tao_harness.types import Snapshot

    # r0 holds 3 acting sessions (3 × (3000 + 512) = 10536 tokens) but has 8000: one must go, and it is
    # the one whose cache credit decayed the most (observed longest ago).
    sessions = [
        {"id": f"a{i}", "tokens": 3000, "shared_tokens": 0, "ready": 0, "state": "acting", "node": "r0",
         "cache": {"r0": {"tokens": 3000, "observed_at": observed}}}
        for i, observed in enumerate((99.0, 60.0, 95.0))
    ]
    snapshot = Snapshot.from_json({"now": 100.0, "nodes": [{"id": "r0", "capacity_tokens": 8000,
                                                             "used_tokens": 10536}], "sessions": sessions})
    plan = get_policy("tao").plan(snapshot)
    assert list(plan.interrupts) == ["a1"]
    assert plan.assignments == ()
