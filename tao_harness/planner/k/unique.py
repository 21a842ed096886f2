"""The credited pairs every K-optimal placement holds; when they are all of one, the rest searched around
it is the whole optimum.

The general path fixes the K level's placement P and searches the other sessions around it. That proves
the plan optimal among the plans holding P; it is optimal outright when every K-optimal plan collects
its credit on exactly P's pairs. The Lagrangian says so pair by pair: at multipliers λ with
L(λ) = K*, probing (planner/k/dual.py) bounds every way of each session (on one of its credit nodes, or
on none) and closes the ways bounded below K*, which no K-optimal plan takes. A session left one way is
fixed to it, the problem restricted, the multipliers refreshed and the rest probed again. The sessions
fixed on a node are in every K-optimal placement, whenever the rounds stop; when no session is left
open they are the only K-optimal credited pairs. Either way they bound the rest of every K-optimal plan
(planner/bounds/lexicographic.py's `bound_holding`): on `all` snapshots at 160 x 8, where credit ties leave a
few sessions open, that bound alone is the plan's value in half of the unproven ones. And the few open
sessions' ways left can be listed: every K-optimal placement is the common pairs plus one open way (or
none) of each open session, so when few combinations reach K*, `k_optimal_placements` gives all of them
(on `all` at 160 x 8, at most four in about half of the snapshots the probes leave open) and
planner/solve.py searches the rest around each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.dual import dual_steps, probe
from tao_harness.planner.k.lagrange import KLevel, credit_matrix, credit_step
from tao_harness.planner.k.start import starting_multipliers
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Problem

_ROUNDS = 6  # probes at most (each after fixing what the last one left one way)
_STEPS = 30  # subgradient steps before each probe, stopping once L(λ) reaches K*
_WARM_STEPS = 10  # ... when they start from the K level's multipliers (independent 160 x 8 multi-credit
# snapshots: the same pairs found as with 30, the probes' time 3.7 -> 2.3 ms)
_FIRST_STEP = 1.5  # the first step, as a share of the Polyak step (as the K level's search)
_ENUMERATION_NODES = 2_000  # steps of the listing of the K-optimal placements (~1 µs each)


@dataclass(frozen=True, slots=True)
class CommonPairs:
    """What the probes proved about the K-optimal placements."""

    pairs: dict[int, int]  # credited session -> node, held by every K-optimal placement
    complete: bool  # no session was left open: these are the only credited pairs of any K-optimal placement
    open: dict[int, tuple[int, ...]]  # every other credited session a K-optimal placement may place: the
    # credit nodes it may use there (it may also sit on none of them)

    def only(self, placement: dict[int, int]) -> bool:
        """Whether `placement`'s credited pairs are those of every K-optimal placement."""
        return self.complete and self.pairs == placement


def k_common_pairs(problem: Problem, k_star: int, deadline: Deadline | None = None,
                   level: KLevel | None = None) -> CommonPairs:
    """The credited pairs every placement collecting the proven optimum `k_star` holds (as far as the
    probes and the deadline get; none proven: empty). With the K `level` that proved it, its pairs and
    step are reused and the steps start from its root's multipliers; else from planner/k/start.py's."""
    if level is not None and level.arrays is not None:
        start = arrays = level.arrays
        step = level.step
    else:
        credit = credit_matrix(problem)
        if not any(credit):
            return CommonPairs({}, True, {})  # no credit anywhere: no K-optimal plan holds a credited pair
        step = credit_step(credit)
        start = arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size, dtype=np.int64))
    multipliers = None if level is None else level.multipliers
    if multipliers is None:
        lam = starting_multipliers(arrays, problem.n)  # per problem session
    else:
        lam = multipliers.copy()
    steps_per_probe = _STEPS if multipliers is None else _WARM_STEPS
    fixed: dict[int, int] = {}
    fixed_value = 0
    for _ in range(_ROUNDS):
        if not len(arrays.sessions):
            break
        local = np.where(arrays.shared, lam[arrays.sessions], 0.0)
        steps = dual_steps(arrays, local, steps_per_probe, fixed_value, k_star, step, _FIRST_STEP, math.inf,
                           deadline)
        lam[arrays.sessions] = steps.multipliers
        outcome = probe(arrays, steps.multipliers, fixed_value, k_star - step, step, deadline)
        if outcome is not None and outcome.settled:
            return CommonPairs({}, False, _ways(start))  # K* out of reach: it is not (rounding): trust none
        if outcome is None or not outcome.narrowed:
            return CommonPairs(fixed, False, _ways(arrays))  # out of time, or some session open two ways
        restricted = arrays.restricted(outcome.place, outcome.drop)
        if restricted is None:
            return CommonPairs({}, False, _ways(start))  # the fixed sessions overflow a room: as settled
        arrays, newly, value = restricted
        fixed.update(newly)
        fixed_value += value
    return CommonPairs(fixed, not len(arrays.sessions), _ways(arrays))


def _ways(arrays: DualArrays) -> dict[int, tuple[int, ...]]:
    """Per session of `arrays` (problem index), the nodes of its open pairs."""
    ways: dict[int, list[int]] = {}
    for s, b in zip(arrays.pair_session.tolist(), arrays.pair_node.tolist()):
        ways.setdefault(int(arrays.sessions[s]), []).append(b)
    return {i: tuple(nodes) for i, nodes in ways.items()}


def k_optimal_placements(problem: Problem, common: CommonPairs, k_star: int, limit: int
                         ) -> list[dict[int, int]] | None:
    """Every K-optimal placement (credited pairs collecting `k_star`): the common pairs plus, for each open
    session, one of its open credit nodes or none; None when there are more than `limit` (or listing
    them takes more than `_ENUMERATION_NODES` steps).

    Complete because no K-optimal placement uses a way the probes closed. A depth-first enumeration,
    sessions with the most credit first, cut where what is left cannot make up K* or a room overflows."""
    rooms = list(problem.room)
    for i, b in common.pairs.items():
        rooms[b] -= problem.size[i]
    need = k_star - sum(problem.values[i][b][0] for i, b in common.pairs.items())  # type: ignore[index]
    ways = [(i, sorted(((problem.values[i][b][0], b) for b in nodes), reverse=True))  # type: ignore[index]
            for i, nodes in common.open.items()]
    ways.sort(key=lambda way: -way[1][0][0])
    most = [0] * (len(ways) + 1)  # the most credit the sessions from position j on can add
    for j in range(len(ways) - 1, -1, -1):
        most[j] = most[j + 1] + ways[j][1][0][0]
    found: list[dict[int, int]] = []
    chosen: dict[int, int] = {}
    visits = [0]

    def visit(j: int, collected: int) -> None:
        visits[0] += 1
        if visits[0] > _ENUMERATION_NODES:
            raise _TooMany  # many open sessions, few of their combinations reaching K*: too long to list
        if collected + most[j] < need:
            return
        if j == len(ways):
            found.append({**common.pairs, **chosen})
            if len(found) > limit:
                raise _TooMany
            return
        i, options = ways[j]
        for k, b in options:
            if problem.size[i] <= rooms[b] and collected + k <= need:
                rooms[b] -= problem.size[i]
                chosen[i] = b
                visit(j + 1, collected + k)
                del chosen[i]
                rooms[b] += problem.size[i]
        visit(j + 1, collected)  # on none of its credit nodes

    try:
        visit(0, 0)
    except _TooMany:
        return None
    return found


class _TooMany(Exception):
    """More K-optimal placements than the caller asked for."""
