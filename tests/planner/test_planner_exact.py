"""The planner against brute force: the lexicographic optimum on hundreds of random small instances."""

from __future__ import annotations

import itertools
from dataclasses import replace
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_bench.reference import _closed, brute_force, milp_lexicographic, objective
from tao_harness.planner.bounds.certificate import certified_placement
from tao_harness.planner.bounds.credit import best_credit_subsets, k_optimal_options
from tao_harness.planner.bounds.lexicographic import (bound_holding, confined_bound, lexicographic_bound,
                                                      merged_bound, rest_bound)
from tao_harness.planner.rest.dp import BudgetExceeded, exact_dp
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import dembo_hammer
from tao_harness.planner.shared.problem import Packer, Problem, Solution, is_feasible
from tao_harness.planner.solve import _repacked, solve

from test_twins import twin_problem


def random_problem(
    rng: random.Random, *, credit_nodes: int | None = None, eligibility: bool = True
) -> Problem:
    """≤ 8 sessions × ≤ 3 nodes; small sizes so capacity binds, small values so ties happen."""
    n, m = rng.randint(0, 8), rng.randint(1, 3)
    values = []
    for _ in range(n):
        r, t = rng.randint(0, 1), rng.randint(0, 6)
        credited = rng.sample(range(m), min(m, rng.randint(0, 2) if credit_nodes is None else credit_nodes))
        row = []
        for b in range(m):
            if eligibility and rng.random() < 0.15:
                row.append(None)
            else:
                row.append((rng.randint(1, 5) if b in credited else 0, r, t))
        values.append(tuple(row))
    return Problem(
        session_ids=tuple(f"s{i}" for i in range(n)), node_ids=tuple(f"r{b}" for b in range(m)),
        size=tuple(rng.randint(0, 6) for _ in range(n)), room=tuple(rng.randint(0, 12) for _ in range(m)),
        values=tuple(values),
    )


@pytest.mark.parametrize("seed", range(3))
def test_solve_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(120):
        problem = random_problem(rng)
        solution = solve(problem, state_budget=10**6)
        assert is_feasible(problem, solution.placement)
        assert not solution.fallback
        assert objective(problem, dict(solution.placement)) == brute_force(problem), problem


def test_dp_alone_matches_brute_force() -> None:
    rng = random.Random(11)
    for _ in range(150):
        problem = random_problem(rng)
        placement, states = exact_dp(problem, Packer.for_problem(problem), 10**6)
        assert placement is not None and states >= 1
        assert objective(problem, placement) == brute_force(problem), problem


def test_certificate_is_right_whenever_it_claims_optimality() -> None:
    rng = random.Random(7)
    proven = 0
    for _ in range(160):
        problem = random_problem(rng, credit_nodes=rng.randint(0, 1), eligibility=False)
        result = certified_placement(problem, Packer.for_problem(problem))
        if result is None:  # only when some node's best credit subset is not unique
            continue
        placement, is_proven = result.placement, result.proven
        assert is_feasible(problem, placement)
        if is_proven:
            proven += 1
            assert objective(problem, placement) == brute_force(problem), problem
        else:
            assert objective(problem, placement) <= brute_force(problem)
    assert proven > 100  # it should settle most small instances


def test_residual_dp_after_an_unproven_certificate_is_exact() -> None:
    """Tight rooms and credit on one node: the certificate fixes the K part, the DP finishes the rest."""
    rng = random.Random(9)
    residual_cases = 0
    for _ in range(20_000):  # bounded: should the certificate prove (nearly) all of them, fail, not spin
        if residual_cases == 25:
            break
        n, m = rng.randint(4, 8), rng.randint(2, 3)
        values = []
        for _ in range(n):
            r, t, home = rng.randint(0, 1), rng.randint(0, 5), rng.randint(-1, m - 1)
            values.append(tuple((rng.randint(1, 40) if b == home else 0, r, t) for b in range(m)))
        problem = Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)),
                          tuple(rng.randint(1, 7) for _ in range(n)),
                          tuple(rng.randint(2, 10) for _ in range(m)),
                          tuple(values))
        certificate = certified_placement(problem, Packer.for_problem(problem))
        if certificate is None or certificate.proven:
            continue
        residual_cases += 1
        solution = solve(problem, state_budget=10**6)
        assert solution.solver == "dp" and is_feasible(problem, solution.placement)
        assert objective(problem, dict(solution.placement)) == brute_force(problem), problem
    assert residual_cases == 25, "too few unproven certificates to exercise the DP after one"


