"""The K level of the certificate: every K-optimal way to fill each node with its credited sessions.

When every session has credit on at most one node (one it may use), K only grows when a session sits
on its credit node, and nodes share no credited sessions: K* = Σ_b (best credit subset of node b's
credited sessions within C̄_b), one 1-D knapsack per node. Every optimal plan puts on each node exactly
one of that node's K-optimal subsets (its credited sessions there reach K*_b, and another credited one
would raise K). Usually each node has one; when credits tie, the few combinations are listed and each
is finished separately (planner/solve.py keeps the best).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from tao_harness.planner.shared.knapsack import dembo_hammer
from tao_harness.planner.shared.problem import Problem, sizes_gcd

_UNREACHABLE = -(1 << 60)
_TABLE_CELLS = 4_000_000  # items × room (in the sizes' gcd) past which the tables are not built: 32 MB, a few
# ms (at 16-token quanta, one 1-node snapshot's tables took 80 x 1 M cells: 640 MB and 2.6 s)


def credit_nodes(problem: Problem) -> tuple[list[int], list[int]] | None:
    """Per session, the node with positive credit (-1 for none) and that credit; None if the certificate
    cannot apply (credit on several nodes). A node a session may not use holds no credit for it."""
    nodes, credits = [], []
    for row in problem.values:
        credited = [b for b, v in enumerate(row) if v is not None and v[0] > 0]
        if len(credited) > 1:
            return None
        nodes.append(credited[0] if credited else -1)
        credits.append(row[credited[0]][0] if credited else 0)  # type: ignore[index]
    return nodes, credits


def best_credit_subsets(
    items: list[int], size: list[int], credit: list[int], room: int, limit: int
) -> list[list[int]] | None:
    """Every subset of `items` maximizing Σ credit within `room`, or None if there are more than `limit`
    or their tables would pass `_TABLE_CELLS` (the caller then takes the general path, which does not
    list them).

    The sessions in every optimum and those in none are set aside first (planner/shared/knapsack.py's
    `dembo_hammer`; at 16-token quanta the tables of the rest took 3.2 of the 9.3 ms of a plan on the
    independent eligibility snapshots at 160 x 8). Then an exact-size DP over the others, in the sizes' gcd:
    tables[j][c] is the largest credit sum of a subset of items[:j] of total size exactly c grains. Credits
    are positive, so "unreachable" is a huge negative number that never ties with a sum. The optima are
    walked back through every branch (leave item j-1 out, or take it) that keeps the max.
    """
    items = [i for i in items if size[i] <= room]
    if sum(size[i] for i in items) <= room:
        return [items]  # every credit is positive, so taking all is the only optimum
    grain = sizes_gcd(items, size)
    size = [w // grain for w in size]
    room //= grain
    everywhere, items, room = _set_aside(items, size, credit, room)
    if len(items) * (room + 1) > _TABLE_CELLS:
        return None
    best = np.full(room + 1, _UNREACHABLE, dtype=np.int64)
    best[0] = 0
    tables = [best]
    for i in items:  # each of positive size: those of none are set aside
        best = best.copy()
        np.maximum(best[size[i]:], tables[-1][:-size[i]] + credit[i], out=best[size[i]:])
        tables.append(best)
    top = int(best.max())
    found: list[list[int]] = []

    def walk(j: int, c: int, chosen: list[int]) -> None:
        if j == 0:
            found.append(everywhere + chosen)
            if len(found) > limit:
                raise _TooMany
            return
        i, target = items[j - 1], int(tables[j][c])
        if tables[j - 1][c] == target:
            walk(j - 1, c, chosen)
        w = size[i]
        if c >= w and tables[j - 1][c - w] + credit[i] == target:
            walk(j - 1, c - w, chosen + [i])

    try:
        for c in np.flatnonzero(best == top):
            walk(len(items), int(c), [])
    except _TooMany:
        return None
    return found


def _set_aside(items: list[int], size: list[int], credit: list[int], room: int
               ) -> tuple[list[int], list[int], int]:
    """The items of every optimal subset within `room` (those of no size, and the clear cases of the
    reduction), the items that may be in some, and the room the first leave."""
    sizes = np.array([size[i] for i in items], dtype=np.int64)
    fixed, free = dembo_hammer(sizes, np.array([credit[i] for i in items], dtype=np.int64), room)
    everywhere = [i for i in items if size[i] == 0] + [items[j] for j in fixed.tolist()]
    return everywhere, [items[j] for j in free.tolist()], room - int(sizes[fixed].sum())


def k_optimal_options(problem: Problem, limit: int) -> list[dict[int, int]] | None:
    """Every K-optimal placement of the credited sessions (session -> its credit node), at most `limit`
    of them (combinations across nodes); None when the certificate does not apply or there are more."""
    info = credit_nodes(problem)
    if info is None:
        return None
    credit_node, credit = info
    size = list(problem.size)
    per_node: list[list[list[int]]] = []
    for b in range(problem.m):
        group = [i for i, node in enumerate(credit_node) if node == b]
        subsets = best_credit_subsets(group, size, credit, problem.room[b], limit) if group else [[]]
        if subsets is None:
            return None
        per_node.append(subsets)
    if np.prod([len(subsets) for subsets in per_node]) > limit:
        return None
    return [{i: b for b, subset in enumerate(choice) for i in subset} for choice in product(*per_node)]


class _TooMany(Exception):
    """More optimal subsets than the caller asked for."""
