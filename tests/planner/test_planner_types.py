"""Snapshot / plan JSON: the issue's example, round trips, validation messages, decay and rounding."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from planner_bench.reference import brute_force
from tao_harness.config import PlannerConfig
from tao_harness.planner.shared.problem import build_problem
from tao_harness.policies.registry import get_policy
from tao_harness.types import CacheEntry, Plan, PlannerParams, Snapshot, SnapshotError

ISSUE_EXAMPLE: dict[str, Any] = {
    "now": 1000.0,
    "params": {"half_life_s": 10, "horizon_s": 1, "quantum_tokens": 256, "reserve_tokens": 512},
    "nodes": [{"id": "r0", "capacity_tokens": 65536, "used_tokens": 12000},
              {"id": "r1", "capacity_tokens": 8000}],
    "sessions": [{"id": "s1", "tokens": 14000, "shared_tokens": 2000, "ready": 1,
                  "cache": {"r0": {"tokens": 9000, "observed_at": 996.5}},
                  "eligible": ["r0", "r1"], "turn": 7, "state": "waiting"}],
}


def test_issue_example_parses_plans_and_round_trips() -> None:
    snapshot = Snapshot.from_json(ISSUE_EXAMPLE)
    assert Snapshot.from_json(json.loads(json.dumps(snapshot.to_json()))) == snapshot
    plan = get_policy("tao").plan(snapshot)
    # k = round(9000 · 2^(−3.5/10)) = round(7061.3…) = 7061; t = 14000 − 2000
    assert plan.to_json()["assignments"] == [{"session": "s1", "node": "r0", "value": [7061, 1, 12000]}]
    assert plan.objective == (7061, 1, 12000, 1)
    again = Plan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again.assignments == plan.assignments and again.objective == plan.objective


@pytest.mark.parametrize(
    ("k0", "age", "half_life", "expected"),
    [
        (9000, 3.5, 10, 7061),
        (9000, 10.0, 10, 4500),
        (9000, 20.0, 10, 2250),
        (9000, -5.0, 10, 9000),  # observed "in the future" (clock skew): no growth
        (1, 10.0, 10, 0),  # 0.5 rounds half to even
        (3, 10.0, 10, 2),  # 1.5 rounds half to even
        (1000, 1000.0, 10, 0),
    ],
)
def test_cache_credit_decays_and_rounds(k0: int, age: float, half_life: float, expected: int) -> None:
    assert CacheEntry(k0, 100.0 - age).credit(100.0, half_life) == expected


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(ISSUE_EXAMPLE)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["sessions", 0, "cache"], {"r9": {"tokens": 1, "observed_at": 0}},
         "sessions[0].cache: unknown node 'r9'"),
        (["sessions", 0, "eligible"], ["r0", "r7"], "sessions[0].eligible: unknown node 'r7'"),
        (["sessions", 0, "tokens"], -1, "sessions[0].tokens: must be >= 0"),
        (["sessions", 0, "tokens"], KeyError, "sessions[0].tokens: missing field"),
        (["sessions", 0, "shared_tokens"], 20000, "sessions[0].shared_tokens: 20000 exceeds tokens"),
        (["sessions", 0, "ready"], 2, "sessions[0].ready: must be 0 or 1"),
        (["sessions", 0, "state"], "sleeping", "sessions[0].state: must be one of"),
        (["sessions", 0, "state"], "acting", "sessions[0].node: a acting session must name a node"),
        (["sessions", 0, "bogus"], 1, "sessions[0].bogus: unknown field"),
        (["sessions", 0, "returns_at"], "later", "sessions[0].returns_at: expected a finite number"),
        (["sessions", 0, "cache", "r0", "tokens"], "many",
         "sessions[0].cache.r0.tokens: expected an integer"),
        (["sessions", 1], {"id": "s1", "tokens": 5}, "sessions[1].id: duplicate session id 's1'"),
        (["nodes", 1, "id"], "r0", "nodes[1].id: duplicate node id 'r0'"),
        (["nodes", 0, "capacity_tokens"], KeyError, "nodes[0].capacity_tokens: missing field"),
        (["nodes", 0, "used_tokens"], -3, "nodes[0].used_tokens: must be >= 0"),
        # past 2^40 tokens the planner's float sums of credit would no longer be exact (found by review:
        # credits past 2^53 gave a bound below the optimum, past 2^63 an OverflowError)
        (["nodes", 0, "capacity_tokens"], 2 ** 41, "nodes[0].capacity_tokens: must be <= 1099511627776"),
        (["sessions", 0, "tokens"], 2 ** 60, "sessions[0].tokens: must be <= 1099511627776"),
        (["sessions", 0, "cache", "r0", "tokens"], 2 ** 54, "sessions[0].cache.r0.tokens: must be <="),
        (["nodes", 0, "kv_usage"], 1.5, "nodes[0].kv_usage: must be within 0..1"),
        (["params", "half_life_s"], 0, "params.half_life_s: must be > 0"),
        (["params", "quantum_tokens"], 0, "params.quantum_tokens: must be >= 1"),
        (["now"], KeyError, "now: missing field"),
        (["now"], "soon", "now: expected a finite number"),
        (["nodes"], {"id": "r0"}, "nodes: expected a list"),
    ],
)
def test_invalid_snapshots_name_the_field(path: list[Any], value: Any, message: str) -> None:
    data = _broken(path, value) if path != ["sessions", 1] else {**ISSUE_EXAMPLE, "sessions": [
        ISSUE_EXAMPLE["sessions"][0], value]}
    with pytest.raises(SnapshotError) as caught:
        Snapshot.from_json(data)
    assert str(caught.value).startswith(message), str(caught.value)


def test_optional_fields_default_and_params_may_be_left_out() -> None:
    snapshot = Snapshot.from_json({"now": 5, "nodes": [{"id": "a", "capacity_tokens": 10}],
                                   "sessions": [{"id": "x", "tokens": 3}]})
    session = snapshot.sessions[0]
    assert snapshot.params == PlannerParams()
    assert (session.state, session.ready, session.has_request, session.eligible, session.node) == (
        "waiting", 0, True, None, None)
    assert snapshot.nodes[0].free_tokens == 10 and snapshot.waiting == (session,)


def test_plan_make_empty_and_validation() -> None:
    empty = Plan.make_empty("tao")
    assert empty.objective == (0, 0, 0, 0) and empty.assignments == () and not empty.fallback
    with pytest.raises(SnapshotError, match="objective: expected 4 integers"):
        Plan.from_json({"policy": "tao", "solver": "dp", "objective": [1, 2]})


@pytest.mark.parametrize("deadline_ms", [30.0, 1e-6], ids=["default-deadline", "wall-deadline-gone"])
def test_exact_for_the_real_problem_when_sizes_are_multiples_of_the_quantum(deadline_ms: float) -> None:
    """With w_i and C_b multiples of Δ the discretized optimum is the real one (checked by brute force).

    With the wall deadline gone before the search starts (a planner descheduled on a busy machine: CI
    once planned one of these snapshots short of its optimum) the CPU floor still lets it finish."""
    policy = get_policy("tao", PlannerConfig(deadline_ms=deadline_ms))
    rng = random.Random(2)
    quantum = 256
    for _ in range(60):
        nodes = [{"id": f"r{b}", "capacity_tokens": quantum * rng.randint(0, 12)}
                 for b in range(rng.randint(1, 3))]
        sessions = []
        for i in range(rng.randint(1, 6)):
            tokens = quantum * rng.randint(2, 7) - 512
            cache = {}
            if rng.random() < 0.5:
                cache[rng.choice(nodes)["id"]] = {"tokens": rng.randint(0, tokens), "observed_at": 990.0}
            sessions.append({"id": f"s{i}", "tokens": tokens, "ready": rng.randint(0, 1), "cache": cache,
                             "shared_tokens": rng.randint(0, tokens)})
        snapshot = Snapshot.from_json({"now": 1000.0, "nodes": nodes, "sessions": sessions})
        problem = build_problem(snapshot, snapshot.waiting)
        assert policy.plan(snapshot).objective == brute_force(problem)


def test_discretized_plans_never_overfill_the_real_capacity() -> None:
    rng = random.Random(4)
    for _ in range(60):
        nodes = [{"id": f"r{b}", "capacity_tokens": rng.randint(0, 9000)} for b in range(rng.randint(1, 3))]
        sessions = [{"id": f"s{i}", "tokens": rng.randint(0, 4000)} for i in range(rng.randint(1, 7))]
        snapshot = Snapshot.from_json({"now": 0, "params": {"quantum_tokens": 300}, "nodes": nodes,
                                       "sessions": sessions})
        plan = get_policy("tao").plan(snapshot)
        for node in snapshot.nodes:
            taken = sum(snapshot.session(a.session).cost(snapshot.params) for a in plan.assignments
                        if a.node == node.id)
            assert taken <= node.free_tokens
