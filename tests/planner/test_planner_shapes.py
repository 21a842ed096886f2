"""The planner on every snapshot shape (scripts/planner_bench/shapes.py): exact against brute force and the
MILP, and every plan's certified bound holds the true optimum (so its proven gap is never optimistic)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Iterator

import pytest

from planner_bench.reference import brute_force, milp_lexicographic, objective
from planner_bench.shapes import SHAPES
from tao_harness.config import PlannerConfig
from tao_harness.planner.k.lagrange import k_level
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Problem, build_problem, is_feasible
from tao_harness.planner.solve import solve
from tao_harness.policies.registry import get_policy
from tao_harness.types import Plan, Snapshot

UNLIMITED = 10**7


def drawn(shape: str, seed: str, count: int, sessions: int | None = None, nodes: int | None = None
          ) -> Iterator[tuple[Snapshot, Problem]]:
    """`count` snapshots of `shape` with their problems; sizes drawn small when not given."""
    rng = random.Random(f"{seed}/{shape}")
    for _ in range(count):
        n = sessions if sessions is not None else rng.randint(12, 24)
        snapshot = SHAPES[shape](rng, n, nodes if nodes is not None else rng.choice([2, 4]))
        yield snapshot, build_problem(snapshot, snapshot.waiting)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_matches_brute_force(shape: str) -> None:
    rng = random.Random(f"brute/{shape}")
    for _ in range(25):
        snapshot = SHAPES[shape](rng, rng.randint(1, 7), rng.randint(1, 3))
        problem = build_problem(snapshot, snapshot.waiting)
        solution = solve(problem, state_budget=UNLIMITED)
        assert is_feasible(problem, solution.placement) and not solution.fallback
        found = objective(problem, dict(solution.placement))
        assert found == brute_force(problem) == solution.bound, snapshot.to_json()


# shapes whose (R, T, N) the planner does not prove at 12-24 sessions even without a deadline: with credit on
# nearly every node for every session the whole DP's layers outgrow its budget, and the bound around the
# common pairs stays above the plan (fleet, 20 x 4: R̄ 9 against the optimum's 7); the plans are still the
# MILP's optimum and K is proven
_REST_UNPROVEN_SMALL = {"fleet"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_matches_the_milp(shape: str) -> None:
    for snapshot, problem in drawn(shape, "milp", 4):
        solution = solve(problem, state_budget=UNLIMITED)
        assert is_feasible(problem, solution.placement)
        found = objective(problem, dict(solution.placement))
        assert found == milp_lexicographic(problem), snapshot.to_json()
        assert solution.bound is not None and solution.bound >= found and solution.bound[0] == found[0]
        if shape not in _REST_UNPROVEN_SMALL:
            assert solution.bound == found


@pytest.mark.parametrize("shape", ["eligible", "all"])
def test_the_rest_around_a_restricted_k_placement_is_searched(shape: str) -> None:
    """Past the whole-problem DP's size, with eligibility subsets: the sessions around the K level's
    placement are searched (branch and bound, then the residual's DP), not only packed and repaired, so
    the plan is the MILP's lexicographic optimum among the plans holding its credited pairs (the repair
    alone was short in R or T on most of these), and mostly the optimum itself (where it is not, another
    K-optimal placement leaves more room: credit ties)."""
    at_optimum = 0
    for snapshot, problem in drawn(shape, "restricted-rest", 6, 36, 3):
        solution = solve(problem, state_budget=UNLIMITED)
        assert is_feasible(problem, solution.placement)
        found = objective(problem, dict(solution.placement))
        credited = {i: b for i, b in solution.placement.items()
                    if problem.values[i][b][0] > 0}  # type: ignore[index]
        assert found == best_holding(problem, credited), snapshot.to_json()
        at_optimum += found == milp_lexicographic(problem)
    assert at_optimum >= 4


def best_holding(problem: Problem, held: dict[int, int]) -> tuple[int, ...]:
    """The lexicographic optimum of the plans holding `held`: its value plus the MILP's best of the other
    sessions in the rooms it leaves."""
    rooms = list(problem.room)
    for i, b in held.items():
        rooms[b] -= problem.size[i]
    rest = [i for i in range(problem.n) if i not in held]
    others = replace(problem, session_ids=tuple(problem.session_ids[i] for i in rest),
                     size=tuple(problem.size[i] for i in rest), room=tuple(rooms),
                     values=tuple(problem.values[i] for i in rest))
    return tuple(a + b for a, b in zip(objective(problem, held), milp_lexicographic(others)))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_k_bound_holds_the_optimum_on_large_snapshots(shape: str) -> None:
    """48 sessions × 6 nodes under a short deadline: whatever the plan, K ≤ K* ≤ K̄; K̄ = K means K*."""
    checked = 0
    for _, problem in drawn(shape, "bound", 2, 48, 6):
        solution = solve(problem, state_budget=UNLIMITED, deadline=Deadline.after(0.02))
        assert is_feasible(problem, solution.placement) and solution.bound is not None
        try:
            (k_star,) = milp_lexicographic(problem, time_limit_s=8, levels=1)
        except RuntimeError:  # HiGHS did not prove its K within the limit: no reference for this one
            continue
        checked += 1
        k = objective(problem, dict(solution.placement))[0]
        assert k <= k_star <= solution.bound[0]
        if solution.bound[0] == k:
            assert k == k_star
    assert checked >= 1


@pytest.mark.parametrize("shape", ["multi", "all"])
def test_the_lagrangian_k_level_proves_k_on_shared_credit(shape: str) -> None:
    """Credit on several nodes (the certificate's blind spot): the K level's bound meets its placement."""
    proven = 0
    for _, problem in drawn(shape, "k", 10, 64, 8):
        level = k_level(problem)
        assert is_feasible(problem, level.placement)
        assert level.value == sum(problem.values[i][b][0] for i, b in level.placement.items())  # type: ignore
        proven += level.proven
    assert proven >= 9


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_plan_proven_under_the_deadline_is_the_lexicographic_optimum(shape: str) -> None:
    """32 sessions x 4 nodes under the live deadline: every plan's bound holds the MILP's optimum, and a
    plan claiming a proof (bound = objective: certificate, residual search, unique K-optimal credited
    pairs) is that optimum. Sound whatever the machine's speed: a slower search only proves less. The
    exact program's own admissions (`Plan.solved`) are what the MILP solves for (`busy` plans also admit
    sessions that interrupts made room for); the plan's bound exceeds its objective by the program's gap."""
    policy = get_policy("tao", PlannerConfig(deadline_clock="cpu"))
    for snapshot, problem in drawn(shape, "proven", 3, 32, 4):
        plan = policy.plan(snapshot)
        optimum = milp_lexicographic(problem)
        assert plan.bound is not None and plan.solved is not None
        solved_bound = tuple(s + b - o for s, b, o in zip(plan.solved, plan.bound, plan.objective))
        assert plan.solved <= optimum <= solved_bound, snapshot.to_json()
        if tuple(plan.bound) == tuple(plan.objective):
            assert plan.solved == optimum, snapshot.to_json()


def test_a_passed_deadline_still_gives_a_feasible_plan_and_a_valid_bound() -> None:
    rng = random.Random("late")
    snapshot = SHAPES["all"](rng, 40, 4)
    problem = build_problem(snapshot, snapshot.waiting)
    late = solve(problem, state_budget=UNLIMITED, deadline=Deadline.after(-1))
    exact = solve(problem, state_budget=UNLIMITED)
    assert is_feasible(problem, late.placement) and late.bound is not None
    assert objective(problem, dict(late.placement)) <= objective(problem, dict(exact.placement)) <= late.bound


def test_plans_carry_their_bound_and_gap_through_json() -> None:
    rng = random.Random("json")
    policy = get_policy("tao", PlannerConfig())
    for shape in ("ours", "all"):
        plan = policy.plan(SHAPES[shape](rng, 24, 4))
        assert plan.bound is not None and plan.objective <= plan.bound
        again = Plan.from_json(plan.to_json())
        assert again.bound == plan.bound and again.gap == plan.gap
    proven = Plan(policy="tao", solver="dp", objective=(5, 1, 9, 2), bound=(5, 1, 9, 2))
    assert proven.gap == ("", 0.0)
    short_in_r = Plan(policy="tao", solver="lagrange", objective=(5, 1, 9, 2), bound=(5, 4, 0, 0))
    assert short_in_r.gap == ("R", 0.75)
    assert Plan(policy="vllm-rr", solver="rr", objective=(0, 0, 0, 1)).gap is None
