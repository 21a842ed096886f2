"""HiGHS's branch and cut on the K level (planner/k/mip.py) against brute force: with time enough it
proves the optimum and returns a placement reaching it, alike sessions counted as one class; its bound
holds whatever start it is given; and on small tight-packing snapshots and on snapshots of forks the K
level, which hands such sub-problems to it, agrees with an independent MILP."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from planner_bench.reference import milp_lexicographic
from planner_bench.shapes import SHAPES
from tao_harness.planner.k import lagrange
from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.lagrange import credit_matrix, k_level
from tao_harness.planner.k.mip import Alike, KBranchCut, k_branch_and_cut
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Problem, build_problem, is_feasible
from tao_harness.planner.warm import warm_up
from tao_harness.types import CacheEntry, NodeState, PlannerParams, SessionView, Snapshot
from test_k_dual import small_k_problems
from test_k_level import every_k_placement, k_of


def test_branch_and_cut_proves_the_optimum_of_small_problems() -> None:
    rng = random.Random("mip")
    checked = 0
    for problem, credit in small_k_problems("mip-problems", 120):
        optimum = max(k_of(problem, p) for p in every_k_placement(problem))
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        step = math.gcd(*(k for column in credit for k in column.values()))
        start = rng.choice(every_k_placement(problem))  # any feasible start, or a stale one below
        if rng.random() < 0.3:
            start = {i: rng.randrange(problem.m) for i in range(problem.n)}
        assert_proven(problem, k_branch_and_cut(arrays, start, step, 5.0), optimum)
        checked += 1
    assert checked >= 60


def assert_proven(problem: Problem, found: KBranchCut, optimum: int) -> None:
    """HiGHS's answer is the optimum, proven, with a feasible placement reaching it."""
    assert found.bound == optimum and found.value == optimum
    if optimum:
        assert found.placement is not None and is_feasible(problem, found.placement)
        assert k_of(problem, found.placement) == optimum


def with_copies(rng: random.Random, snapshot: Snapshot, sessions: int) -> Snapshot:
    """`snapshot` with its sessions copied (each a fork of one of them) until it holds `sessions`."""
    views = list(snapshot.sessions)
    while len(views) < sessions:
        views.append(replace(rng.choice(snapshot.sessions), id=f"copy{len(views)}"))
    return replace(snapshot, sessions=tuple(views))


def test_alike_sessions_are_counted_as_one_class_and_the_optimum_proven() -> None:
    """Snapshots of seven sessions copied from one to three: a class per session copied, each of one size and
    one credit per node, and HiGHS's count per class reaches the brute-force optimum and proves it."""
    rng = random.Random("alike")
    checked = 0
    for _ in range(80):
        shape = rng.choice(["degenerate", "multi", "adversarial"])
        snapshot = with_copies(rng, SHAPES[shape](rng, rng.randint(1, 3), rng.randint(1, 3)), 7)
        problem = build_problem(snapshot, snapshot.waiting)
        credit = credit_matrix(problem)
        if not any(credit):
            continue
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        alike = Alike.of(arrays)
        assert len(alike.count) <= 3 and alike.count.sum() == len(arrays.sessions)
        row = [(problem.size[i], tuple(column.get(i) for column in credit)) for i in arrays.sessions.tolist()]
        for s, t in [(s, t) for s in range(len(row)) for t in range(len(row))]:
            assert (alike.session_class[s] == alike.session_class[t]) == (row[s] == row[t])
        optimum = max(k_of(problem, p) for p in every_k_placement(problem))
        assert_proven(problem, k_branch_and_cut(arrays, {}, 1, 5.0, alike), optimum)
        checked += 1
    assert checked >= 40


