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
    # the exact program found the node full: "back" came in by the interrupts, after it
    assert plan.solved == (0, 0, 0, 0) and (plan.objective[1], plan.objective[3]) == (1, 1)


def test_interrupts_only_for_sessions_that_need_the_gpu_and_only_if_they_then_fit(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    holder = acting("holder", 10, cached("r0", 5000, 200))  # credit decayed to 0 during a long tool
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


def test_an_interrupt_never_releases_more_value_than_it_admits(snap: Snap) -> None:
    # Issue 7: a cold ready session used to displace a warm holder, which then came back cold and
    # displaced the next one. Released triples, summed, must stay below the admitted session's triple.
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    ready = {"id": "ready", "tokens": tokens(4), "ready": 1}
    warm = acting("warm", 10, cached("r0", 5000, 1))
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[warm, ready]))
    assert plan.interrupts == () and plan.assignments == ()
    # Two cold holders whose tools are about to return (r = 1 each) outweigh one ready session (R 2 > 1) ...
    returning = [dict(acting(f"returning{i}", 5, {}), ready=1) for i in range(2)]
    big = {"id": "big", "tokens": tokens(10), "ready": 1}
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[*returning, big]))
    assert plan.interrupts == ()
    # ... while one of them alone is worth less than it when the waiting session has credit on r0.
    credited = dict(ready, cache=cached("r0", 3000, 1))
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[*returning, credited]))
    assert plan.interrupts == ("returning0",) and plan.admitted == {"ready": "r0"}


def test_a_holder_is_worth_the_credit_it_will_have_when_its_tool_returns(snap: Snap) -> None:
    # Fresh credit now, but `sleep 600` ends long after it has decayed (h = 10 s): keeping the node for
    # it buys nothing, so the ready session gets it. A tool returning in 2 s keeps it.
    nodes = [{"id": "r0", "capacity_tokens": 10 * Q, "used_tokens": 10 * Q}]
    ready = {"id": "ready", "tokens": tokens(4), "ready": 1}
    for returns_in, released in ((600.0, ("warm",)), (2.0, ())):
        warm = dict(acting("warm", 10, cached("r0", 5000, 1)), returns_at=1000.0 + returns_in)
        plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[warm, ready]))
        assert plan.interrupts == released


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


def test_an_over_reserved_node_releases_acting_sessions_only_once_running_requests_overfill_it(
        snap: Snap) -> None:
    # r0 holds three 3000-token sessions (3 × 3512 = 10536 reserved tokens) and has 8000. Grown acting
    # contexts alone release nothing (issue 7: each release sent a whole context back cold) ...
    def holder(session_id: str, state: str) -> dict[str, Any]:
        return {"id": session_id, "tokens": 3000, "state": state, "node": "r0",
                "cache": cached("r0", 3000, 5)}

    nodes = [{"id": "r0", "capacity_tokens": 8000, "used_tokens": 10536}]
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=[holder(f"a{i}", "acting") for i in range(3)]))
    assert plan.interrupts == () and plan.assignments == ()
    # ... but once the reasoning sessions' reservations exceed the capacity by themselves, the engine
    # is preempting, and every acting session there goes back to the pool, with or without anyone waiting.
    nodes = [{"id": "r0", "capacity_tokens": 7000, "used_tokens": 4 * 3512}]
    sessions = [holder("busy0", "reasoning"), holder("busy1", "reasoning"),
                holder("idle0", "acting"), holder("idle1", "acting")]
    plan = get_policy("tao").plan(snap(nodes=nodes, sessions=sessions))
    assert set(plan.interrupts) == {"idle0", "idle1"} and plan.assignments == ()
