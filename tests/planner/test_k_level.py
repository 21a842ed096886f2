"""The K level's parts (planner/k/lagrange.py, planner/shared/knapsack.py, planner/k/lp.py,
planner/k/polish.py, planner/k/reshuffle.py) against brute force: the knapsack is exact, every LP-derived
bound holds, shift moves never lose K, and the credits' gcd is used."""

from __future__ import annotations

import random
from itertools import combinations, product
from typing import Iterator

import numpy as np

from planner_bench.reference import brute_force, milp_lexicographic
from planner_bench.shapes import SHAPES
from tao_harness.planner.bounds.lexicographic import bound_holding, lexicographic_bound
from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.forced import forced_tables
from tao_harness.planner.k.lagrange import KLevel, _larger_twins, credit_matrix, k_level
from tao_harness.planner.k.lp import k_relaxation
from tao_harness.planner.k.polish import polish_placement
from tao_harness.planner.k.reshuffle import reshuffle
from tao_harness.planner.k.unique import k_common_pairs, k_optimal_placements
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import knapsack_kernel
from tao_harness.planner.shared.problem import Packer, Problem, build_problem, is_feasible
from tao_harness.types import Snapshot


def k_of(problem: Problem, placement: dict[int, int]) -> int:
    return sum(problem.values[i][b][0] for i, b in placement.items())  # type: ignore[index]


def every_k_placement(problem: Problem) -> list[dict[int, int]]:
    """Every feasible placement of credited sessions on credit nodes (tiny problems)."""
    credit = credit_matrix(problem)
    options = [[None] + [b for b in range(problem.m) if i in credit[b]] for i in range(problem.n)]
    found = []
    for choice in product(*options):
        placement = {i: b for i, b in enumerate(choice) if b is not None}
        if is_feasible(problem, placement):
            found.append(placement)
    return found


def knapsack(items: list[int], size: tuple[int, ...], profit: dict[int, float], room: int
             ) -> tuple[float, list[int]]:
    """The compiled kernel's most profit of a subset of `items` within `room`, and that subset."""
    value, take = knapsack_kernel(np.array([size[i] for i in items], dtype=np.int64),
                                  np.array([profit[i] for i in items], dtype=np.float64), room)
    return value, [i for i, taken in zip(items, take) if taken]


def assert_knapsack_exact(size: tuple[int, ...], profit: dict[int, float], room: int) -> None:
    """`knapsack` reaches the optimum found by enumeration (tiny item counts), and its choice fits."""
    n = len(size)
    value, chosen = knapsack(list(range(n)), size, profit, room)
    best = max(sum(profit[i] for i in subset) for r in range(n + 1) for subset in combinations(range(n), r)
               if sum(size[i] for i in subset) <= room)
    assert abs(value - max(best, 0.0)) < 1e-9
    assert sum(size[i] for i in chosen) <= room and abs(sum(profit[i] for i in chosen) - value) < 1e-9


def small_problems(seed: str, count: int) -> list[Problem]:
    rng = random.Random(seed)
    problems = []
    for _ in range(count):
        shape = rng.choice(["multi", "all", "adversarial", "crowded", "degenerate"])
        snapshot = SHAPES[shape](rng, rng.randint(1, 6), rng.randint(1, 3))
        problems.append(build_problem(snapshot, snapshot.waiting))
    return problems


def test_knapsack_is_exact_and_its_choice_fits() -> None:
    rng = random.Random("knapsack")
    for _ in range(400):
        n = rng.randint(0, 9)
        size = tuple(rng.randint(0, 12) for _ in range(n))
        profit = {i: rng.choice([rng.uniform(-3, 10), float(rng.randint(1, 5))]) for i in range(n)}
        room = rng.randint(0, 30)
        assert_knapsack_exact(size, profit, room)


def test_lp_bounds_hold_every_placement() -> None:
    """D(μ) bounds every placement; with_pair[(i, b)] those holding i on b; without[i] those leaving i out."""
    checked = 0
    for problem in small_problems("lp", 60):
        credit = credit_matrix(problem)
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        relaxation = k_relaxation(arrays)
        if relaxation is None:
            continue
        checked += 1
        sessions = arrays.sessions.tolist()
        pairs = zip(arrays.pair_session.tolist(), arrays.pair_node.tolist(), relaxation.with_pair.tolist())
        with_pair = {(sessions[s], b): bound for s, b, bound in pairs}
        without = dict(zip(sessions, relaxation.without.tolist()))
        for placement in every_k_placement(problem):
            k = k_of(problem, placement)
            assert k <= relaxation.bound
            for i, b in placement.items():
                assert k <= with_pair[(i, b)]
            for i in without:
                if i not in placement:
                    assert k <= without[i]
    assert checked >= 20


