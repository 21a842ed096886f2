"""The compiled K-level kernels (planner/k/dual.py) against brute force: the forced-in / forced-out
knapsacks the probe closes pairs with, the Lagrangian bound of the subgradient steps (≥ every
placement's K, whatever the multipliers), and the placement they return (feasible, worth what it says)."""

from __future__ import annotations

import math
import random
from itertools import combinations

import numpy as np

from planner_bench.shapes import SHAPES
from tao_harness.planner.k.arrays import OPEN, DualArrays
from tao_harness.planner.k.dual import dual_steps, probe
from tao_harness.planner.k.forced import forced_tables, forced_values
from tao_harness.planner.k.lagrange import credit_matrix
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import float_slack, knapsack_kernel
from tao_harness.planner.shared.problem import build_problem, is_feasible
from test_k_level import every_k_placement, k_of


def best_subset(size: list[int], profit: list[float], items: list[int], room: int) -> float:
    """The most profit of a subset of `items` within `room` (0 for none)."""
    return max(sum(profit[j] for j in subset) for r in range(len(items) + 1)
               for subset in combinations(items, r) if sum(size[j] for j in subset) <= room)


def test_forced_tables_match_brute_force() -> None:
    """Items of profit ≤ 0 are never taken, unless forced in."""
    rng = random.Random("forced")
    for _ in range(300):
        n = rng.randint(1, 8)
        size = [rng.randint(0, 9) for _ in range(n)]
        profit = [rng.choice([rng.uniform(-4, 10), float(rng.randint(1, 6))]) for _ in range(n)]
        room = rng.randint(max(size), 25)  # every item fits alone, as in a K sub-problem
        value, forced_in, forced_out = forced_tables(np.array(size, dtype=np.int64), np.array(profit), room)
        taken = [j for j in range(n) if profit[j] > 0]
        assert abs(value - best_subset(size, profit, taken, room)) < 1e-9
        for j in range(n):
            others = [k for k in taken if k != j]
            assert abs(forced_out[j] - best_subset(size, profit, others, room)) < 1e-9
            assert abs(forced_in[j] - profit[j] - best_subset(size, profit, others, room - size[j])) < 1e-9


def assert_forced_values_agree(size: np.ndarray, profit: np.ndarray, room: int, floor_loss: float) -> None:
    """`forced_values` against the tables: each forced value exact where it is above the knapsack minus
    `floor_loss`, else reported at that floor (never below the exact one: the probe's bounds hold)."""
    exact_value, exact_in, exact_out = forced_tables(size, profit, room)
    value, take = knapsack_kernel(size, profit, room)
    assert abs(value - exact_value) < 1e-6
    found, forced_in, forced_out = forced_values(size, profit, room, value, take, floor_loss, 10 ** 9)
    assert found
    floor = value - floor_loss
    for exact, got in ((exact_in, forced_in), (exact_out, forced_out)):
        for j in range(len(size)):
            if exact[j] > floor + 1e-6:
                assert abs(got[j] - exact[j]) < 1e-6
            elif math.isfinite(exact[j]):
                assert exact[j] - 1e-6 <= got[j] <= floor + 1e-6
            else:
                assert got[j] == -math.inf


def test_forced_values_match_the_tables() -> None:
    """Small items against brute force through the tables, and rooms of thousands of quanta with items of a
    few profits per size (the K level's knapsacks at its multipliers: near-equal ratios), alike items,
    items of no size and sizes with a common factor; floors from nothing pruned to everything."""
    rng = random.Random("forced-values")
    for trial in range(300):
        large = trial % 3 == 0
        n = rng.randint(1, 40 if large else 8)
        scale, unit = (400, rng.choice([1, 16])) if large else (1, 1)  # unit: sizes in whole blocks
        size = [unit * rng.choice([0, rng.randint(1, 9) * scale + rng.randint(0, scale - 1)])
                for _ in range(n)]
        ratio = rng.choice([0.5, 1.0, 1.25])
        profit = [rng.choice([ratio * size[j] + rng.uniform(-2, 2), rng.uniform(-4, 10) * scale, 3.0 * scale])
                  for j in range(n)]
        for _ in range(rng.choice([0, 0, 3])):  # copies of one item: sessions of one task template
            j = rng.randrange(n)
            size, profit = size + [size[j]] * 2, profit + [profit[j]] * 2
        room = rng.randint(max(size), sum(size) + 1)
        floor_loss = rng.choice([-1.0, 0.0, rng.uniform(0, 3 * scale), math.inf])
        assert_forced_values_agree(np.array(size, dtype=np.int64), np.array(profit), room, floor_loss)