def tight_snapshot(rng: random.Random, sessions: int, nodes: int) -> Snapshot:
    """Large sessions beside small rooms, each credited the same on one to all nodes (copies written
    together): the Lagrangian bound stays ~1% above the optimum."""
    params = PlannerParams()
    quantum, now = params.quantum_tokens, 100.0
    ids = [f"n{b}" for b in range(nodes)]
    views = []
    for i in range(sessions):
        size = rng.randint(4, 120)
        tokens = size * quantum - params.reserve_tokens
        cached = rng.choice([1, 2, 3, 4]) * tokens // 4 // quantum * quantum
        observed = now - params.half_life_s * rng.choice([0, 0.5, 1, 2])
        cache = {b: CacheEntry(cached, observed) for b in rng.sample(ids, rng.randint(1, nodes))}
        views.append(SessionView(id=f"s{i}", tokens=tokens, cache=cache, turn=3, arrived_at=now - i))
    demand = sum(v.cost(params) for v in views)
    weights = [rng.choice([0.05, 0.3, 1.0, 1.5]) for _ in ids]
    rooms = [int(demand / rng.uniform(0.7, 3.0) * w / sum(weights)) // quantum * quantum for w in weights]
    return Snapshot(now=now, params=params, nodes=tuple(NodeState(id=b, capacity_tokens=r) for b, r in
                                                       zip(ids, rooms)), sessions=tuple(views))


def counted_handovers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The open pairs of each sub-problem the K level hands to HiGHS from now on (a list that grows)."""
    handed: list[int] = []

    def counted(arrays: DualArrays, *args: object) -> KBranchCut:
        handed.append(len(arrays.pair_session))
        return k_branch_and_cut(arrays, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(lagrange, "k_branch_and_cut", counted)
    return handed


@pytest.mark.parametrize("search_share", [0.6, 0.0])
def test_the_k_level_on_tight_packings_agrees_with_an_independent_milp(
    search_share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the K level hands its search over to HiGHS (small sub-problems; with no time for the search
    first, every unsettled root is handed over), its proven K is scipy's MILP optimum
    (scripts/planner_bench/reference.py) and its placement reaches it."""
    warm_up()  # the kernels compiled or loaded before the deadline starts, as a TAO policy does
    monkeypatch.setattr(lagrange, "_MIP_AFTER", search_share)
    handed = counted_handovers(monkeypatch)
    rng = random.Random("tight")
    proven = 0
    for _ in range(6):
        snapshot = tight_snapshot(rng, 20, 3)
        problem = build_problem(snapshot, snapshot.waiting)
        level = k_level(problem, Deadline.after(0.5, "cpu"))
        (k_star,) = milp_lexicographic(problem, 60.0, levels=1)
        assert is_feasible(problem, level.placement) and level.value == k_of(problem, level.placement)
        assert level.value <= k_star <= level.bound
        if level.proven:
            assert level.value == k_star
        proven += level.proven
    assert proven == 6  # half a second is ample for either at this size
    if search_share == 0.0:
        assert handed  # the roots the first steps did not settle went to HiGHS


@pytest.mark.parametrize("first", [False, True])
def test_a_handover_that_proves_nothing_leaves_the_bound_open(first: bool, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """HiGHS out of time before any bound (its answer: no placement, no bound), after the search or before
    it: the K level keeps the search's bound, so K ≤ K* ≤ K̄ still holds and nothing unproven is called
    proven (HiGHS first, the search after it may still prove it)."""
    warm_up()
    monkeypatch.setattr(lagrange, "_MIP_AFTER", 0.0)
    monkeypatch.setattr(lagrange, "_MIP_FIRST_COLUMNS", 10_000 if first else 0)
    monkeypatch.setattr(lagrange, "_MIP_FIRST_ALIKE", 0)  # every root first, however unalike its sessions
    handed: list[int] = []

    def nothing(arrays: DualArrays, *args: object) -> KBranchCut:
        handed.append(len(arrays.pair_session))
        return KBranchCut(None, 0, None)

    monkeypatch.setattr(lagrange, "k_branch_and_cut", nothing)
    rng = random.Random("tight")
    for _ in range(6):
        snapshot = tight_snapshot(rng, 20, 3)
        problem = build_problem(snapshot, snapshot.waiting)
        before = len(handed)
        level = k_level(problem, Deadline.after(0.5, "cpu"))
        (k_star,) = milp_lexicographic(problem, 60.0, levels=1)
        assert level.value <= k_star <= level.bound
        if len(handed) > before and not first:  # the search left it open and HiGHS proved nothing: still open
            assert not level.proven
    assert handed


def test_the_k_level_over_forks_counts_them_with_highs_first_and_agrees_with_an_independent_milp(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions forked in a few groups: where the first steps leave the K level open, HiGHS goes first over
    the classes (planner/k/lagrange.py's `_MIP_FIRST_COLUMNS`; here sessions alike by twos will do), and its K
    is scipy's MILP optimum, proven."""
    warm_up()
    monkeypatch.setattr(lagrange, "_MIP_FIRST_ALIKE", 2)
    handed = counted_handovers(monkeypatch)
    rng = random.Random("forks")
    for _ in range(8):
        snapshot = with_copies(rng, tight_snapshot(rng, 6, 3), 30)
        problem = build_problem(snapshot, snapshot.waiting)
        level = k_level(problem, Deadline.after(2.0, "cpu"))
        (k_star,) = milp_lexicographic(problem, 60.0, levels=1)
        assert is_feasible(problem, level.placement) and level.value == k_of(problem, level.placement)
        assert level.proven and level.value == k_star
    assert len(handed) >= 3  # the others the first steps settled
