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

Alike sessions (the same size and the same credit on the same nodes: forks of one parent, copies of one
template) form one class, and HiGHS counts how many of a class go to each node: it never branches between
copies, whose swaps leave every bound where it was. On independent snapshots of 160 sessions in 11-14
such classes, HiGHS proves K* from scratch in 1-2 ms this way, where it needs seconds over the sessions
one by one; with 32-46 classes (several shapes mixed) it takes 0.05-0.3 s, against 60 s unsolved before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy
import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.highs import quiet_highs
from tao_harness.planner.k.lp import assignment_model

_TOLERANCE = 1e-7  # relative slack added to HiGHS's dual bound before flooring (its LP tolerances are 1e-7):
# a bound a little below the truth is not taken as a proof of one credit step less
_HIGHS_OPTIONS = (("threads", 1), ("mip_rel_gap", 0.0),
                  ("mip_heuristic_run_feasibility_jump", False))  # ... besides the gap and time limit: the
# feasibility jump heuristic looks for a first placement, which the search's start already is, and took
# ~9 ms whatever the model (a 5-column one: 10 ms with it, 0.8 without; independent forks 4-12 -> 1-2 ms)
_GAP = 0.5  # of a credit step: HiGHS stops once its bound is this close to its best (plus the slack, still
# below the next step, so the floored bound is the best: a proof)


@dataclass(frozen=True, slots=True)
class KBranchCut:
    """What HiGHS established within its time."""

    placement: dict[int, int] | None  # its best placement (problem session -> node) when feasible, else None
    value: int  # its K (0 without a placement)
    bound: int | None  # ≥ K of every placement, a multiple of the step; None when HiGHS proved none


def k_branch_and_cut(arrays: DualArrays, incumbent: dict[int, int], step: int, seconds: float,
                     alike: Alike | None = None) -> KBranchCut:
    """Maximize K over the pairs of `arrays` with HiGHS (mip_rel_gap 0, absolute gap half a `step`),
    started from `incumbent`, for at most `seconds` of wall time; `alike`: the classes of `arrays` when
    the caller has them."""
    if not len(arrays.pair_session):
        return KBranchCut(None, 0, 0)
    alike = alike or Alike.of(arrays)
    solver = quiet_highs()
    gap_and_time = (("mip_abs_gap", step * _GAP), ("time_limit", max(seconds, 1e-3)))
    for option, setting in (*_HIGHS_OPTIONS, *gap_and_time):
        solver.setOptionValue(option, setting)
    solver.passModel(alike.model(arrays))
    at, _ = arrays.pairs_of(incumbent)
    if (at >= 0).any():
        solution = highspy.HighsSolution()
        solution.col_value = np.bincount(alike.column_of_pair[at[at >= 0]],
                                         minlength=len(alike.column_pair)).astype(np.float64).tolist()
        solution.value_valid = True
        solver.setSolution(solution)
    solver.run()
    dual = float(solver.getInfo().mip_dual_bound)
    bound = None
    if math.isfinite(dual):
        bound = math.floor(dual + _TOLERANCE * max(1.0, abs(dual))) // step * step
    counts = np.rint(np.asarray(solver.getSolution().col_value)).astype(np.int64)
    taken = alike.pairs_taken(arrays, counts)
    placement = None if taken is None else _checked(arrays, taken)
    worth = int(arrays.pair_credit[taken].sum()) if placement is not None else 0
    return KBranchCut(placement, worth, bound)


@dataclass(frozen=True, slots=True)
class Alike:
    """A K sub-problem's sessions in classes of alike ones (the same size, the same credit on the same
    nodes), and HiGHS's columns over them: one per class and node it may go to."""

    session_class: np.ndarray  # int64 per local session: its class
    count: np.ndarray  # int64 per class: its sessions
    column_pair: np.ndarray  # int64 per column: the pair of its class's first session on its node
    column_class: np.ndarray  # int64 per column: its class
    column_of_pair: np.ndarray  # int64 per pair: the column of its session's class on its node

    @classmethod
    def of(cls, arrays: DualArrays) -> Alike:
        n, m = len(arrays.sessions), len(arrays.room)
        table = np.full((n, m + 1), -1.0)  # per session its credit on each node (-1: no pair), then its size
        table[arrays.pair_session, arrays.pair_node] = arrays.pair_credit
        table[:, m] = arrays.size
        order = np.lexsort(table.T)  # alike sessions side by side (np.unique over rows took 4 times as long)
        ordered = table[order]
        first_row = np.ones(min(n, 1), dtype=np.bool_)  # none without sessions
        starts = np.concatenate((first_row, (ordered[1:] != ordered[:-1]).any(axis=1)))
        session_class = np.empty(n, dtype=np.int64)
        session_class[order] = np.cumsum(starts) - 1
        first = order[starts]
        is_first = np.zeros(n, dtype=np.bool_)
        is_first[first] = True
        column_pair = np.flatnonzero(is_first[arrays.pair_session])
        column_class = session_class[arrays.pair_session[column_pair]]
        column_at = np.full((len(first), m), -1, dtype=np.int64)  # (class, node) -> column
        column_at[column_class, arrays.pair_node[column_pair]] = np.arange(len(column_pair))
        return cls(session_class, np.bincount(session_class, minlength=len(first)), column_pair, column_class,
                   column_at[session_class[arrays.pair_session], arrays.pair_node])

    def model(self, arrays: DualArrays) -> highspy.HighsLp:
        """How many sessions of each class go to each node (integers: at most the class, and as many as the
        room holds), within every room: max Σ k x."""
        node = arrays.pair_node[self.column_pair]
        size = arrays.size[arrays.pair_session[self.column_pair]]
        most = self.count[self.column_class]
        fitting = np.minimum(most, np.where(size > 0, arrays.room[node] // np.maximum(size, 1), most))
        lp = assignment_model(arrays, arrays.pair_credit[self.column_pair], size, node, self.column_class,
                              self.count.astype(np.float64), fitting.astype(np.float64))
        lp.integrality_ = [highspy.HighsVarType.kInteger] * len(self.column_pair)
        return lp

    def pairs_taken(self, arrays: DualArrays, counts: np.ndarray) -> np.ndarray | None:
        """The pairs placing `counts[j]` sessions of column j's class on its node (any of them: they are
        alike); None when the counts are not one per column, or ask a class for more than it holds."""
        if counts.shape != self.column_pair.shape or (counts < 0).any():
            return None
        members = np.argsort(self.session_class, kind="stable")  # the sessions, class by class
        start = np.concatenate(([0], np.cumsum(self.count)))
        used = np.zeros(len(self.count), dtype=np.int64)
        pair_at = arrays.pair_index()
        taken = np.zeros(len(arrays.pair_session), dtype=np.bool_)
        for j in np.flatnonzero(counts).tolist():
            c, b, more = self.column_class[j], arrays.pair_node[self.column_pair[j]], counts[j]
            if used[c] + more > self.count[c]:
                return None
            taken[pair_at[members[start[c] + used[c]:start[c] + used[c] + more], b]] = True
            used[c] += more
        return taken


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