def test_forced_values_stop_at_their_node_budget() -> None:
    rng = random.Random("forced-budget")
    size = np.array([rng.randint(300, 900) for _ in range(40)], dtype=np.int64)
    profit = size * 0.75 + np.array([rng.uniform(-1, 1) for _ in range(40)])
    room = int(size.sum() // 2)
    value, take = knapsack_kernel(size, profit, room)
    assert not forced_values(size, profit, room, value, take, math.inf, 10)[0]
    assert forced_values(size, profit, room, value, take, math.inf, 10 ** 9)[0]


def small_k_problems(seed: str, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        shape = rng.choice(["multi", "all", "adversarial", "crowded", "degenerate"])
        snapshot = SHAPES[shape](rng, rng.randint(1, 6), rng.randint(1, 3))
        problem = build_problem(snapshot, snapshot.waiting)
        credit = credit_matrix(problem)
        if any(credit):
            yield problem, credit


def test_dual_bound_holds_and_its_placement_is_feasible() -> None:
    rng = random.Random("dual")
    for problem, credit in small_k_problems("dual-problems", 150):
        optimum = max(k_of(problem, p) for p in every_k_placement(problem))
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        lam = np.array([rng.uniform(0, 3000) if shared else 0.0 for shared in arrays.shared])
        outcome = dual_steps(arrays, lam, 12, 0, -1, 1, 1.5, float("inf"))
        assert math.floor(outcome.bound + float_slack(outcome.bound)) >= optimum  # floored as the search does
        assert outcome.placement is not None  # anything beats the incumbent -1
        assert is_feasible(problem, outcome.placement)
        assert all(i in credit[b] for i, b in outcome.placement.items())
        assert k_of(problem, outcome.placement) == outcome.value <= optimum


def test_steps_past_the_deadline_stop_after_one() -> None:
    """The deadline is checked after every step's chunk, the first step alone (at 640 x 8 with credit on every
    node a step is ~20 ms: fixed chunks of two overran a 30 ms deadline by 40 ms)."""
    snapshot = SHAPES["everywhere"](random.Random("late steps"), 40, 4)
    problem = build_problem(snapshot, snapshot.waiting)
    arrays = DualArrays.of(credit_matrix(problem), list(problem.room), np.array(problem.size))
    lam = np.zeros(len(arrays.sessions))
    unbounded = dual_steps(arrays, lam, 20, 0, -1, 1, 1.5, float("inf"))
    assert unbounded.steps > 1  # this sub-problem takes several steps when given the time
    late = dual_steps(arrays, lam, 20, 0, -1, 1, 1.5, float("inf"), Deadline(at=0.0, clock=lambda: 1.0))
    assert late.steps == 1 and math.isfinite(late.bound)


def test_probe_never_closes_the_optimum() -> None:
    """Every way the probe closes (or a fixing excludes) is one no placement beating the incumbent uses."""
    rng = random.Random("probe")
    for problem, credit in small_k_problems("probe-problems", 150):
        placements = every_k_placement(problem)
        optimum = max(k_of(problem, p) for p in placements)
        incumbent = optimum - rng.choice([1, 1000, 5000])  # below the optimum: its placements must survive
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        lam = np.array([rng.uniform(0, 3000) if shared else 0.0 for shared in arrays.shared])
        outcome = probe(arrays, lam, 0, incumbent, 1)
        assert not outcome.settled
        sessions = arrays.sessions.tolist()
        pairs = zip(arrays.pair_session.tolist(), arrays.pair_node.tolist(), outcome.drop.tolist())
        closed = [(sessions[s], b) for s, b, dropped in pairs if dropped]
        fixed = {sessions[s]: (None if b == -1 else b) for s, b in enumerate(outcome.place.tolist())
                 if b != OPEN}
        best = [p for p in placements if k_of(problem, p) == optimum]
        assert any(all(best_p.get(i) != b for i, b in closed)
                   and all(best_p.get(i) == b for i, b in fixed.items()) for best_p in best)


def test_a_probe_past_the_deadline_gives_up() -> None:
    arrays = DualArrays.of([{0: 10, 1: 5}, {0: 10, 1: 3}], [100, 100], np.array([1, 1], dtype=np.int64))
    assert probe(arrays, np.zeros(2), 0, 0, 1, Deadline(at=0.0, clock=lambda: 1.0)) is None
    assert probe(arrays, np.zeros(2), 0, 0, 1, Deadline(at=2.0, clock=lambda: 1.0)) is not None


def test_a_probe_solves_small_problems_in_one_call_as_it_does_node_by_node(monkeypatch) -> None:
    """The batched probe (every node in one compiled call) and the node-by-node one (deadline checked
    between nodes) establish the same: settled or not, the same pairs closed, places fixed and split."""
    import tao_harness.planner.k.dual as k_dual

    rng = random.Random("batched probe")
    far = Deadline.after(3600.0)
    compared = 0
    for problem, credit in small_k_problems("batched-probe-problems", 80):
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        lam = np.array([rng.uniform(0, 3000) if shared else 0.0 for shared in arrays.shared])
        best = rng.randint(0, sum(max(column.values(), default=0) for column in credit))
        batched = probe(arrays, lam, 0, best, 1, far)
        monkeypatch.setattr(k_dual, "_BATCH_CELLS", -1)
        by_node = probe(arrays, lam, 0, best, 1, far)
        monkeypatch.undo()
        assert batched is not None and by_node is not None
        assert batched.settled == by_node.settled and batched.split == by_node.split
        assert (batched.place == by_node.place).all() and (batched.drop == by_node.drop).all()
        compared += 1
    assert compared > 40


def test_probe_splits_on_the_session_whose_best_way_bounds_lowest() -> None:
    """Rooms take everyone, λ = 0: L = 10 + 10 + 5 + 3 = 28. Session 0 (10 on either node) on node 0 or
    1 bounds 28 − 10 = 18, on none 8; session 1 (5 on node 0, 3 on node 1) bounds 25, 23 and 20. Splitting
    on session 0 leaves children bounded by 18 at most: the one to split on, ways highest bound first."""
    arrays = DualArrays.of([{0: 10, 1: 5}, {0: 10, 1: 3}], [100, 100], np.array([1, 1], dtype=np.int64))
    outcome = probe(arrays, np.zeros(2), 0, 0, 1)
    assert not outcome.settled and not outcome.narrowed
    assert outcome.split == [(18, 0, 0), (18, 0, 1), (8, 0, None)]