def test_k_level_is_exact_on_small_problems() -> None:
    for problem in small_problems("level", 80):
        level = k_level(problem)
        k_star = max(k_of(problem, p) for p in every_k_placement(problem))
        assert is_feasible(problem, level.placement) and level.value == k_of(problem, level.placement)
        assert level.proven and level.value == k_star == level.bound


def test_an_unfinished_k_bound_is_a_multiple_of_the_credits_gcd() -> None:
    """Adversarial credits are 1000 or 2000: every K is a multiple of 1000, and so is the bound."""
    rng = random.Random("gcd")
    for _ in range(3):
        snapshot = SHAPES["adversarial"](rng, 160, 8)
        level = k_level(build_problem(snapshot, snapshot.waiting), Deadline.after(0.002, "cpu"))
        assert level.bound % 1000 == 0 and level.value <= level.bound


def test_a_k_bound_out_of_time_before_any_step_still_holds() -> None:
    """A deadline gone before the search starts leaves the LP's bound: still above every placement."""
    for problem in small_problems("late", 40):
        level = k_level(problem, Deadline(at=0.0, clock=lambda: 1.0))
        k_star = max(k_of(problem, p) for p in every_k_placement(problem))
        assert is_feasible(problem, level.placement) and level.value <= k_star <= level.bound


def test_flat_credit_out_of_time_takes_no_subgradient_step() -> None:
    """With flat credit the LP, the fills and their polish come first; a deadline gone by then leaves the
    subgradient steps out (at 640 x 8 with credit on every node one step is ~20 ms)."""
    rng = random.Random("flat late")
    for _ in range(5):
        snapshot = SHAPES["replicated"](rng, 24, 4)
        problem = build_problem(snapshot, snapshot.waiting)
        level = k_level(problem, Deadline(at=0.0, clock=lambda: 1.0))
        assert level.iterations == 0 and level.value <= level.bound
        assert k_level(problem).iterations > 0 or level.proven  # given the time, it does step


def shift_in(problem: Problem, placement: dict[int, int]) -> dict[int, int]:
    """`placement` polished by the compiled local search over the problem's credited pairs."""
    credit = credit_matrix(problem)
    return polish_placement(DualArrays.of(credit, list(problem.room), np.array(problem.size)), placement)


def test_shift_makes_room_by_moving_a_session_to_its_other_credit_node() -> None:
    # session 0 (size 2) sits on node 0, which session 1 (size 2, credit there only) needs; node 1 is free
    problem = Problem(("a", "b"), ("r0", "r1"), size=(2, 2), room=(2, 2),
                      values=(((5, 0, 0), (5, 0, 0)), ((7, 0, 0), None)))
    assert shift_in(problem, {0: 0}) == {0: 1, 1: 0}
    for problem in small_problems("shift", 60):
        for placement in every_k_placement(problem)[:5]:
            shifted = shift_in(problem, placement)
            assert is_feasible(problem, shifted) and k_of(problem, shifted) >= k_of(problem, placement)


def test_reshuffle_never_loses_k_and_stops_at_its_target() -> None:
    for problem in small_problems("reshuffle", 40):
        placements = every_k_placement(problem)
        k_star = max(k_of(problem, p) for p in placements)
        start = min(placements, key=lambda p: k_of(problem, p))
        value_of = lambda p: k_of(problem, p)  # noqa: E731
        refill = lambda p: shift_in(problem, p)  # noqa: E731
        found, value = reshuffle(start, problem.m, value_of, refill, k_star, 30, None)
        assert is_feasible(problem, found) and value == k_of(problem, found) >= k_of(problem, start)
        assert reshuffle(start, problem.m, value_of, refill, k_of(problem, start), 30, None)[0] == start


def k_optimal_credited_pairs(problem: Problem) -> set[frozenset[tuple[int, int]]]:
    """Every set of credited pairs some K-optimal placement collects on (enumerated: tiny problems)."""
    best, found = -1, set()
    options = [[None] + [b for b, v in enumerate(row) if v is not None] for row in problem.values]
    for choice in product(*options):
        used = [0] * problem.m
        for i, b in enumerate(choice):
            if b is not None:
                used[b] += problem.size[i]
        if any(u > r for u, r in zip(used, problem.room)):
            continue
        pairs = frozenset((i, b) for i, b in enumerate(choice)
                          if b is not None and problem.values[i][b][0] > 0)  # type: ignore[index]
        k = sum(problem.values[i][b][0] for i, b in pairs)
        if k > best:
            best, found = k, {pairs}
        elif k == best:
            found.add(pairs)
    return found


