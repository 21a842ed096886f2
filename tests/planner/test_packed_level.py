"""The residual around a K placement solved as a K level over packed (R, T, N) values
(planner/rest/packed_level.py): against brute force on small residuals with eligibility subsets, and against
the MILP on the residuals of 32 x 8 snapshots with eligibility subsets."""

from __future__ import annotations

import random

from planner_bench.reference import brute_force, milp_lexicographic
from planner_bench.shapes import SHAPES
from tao_harness.planner.bounds.certificate import residual_problem
from tao_harness.planner.bounds.credit import k_optimal_options
from tao_harness.planner.rest.packed_level import packed_level
from tao_harness.planner.shared.problem import Packer, Problem, build_problem, is_feasible, objective
from tao_harness.types import MAX_TOKENS


def restricted_residual(rng: random.Random, n: int, m: int) -> Problem:
    """Sessions worth (0, r, t) on the nodes they may use (a third of them only some), large beside the
    rooms: the residual's shape."""
    values = []
    for _ in range(n):
        value = (0, rng.randint(0, 1), rng.randint(1, 60))
        allowed = rng.sample(range(m), rng.randint(1, m)) if rng.random() < 0.35 else range(m)
        values.append(tuple(value if b in allowed else None for b in range(m)))
    return Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)),
                   tuple(rng.randint(1, 9) for _ in range(n)), tuple(rng.randint(0, 16) for _ in range(m)),
                   tuple(values))


def test_a_proven_packed_level_is_the_lexicographic_optimum_and_its_bound_holds_it() -> None:
    rng = random.Random("packed-level")
    proven = 0
    for _ in range(150):
        residual = restricted_residual(rng, rng.randint(0, 7), rng.randint(1, 3))
        packer = Packer.for_problem(residual)
        level = packed_level(residual, packer, None)
        assert level is not None and is_feasible(residual, level.placement)
        found, optimum = objective(residual, level.placement), brute_force(residual)
        assert packed(packer, found) == level.value
        assert level.value <= packed(packer, optimum) <= level.bound
        if level.proven:
            assert found == optimum
        proven += level.proven
    assert proven >= 140  # unlimited in time, its search settles these


def packed(packer: Packer, plan: tuple[int, ...]) -> int:
    """A plan's (R, T, N) as the packed sum of its pairs' values (each pair adds 1 to the N field)."""
    _, r, t, count = plan
    return packer.pack((0, r, t)) - 1 + count


def test_values_past_the_k_levels_exact_range_are_declined() -> None:
    big = MAX_TOKENS // 2
    residual = Problem(("a", "b"), ("r0",), (1, 1), (2,), (((0, 1, big),), ((0, 0, big),)))
    assert packed_level(residual, Packer.for_problem(residual), None) is None


def test_on_residuals_of_eligibility_snapshots_it_proves_the_milps_optimum() -> None:
    """The residuals the planner searches around the K-optimal placement of 32 x 8 snapshots with
    eligibility subsets (where the branch and bound's nested bound is loose): the packed level, unlimited
    in time, proves most of them, and what it proves is the MILP's lexicographic optimum of the residual."""
    rng = random.Random("packed-level/eligible")
    proven = 0
    for _ in range(8):
        snapshot = SHAPES["eligible"](rng, 32, 8)
        problem = build_problem(snapshot, snapshot.waiting)
        (forced,) = k_optimal_options(problem, 1) or [None]
        assert forced is not None  # eligible: credit on one node per session, its K-optimal subsets unique
        residual, _ = residual_problem(problem, forced)
        level = packed_level(residual, Packer.for_problem(residual), None)
        assert level is not None and is_feasible(residual, level.placement)
        if level.proven:
            assert objective(residual, level.placement) == milp_lexicographic(residual), snapshot.to_json()
            proven += 1
    assert proven >= 7
