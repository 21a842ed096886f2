"""The LP relaxation of the K level: multipliers for the Lagrangian (planner/lagrange.py) in one solve.

The K problem places credited sessions on credit nodes: max Σ k_ib x_ib subject to Σ_b x_ib ≤ 1 per
session (dual λ_i) and Σ_i w̄_i x_ib ≤ C̄_b per node (dual μ_b). Its LP relaxation is a transportation
problem (sizes do not depend on the node) that HiGHS's dual simplex solves in about a millisecond, where
subgradient steps on the λ_i take hundreds of iterations to come near it.

Only the node prices μ ≥ 0 are taken from the solver; everything else is recomputed from them in exact
arithmetic, so the bound holds whatever the solver's tolerances: with λ_i(μ) = max(0, max_b k_ib − w̄_i μ_b)
the pair (λ(μ), μ) is dual feasible, and by weak duality

    D(μ) = Σ_b C̄_b μ_b + Σ_i λ_i(μ)  ≥  K of every feasible placement.

The Lagrangian at λ(μ), with an exact knapsack per node, is at most D(μ) (each knapsack is at most its
own LP): the LP's multipliers are a warm start at least as good as the LP bound.
"""

from __future__ import annotations

from dataclasses import dataclass
import highspy
import numpy as np

_SCALE = 1 << 20  # node prices are rounded to multiples of 2^-20 (any μ ≥ 0 gives a valid bound)


@dataclass(frozen=True, slots=True)
class KRelaxation:
    """What the LP relaxation established about K."""

    bound: int  # ⌊D(μ)⌋ ≥ K of every feasible placement
    multipliers: dict[int, float]  # λ_i(μ) per credited session
    whole: dict[int, int]  # the sessions the LP placed whole: session -> node
    with_pair: dict[tuple[int, int], int]  # (i, b) -> ⌊D(μ) − reduced cost⌋ ≥ K of placements with i on b
    without: dict[int, int]  # i -> ⌊D(μ) − λ_i⌋ ≥ K of placements leaving i off its credit nodes


def k_relaxation(credit: list[dict[int, int]], size: tuple[int, ...], room: list[int]) -> KRelaxation | None:
    """The LP relaxation over the credited pairs `credit[b]` (session -> k); None when HiGHS fails."""
    pairs = [(i, b) for b, column in enumerate(credit) for i in column]
    if not pairs:
        return None
    sessions = sorted({i for i, _ in pairs})
    row_of = {i: r for r, i in enumerate(sessions)}
    count, rows = len(pairs), len(sessions) + len(credit)
    index = np.empty(2 * count, dtype=np.int32)
    value = np.empty(2 * count)
    for j, (i, b) in enumerate(pairs):
        index[2 * j], index[2 * j + 1] = row_of[i], len(sessions) + b
        value[2 * j], value[2 * j + 1] = 1.0, float(size[i])
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = count, rows
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.array([float(credit[b][i]) for i, b in pairs])
    lp.col_lower_, lp.col_upper_ = np.zeros(count), np.ones(count)
    lp.row_lower_ = np.full(rows, -highspy.kHighsInf)
    lp.row_upper_ = np.array([1.0] * len(sessions) + [float(r) for r in room])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, 2 * count + 1, 2, dtype=np.int32)
    lp.a_matrix_.index_, lp.a_matrix_.value_ = index, value
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("presolve", "off")
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    solution = solver.getSolution()
    duals = solution.row_dual[len(sessions):]
    prices = [round(abs(float(d)) * _SCALE) for d in duals]  # μ_b · 2^20, integers: exact arithmetic below
    scaled: dict[int, int] = {}  # λ_i(μ) · 2^20
    for b, column in enumerate(credit):
        for i, k in column.items():
            reduced = k * _SCALE - size[i] * prices[b]
            if reduced > scaled.get(i, 0):
                scaled[i] = reduced
    total = sum(p * r for p, r in zip(prices, room)) + sum(scaled.values())
    whole = {i: b for (i, b), x in zip(pairs, solution.col_value) if x > 1 - 1e-9}
    # a placement holding pair (i, b) loses its reduced cost λ_i + w̄_i μ_b − k_ib ≥ 0 from D(μ); one
    # leaving session i out loses λ_i (weak duality with those terms kept)
    with_pair = {(i, b): (total - (scaled.get(i, 0) + size[i] * prices[b] - credit[b][i] * _SCALE)) // _SCALE
                 for i, b in pairs}
    without = {i: (total - scaled.get(i, 0)) // _SCALE for i in sessions}
    return KRelaxation(total // _SCALE, {i: lam / _SCALE for i, lam in scaled.items()}, whole, with_pair,
                       without)
