"""Two nodes of a K placement re-solved together (planner/k/pairs.py, used by planner/k/lagrange.py): the
pair picked has the most knapsack slack at the multipliers, and the re-solved placement is feasible, never
worse, and the best of all that keep the other nodes as they were (against enumeration)."""

from __future__ import annotations

import random
from itertools import combinations

import numpy as np

from planner_bench.shapes import SHAPES
from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.lagrange import _two_nodes_resolved, credit_matrix
from tao_harness.planner.k.pairs import pair_problem, widest_pair
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Problem, build_problem, is_feasible
from test_k_level import every_k_placement, k_of


def small_problems(seed: str, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        shape = rng.choice(["multi", "all", "everywhere", "templates"])
        snapshot = SHAPES[shape](rng, rng.randint(2, 6), 3)
        problem = build_problem(snapshot, snapshot.waiting)
        credit = credit_matrix(problem)
        if any(credit):
            yield rng, problem, credit


def arrays_of(problem: Problem, credit: list[dict[int, int]]) -> DualArrays:
    return DualArrays.of(credit, list(problem.room), np.array(problem.size, dtype=np.int64))


def slack_of(problem: Problem, credit: list[dict[int, int]], placement: dict[int, int], lam: np.ndarray,
             b: int) -> float:
    """Node b's best reduced profit by enumeration, less what `placement` makes of it there."""
    column = credit[b]
    best = max(sum(column[i] - lam[i] for i in chosen)
               for r in range(len(column) + 1) for chosen in combinations(column, r)
               if sum(problem.size[i] for i in chosen) <= problem.room[b])
    return best - sum(column[i] - lam[i] for i, at in placement.items() if at == b)


def test_the_pair_picked_has_the_most_slack() -> None:
    checked = 0
    for rng, problem, credit in small_problems("widest", 60):
        placement = rng.choice(every_k_placement(problem))
        lam = np.array([rng.choice([0.0, rng.uniform(0, 5000)]) for _ in range(problem.n)])
        slack = [slack_of(problem, credit, placement, lam, b) for b in range(problem.m)]
        a, b = widest_pair(arrays_of(problem, credit), placement, lam)
        most = max(slack[x] + slack[y] for x, y in combinations(range(3), 2))
        assert a < b and slack[a] + slack[b] >= most - 1e-6
        checked += 1
    assert checked >= 30


def test_two_nodes_re_solved_are_the_best_that_keep_the_third() -> None:
    checked = improved = 0
    for rng, problem, credit in small_problems("resolved", 80):
        placements = every_k_placement(problem)
        placement = rng.choice(placements)
        lam = np.array([rng.uniform(0, 3000) for _ in range(problem.n)])
        arrays = arrays_of(problem, credit)
        nodes = widest_pair(arrays, placement, lam)
        found, value = _two_nodes_resolved(problem, credit, arrays, placement, k_of(problem, placement), lam,
                                           Deadline.after(5.0, "cpu"))
        assert is_feasible(problem, found) and value == k_of(problem, found) >= k_of(problem, placement)
        kept = {i: b for i, b in placement.items() if b not in nodes}
        assert {i: b for i, b in found.items() if b not in nodes} == kept
        keeping = [p for p in placements if {i: b for i, b in p.items() if b not in nodes} == kept]
        best = max(k_of(problem, p) for p in keeping)
        assert value == best
        pair, pool = pair_problem(problem, credit, placement, nodes)
        assert pair.m == 2 and set(pool) >= {i for i, b in placement.items() if b in nodes}
        checked += 1
        improved += value > k_of(problem, placement)
    assert checked >= 40 and improved >= 10