def tiny_k_levels(seed: int, shapes: list[str]) -> Iterator[tuple[Snapshot, Problem, KLevel]]:
    """300 snapshots of 2-6 sessions x 2-3 nodes from `shapes` (small enough to enumerate), each with
    its problem and K level."""
    rng = random.Random(seed)
    for _ in range(300):
        snapshot = SHAPES[rng.choice(shapes)](rng, rng.randint(2, 6), rng.randint(2, 3))
        problem = build_problem(snapshot, snapshot.waiting)
        yield snapshot, problem, k_level(problem)


def test_a_unique_k_placement_is_unique_and_most_are_recognized() -> None:
    """Sound (unique whenever it says so, checked by enumeration) and not vacuous: it recognizes most
    of the snapshots whose K-optimal credited pairs are unique."""
    unique = recognized = 0
    for snapshot, problem, level in tiny_k_levels(61, ["multi", "all", "everywhere", "copies"]):
        assert level.proven
        said = k_common_pairs(problem, level.value).only(level.placement)
        truth = k_optimal_credited_pairs(problem)
        if said:
            credited = frozenset((i, b) for i, b in level.placement.items() if problem.values[i][b][0] > 0)
            assert truth == {credited}, snapshot.to_json()
        unique += len(truth) == 1
        recognized += said
    assert unique > 60 and recognized >= 0.6 * unique


def test_the_common_pairs_are_in_every_k_optimal_placement_and_bound_the_rest() -> None:
    """Checked by enumeration on tiny snapshots: every K-optimal placement holds the pairs
    `k_common_pairs` returns, and the bound around them holds the whole optimum, never above the whole
    problem's surrogate bound (planner/solve.py takes it alone once K is proven); often they are more
    than nothing where the K-optimal placement is not unique (else the bound would be the whole surrogate)."""
    partial = from_level = 0
    for snapshot, problem, level in tiny_k_levels(67, ["multi", "all", "everywhere", "copies", "forks"]):
        truth = k_optimal_credited_pairs(problem)
        for given in (None, level):  # from scratch, and from the K level (as the planner calls it)
            common = k_common_pairs(problem, level.value, level=given)
            pairs = set(common.pairs.items())
            assert all(pairs <= placement for placement in truth), snapshot.to_json()
            held = bound_holding(problem, common.pairs, level.value)
            assert brute_force(problem) <= held, snapshot.to_json()
            whole = lexicographic_bound(problem, Packer.for_problem(problem), level.value)
            assert held <= whole, snapshot.to_json()
            if given is None:
                partial += len(truth) > 1 and bool(pairs)
            else:
                from_level += len(truth) > 1 and bool(pairs)
    assert partial >= 15 and from_level >= 15, (partial, from_level)  # 22 of these draws


def test_the_listed_k_optimal_placements_are_all_of_them() -> None:
    """Where the probes leave sessions open, the listing gives every K-optimal placement and nothing else
    (enumeration), or None past its limit."""
    listed = 0
    for snapshot, problem, level in tiny_k_levels(71, ["multi", "all", "everywhere", "copies", "forks"]):
        placements = k_optimal_placements(problem, k_common_pairs(problem, level.value), level.value, 8)
        if placements is None:
            continue
        truth = k_optimal_credited_pairs(problem)
        assert {frozenset(p.items()) for p in placements} == truth, snapshot.to_json()
        assert len(placements) == len(truth)
        listed += len(truth) > 1
    assert listed >= 25, listed  # 36 of these draws


def test_the_common_pairs_hold_with_credits_far_past_a_cache() -> None:
    """Flat credit of 2^36 on every pair (K* ≈ 4.8e11): float sums of that size err by more than an
    absolute 1e-6, which once closed a way a K-optimal placement takes (found by review); the slack now
    scales with the sums (knapsack.float_slack)."""
    credit, no = 2 ** 36, None
    rows = [[1, no, 1], [1, 1, no], [no, 1, 1], [1, 1, no], [no, 1, 1], [1, 1, 1], [1, no, 1], [1, 1, no]]
    values = tuple(tuple(None if x is None else (credit, 0, 0) for x in row) for row in rows)
    problem = Problem(tuple(f"s{i}" for i in range(8)), ("n0", "n1", "n2"), (2, 2, 3, 2, 3, 2, 3, 2),
                      (2, 6, 8), values)
    k_star = brute_force(problem)[0]
    pairs = set(k_common_pairs(problem, k_star).pairs.items())
    assert all(pairs <= placement for placement in k_optimal_credited_pairs(problem))


