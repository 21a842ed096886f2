"""The residual machinery: the bin-packing feasibility search, local repair, the nested bound and the branch
and bound over room fillings (against brute force and the MILP)."""

from __future__ import annotations

import itertools
import random

import pytest

from planner_bench.reference import brute_force, milp_lexicographic, objective
from tao_harness.planner.bounds.certificate import residual_problem
from tao_harness.planner.packing import bins
from tao_harness.planner.packing.bins import solve_residual
from tao_harness.planner.packing.improve import improve
from tao_harness.planner.packing.nested import nested_bound, nested_prefix
from tao_harness.planner.packing.feasible import SearchLimit, pack_all
from tao_harness.planner.shared.problem import Packer, Problem, is_feasible, total_value
from tao_harness.planner.solve import solve


def uniform_problem(rng: random.Random, n: int, m: int, *, big: bool = False) -> Problem:
    """Sessions worth the same on every node (the residual's shape); sizes large next to the rooms."""
    values = []
    for _ in range(n):
        value = (0, rng.randint(0, 1), rng.randint(1, 40 if big else 6))
        values.append((value,) * m)
    sizes = tuple(rng.randint(1, 9 if big else 6) for _ in range(n))
    return Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)), sizes,
                   tuple(rng.randint(2, 16 if big else 12) for _ in range(m)), tuple(values))


def test_pack_all_decides_feasibility_and_respects_its_node_limit() -> None:
    assert pack_all([0, 1, 2], [3, 3, 2], [4, 4], node_limit=100) is None  # 8 ≤ 8 in total, yet no split
    placement = pack_all([0, 1, 2], [3, 1, 4], [4, 4], node_limit=100)
    assert placement is not None and sorted(placement) == [0, 1, 2]
    assert placement[0] == placement[1] != placement[2]  # 3 + 1 in one room, 4 in the other
    sizes = [7, 7, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5]  # needs real search before failing
    with pytest.raises(SearchLimit):
        pack_all(list(range(len(sizes))), sizes, [13] * 6 + [12], node_limit=3)


def test_pack_all_proves_a_fragmented_misfit_at_its_root() -> None:
    """Sizes in steps of 8 quanta (2 apart from the rooms' multiples): the rooms hold them one at a time up to
    a few quanta short each, so the merged room's slack is no proof; the subset-sum fills are, at once."""
    sizes = [10, 10, 18, 18, 26, 26, 26, 34, 34, 34, 34, 34, 34, 34, 42]  # 414 in all
    rooms = [49, 0, 47, 76, 26, 13, 163, 45]  # 419 in all, the fullest fills 410
    assert pack_all(list(range(len(sizes))), sizes, rooms, node_limit=1) is None  # (without the fills: 38,733
    # nodes)


@pytest.mark.parametrize("scale", [1, 4099])
def test_pack_all_agrees_with_enumeration_on_sizes_with_a_common_step(scale: int) -> None:
    """Sizes 2 apart from multiples of 8, as quanta (the fills' bitsets) and as tokens of 1-token quanta,
    rooms past the bitsets' width (the fallback)."""
    rng = random.Random(29)
    for _ in range(300):
        sizes = [(2 + 8 * rng.randint(0, 4)) * scale + rng.randint(0, scale // 2)
                 for _ in range(rng.randint(1, 6))]
        rooms = [rng.randint(0, 60 * scale) for _ in range(rng.randint(1, 3))]
        fits = any(all(sum(s for s, b in zip(sizes, choice) if b == r) <= rooms[r] for r in range(len(rooms)))
                   for choice in itertools.product(range(len(rooms)), repeat=len(sizes)))
        placement = pack_all(list(range(len(sizes))), sizes, rooms, node_limit=10**6)
        assert (placement is not None) == fits, (sizes, rooms)
        if placement is not None:
            used = [sum(sizes[i] for i, b in placement.items() if b == r) for r in range(len(rooms))]
            assert all(u <= room for u, room in zip(used, rooms))


def test_improve_never_loses_value_and_repairs_a_poor_plan() -> None:
    rng = random.Random(25)
    gained = 0
    for _ in range(100):
        problem = uniform_problem(rng, rng.randint(1, 8), rng.randint(1, 3))
        packer = Packer.for_problem(problem)
        start: dict[int, int] = {}
        better = improve(problem, packer, start)
        assert is_feasible(problem, better)
        assert total_value(problem, packer, better) >= total_value(problem, packer, start)
        gained += total_value(problem, packer, better) > 0
    assert gained > 80  # from an empty plan, re-packing each room admits sessions


def tight_problem(rng: random.Random, n: int, m: int) -> Problem:
    """Bench-like residual: t ≈ 100 per quantum minus an overhead, a few sessions per room."""
    sizes = tuple(rng.randint(3, 40) for _ in range(n))
    values = tuple(((0, rng.randint(0, 1), 100 * w - rng.randint(0, 150)),) * m for w in sizes)
    rooms = tuple(rng.randint(10, 60) for _ in range(m))
    return Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)), sizes, rooms, values)