def test_best_credit_subsets_lists_every_tie() -> None:
    size, credit = [3, 3, 3], [5, 5, 7]
    ties = best_credit_subsets([0, 1, 2], size, credit, 6, limit=4)
    assert ties is not None and sorted(sorted(t) for t in ties) == [[0, 2], [1, 2]]
    assert best_credit_subsets([0, 1, 2], size, credit, 6, limit=1) is None  # more than the limit
    assert best_credit_subsets([0, 2], size, credit, 6, limit=1) == [[0, 2]]
    assert best_credit_subsets([0, 1], [4, 3], [5, 6], 5, limit=1) == [[1]]
    # {0, 1} (size 4) and {2} (size 3) tie at credit 6 with different sizes
    assert sorted(sorted(t) for t in best_credit_subsets([0, 1, 2], [2, 2, 3], [3, 3, 6], 4, limit=4) or []) \
        == [[0, 1], [2]]


def test_best_credit_subsets_are_every_optimum_by_enumeration() -> None:
    """With the sessions of every optimum and of none set aside before the tables (sizes of none, equal
    credits, clear ratios): still exactly the optimal subsets, none missing, none extra."""
    rng = random.Random(31)
    set_aside = 0
    for _ in range(400):
        n = rng.randint(1, 10)
        size = [rng.choice([0, 1, 2, 3, 5, 8, 13, 30]) * rng.choice([1, 4]) for _ in range(n)]
        credit = [rng.choice([1, 2, 3, 5, 8, 100, 1000]) * rng.choice([1, 1, 3]) for _ in range(n)]
        room = rng.randint(0, sum(size) + 3)
        items = list(range(n))
        feasible = [set(c) for r in range(n + 1) for c in itertools.combinations(items, r)
                    if sum(size[i] for i in c) <= room]
        top = max(sum(credit[i] for i in c) for c in feasible)
        optima = sorted(sorted(c) for c in feasible if sum(credit[i] for i in c) == top)
        listed = best_credit_subsets(items, size, credit, room, limit=10**6)
        assert listed is not None and sorted(sorted(t) for t in listed) == optima, (size, credit, room)
        positive = [i for i in items if size[i] > 0]
        fixed, _ = dembo_hammer(np.array([size[i] for i in positive], dtype=np.int64),
                                np.array([credit[i] for i in positive], dtype=np.int64), room)
        set_aside += len(fixed) > 0
    assert set_aside > 100  # the reduction was at work


def test_credit_ties_are_solved_exactly() -> None:
    """Equal credits on one node: every K-optimal subset is finished, the best kept, no fallback."""
    rng = random.Random(13)
    tied = 0
    for _ in range(200):
        n, m = rng.randint(3, 8), rng.randint(1, 3)
        values = []
        for _ in range(n):
            r, t, home = rng.randint(0, 1), rng.randint(0, 6), rng.randint(-1, m - 1)
            values.append(tuple((rng.choice([2, 4]) if b == home else 0, r, t) for b in range(m)))
        problem = Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)),
                          tuple(rng.randint(1, 5) for _ in range(n)),
                          tuple(rng.randint(2, 10) for _ in range(m)), tuple(values))
        options = k_optimal_options(problem, limit=4)
        if options is None or len(options) < 2:
            continue  # no tie, or too many for the certificate (the DP then takes the whole)
        tied += 1
        solution = solve(problem, state_budget=10**6)
        assert is_feasible(problem, solution.placement) and not solution.fallback
        assert objective(problem, dict(solution.placement)) == brute_force(problem), problem
    assert tied > 30


def test_budget_exhaustion_falls_back_to_a_feasible_plan() -> None:
    rng = random.Random(3)
    problem = Problem(
        session_ids=tuple(f"s{i}" for i in range(14)), node_ids=("a", "b", "c"),
        size=tuple(rng.randint(3, 9) for _ in range(14)), room=(17, 19, 23),
        values=tuple(tuple((rng.randint(0, 3), rng.randint(0, 1), rng.randint(0, 9)) for _ in range(3))
                     for _ in range(14)),
    )
    with pytest.raises(BudgetExceeded):
        exact_dp(problem, Packer.for_problem(problem), budget=50)
    solution = solve(problem, state_budget=50)
    assert solution.fallback and solution.solver in ("bfd", "split", "lagrange") and 0 < solution.states <= 50
    assert is_feasible(problem, solution.placement)
    exact = solve(problem, state_budget=10**6)
    assert not exact.fallback and exact.bound == objective(problem, dict(exact.placement))
    # the fallback's certified bound holds the optimum, and its plan is no better than the optimum
    assert objective(problem, dict(solution.placement)) <= objective(problem, dict(exact.placement))
    assert solution.bound is not None and objective(problem, dict(exact.placement)) <= solution.bound


