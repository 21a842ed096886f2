"""Each node's knapsack with one of its items forced in and forced out: what the K level's probes
(planner/k/dual.py) bound every way to place a session with.

Two ways to the same numbers. `forced_tables` builds "best within c" tables forward and backward over the
items and joins them around each one: exact, at the cost of two tables of items x room, which on rooms of
thousands of quanta (16-token quanta, large replicas) is milliseconds a node. `forced_values` searches
(planner/shared/knapsack.py's branch and bound) only for the forced values a probe can use: a way to place a
session is closed once one of its knapsacks loses `floor_loss` or more, so each search is asked only for
values above the node's knapsack minus that, which prunes most of its tree; a forced value none above is
reported at that floor (an upper bound, and the way is closed either way). Past its node budget it says
so, and the tables are built.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tao_harness.planner.shared.knapsack import alike_runs, ratio_order, search_above, size_gcd


@njit(cache=True)
def forced_values(size: np.ndarray, profit: np.ndarray, room: int, value: float, take: np.ndarray,
                  floor_loss: float, nodes: int) -> tuple[bool, np.ndarray, np.ndarray]:
    """Per item j (`size[j]` int64, `profit[j]` float64) the knapsack within `room` with j forced in and
    forced out, given the knapsack itself (`value`, the items `take`n: planner/shared/knapsack.py's kernel),
    each exact when it is above `value − floor_loss`, else reported there; False (and the values unknown) past
    `nodes` search nodes in all.

    An item the knapsack takes changes nothing forced in, one it leaves changes nothing forced out: one
    search per item, over the positive items without it. Items alike (same size and profit: sessions of
    one task template) share their values, and where the knapsack takes some of them and leaves others,
    swapping one for another costs nothing: no search."""
    n = size.shape[0]
    forced_in, forced_out = np.full(n, value), np.full(n, value)
    positive = np.empty(n, dtype=np.int64)
    k = 0
    for j in range(n):
        if profit[j] > 0 and size[j] <= room:
            positive[k] = j
            k += 1
    ordered, w, p, run_end = ratio_order(positive[:k], size, profit)
    where = np.full(n, -1, dtype=np.int64)  # item -> its place in the order
    for t in range(k):
        where[ordered[t]] = t
    g = size_gcd(w)  # of the positive items: a room is worth only its multiples of it
    by_profit = np.argsort(profit, kind="mergesort")
    alike = by_profit[np.argsort(size[by_profit], kind="mergesort")]  # items alike next to each other
    start = 0
    while start < n:
        end = start + 1
        first = alike[start]
        while end < n and size[alike[end]] == size[first] and profit[alike[end]] == profit[first]:
            end += 1
        if size[first] > room:
            for r in range(start, end):
                forced_in[alike[r]] = -np.inf
            start = end
            continue
        taken = left = 0
        for r in range(start, end):
            if take[alike[r]]:
                taken += 1
            else:
                left += 1
        for taken_one, other_side in ((True, left), (False, taken)):
            j = -1
            for r in range(start, end):
                if take[alike[r]] == taken_one:
                    j = alike[r]
                    break
            if j < 0 or other_side > 0:  # none on this side, or a swap with one on the other side
                continue
            best, nodes = _forced_search(j, taken_one, size, profit, room, g, w, p, run_end,
                                         where[j], value - floor_loss, nodes)
            if nodes < 0:
                return False, forced_in, forced_out
            for r in range(start, end):
                if take[alike[r]] == taken_one:
                    if taken_one:
                        forced_out[alike[r]] = best
                    else:
                        forced_in[alike[r]] = profit[j] + best
        start = end
    return True, forced_in, forced_out


@njit(cache=True)
def _forced_search(j: int, taken: bool, size: np.ndarray, profit: np.ndarray, room: int, g: int,
                   w: np.ndarray, p: np.ndarray, run_end: np.ndarray, t: int, lower: float, nodes: int
                   ) -> tuple[float, int]:
    """Item j's one forced knapsack that differs from the knapsack (out when `taken`, else in, its own
    profit not counted), searched over the positive items (ordered: `w`, `p`, `run_end`; j at `t`, or -1
    when priced out; `g` their sizes' gcd) above `lower`: its value and the nodes left (see
    `search_above`)."""
    within = (room if taken else room - size[j]) // g * g
    if t < 0:
        return search_above(w, p, run_end, within, lower - profit[j], nodes, np.zeros(w.shape[0], np.bool_))
    without_w = np.concatenate((w[:t], w[t + 1:]))
    without_p = np.concatenate((p[:t], p[t + 1:]))
    return search_above(without_w, without_p, alike_runs(without_w, without_p), within,
                        lower if taken else lower - profit[j], nodes, np.zeros(without_w.shape[0], np.bool_))


@njit(cache=True)
def forced_tables(size: np.ndarray, profit: np.ndarray, room: int) -> tuple[float, np.ndarray, np.ndarray]:
    """KP (the knapsack of items j, `size[j]` int64 and `profit[j]` float64, within `room`), and per item
    the knapsack with it forced in and forced out: "best within c" tables forward and backward over the
    items of positive profit, joined around each one. An item of profit ≤ 0 is never taken unless forced
    in, so leaving it out changes nothing and forcing it in costs one lookup in the whole table (under the
    multipliers most of a node's items are priced out: with credit on every node a session is wanted by
    one or two of them). The tables stop at the positive items' total size when that is below the room:
    past it every table is flat."""
    n = size.shape[0]
    positive = np.empty(n, dtype=np.int64)
    k, total = 0, 0
    for j in range(n):
        if profit[j] > 0:
            positive[k] = j
            k += 1
            total += size[j]
    width = min(room, total)
    forward = np.zeros((k + 1, width + 1))
    backward = np.zeros((k + 1, width + 1))  # backward[t]: positive items t..k−1
    for t in range(k):
        _add(forward[t], forward[t + 1], size[positive[t]], profit[positive[t]])
    for t in range(k - 1, -1, -1):
        _add(backward[t + 1], backward[t], size[positive[t]], profit[positive[t]])
    whole = forward[k]
    forced_in, forced_out = np.empty(n), np.empty(n)
    for j in range(n):  # priced out: the whole knapsack without it, or it beside the best of the rest
        forced_out[j] = whole[width]
        forced_in[j] = profit[j] + whole[min(room - size[j], width)] if size[j] <= room else -np.inf
    for t in range(k):
        j = positive[t]
        forced_out[j] = _join(forward[t], backward[t + 1], room, width)
        forced_in[j] = profit[j] + _join(forward[t], backward[t + 1], room - size[j], width) \
            if size[j] <= room else -np.inf
    return whole[width], forced_in, forced_out


@njit(cache=True)
def _join(before: np.ndarray, after: np.ndarray, capacity: int, width: int) -> float:
    """The best of two "best within c" tables (flat past `width`) sharing `capacity` ≥ 0 between them."""
    lo, hi = max(0, capacity - width), min(capacity, width)
    if lo > hi:  # both past their flat point
        return before[width] + after[width]
    best = -np.inf
    for c in range(lo, hi + 1):
        best = max(best, before[c] + after[capacity - c])
    return best


@njit(cache=True)
def _add(table: np.ndarray, out: np.ndarray, w: int, p: float) -> None:
    """`out`: the "best within c" table `table` with one more item (profit p > 0; one wider than the table
    is never taken)."""
    out[:] = table
    for c in range(w, table.shape[0]):
        if table[c - w] + p > out[c]:
            out[c] = table[c - w] + p
