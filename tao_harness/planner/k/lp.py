"""The LP relaxation of the K level: multipliers for the Lagrangian (planner/k/lagrange.py) in one solve.

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

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.highs import quiet_highs

_SCALE = 1 << 20  # node prices are rounded to multiples of 2^-20 (any μ ≥ 0 gives a valid bound)


@dataclass(frozen=True, slots=True)
class KRelaxation:
    """What the LP relaxation established about K, over the pairs of the `DualArrays` it was given."""

    bound: int  # ⌊D(μ)⌋ ≥ K of every feasible placement
    multipliers: dict[int, float]  # λ_i(μ) per credited session (problem session index), where positive
    whole: dict[int, int]  # the sessions the LP placed whole: session -> node
    with_pair: np.ndarray  # int64 per pair: ⌊D(μ) − its reduced cost⌋ ≥ K of placements holding that pair
    without: np.ndarray  # int64 per local session: ⌊D(μ) − λ_i⌋ ≥ K of placements leaving it off its nodes


def k_relaxation(arrays: DualArrays) -> KRelaxation | None:
    """The LP relaxation over the open pairs of `arrays`; None when there are none or HiGHS fails."""
    n = len(arrays.sessions)
    if not len(arrays.pair_session):
        return None
    session, node = arrays.pair_session, arrays.pair_node
    size = arrays.size[session]
    lp = k_model(arrays)
    solver = quiet_highs()
    solver.setOptionValue("presolve", "off")
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    solution = solver.getSolution()
    # μ_b · 2^20 as integers, exact arithmetic below (Python integers past int64's range)
    exact = np.int64 if _fits_int64(arrays) else object
    prices = np.round(np.abs(np.asarray(solution.row_dual[n:])) * _SCALE).astype(np.int64).astype(exact)
    credit = arrays.pair_credit.astype(np.int64).astype(exact)
    reduced = credit * _SCALE - size.astype(exact) * prices[node]
    scaled = np.zeros(n, dtype=np.int64).astype(exact)  # λ_i(μ) · 2^20 = max(0, max_b k_ib − w̄_i μ_b)
    np.maximum.at(scaled, session, reduced)
    total = int((prices * arrays.room.astype(exact)).sum() + scaled.sum())
    taken = np.asarray(solution.col_value) > 1 - 1e-9
    sessions = arrays.sessions.tolist()
    whole = {sessions[s]: b for s, b in zip(session[taken].tolist(), node[taken].tolist())}
    # a placement holding pair (i, b) loses its reduced cost λ_i + w̄_i μ_b − k_ib ≥ 0 from D(μ); one
    # leaving session i out loses λ_i (weak duality with those terms kept)
    with_pair = ((total - (scaled[session] - reduced)) // _SCALE).astype(np.int64)
    without = ((total - scaled) // _SCALE).astype(np.int64)
    multipliers = {sessions[s]: int(lam) / _SCALE for s, lam in enumerate(scaled.tolist()) if lam > 0}
    return KRelaxation(total // _SCALE, multipliers, whole, with_pair, without)


def k_model(arrays: DualArrays) -> highspy.HighsLp:
    """The K problem over the open pairs of `arrays`, relaxed (0 ≤ x ≤ 1): a column per pair (its credit),
    a row per session (at most one pair) and per node (its room)."""
    count, n = len(arrays.pair_session), len(arrays.sessions)
    return assignment_model(arrays, arrays.pair_credit, arrays.size[arrays.pair_session], arrays.pair_node,
                            arrays.pair_session, np.ones(n), np.ones(count))


def assignment_model(arrays: DualArrays, cost: np.ndarray, size: np.ndarray, node: np.ndarray,
                     row: np.ndarray, row_upper: np.ndarray, col_upper: np.ndarray) -> highspy.HighsLp:
    """max Σ cost·x over columns j, continuous 0 ≤ x_j ≤ col_upper[j]: column j in its own row `row[j]`
    (Σ x ≤ `row_upper` of that row, the rows first) and in its node's `node[j]` (Σ size·x within the room of
    `arrays`). The K relaxation's model (a row per session) and HiGHS's count of alike sessions per node
    (planner/k/mip.py: a row per class)."""
    columns, rows = len(cost), len(row_upper)
    index = np.empty(2 * columns, dtype=np.int32)  # column j: its own row, then its node's
    index[0::2], index[1::2] = row, rows + node
    value = np.empty(2 * columns)
    value[0::2], value[1::2] = 1.0, size
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = columns, rows + len(arrays.room)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = cost
    lp.col_lower_, lp.col_upper_ = np.zeros(columns), col_upper
    lp.row_lower_ = np.full(lp.num_row_, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate((row_upper, arrays.room.astype(np.float64)))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, 2 * columns + 1, 2, dtype=np.int32)
    lp.a_matrix_.index_, lp.a_matrix_.value_ = index, value
    return lp


def _fits_int64(arrays: DualArrays) -> bool:
    """Whether D(μ)'s terms, scaled by 2^20, stay within int64 (credits of real snapshots do by far): an
    optimal μ_b is at most the largest credit per quantum, so Σ C̄_b μ_b + Σ λ_i ≤ k_max (Σ C̄_b + n)."""
    top = float(arrays.pair_credit.max(initial=0.0)) * (float(arrays.room.sum()) + len(arrays.sessions) + 1)
    return top * _SCALE * 4 < 2.0 ** 62
