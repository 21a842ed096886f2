"""Where the K level's multipliers start (planner/k/start.py): the start's bound L(λ) holds every placement,
is never above that of the second-best credits (one of its guesses), and with scarce rooms is far below it."""

from __future__ import annotations

import random
from itertools import permutations

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.dual import lagrangian_bound
from tao_harness.planner.k.lagrange import credit_matrix
from tao_harness.planner.k.start import starting_multipliers
from tao_harness.planner.shared.knapsack import float_slack
from tao_harness.planner.shared.problem import Problem
from test_k_dual import best_subset, small_k_problems
from test_k_level import every_k_placement, k_of


def second_best_credits(arrays: DualArrays) -> np.ndarray:
    """Per local session its second-best credit (0 when not shared): the guess the start used to be."""
    lam = np.zeros(len(arrays.sessions))
    for s in np.flatnonzero(arrays.shared):
        lam[s] = sorted(arrays.pair_credit[arrays.pair_session == s])[-2]
    return lam


def local(arrays: DualArrays, lam: np.ndarray) -> np.ndarray:
    return np.where(arrays.shared, lam[arrays.sessions], 0.0)


def test_lagrangian_bound_is_each_nodes_knapsack_plus_the_multipliers() -> None:
    rng = random.Random("bound-at")
    for problem, credit in small_k_problems("bound-at-problems", 120):
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        lam = np.array([rng.uniform(0, 3000) if shared else 0.0 for shared in arrays.shared])
        by_session = dict(zip(arrays.sessions.tolist(), lam.tolist()))
        expected = sum(lam)
        for b, column in enumerate(credit):
            profit = [column.get(i, 0) - by_session.get(i, 0.0) for i in range(problem.n)]
            expected += best_subset(list(problem.size), profit, [i for i in column if profit[i] > 0],
                                    problem.room[b])
        assert abs(lagrangian_bound(arrays, lam) - expected) < 1e-6


def test_the_start_bounds_every_placement_and_no_worse_than_the_second_best_credits() -> None:
    checked = 0
    for problem, credit in small_k_problems("start-problems", 200):
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        lam = starting_multipliers(arrays, problem.n)
        assert lam.shape == (problem.n,) and (lam >= 0).all()
        assert not lam[np.setdiff1d(np.arange(problem.n), arrays.sessions[arrays.shared])].any()
        bound = lagrangian_bound(arrays, local(arrays, lam))
        optimum = max(k_of(problem, placement) for placement in every_k_placement(problem))
        assert bound + float_slack(bound) >= optimum
        assert bound <= lagrangian_bound(arrays, second_best_credits(arrays)) + 1e-6
        checked += arrays.shared.any()
    assert checked >= 40


def test_scarce_rooms_start_near_the_optimum_where_second_best_credits_count_every_session() -> None:
    """Twelve sessions credited on three nodes whose rooms hold one each: the second-best credits add up the
    multipliers of the nine left out."""
    rng = random.Random("scarce")
    n, m = 12, 3
    values = tuple(tuple((rng.randint(50, 100) * 10, 0, 0) for _ in range(m)) for _ in range(n))
    problem = Problem(tuple(f"s{i}" for i in range(n)), tuple(f"n{b}" for b in range(m)), (4,) * n, (5,) * m,
                      values)
    arrays = DualArrays.of(credit_matrix(problem), list(problem.room), np.array(problem.size))
    optimum = max(sum(values[i][b][0] for b, i in enumerate(chosen)) for chosen in permutations(range(n), m))
    start = lagrangian_bound(arrays, local(arrays, starting_multipliers(arrays, n)))
    assert lagrangian_bound(arrays, second_best_credits(arrays)) > 3 * optimum
    assert optimum <= start + float_slack(start) <= 1.05 * optimum