def test_flat_credit_settled_by_the_lp_bound_takes_no_step_and_is_exact() -> None:
    """With flat credit a refilled LP placement (or node fill) reaching the LP bound (floored) ends the K
    level at once: no subgradient step, no packing-only ceiling; the placement is still K-optimal (brute
    force)."""
    rng = random.Random("flat tight")
    settled = 0
    for _ in range(60):
        snapshot = SHAPES[rng.choice(["copies", "replicated"])](rng, rng.randint(2, 6), rng.randint(2, 3))
        problem = build_problem(snapshot, snapshot.waiting)
        level = k_level(problem)
        k_star = max(k_of(problem, p) for p in every_k_placement(problem))
        assert is_feasible(problem, level.placement) and level.proven and level.value == k_star
        settled += level.iterations == 0
    assert settled >= 10  # the path is taken (and exact) on many of them


def test_knapsack_on_large_rooms_is_exact() -> None:
    """Rooms of thousands of quanta take the branch and bound before the DP (planner/shared/knapsack.py): the
    same optimum as brute force, ties, zero sizes and sizes in whole blocks (a common factor the room
    lacks) included, and the choice fits."""
    rng = random.Random("large rooms")
    for _ in range(300):
        n = rng.randint(1, 12)
        unit = rng.choice([1, 16])
        size = tuple(unit * rng.choice([0, rng.randint(1, 400), rng.randint(1, 4000 // unit), 90])
                     for _ in range(n))
        profit = {i: rng.choice([rng.uniform(-3, 10), float(rng.randint(1, 5)), 2.0]) for i in range(n)}
        room = rng.randint(2000, 12000)
        assert_knapsack_exact(size, profit, room)
    for _ in range(200):  # many items, against the forced tables' DP (exact: test_k_dual.py)
        n = rng.randint(10, 40)
        unit = rng.choice([1, 16])
        size = tuple(unit * rng.randint(1, 6000 // unit) for _ in range(n))
        ratio = rng.uniform(0.5, 2)  # near-equal ratios: the search's hard case
        profit = {i: ratio * size[i] + rng.choice([0.0, rng.uniform(-1, 1)]) for i in range(n)}
        room = rng.randint(sum(size) // 4, sum(size) // 2)
        value, chosen = knapsack(list(range(n)), size, profit, room)
        exact, _, _ = forced_tables(np.array(size, dtype=np.int64), np.array(list(profit.values())), room)
        assert abs(value - exact) < 1e-6
        assert sum(size[i] for i in chosen) <= room and abs(sum(profit[i] for i in chosen) - value) < 1e-6


def template_problem(rng: random.Random) -> Problem:
    """Workers forked from a few task templates: the template's credit on each of its home nodes
    (graded: seen at different times), sizes of their own, so most sessions have larger twins; rooms of a
    few sessions each."""
    templates, size_range, room_range = rng.choice([(3, (2, 9), (8, 24)), (2, (3, 15), (10, 30))])
    m = rng.randint(2, 4)
    credits = [[rng.choice([0, 4, 6, 8, 12]) for _ in range(m)] for _ in range(templates)]
    n = rng.randint(12, 20)
    size, values = [], []
    for _ in range(n):
        template = credits[rng.randrange(templates)]
        size.append(rng.randint(*size_range))
        values.append(tuple((k, 0, 1) for k in template))
    return Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)), tuple(size),
                   tuple(rng.randint(*room_range) for _ in range(m)), tuple(values))


def test_k_level_leaving_larger_twins_uncredited_is_exact() -> None:
    """The search takes a session left uncredited to leave its larger twins (same credit on the same
    nodes) so too: still exact against the MILP, where it branched and where it did not."""
    rng = random.Random("twins")
    searched = proven = 0
    for _ in range(300):
        problem = template_problem(rng)
        level = k_level(problem)
        (k_star,) = milp_lexicographic(problem, levels=1)
        assert is_feasible(problem, level.placement) and level.value == k_of(problem, level.placement)
        assert level.value <= k_star <= level.bound, problem  # a twin fixed wrongly would cut K* off
        proven += level.proven
        searched += level.nodes > 1
    assert searched >= 30 and proven >= 290  # it branched (fixing twins) often; a few stop at the node limit


def test_larger_twins_are_those_alike_in_credit_and_larger() -> None:
    credit = [{0: 5, 1: 5, 2: 5, 3: 7}, {0: 2, 1: 2, 2: 3}]
    size = (4, 2, 2, 1)
    twins = _larger_twins(credit, size)
    assert twins == {1: [0]}  # 0 and 1 alike (5 on r0, 2 on r1), 1 the smaller; 2 differs on r1, 3 on r0