def test_many_rooms_with_few_sessions_each_are_solved_exactly() -> None:
    """The shape where the merged-room bound alone pruned nothing: this instance used to exhaust a
    20k-state budget; with a repaired incumbent and the residual's branch and bound first it is proven well
    within it."""
    rng = random.Random(1)
    problem = [tight_problem(rng, 20, 8) for _ in range(3)][2]
    solution = solve(problem, state_budget=20_000)
    assert solution.solver == "dp" and not solution.fallback and solution.states < 10_000
    assert is_feasible(problem, solution.placement)
    assert objective(problem, dict(solution.placement)) == milp_lexicographic(problem)


def packed_gains(problem: Problem) -> tuple[Packer, list[int]]:
    packer = Packer.for_problem(problem)
    return packer, [packer.pack(row[0]) for row in problem.values]  # type: ignore[arg-type]


def test_nested_bound_is_an_upper_bound_and_its_choice_fits_the_relaxation() -> None:
    rng = random.Random(31)
    tight = 0
    for _ in range(150):
        problem = uniform_problem(rng, rng.randint(0, 8), rng.randint(1, 3))
        packer, gain = packed_gains(problem)
        items, rooms = list(range(problem.n)), list(problem.room)
        bound = nested_bound(items, list(problem.size), gain, rooms)
        optimum = brute_force(problem)
        assert packer.unpack(bound.value) >= optimum, problem
        assert sum(gain[i] for i in bound.chosen) == bound.value
        assert sum(problem.size[i] for i in bound.chosen) <= sum(rooms)
        tight += packer.unpack(bound.value) == optimum
    assert tight > 100  # on small instances the bound is usually the optimum itself


def test_nested_bound_is_tighter_than_merging_the_rooms() -> None:
    """Rooms 5 and 5, sessions 6 and 4 + 4: merged, 6 + 4 fit in 10; nested, 6 fits no room."""
    problem = Problem(("a", "b", "c"), ("r0", "r1"), (6, 4, 4), (5, 5), (((0, 0, 9), (0, 0, 9)),
                      ((0, 0, 4), (0, 0, 4)), ((0, 0, 4), (0, 0, 4))))
    packer, gain = packed_gains(problem)
    bound = nested_bound([0, 1, 2], list(problem.size), gain, [5, 5])
    assert packer.unpack(bound.value) == (0, 0, 8, 2) == brute_force(problem)


def test_a_shared_prefix_gives_the_same_bound() -> None:
    rng = random.Random(33)
    for _ in range(60):
        problem = tight_problem(rng, 14, 4)
        _, gain = packed_gains(problem)
        size, rooms = list(problem.size), list(problem.room)
        cut = rng.randint(3, 30)
        prefix = nested_prefix(list(range(problem.n)), size, gain, rooms, cut)
        items = [i for i in range(problem.n) if size[i] > cut or rng.random() < 0.6]  # drop some small ones
        with_prefix = nested_bound(items, size, gain, rooms, prefix)
        assert with_prefix.value == nested_bound(items, size, gain, rooms).value
        assert sum(gain[i] for i in with_prefix.chosen) == with_prefix.value


def fragmented_problem(rng: random.Random, n: int, m: int) -> Problem:
    """Sessions large next to the rooms, t nearly proportional to size: many near-optimal packings."""
    sizes = tuple(rng.randint(3, 9) for _ in range(n))
    values = tuple(((0, rng.randint(0, 1), 10 * w - rng.randint(0, 15)),) * m for w in sizes)
    return Problem(tuple(f"s{i}" for i in range(n)), tuple(f"r{b}" for b in range(m)), sizes,
                   tuple(rng.randint(5, 12) for _ in range(m)), values)


def restricted_problem(rng: random.Random, n: int, m: int) -> Problem:
    """`fragmented_problem` with eligibility subsets: about a third of the sessions may use only some
    rooms (a session may use none); twins (same size and value, other rooms) and equal rooms, so that
    the search's symmetry cuts are tested."""
    base = fragmented_problem(rng, n, m)
    sizes, rows = list(base.size), list(base.values)
    for i in range(1, n):
        if rng.random() < 0.3:  # a twin of an earlier session
            j = rng.randrange(i)
            sizes[i], rows[i] = sizes[j], rows[j]
    values = tuple(row if rng.random() < 0.6 else tuple(v if rng.random() < 0.5 else None for v in row)
                   for row in rows)
    rooms = tuple(rng.choice([base.room[0], rng.randint(5, 12)]) for _ in range(m))
    return Problem(base.session_ids, base.node_ids, tuple(sizes), rooms, values)


