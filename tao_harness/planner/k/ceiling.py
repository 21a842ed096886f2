"""A second bound on K, from packing alone: the size-nested surrogate bound (planner/packing/nested.py) over
the credited sessions, each worth its best credit on any node.

Every K-placement puts credited sessions into the rooms, each collecting at most its best credit, so it
is a feasible choice of that relaxation (which forgets on which nodes a session is credited or eligible,
but not which rooms it fits). The Lagrangian and LP bounds (planner/k/lagrange.py, planner/k/lp.py) know
the nodes but let a session's room be pieced together from several fractions; this one knows the
fragmentation and forgets the nodes. With flat credit on rooms of very different sizes (the degenerate
shape's equal-credit snapshots) it is often the lower of the two, and then the only one a placement
can reach.
"""

from __future__ import annotations

from tao_harness.planner.packing.nested import nested_value
from tao_harness.planner.shared.int_knapsack import INT64_BITS

_WORK = 2_000_000  # sessions × merged room past which the DP (numpy, ~1 ns a cell) is not worth its time


def k_ceiling(credit: list[dict[int, int]], size: tuple[int, ...], room: tuple[int, ...]) -> int | None:
    """≥ K of every feasible placement, for the credited pairs `credit[b]` (session -> k, each fitting
    room b); None when the problem is too large for the DP to pay (or its sums for int64)."""
    best: dict[int, int] = {}
    for column in credit:
        for i, k in column.items():
            best[i] = max(best.get(i, 0), k)
    items = sorted(best)
    if len(items) * sum(room) > _WORK or sum(best.values()) >= 1 << INT64_BITS:
        return None
    gain = [0] * len(size)
    for i, k in best.items():
        gain[i] = k
    return nested_value(items, list(size), gain, list(room))
