"""Whether a K-optimal placement is the only one: then the rest searched around it is the whole optimum.

The general path fixes the K level's placement P and searches the other sessions around it. That proves
the plan optimal among the plans holding P; it is optimal outright when every K-optimal plan collects
its credit on exactly P's pairs. The Lagrangian says so pair by pair: at multipliers λ with
L(λ) = K*, probing (planner/k_dual.py) bounds every way of each session (on one of its credit nodes, or
on none) and closes the ways bounded below K*, which no K-optimal plan takes. A session left one way is
fixed to it, the problem restricted, the multipliers refreshed and the rest probed again. When no
session is left open, the K-optimal credited pairs are unique (and P's); when a probe narrows nothing,
or the deadline passes, the answer is no (which only means unproven).
"""

from __future__ import annotations

import math

import numpy as np

from tao_harness.planner.deadline import Deadline
from tao_harness.planner.k_arrays import DualArrays
from tao_harness.planner.k_dual import dual_steps, probe
from tao_harness.planner.lagrange import credit_matrix, credit_step, shared_sessions, starting_multipliers
from tao_harness.planner.problem import Problem

_ROUNDS = 6  # probes at most (each after fixing what the last one left one way)
_STEPS = 30  # subgradient steps before each probe, stopping once L(λ) reaches K*
_FIRST_STEP = 1.5  # the first step, as a share of the Polyak step (as the K level's search)


def k_placement_unique(
    problem: Problem, placement: dict[int, int], k_star: int, deadline: Deadline | None = None
) -> bool:
    """Whether every K-optimal placement collects its credit on exactly `placement`'s pairs (credited
    sessions on their credit nodes, collecting the proven optimum `k_star`)."""
    credit = credit_matrix(problem)
    if not any(credit):
        return not placement  # no credit anywhere: every placement is K-optimal, with no credited pair
    step = credit_step(credit)
    arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size, dtype=np.int64))
    lam = starting_multipliers(credit, problem.n, shared_sessions(credit))  # per problem session
    fixed: dict[int, int] = {}
    fixed_value = 0
    for _ in range(_ROUNDS):
        if not len(arrays.sessions):
            break
        local = np.where(arrays.shared, lam[arrays.sessions], 0.0)
        steps = dual_steps(arrays, local, _STEPS, fixed_value, k_star, step, _FIRST_STEP, math.inf, deadline)
        lam[arrays.sessions] = steps.multipliers
        outcome = probe(arrays, steps.multipliers, fixed_value, k_star - step, step, deadline)
        if outcome is None or outcome.settled or not outcome.narrowed:
            return False  # out of time; K* out of reach (it is not: rounding); or some session open two ways
        restricted = arrays.restricted(outcome.place, outcome.drop)
        if restricted is None:
            return False
        arrays, newly, value = restricted
        fixed.update(newly)
        fixed_value += value
    return not len(arrays.sessions) and fixed == placement