@pytest.mark.parametrize("max_contents", [200, 1])  # 1: branch on single sessions instead of fillings
@pytest.mark.parametrize("restricted", [False, True])
@pytest.mark.parametrize("bound_cells", [1_000_000, 8])  # 8: every nested bound in a coarser grain
def test_branch_and_bound_matches_brute_force(
    max_contents: int, restricted: bool, bound_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exact, and with eligibility subsets too: maximal fillings among the sessions that may use the
    room, rooms alike only for sessions that may use both, sessions that may use no room left dropped;
    and with the bounds counting sizes in a coarser grain than the sessions' (looser, still bounds)."""
    monkeypatch.setattr(bins, "_MAX_CONTENTS", max_contents)
    monkeypatch.setattr(bins, "_BOUND_CELLS", bound_cells)
    rng = random.Random(36 if restricted else 35)
    searched = 0
    for _ in range(150):
        n, m = rng.randint(5, 8), rng.randint(2, 3)
        problem = restricted_problem(rng, n, m) if restricted else fragmented_problem(rng, n, m)
        packer = Packer.for_problem(problem)
        result = solve_residual(problem, packer, {}, node_limit=10**6)
        assert result.proven and is_feasible(problem, result.placement)
        assert objective(problem, result.placement) == brute_force(problem), problem
        searched += result.nodes > 1 and (not restricted or any(None in row for row in problem.values))
    assert searched > 20  # the search itself ran (with subsets), not only the root bound


def test_the_bounds_grain_is_the_sizes_gcd_unless_the_table_would_be_too_large(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """256-token contexts planned in 16-token quanta: sizes in multiples of 16 give an exact grain of 16;
    a table past the cell limit takes a coarser grain (a multiple of the gcd), rooms rounded down."""
    sizes, rooms = [16 * w for w in (3, 5, 8, 2)], [100, 37]
    exact = bins._Grain.of([0, 1, 2, 3], sizes, rooms)
    assert exact.scale == 16 and exact.size == [3, 5, 8, 2] and exact.rooms(rooms) == [6, 2]
    assert bins._Grain.of([0, 1], [3, 5], rooms).scale == 1  # coprime sizes, a small table: exact
    monkeypatch.setattr(bins, "_BOUND_CELLS", 36)  # 4 sessions x (137 // 16 + 1): just within
    assert bins._Grain.of([0, 1, 2, 3], sizes, rooms).scale == 16
    monkeypatch.setattr(bins, "_BOUND_CELLS", 10)
    coarse = bins._Grain.of([0, 1, 2, 3], sizes, rooms)  # 36 cells: four times the limit
    assert coarse.scale == 64 and coarse.size == [0, 1, 2, 0] and coarse.rooms(rooms) == [1, 0]


def test_the_residual_search_is_exact_on_sizes_with_a_common_factor() -> None:
    """Sizes all multiples of 4, rooms not: the bounds count in fours (exact), the plan matches brute
    force."""
    rng = random.Random(44)
    for _ in range(60):
        base = fragmented_problem(rng, rng.randint(5, 8), rng.randint(2, 3))
        problem = Problem(base.session_ids, base.node_ids, tuple(4 * w for w in base.size),
                          tuple(4 * room + rng.randint(0, 3) for room in base.room), base.values)
        result = solve_residual(problem, Packer.for_problem(problem), {}, node_limit=10**6)
        assert result.proven and is_feasible(problem, result.placement)
        assert objective(problem, result.placement) == brute_force(problem), problem


def test_residual_problem_keeps_eligibility_subsets() -> None:
    values = (((5, 1, 10), None, (0, 1, 10)), ((0, 0, 7), (0, 0, 7), None), ((0, 1, 3),) * 3)
    problem = Problem(("a", "b", "c"), ("r0", "r1", "r2"), (2, 3, 1), (4, 4, 4), values)
    sub, back = residual_problem(problem, {0: 0})
    assert back == [1, 2] and sub.room == (2, 4, 4)
    assert sub.values == (((0, 0, 7), (0, 0, 7), None), ((0, 1, 3),) * 3)


def test_node_limit_returns_an_unproven_feasible_placement() -> None:
    rng = random.Random(1)
    problem = tight_problem(rng, 30, 6)
    packer = Packer.for_problem(problem)
    result = solve_residual(problem, packer, {}, node_limit=1)
    assert not result.proven and result.nodes <= 2 and is_feasible(problem, result.placement)
    assert total_value(problem, packer, result.placement) >= 0


def test_a_crowded_residual_is_searched_and_matches_the_milp() -> None:
    """Eight rooms, half of them nearly full, 40 sessions: the certificate's bound is not reached, the
    branch and bound proves the optimum (within its node limit, before the DP; since the root's choice is
    split several ways, at its root) and the MILP agrees."""
    rng = random.Random(43)
    sizes = tuple(rng.randint(3, 20) for _ in range(40))
    values = tuple(((0, rng.randint(0, 1), 100 * w - rng.randint(0, 150)),) * 8 for w in sizes)
    rooms = tuple(rng.choice([rng.randint(0, 4), rng.randint(10, 60)]) for _ in range(8))
    problem = Problem(tuple(f"s{i}" for i in range(40)), tuple(f"r{b}" for b in range(8)), sizes, rooms,
                      values)
    solution = solve(problem, state_budget=20_000)
    assert solution.solver == "dp" and not solution.fallback and 1 <= solution.states <= 80
    assert is_feasible(problem, solution.placement)
    assert objective(problem, dict(solution.placement)) == milp_lexicographic(problem)
