"""The K level by HiGHS's branch and cut, for the small sub-problems the Lagrangian search leaves open.

On small snapshots whose packing is tight (large sessions beside small rooms, credit flat per session)
the Lagrangian bound can sit a percent above the optimum, and splitting on sessions closes that slowly;
HiGHS's cuts and presolve close it in milliseconds (measured: 32 × 4 snapshots the search left open after
26 ms, HiGHS proved from the search's placement in 1-90 ms). It is given the search's best placement as
its start and whatever time is left, and stops once its bound is within half a credit step of its best
(every K is a multiple of the step, so that is a proof).

Its answer is checked in exact arithmetic: the placement it returns is used only when it keeps every room
and collects more; its dual bound is floored to the step after a relative slack of HiGHS's own LP
tolerance is added (a bound a hair below the truth is not taken as a proof of one step less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy
import numpy as np

from tao_harness.planner.k_arrays import DualArrays
from tao_harness.planner.k_lp import k_model

_TOLERANCE = 1e-7  # relative slack added to HiGHS's dual bound before flooring (its LP tolerances are 1e-7):
# a bound a little below the truth is not taken as a proof of one credit step less
_GAP = 0.5  # of a credit step: HiGHS stops once its bound is this close to its best (plus the slack, still
# below the next step, so the floored bound is the best: a proof)


@dataclass(frozen=True, slots=True)
class KBranchCut:
    """What HiGHS established within its time."""

    placement: dict[int, int] | None  # its best placement (problem session -> node) when feasible, else None
    value: int  # its K (0 without a placement)
    bound: int | None  # ≥ K of every placement, a multiple of the step; None when HiGHS proved none


def k_branch_and_cut(arrays: DualArrays, incumbent: dict[int, int], step: int, seconds: float) -> KBranchCut:
    """Maximize K over the pairs of `arrays` with HiGHS (mip_rel_gap 0, absolute gap half a `step`),
    started from `incumbent`, for at most `seconds` of wall time."""
    session = arrays.pair_session
    if not len(session):
        return KBranchCut(None, 0, 0)
    lp = k_model(arrays)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * len(session)
    solver = highspy.Highs()
    for option, setting in (("output_flag", False), ("threads", 1), ("mip_rel_gap", 0.0),
                            ("mip_abs_gap", step * _GAP), ("time_limit", max(seconds, 1e-3))):
        solver.setOptionValue(option, setting)
    solver.passModel(lp)
    at, _ = arrays.pairs_of(incumbent)
    if (at >= 0).any():
        start = np.zeros(len(session))
        start[at[at >= 0]] = 1.0
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        solver.setSolution(solution)
    solver.run()
    info = solver.getInfo()
    dual = float(info.mip_dual_bound)
    bound = None
    if math.isfinite(dual):
        bound = math.floor(dual + _TOLERANCE * max(1.0, abs(dual))) // step * step
    taken = np.asarray(solver.getSolution().col_value) > 0.5
    placement = _checked(arrays, taken)
    worth = int(arrays.pair_credit[taken].sum()) if placement is not None else 0
    return KBranchCut(placement, worth, bound)


def _checked(arrays: DualArrays, taken: np.ndarray) -> dict[int, int] | None:
    """The pairs `taken` as a placement when each session holds at most one and every room is kept."""
    if not len(taken) or not taken.any():
        return None
    sessions = arrays.pair_session[taken]
    if len(np.unique(sessions)) != len(sessions):
        return None
    used = np.bincount(arrays.pair_node[taken], weights=arrays.size[sessions], minlength=len(arrays.room))
    if (used > arrays.room).any():
        return None
    return dict(zip(arrays.sessions[sessions].tolist(), arrays.pair_node[taken].tolist()))
