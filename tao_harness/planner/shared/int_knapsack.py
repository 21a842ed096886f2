"""The exact 0-1 knapsack over integer gains (packed values), with the items it takes: the surrogate
relaxation's single bin (bounds/certificate.py, bounds/lexicographic.py) and every re-packed room
(packing/improve.py). Compiled with numba, as shared/knapsack.py's kernel over float profits is."""

from __future__ import annotations

import numpy as np
from numba import njit

from tao_harness.planner.shared.knapsack import dembo_hammer
from tao_harness.planner.shared.problem import sizes_gcd

INT64_BITS = 62  # packed values must stay below 2^62 so sums of two never overflow int64
_DP_CELLS = 8_000_000  # the surrogate's DP (items left by the reduction × room) at most: ~8 ms, 8 MB (at
# 16-token quanta on 160 x 8 ~1 M; at 1-token quanta it passed 10^9, seconds and gigabytes)


def surrogate_knapsack(items: list[int], size: list[int], gain: list[int], capacity: int) -> list[int] | None:
    """A subset of `items` maximizing Σ gain with Σ size ≤ capacity (gains < 2^62), sizes counted in their
    gcd; None when its DP would still pass `_DP_CELLS` (rooms of millions of quanta: 1-token quanta)."""
    if sum(size[i] for i in items) <= capacity:
        return list(items)
    chosen = [i for i in items if size[i] == 0]
    grain = sizes_gcd(items, size)
    picks = _knapsack_picks(np.array([size[i] // grain for i in items], dtype=np.int64),
                            np.array([gain[i] for i in items], dtype=np.int64), capacity // grain, _DP_CELLS)
    if len(picks) and picks[0] < 0:
        return None
    return chosen + [items[k] for k in picks]


@njit(cache=True)
def _knapsack_picks(size: np.ndarray, gain: np.ndarray, capacity: int, cells: int) -> np.ndarray:
    """The positions j of the items (`size[j]`, `gain[j]`, int64: exact) of positive size an optimal
    subset within `capacity` takes, last first, or [-1] when the DP would pass `cells`. On ties in gain,
    an item is taken only where it is strictly better than doing without it, so the subset is the same
    whatever the machine.

    Compiled (and cached, as planner/shared/knapsack.py's kernel): the planner solves several of these per
    snapshot (certificate, bound, each re-packed room), and in numpy each item's pass over the
    capacities cost more in array set-up than in arithmetic. The items every optimum takes or none does
    are set aside first (planner/shared/knapsack.py's `dembo_hammer`), and the DP runs over the others in the
    room they leave."""
    fixed, free = dembo_hammer(size, gain, capacity)
    room = capacity
    for j in fixed:
        room -= size[j]
    if len(free) == 0:
        return np.sort(fixed)[::-1]
    room = min(room, size[free].sum())  # past what the free items take together every capacity is alike
    # (a room of billions of quanta beside a few sessions: the DP's arrays are as long as the room)
    if len(free) * (room + 1) > cells:
        return np.full(1, -1, dtype=np.int64)
    picks = _dp_picks(size[free], gain[free], room)
    return np.sort(np.concatenate((fixed, free[picks])))[::-1]


@njit(cache=True)
def _dp_picks(size: np.ndarray, gain: np.ndarray, capacity: int) -> np.ndarray:
    """`_knapsack_picks` by DP over every capacity: each item passes only over the capacities its
    predecessors' total size reaches (`top`): beyond it the best gain is the same as at `top`, and an item
    is taken there exactly when its gain is positive."""
    n = size.shape[0]
    best = np.zeros(capacity + 1, dtype=np.int64)  # best gain with total size at most c, for c ≤ top
    take = np.empty((n, capacity + 1), dtype=np.bool_)  # item j raised best[c], for size[j] ≤ c ≤ reach[j]
    reach = np.zeros(n, dtype=np.int64)  # `top` once item j is in
    top = 0
    for j in range(n):
        w, g = size[j], gain[j]
        if w == 0 or w > capacity:
            continue
        after = min(capacity, top + w)
        best[top + 1:after + 1] = best[top]  # the capacities item j may reach, as they are without it
        for c in range(after, w - 1, -1):  # downwards: best[c - w] is still without item j
            old, new = best[c], best[c - w] + g
            raised = new > old
            take[j, c] = raised
            best[c] = new if raised else old  # a select, not a branch: `raised` is a coin flip
        top = after
        reach[j] = top
    picks = np.empty(n, dtype=np.int64)
    count, c = 0, capacity
    for j in range(n - 1, -1, -1):
        w = size[j]
        if w > 0 and c >= w and (take[j, c] if c <= reach[j] else gain[j] > 0):
            picks[count] = j
            count += 1
            c -= w
    return picks[:count]