def test_a_dp_growing_past_its_budget_gives_up_early() -> None:
    # 24 sessions over 6 equal rooms, every one worth something different: the layers multiply
    rng = random.Random(11)
    problem = Problem(
        session_ids=tuple(f"s{i}" for i in range(24)), node_ids=tuple("abcdef"),
        size=tuple(rng.randint(5, 40) for _ in range(24)), room=(60, 61, 62, 63, 64, 65),
        values=tuple(tuple((0, rng.randint(0, 1), rng.randint(0, 999)) for _ in range(6)) for _ in range(24)),
    )
    with pytest.raises(BudgetExceeded) as raised:
        exact_dp(problem, Packer.for_problem(problem), budget=20_000)
    assert raised.value.projected and raised.value.states < 10_000


def test_milp_reference_agrees_with_brute_force() -> None:
    rng = random.Random(5)
    for _ in range(4):
        problem = random_problem(rng)
        assert milp_lexicographic(problem) == brute_force(problem)


def test_the_milp_reference_takes_a_level_as_solved_only_when_its_dual_bound_closes() -> None:
    """HiGHS reported "optimal" at T = 477,440 with its dual bound at 477,695.99 (an independent 64 x 8
    snapshot; a feasible plan has 477,696): the reference trusts a level only when no integer above its
    value is left under the bound (the bound is of the minimized −value)."""
    assert not _closed(477_440, -477_695.99)
    assert _closed(477_696, -477_696.0000001) and _closed(10, -10.9) and not _closed(10, -11.0)
    assert not _closed(10, float("nan")) and _closed(10, None)
    # past a million the slack stays below a unit (HiGHS's bound of a proven K = 1,755,826 on an
    # independent long-context snapshot: 1,755,826.0000000005)
    assert _closed(1_755_826, -1_755_826.0) and _closed(1_755_826, -1_755_826.0000000005)
    assert not _closed(1_755_826, -1_755_827.0) and not _closed(10**12, -(10**12 + 1.0))


def test_the_milp_reference_proves_k_past_a_million() -> None:
    """Credits of long contexts sum past 10^6 at 160 x 8: the reference must still call K* proven."""
    values = ((1_500_000, 1, 5), (1_200_000, 1, 5), None), ((1_200_000, 0, 7), None, (900_000, 0, 7))
    problem = Problem(("a", "b"), ("r0", "r1", "r2"), (4, 4), (4, 3, 4), values)  # type: ignore[arg-type]
    assert milp_lexicographic(problem, levels=1) == (2_400_000,) == brute_force(problem)[:1]


def test_the_milp_reference_refuses_numbers_past_what_its_floats_tell_apart() -> None:
    """A fuzzed snapshot (a room of 2^36 quanta, credits of 2^40) got K = 3,399 from HiGHS, "optimal", beside
    a feasible 550,361,179,102: past 2^31 the reference raises (a check counts it unsolved), never answers."""
    values = ((2**40, 0, 1),), ((5, 1, 1),)
    problem = Problem(("a", "b"), ("r0",), (2**36, 1), (2**36 + 1,), values)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="past what HiGHS"):
        milp_lexicographic(problem, levels=1)
    assert brute_force(problem)[0] == 2**40 + 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 1), st.integers(0, 10**6)),
                min_size=1, max_size=12),
       st.data())
