"""Rooms of millions of quanta (1-token quanta on large replicas, or a replica with far more room than
demand): the planner's subset-sum bitsets and knapsack tables are counted in the sizes' gcd, and past
their work limits give way to a valid looser answer instead of running for seconds (seen: 6 s and 640 MB
for one 160-session snapshot at 1-token quanta)."""

from __future__ import annotations

import random
import time

import pytest

from tao_harness.config import PlannerConfig
from tao_harness.planner.bounds import certificate, credit
from tao_harness.planner.bounds.certificate import fullest_fills
from tao_harness.planner.bounds.credit import best_credit_subsets
from tao_harness.planner.packing import split
from tao_harness.planner.packing.split import fullest_subset
from tao_harness.planner.shared import int_knapsack
from tao_harness.planner.shared.int_knapsack import surrogate_knapsack
from tao_harness.planner.shared.problem import build_problem, is_feasible, objective
from tao_harness.policies.registry import get_policy
from tao_harness.types import CacheEntry, NodeState, PlannerParams, SessionView, Snapshot


def test_fullest_fills_in_the_sizes_gcd_and_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    size = [6, 9, 15]  # gcd 3: the subset sums 0, 6, 9, 15, 21, 24, 30
    assert fullest_fills([0, 1, 2], size, [5, 8, 23, 29, 31, 100]) == [0, 6, 21, 24, 30, 30]
    monkeypatch.setattr(certificate, "FILL_BITS", 3)  # 3 items × 10 grains: past it
    assert fullest_fills([0, 1, 2], size, [5, 8, 31, 100]) == [5, 8, 30, 30]  # the rooms, down to the total


def test_fullest_subset_in_the_sizes_gcd_and_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    size = [10, 4, 6, 8]
    assert sorted(fullest_subset([0, 1, 2, 3], size, 14)) == [0, 1]  # 14 exactly, the earlier items
    assert fullest_subset([0, 1, 2, 3], size, 100) == [0, 1, 2, 3]
    monkeypatch.setattr(split, "FILL_BITS", 1)
    assert fullest_subset([0, 1, 2, 3], size, 13) == [0]  # in order while each fits: 10, then 4 > 3 left


def test_best_credit_subsets_in_the_sizes_gcd_and_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    size, gain = [4000, 6000, 10000], [5, 7, 11]
    found = best_credit_subsets([0, 1, 2], size, gain, 15999, limit=4)
    assert found is not None and [sorted(s) for s in found] == [[0, 2]]  # 14,000 of 15,999
    monkeypatch.setattr(credit, "_TABLE_CELLS", 10)  # 3 items × 8 grains of 2,000 tokens: past it
    assert best_credit_subsets([0, 1, 2], size, gain, 15999, limit=4) is None


def test_surrogate_knapsack_in_the_sizes_gcd_and_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    size, gain = [3000, 5000, 7000, 2000], [4, 6, 9, 1]
    assert sorted(surrogate_knapsack([0, 1, 2, 3], size, gain, 10999) or []) == [0, 2]  # 13 in 10,000
    monkeypatch.setattr(int_knapsack, "_DP_CELLS", 5)
    assert surrogate_knapsack([0, 1, 2, 3], size, gain, 10999) is None
    assert surrogate_knapsack([0, 1], size, gain, 10999) == [0, 1]  # all fit: no DP needed


def large_rooms_snapshot(rng: random.Random, nodes: int) -> Snapshot:
    """160 sessions of up to 1M tokens at 1-token quanta, replicas with up to a hundred times the demand
    each, or nearly none; credit on one node (the certificate) or several (the general path)."""
    params = PlannerParams(quantum_tokens=1)
    ids = [f"r{b}" for b in range(nodes)]
    views = []
    for i in range(160):
        tokens = rng.randint(1000, 1_000_000)
        cache = {b: CacheEntry(rng.randint(0, tokens), 1000.0 - rng.uniform(0, 30))
                 for b in rng.sample(ids, rng.choice([0, 1, 1, min(2, nodes)]))}
        views.append(SessionView(id=f"s{i}", tokens=tokens, ready=rng.randint(0, 1), cache=cache, turn=3))
    demand = sum(v.tokens + params.reserve_tokens for v in views)
    node_states = tuple(NodeState(id=b, capacity_tokens=int(demand * rng.choice([0.01, 0.3, 3.0, 100.0])))
                        for b in ids)
    return Snapshot(now=1000.0, params=params, nodes=node_states, sessions=tuple(views))


@pytest.mark.parametrize("nodes", [1, 3, 8])
def test_a_plan_at_one_token_quanta_is_feasible_bounded_and_within_its_deadline(nodes: int) -> None:
    """Feasible, bounded, and not a runaway: its CPU time (the planning thread's, which a busy machine
    does not inflate) within 2 s, where the deadline is 30 ms and these snapshots took 1-6 s before."""
    policy = get_policy("tao", PlannerConfig(deadline_clock="cpu"))
    rng = random.Random(nodes)
    for _ in range(3):
        snapshot = large_rooms_snapshot(rng, nodes)
        started = time.thread_time()
        plan = policy.plan(snapshot)
        assert time.thread_time() - started < 2.0
        problem = build_problem(snapshot, snapshot.waiting)
        index = {sid: k for k, sid in enumerate(problem.session_ids)}
        placement = {index[a.session]: problem.node_ids.index(a.node) for a in plan.assignments}
        assert is_feasible(problem, placement)
        assert plan.bound is not None and tuple(plan.bound) >= objective(problem, placement)
        assert tuple(plan.objective) == objective(problem, placement)
