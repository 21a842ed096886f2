"""Two nodes of an unproven K placement, re-solved together: the move that the K level's node-by-node
re-packs and exchanges cannot make.

With graded credit and many sessions alike, the best placement can differ from the one found by a joint
re-packing of two nodes and the sessions left out: one node takes more, smaller sessions, and the other
takes sessions the first gave up, with some left out in exchange. On an independent 160 x 8 snapshot the
search's placement was 0.66% short of K* for that reason alone (nodes 1 and 7: eight sessions on one
instead of seven, three others on the other), and no re-pack of either node, nor any exchange between
them, reaches it.

Which two: at the root's multipliers λ each node b has a slack, its knapsack's best reduced profit
KS_b(λ) less what its sessions in the placement make of it (Σ k_ib − λ_i ≥ 0). The Lagrangian bound
exceeds the placement's K by the sum of the slacks (plus the λ of the sessions left out), so the two
nodes of most slack hold the most of the gap. On the independent snapshots, with the multipliers of one
K level each, the improving pair ranked first on mixed-3 and mixed-38 and 13th on mixed-35; which pair
ranks first moves with the multipliers the search ends on (mixed-38 at 30 ms picks another).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.dual import node_values
from tao_harness.planner.shared.problem import Problem


def widest_pair(arrays: DualArrays, placement: dict[int, int], lam: np.ndarray) -> tuple[int, int]:
    """The two nodes whose slack at the multipliers `lam` (per problem session) is the most, lower nodes
    first on ties; `arrays`: the K problem's credited pairs, `placement` on them."""
    local = lam[arrays.sessions]
    at, _ = arrays.pairs_of(placement)
    placed = at >= 0
    held = np.bincount(arrays.pair_node[at[placed]], weights=arrays.pair_credit[at[placed]] - local[placed],
                       minlength=len(arrays.room))
    slack = (node_values(arrays, local) - held).tolist()
    return max(combinations(range(len(slack)), 2), key=lambda ab: (slack[ab[0]] + slack[ab[1]], -ab[0]))


def pair_problem(problem: Problem, credit: list[dict[int, int]], placement: dict[int, int],
                 nodes: tuple[int, int]) -> tuple[Problem, list[int]]:
    """The K problem of `nodes` alone, over the sessions `placement` puts there and those it leaves out
    that have credit on one of them; and the problem session of each of its sessions."""
    pool = [i for i in range(problem.n)
            if placement.get(i) in nodes or (i not in placement and any(i in credit[b] for b in nodes))]
    return Problem(session_ids=tuple(problem.session_ids[i] for i in pool),
                   node_ids=tuple(problem.node_ids[b] for b in nodes),
                   size=tuple(problem.size[i] for i in pool), room=tuple(problem.room[b] for b in nodes),
                   values=tuple(tuple(problem.values[i][b] for b in nodes) for i in pool)), pool