def test_packing_orders_sums_lexicographically(
    values: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    problem = Problem(tuple(f"s{i}" for i in range(len(values))), ("a",), tuple(1 for _ in values),
                      (len(values),),
                      tuple((v,) for v in values))
    packer = Packer.for_problem(problem)
    left = data.draw(st.lists(st.sampled_from(range(len(values))), unique=True))
    right = data.draw(st.lists(st.sampled_from(range(len(values))), unique=True))

    def triple_sum(chosen: list[int]) -> tuple[int, int, int, int]:
        return (sum(values[i][0] for i in chosen), sum(values[i][1] for i in chosen),
                sum(values[i][2] for i in chosen), len(chosen))

    packed_left, packed_right = (sum(packer.pack(values[i]) for i in side) for side in (left, right))
    assert packer.unpack(packed_left) == triple_sum(left)
    assert (packed_left < packed_right) == (triple_sum(left) < triple_sum(right))


def best_by_credited_pairs(problem: Problem) -> dict[frozenset[tuple[int, int]], tuple[int, int, int, int]]:
    """Brute force: per set of credited pairs a plan collects credit on, its best (K, R, T, N)."""
    best: dict[frozenset[tuple[int, int]], tuple[int, int, int, int]] = {}
    for rooms_of in itertools.product(range(-1, problem.m), repeat=problem.n):
        placement = {i: b for i, b in enumerate(rooms_of) if b >= 0}
        if not is_feasible(problem, placement):
            continue
        pairs = frozenset((i, b) for i, b in placement.items()
                          if problem.values[i][b][0] > 0)  # type: ignore[index]
        best[pairs] = max(best.get(pairs, (-1, 0, 0, 0)), objective(problem, placement))
    return best


def test_the_bound_around_each_k_optimal_option_holds_every_plan_holding_it() -> None:
    """bound_holding(option) ≥ every plan collecting its credit on exactly that option's pairs, so the
    best of them bounds the optimum; and it is never looser than the whole problem's surrogate."""
    rng = random.Random(23)
    tighter = 0
    for _ in range(150):
        problem = random_problem(rng, credit_nodes=rng.randint(0, 1))
        if problem.n > 7:
            continue
        options = k_optimal_options(problem, 8)
        if not options:
            continue
        best = best_by_credited_pairs(problem)
        packer = Packer.for_problem(problem)
        k_star = objective(problem, options[0])[0]
        whole = lexicographic_bound(problem, packer, k_star)
        for option in options:
            around = bound_holding(problem, option, k_star)
            held = best.get(frozenset(option.items()))
            assert held is None or around >= held, (problem, option)
            assert around <= whole
            tighter += around < whole
        assert max(bound_holding(problem, option, k_star) for option in options) >= brute_force(problem)
    assert tighter >= 10  # (15 of these draws)


def test_the_confined_bound_holds_every_placement_and_tightens_the_merged_one() -> None:
    """With sessions only one room can take, overflowing it: their knapsack there plus every other session
    whole bounds the (R, T, N) of every feasible placement (brute force over the problem with its credit
    zeroed, so (R, T, N) comes first); the whole (R, T, N) bound is never above it, and on some draws it
    is below the merged room's alone (a ready session pinned to a full room)."""
    rng = random.Random(5)
    checked = below_merged = 0
    for _ in range(400):
        drawn = random_problem(rng)
        problem = replace(drawn, values=tuple(tuple(None if v is None else (0, v[1], v[2]) for v in row)
                                              for row in drawn.values))
        packer = Packer.for_problem(problem)
        confined = confined_bound(problem, packer)
        if confined is None:
            continue
        checked += 1
        best = brute_force(problem)
        assert packer.unpack(confined)[1:] >= best[1:], problem
        assert rest_bound(problem, packer) <= confined
        below_merged += confined < merged_bound(problem, packer)
    assert checked >= 40
    assert below_merged >= 5


def test_an_unproven_plan_is_re_packed_over_every_session() -> None:
    # s0 (not ready) holds r0's credit; s1, as large and credited as much there, is ready but left out:
    # the searches held s0 fixed, the re-pack trades it for s1 (K kept) and proves the plan at its bound
    values = (((5, 0, 10), (0, 0, 10)), ((5, 1, 10), (0, 1, 10)))
    problem = Problem(("s0", "s1"), ("r0", "r1"), (2, 2), (2, 0), values)
    packer = Packer.for_problem(problem)
    unproven = Solution({0: 0}, "lagrange", fallback=True, bound=(5, 1, 10, 1))
    repacked = _repacked(problem, packer, unproven, None)
    assert repacked.placement == {1: 0} and not repacked.fallback
    assert objective(problem, repacked.placement) == repacked.bound
    looser = Solution({0: 0}, "lagrange", fallback=True, bound=(5, 2, 10, 1))
    still = _repacked(problem, packer, looser, None)
    assert still.placement == {1: 0} and still.fallback and still.bound == looser.bound
    best = Solution({1: 0}, "lagrange", fallback=True, bound=(5, 2, 10, 1))
    assert _repacked(problem, packer, best, None) is best  # nothing better: the plan as it was


def test_tied_k_optimal_placements_are_searched_best_bound_first_and_soundly() -> None:
    """Credits tied on several nodes (forks of a few templates): many K-optimal placements, each bounded,
    the best searched first. Unlimited, the plan is the optimum; with a deadline that cuts the search
    anywhere, its bound still holds every plan and a plan called optimal is."""
    rng = random.Random(11)
    cut = 0
    for trial in range(160):
        problem = twin_problem(rng, rng.randint(5, 8), rng.randint(2, 3))
        best = brute_force(problem)
        solved = solve(problem, state_budget=20_000)
        assert objective(problem, solved.placement) == best and not solved.fallback
        rushed = solve(problem, state_budget=20_000, deadline=Deadline.after(rng.choice([0.0, 2e-4, 1e-3])))
        assert is_feasible(problem, rushed.placement)
        assert rushed.bound is not None and rushed.bound >= best
        assert rushed.fallback or objective(problem, rushed.placement) == best
        cut += rushed.fallback
    assert cut >= 1  # some searches were cut short
