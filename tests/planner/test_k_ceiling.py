"""The K level's packing-only bound for flat credit against brute force: the size-nested ceiling
(planner/k/ceiling.py) bounds every placement and sees fragmentation the LP does not."""

from __future__ import annotations

import random
from itertools import product

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.ceiling import k_ceiling
from tao_harness.planner.k.lp import k_relaxation


def best_k(credit: list[dict[int, int]], size: tuple[int, ...], room: tuple[int, ...]) -> int:
    """K* by enumerating every placement of credited sessions on credit nodes (tiny problems)."""
    sessions = sorted({i for column in credit for i in column})
    options = [[None] + [b for b, column in enumerate(credit) if i in column] for i in sessions]
    best = 0
    for choice in product(*options):
        used = [0] * len(room)
        for i, b in zip(sessions, choice):
            if b is not None:
                used[b] += size[i]
        if all(u <= r for u, r in zip(used, room)):
            best = max(best, sum(credit[b][i] for i, b in zip(sessions, choice) if b is not None))
    return best


FlatProblem = tuple[list[dict[int, int]], tuple[int, ...], tuple[int, ...]]  # credit, size, room


def flat_problems(seed: str, count: int) -> list[FlatProblem]:
    """Flat credit (one value per session) on random subsets of 1-3 rooms, few size kinds: fragmentation."""
    rng = random.Random(seed)
    problems = []
    for _ in range(count):
        m, n = rng.randint(1, 3), rng.randint(1, 7)
        room = tuple(rng.randint(0, 14) for _ in range(m))
        size = tuple(rng.choice([3, 4, 5, 7]) for _ in range(n))
        credit: list[dict[int, int]] = [{} for _ in range(m)]
        for i in range(n):
            k = rng.choice([1, 2, 3])
            for b in rng.sample(range(m), rng.randint(0, m)):
                if size[i] <= room[b]:
                    credit[b][i] = k
        problems.append((credit, size, room))
    return problems


def test_the_nested_ceiling_bounds_every_placement() -> None:
    for credit, size, room in flat_problems("ceiling", 150):
        ceiling = k_ceiling(credit, size, room)
        assert ceiling is not None and ceiling >= best_k(credit, size, room)


def test_the_nested_ceiling_sees_fragmentation_the_lp_does_not() -> None:
    # three sessions of size 6 and credit 1 fit two rooms of 10 one each: K* = 2, the LP says 20/6
    credit = [{0: 1, 1: 1, 2: 1}, {0: 1, 1: 1, 2: 1}]
    size, room = (6, 6, 6), (10, 10)
    relaxation = k_relaxation(DualArrays.of(credit, list(room), np.array(size)))
    assert relaxation is not None and relaxation.bound == 3
    assert k_ceiling(credit, size, room) == 2 == best_k(credit, size, room)
