"""Each baseline's distinctive choice on a hand-made snapshot, plus the registry."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import pytest

from tao_harness.config import PlannerConfig
from tao_harness.policies.base import Policy
from tao_harness.policies.registry import get_policy, policy_names
from tao_harness.types import Snapshot

Snap = Callable[..., Snapshot]


def cached(node: str, tokens: int, age: float = 0.0) -> dict[str, Any]:
    return {node: {"tokens": tokens, "observed_at": 1000.0 - age}}


def plan_of(name: str, snapshot: Snapshot) -> dict[str, str]:
    return get_policy(name).plan(snapshot).admitted


def test_registry_builds_every_policy_and_rejects_unknown_names() -> None:
    for name in policy_names():
        policy = get_policy(name, PlannerConfig())
        assert isinstance(policy, Policy) and policy.name == name
        assert policy.admission_control == (name.startswith("tao") or name in ("thunderagent", "continuum"))
    with pytest.raises(ValueError, match="tao-bfd.*smetric"):
        get_policy("round-robin")


def test_thunderagent_resumes_by_class_then_places_largest_first_on_the_roomiest_node(snap: Snap) -> None:
    snapshot = snap(
        nodes=[{"id": "small", "capacity_tokens": 30000}, {"id": "big", "capacity_tokens": 50000}],
        sessions=[
            {"id": "acting-tiny", "tokens": 1000, "turn": 5, "has_request": False},
            {"id": "new", "tokens": 20000, "turn": 1},
            {"id": "returning-big", "tokens": 25000, "turn": 4},
            {"id": "returning-small", "tokens": 8000, "turn": 4},
        ],
    )
    plan = get_policy("thunderagent").plan(snapshot)
    # A program is queued ahead of `new`, so it waits for the tick. All four fit the summed room (80,000);
    # placed largest first, each on the node with the most room left, re-sorted after every placement:
    # returning-big -> big (24,900 left), new -> small (9,900), returning-small -> big, acting-tiny -> big.
    assert [a.session for a in plan.assignments] == ["returning-big", "new", "returning-small", "acting-tiny"]
    assert plan.admitted == {"returning-big": "big", "new": "small", "returning-small": "big",
                             "acting-tiny": "big"}


def test_thunderagent_selects_by_priority_within_the_summed_room(snap: Snap) -> None:
    snapshot = snap(
        nodes=[{"id": "r0", "capacity_tokens": 12500}, {"id": "r1", "capacity_tokens": 12500}],
        sessions=[
            {"id": "acting", "tokens": 2000, "turn": 5, "has_request": False},
            {"id": "new", "tokens": 9000, "turn": 1},
            {"id": "returning", "tokens": 11000, "turn": 3},
        ],
    )
    # returning (11,100) then new (9,100) take 20,200 of the summed 25,000, acting's 2,100 still fits; placed
    # largest first, returning -> r0 (1,400 left), new -> r1 (3,400 left), acting -> r1, the roomier.
    assert plan_of("thunderagent", snapshot) == {"returning": "r0", "new": "r1", "acting": "r1"}


def test_thunderagent_places_first_requests_at_once_when_its_queue_is_empty(snap: Snap) -> None:
    nodes = [{"id": "r0", "capacity_tokens": 30000}, {"id": "r1", "capacity_tokens": 30000}]
    holder = {"id": "h", "tokens": 5000, "state": "acting", "node": "r0"}
    policy = get_policy("thunderagent")
    assert policy.plan(snap(nodes=nodes, sessions=[holder])).admitted == {}  # the tick at t = 1000
    # At 1001 (next tick at 1005) a first request meets an empty queue: the node with fewer program tokens.
    first = replace(snap(nodes=nodes, sessions=[{"id": "a", "tokens": 4000, "turn": 1}, holder]), now=1001.0)
    assert policy.plan(first).admitted == {"a": "r1"}
    # One that does not fit anywhere joins the queue; a later first request queues behind it until the tick,
    # where huge (40,100) is too large for either node and b goes to the roomier one.
    queued = snap(nodes=nodes, sessions=[{"id": "huge", "tokens": 40000, "turn": 1},
                                         {"id": "b", "tokens": 1000, "turn": 1}, holder])
    assert policy.plan(replace(queued, now=1002.0)).admitted == {}
    assert policy.plan(replace(queued, now=1005.0)).admitted == {"b": "r1"}


def held(node: str, *sessions: tuple[str, int, str]) -> list[dict[str, Any]]:
    """Sessions (id, tokens, state) holding `node`."""
    return [{"id": sid, "tokens": tokens, "state": state, "node": node} for sid, tokens, state in sessions]


def test_thunderagent_pauses_acting_smallest_first_when_over_capacity(snap: Snap) -> None:
    holders = held("r0", ("a-big", 20000, "acting"), ("a-small", 3000, "acting"), ("a-mid", 5000, "acting"),
                   ("busy", 1000, "reasoning"))
    # Programs hold 29,000 tokens + 4 x 100 of buffer: 3,400 over 26,000; the measured usage is not read.
    over = snap(nodes=[{"id": "r0", "capacity_tokens": 26000, "used_tokens": 0}], sessions=holders)
    assert get_policy("thunderagent").plan(over).interrupts == ("a-small", "a-mid")


def test_thunderagent_marks_every_reasoning_session_if_pausing_acting_ones_falls_short(snap: Snap) -> None:
    holders = held("r0", ("acting", 3000, "acting"), ("think-1", 6000, "reasoning"),
                   ("think-2", 1000, "reasoning"))
    holders += held("r1", ("elsewhere", 1000, "reasoning"))
    # Without `acting`, r0 still holds 7,200 > 6,500: marking does not lower that count, so both are marked.
    snapshot = snap(nodes=[{"id": "r0", "capacity_tokens": 6500}, {"id": "r1", "capacity_tokens": 6500}],
                    sessions=holders)
    assert get_policy("thunderagent").plan(snapshot).interrupts == ("acting", "think-1", "think-2")


def test_sglang_switches_to_least_loaded_past_both_imbalance_thresholds(snap: Snap) -> None:
    session = {"id": "s", "tokens": 10000, "turn": 3, "cache": cached("hot", 9000)}
    balanced = snap(nodes=[{"id": "hot", "capacity_tokens": 10**6, "running_requests": 100},
                           {"id": "cold", "capacity_tokens": 10**6, "running_requests": 70}],
                    sessions=[session])
    imbalanced = snap(nodes=[{"id": "hot", "capacity_tokens": 10**6, "running_requests": 100},
                             {"id": "cold", "capacity_tokens": 10**6, "running_requests": 30}],
                      sessions=[session])
    assert plan_of("sglang-ca", balanced) == {"s": "hot"}  # diff 30 ≤ 64: cache wins
    assert plan_of("sglang-ca", imbalanced) == {"s": "cold"}  # diff 70 > 64 and 100 > 1.5·30


def test_sglang_low_match_rate_goes_to_the_smallest_tree(snap: Snap) -> None:
    snapshot = snap(
        nodes=[{"id": "a", "capacity_tokens": 10**6, "kv_usage": 0.2},
               {"id": "b", "capacity_tokens": 10**6, "kv_usage": 0.7},
               {"id": "c", "capacity_tokens": 10**6, "kv_usage": 0.1}],
        sessions=[{"id": "s", "tokens": 10000, "cache": cached("b", 2000)}],  # 20% ≤ 30%
    )
    assert plan_of("sglang-ca", snapshot) == {"s": "c"}


def test_smetric_first_turn_least_loaded_later_turns_follow_cache(snap: Snap) -> None:
    nodes = [{"id": "busy", "capacity_tokens": 10**6, "running_requests": 6},
             {"id": "idle", "capacity_tokens": 10**6, "running_requests": 1}]
    first = {"id": "s", "tokens": 5000, "turn": 1, "cache": cached("busy", 4000)}
    later = dict(first, turn=6)
    assert plan_of("smetric", snap(nodes=nodes, sessions=[first])) == {"s": "idle"}
    assert plan_of("smetric", snap(nodes=nodes, sessions=[later])) == {"s": "busy"}
    overloaded = [dict(nodes[0], running_requests=30), nodes[1]]
    assert plan_of("smetric", snap(nodes=overloaded, sessions=[later])) == {"s": "idle"}


def test_vllm_ca_longest_prefix_then_least_load(snap: Snap) -> None:
    nodes = [{"id": f"r{b}", "capacity_tokens": 10**6, "running_requests": load}
             for b, load in enumerate([5, 3, 1])]
    snapshot = snap(nodes=nodes, sessions=[
        {"id": "s", "tokens": 8000, "cache": {**cached("r0", 6000), **cached("r1", 6000)}, "arrived_at": 1},
        {"id": "t", "tokens": 8000, "arrived_at": 2},
    ])
    assert plan_of("vllm-ca", snapshot) == {"s": "r1", "t": "r2"}


def test_vllm_rr_cycles_across_plans_and_skips_ineligible_nodes(snap: Snap) -> None:
    nodes = [{"id": f"r{b}", "capacity_tokens": 10**6} for b in range(3)]
    policy = get_policy("vllm-rr")
    first = policy.plan(snap(nodes=nodes, sessions=[{"id": "a", "tokens": 10, "arrived_at": 1},
                                                    {"id": "b", "tokens": 10, "arrived_at": 2}]))
    second = policy.plan(snap(nodes=nodes, sessions=[{"id": "c", "tokens": 10, "eligible": ["r0", "r1"]}]))
    assert first.admitted == {"a": "r0", "b": "r1"}
    assert second.admitted == {"c": "r0"}  # r2 is next but not eligible


def test_dynamo_trades_cache_overlap_against_decode_load(snap: Snap) -> None:
    nodes = [{"id": "warm", "capacity_tokens": 10**6, "active_tokens": 20000},
             {"id": "empty", "capacity_tokens": 10**6, "active_tokens": 0}]
    small_overlap = {"id": "s", "tokens": 16000, "cache": cached("warm", 4000)}
    big_overlap = dict(small_overlap, cache=cached("warm", 16000))
    # warm: prefill 750 + decode 2250 = 3000 blocks vs empty: 1000 + 1000 = 2000 -> empty
    assert plan_of("dynamo", snap(nodes=nodes, sessions=[small_overlap])) == {"s": "empty"}
    # warm: prefill 0 + decode 2250 = 2250 vs empty 2000 -> still empty; with less load warm wins
    lighter = [dict(nodes[0], active_tokens=8000), nodes[1]]
    assert plan_of("dynamo", snap(nodes=lighter, sessions=[big_overlap])) == {"s": "warm"}


def test_request_routers_place_everything_with_a_request_even_past_capacity(snap: Snap) -> None:
    snapshot = snap(nodes=[{"id": "r0", "capacity_tokens": 1000}], sessions=[
        {"id": "a", "tokens": 50000}, {"id": "b", "tokens": 50000},
        {"id": "ahead", "tokens": 10, "has_request": False}])
    for name in ("vllm-rr", "vllm-ca", "dynamo", "sglang-ca", "smetric"):
        assert plan_of(name, snapshot) == {"a": "r0", "b": "r0"}, name
    assert plan_of("tao", snapshot) == {"ahead": "r0"}  # admission control: only what fits


def test_continuum_is_strict_fcfs_with_cache_affinity(snap: Snap) -> None:
    snapshot = snap(
        nodes=[{"id": "r0", "capacity_tokens": 20000}, {"id": "r1", "capacity_tokens": 30000}],
        sessions=[
            {"id": "first", "tokens": 5000, "arrived_at": 1, "cache": cached("r0", 4000)},
            {"id": "blocked", "tokens": 40000, "arrived_at": 2},
            {"id": "later-small", "tokens": 100, "arrived_at": 3},
        ],
    )
    assert plan_of("continuum", snapshot) == {"first": "r0"}  # head-of-line blocking stops the queue
