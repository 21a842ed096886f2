"""The rest of a plan around its K placement, solved as a K level: (R, T, N) packed into one "credit".

planner/rest/around.py searches the residual around a K-optimal placement: the other sessions, worth (0, r, t)
on the nodes they may use, in the rooms left. Its branch and bound prunes with the size-nested surrogate
bound (planner/packing/nested.py), which forgets which nodes a session may use; with eligibility subsets that
bound sits well above the optimum, and the search ran out of nodes and time on a quarter of the 32 x 8
`eligible` snapshots (their plans short of the MILP's lexicographic optimum in R or T).

Packed (planner/shared/problem.py's `Packer`: integer order and sums are the lexicographic ones), each
residual pair's value is one integer, the same on every node the session may use: a K problem with flat
credit. The K level (planner/k/lagrange.py) then bounds it with one knapsack per node, which keeps the
eligibility, and searches it; when its bound meets its placement, that placement is the residual's
lexicographic optimum.
"""

from __future__ import annotations

from tao_harness.planner.k.lagrange import KLevel, k_level
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Packer, Problem
from tao_harness.types import MAX_TOKENS


def packed_level(residual: Problem, packer: Packer, deadline: Deadline | None) -> KLevel | None:
    """The K level of `residual` (values (0, r, t)) with each pair's value packed by `packer` as its
    credit; None when a packed value passes MAX_TOKENS (the K level's float sums are exact below it)."""
    values = tuple(tuple(None if v is None else (packer.pack(v), 0, 0) for v in row)
                   for row in residual.values)
    top = max((v[0] for row in values for v in row if v is not None), default=0)
    if top > MAX_TOKENS:
        return None
    return k_level(Problem(residual.session_ids, residual.node_ids, residual.size, residual.room, values),
                   deadline)
