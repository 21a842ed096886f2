"""Independent exact solvers for checking the planner: brute force (tiny) and a lexicographic MILP.

Not used by any policy. Neither shares code with the DP or the certificate: brute force enumerates every
assignment; the MILP (scipy's HiGHS) maximizes K, fixes it, then R, then T, then N.
"""

from __future__ import annotations

import math

import numpy as np

from tao_harness.planner import Problem, is_feasible, objective

__all__ = ["brute_force", "milp_lexicographic", "objective"]

_HIGHS_EXACT = 2 ** 31  # sizes, rooms and values at most this for the MILP's answer to be taken: HiGHS works
# in floats with tolerances, and past it a fuzzed snapshot (a room of 2^36 quanta, credits of 2^40) got
# K = 3,399 "optimal" beside a feasible 550,361,179,102 (its rows scaled: a K above every integer packing)


def brute_force(problem: Problem) -> tuple[int, int, int, int]:
    """Lexicographic optimum by enumerating every feasible assignment (depth-first; n ≤ 8, m ≤ 3)."""
    left = list(problem.room)
    chosen: dict[int, int] = {}

    def visit(i: int) -> tuple[int, int, int, int]:
        if i == problem.n:
            return objective(problem, chosen)
        best = visit(i + 1)
        for b in range(problem.m):
            if problem.values[i][b] is not None and problem.size[i] <= left[b]:
                left[b] -= problem.size[i]
                chosen[i] = b
                best = max(best, visit(i + 1))
                del chosen[i]
                left[b] += problem.size[i]
        return best

    return visit(0)


def milp_lexicographic(
    problem: Problem, time_limit_s: float = 60.0, levels: int = 4
) -> tuple[int, ...]:
    """Lexicographic optimum by four MILPs (HiGHS): maximize K, fix it, then R, T, N.

    `levels` < 4 stops early: (K,) alone, (K, R), ... Raises RuntimeError unless HiGHS proved each
    level optimal within `time_limit_s` with a placement feasible in integers, and when a size, a room or a
    value is past `_HIGHS_EXACT` (its floats would not tell a unit)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    pairs = [(i, b) for i in range(problem.n) for b in range(problem.m) if problem.values[i][b] is not None]
    if not pairs:
        return (0, 0, 0, 0)[:levels]
    values = [v for i, b in pairs for v in problem.values[i][b]]  # type: ignore[union-attr]
    largest = max(*problem.size, *problem.room, *values)
    if largest > _HIGHS_EXACT:
        raise RuntimeError(f"MILP not run: a number ({largest}) past what HiGHS's floats tell apart")
    count = len(pairs)
    rows, bounds_hi = [], []
    for i in range(problem.n):  # each session on at most one node
        rows.append([1.0 if p[0] == i else 0.0 for p in pairs])
        bounds_hi.append(1.0)
    for b in range(problem.m):  # room of each node
        rows.append([float(problem.size[p[0]]) if p[1] == b else 0.0 for p in pairs])
        bounds_hi.append(float(problem.room[b]))
    constraints = [LinearConstraint(np.array(rows), -np.inf, np.array(bounds_hi))]
    columns = [[float(problem.values[i][b][c]) for i, b in pairs] for c in range(3)]  # type: ignore[index]
    columns.append([1.0] * count)
    achieved = []
    for column in columns[:levels]:
        # gap 0: HiGHS's default (1e-4 relative) stops short of the optimum, and a planner checked against
        # it passes a plan that is short (seen: 28 credit below K* = 732,052, everywhere 160 x 8)
        for presolve in (True, False):
            result = milp(-np.array(column), constraints=constraints, integrality=np.ones(count),
                          bounds=Bounds(0, 1),
                          options={"time_limit": time_limit_s, "mip_rel_gap": 0.0, "presolve": presolve})
            if result.x is None or result.status != 0:
                raise RuntimeError(f"MILP failed: {result.message}")
            taken = np.round(result.x).astype(bool)
            placed = [pair for pair, x in zip(pairs, taken) if x]
            if len(dict(placed)) < len(placed) or not is_feasible(problem, dict(placed)):
                raise RuntimeError(f"MILP's placement does not fit in integers at level {len(achieved) + 1}")
            value = int(round(float(np.dot(column, taken))))
            if _closed(value, result.mip_dual_bound):
                break
            # HiGHS can report "optimal" short of its own dual bound (seen: T 477,440 against a bound of
            # 477,695.99 and a feasible 477,696 on an independent 64 x 8 snapshot; without presolve it is
            # right): its status alone is not a proof
        else:
            raise RuntimeError(f"MILP stopped short of its dual bound at level {len(achieved) + 1}")
        achieved.append(value)
        constraints.append(LinearConstraint(np.array([column]), value - 0.5, np.inf))
    return tuple(achieved)


def _closed(value: int, dual_bound: float | None) -> bool:
    """Whether no integer above `value` is left under HiGHS's dual bound (of the minimized −value), allowing
    for the bound's float rounding (a billionth of it; never half a unit: a relative 1e-6 was more than a
    whole unit past K = 1,000,000, and every such proven level read as unsolved)."""
    if dual_bound is None or not np.isfinite(dual_bound):
        return dual_bound is None  # an older scipy without the bound: the status is all there is
    return math.floor(-dual_bound + min(0.5, 1e-6 + 1e-9 * abs(value))) <= value
