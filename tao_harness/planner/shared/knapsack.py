"""The exact 0-1 knapsack of one node over float profits: the K level's inner step (planner/k/dual.py,
once per node per Lagrangian step, profits k − λ, and planner/k/polish.py's re-packs).

Compiled with numba (`knapsack_kernel`): the Lagrangian solves thousands of these per hard snapshot,
and in Python their bookkeeping, not the DP, was most of the planner's time. numba caches the machine
code beside this file (or in the user's cache when that is read-only); the first call of a new install
compiles it, about a second. Rooms of thousands of quanta (16-token quanta on large replicas) make each
DP pass cost milliseconds: past `_SEARCH_CELLS` a branch and bound is tried first (`search_above`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_EPS = 1e-6  # float slack in comparisons of sums of profits (integers minus multipliers) ...
_RELATIVE_EPS = 2.0 ** -40  # ... plus this share of their magnitude: a float sum of up to ~2^11 terms errs
# by at most 2^-42 of it (with credits of 2^36 an absolute 1e-6 alone closed a way a K-optimal plan takes)

_SEARCH_CELLS = 20_000  # free items × room past which a branch and bound is tried before the DP (rooms of
# thousands of quanta: fine quanta or large replicas, where each DP pass costs milliseconds)
_SEARCH_NODES = 20_000  # its nodes at most (~6 ns each, ~0.13 ms in all); past them the DP ...
_DP_CELLS = 50_000_000  # free items × room past which the DP is not run (a table of as many bytes) ...
_DP_ROOM = 4_000_000  # ... or a room past this (a row of 8 bytes per quantum): when its search gave up,
# the knapsack is bounded by its LP relaxation and its items taken greedily (rooms of billions of quanta:
# 1-token quanta on a replica of 2^40 tokens, where the DP's tables alone ran out of memory)
_CELLS_PER_NODE = 16  # ... and at most one per this many of the DP's cells, so a search that runs out costs
# a fraction of the DP it leaves to. The Lagrangian's late steps price many items alike (profit per size near
# the break item's), where the search rarely ends: knapsacks recorded from two `long` 160 x 8 K levels took
# 19-22 us each with 20,000 nodes, 9.5 us with this cap, 6.5-7.6 us as DP alone; over all 40 such K levels,
# and at 16-token quanta (rooms of thousands, where the search wins: DP alone 38-46 us), no change


@njit(cache=True)
def float_slack(magnitude: float) -> float:
    """The slack for comparing float sums of profits of this magnitude with each other (or flooring one);
    an infinite one (no bound yet) compares as it is."""
    return _EPS + _RELATIVE_EPS * abs(magnitude) if math.isfinite(magnitude) else _EPS


@njit(cache=True)
def ratio_order(items: np.ndarray, size: np.ndarray, profit: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`items` (positive profit) ordered for `search_above`: best profit per size first, larger first among
    equal ratios (so items alike sit together); their sizes, profits and alike runs (see `alike_runs`)."""
    n = items.shape[0]
    by_size = items[np.argsort(-size[items], kind="mergesort")]
    ratio = np.empty(n)
    for t in range(n):
        ratio[t] = -profit[by_size[t]] / max(size[by_size[t]], 1e-9)
    ordered = by_size[np.argsort(ratio, kind="mergesort")]
    w = np.empty(n, dtype=np.int64)
    p = np.empty(n)
    for t in range(n):
        w[t], p[t] = size[ordered[t]], profit[ordered[t]]
    return ordered, w, p, alike_runs(w, p)


@njit(cache=True)
def size_gcd(w: np.ndarray) -> int:
    """The gcd of the sizes (1 when there are none, or all are 0): every total of them is a multiple of it,
    so a room can be taken down to one (sizes in whole blocks of a unit coarser than the quantum). Exact,
    and it lets the search's bound reach the optimum when the items fill what they can."""
    g = 0
    for t in range(w.shape[0]):
        g = math.gcd(g, w[t])
    return max(g, 1)


@njit(cache=True)
def alike_runs(w: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per item t, the index past the last item alike to it (same size and profit) that follows it."""
    n = w.shape[0]
    run_end = np.empty(n, dtype=np.int64)
    for t in range(n - 1, -1, -1):
        run_end[t] = run_end[t + 1] if t + 1 < n and w[t + 1] == w[t] and p[t + 1] == p[t] else t + 1
    return run_end


@njit(cache=True)
def search_above(w: np.ndarray, p: np.ndarray, run_end: np.ndarray, room: int, lower: float, nodes: int,
                 chosen: np.ndarray) -> tuple[float, int]:
    """Horowitz-Sahni depth-first search for the most profit above `lower` within `room`, over items
    ordered by `ratio_order` (w, p, run_end): that profit (`lower` when none is above it) and the nodes
    left of the `nodes` given (negative: the search stopped there, its value unknown). `chosen` (bool, as
    long as w) is left marking the best items found above `lower`, when one is.

    Each node extends the current choice greedily and is bounded by Dantzig's bound (the first item that
    does not fit, in part); a node whose bound does not exceed the best value so far is left. Items alike
    (sessions of one task template) are taken as a prefix of their run: leaving one out leaves out those
    after it, else the search would visit every arrangement of them. Exact up to float rounding, as the
    DP is; a high `lower` (the probes: only values near the optimum matter) prunes most of the tree."""
    n = w.shape[0]
    current = np.zeros(n, dtype=np.bool_)
    best, value, cap, j = lower, 0.0, room, 0
    while True:
        nodes -= 1
        if nodes < 0:
            return best, nodes
        bound, left, k = value, cap, j
        while k < n and w[k] <= left:
            bound += p[k]
            left -= w[k]
            k += 1
        if k < n:
            bound += p[k] * left / w[k]
        if bound > best:  # forward: take the items that fit, leave out the first that does not
            for t in range(j, k):
                current[t] = True
                value += p[t]
            cap, j = left, k + 1
            if j < n:
                continue
            if value > best:  # a leaf: every item decided
                best = value
                chosen[:] = current
        i = min(j, n) - 1  # back to the last item taken, left out this time
        while i >= 0 and not current[i]:
            i -= 1
        if i < 0:
            return best, nodes
        current[i] = False
        value -= p[i]
        cap += w[i]
        j = run_end[i]


@njit(cache=True)
def knapsack_kernel(size: np.ndarray, profit: np.ndarray, room: int) -> tuple[float, np.ndarray]:
    """The exact knapsack of items j (`size[j]` int64, `profit[j]` float64) within `room`: its value and
    which items it takes (items of profit ≤ 0 never). Past `_DP_CELLS` or `_DP_ROOM`, where its search
    gave up, an upper bound (its LP's) and a feasible choice instead: every caller reads the value as a
    bound and the choice as a packing.

    Dembo-Hammer reduction first: with the greedy (ratio order) value as a lower bound and the break
    item's ratio r*, an item whose fractional bound when left out, U − p + r*·w, falls below it is in
    every optimum, one whose bound when forced in, U + p − r*·w, falls below it is in none; the
    capacity DP runs over the rest only, smallest first, each item writing only the capacities its
    predecessors' total size reaches."""
    n = size.shape[0]
    take = np.zeros(n, dtype=np.bool_)
    candidates = np.empty(n, dtype=np.int64)
    count, total, value = 0, 0, 0.0
    for j in range(n):
        if profit[j] > 0 and size[j] <= room:
            candidates[count] = j
            count += 1
            total += size[j]
    candidates = candidates[:count]
    if total <= room:
        for j in candidates:
            take[j] = True
            value += profit[j]
        return value, take
    ratio = np.empty(count)
    for k in range(count):
        ratio[k] = -profit[candidates[k]] / max(size[candidates[k]], 1e-9)
    order = candidates[np.argsort(ratio, kind="mergesort")]
    used, upper, brk = 0, 0.0, count
    for k in range(count):
        j = order[k]
        if used + size[j] > room:
            brk = k
            upper += profit[j] * (room - used) / size[j]
            break
        used += size[j]
        upper += profit[j]
    break_ratio = profit[order[brk]] / size[order[brk]]
    lower, left = 0.0, room
    for j in order:  # greedy past the break item: a feasible value
        if size[j] <= left:
            lower += profit[j]
            left -= size[j]
    free = np.empty(count, dtype=np.int64)
    free_count, cap = 0, room
    slack = float_slack(upper)
    for k in range(count):
        j = order[k]
        if k < brk and upper - profit[j] + break_ratio * size[j] < lower - slack:
            take[j] = True
            value += profit[j]
            cap -= size[j]
        elif k < brk or upper + profit[j] - break_ratio * size[j] >= lower - slack:
            free[free_count] = j
            free_count += 1
    free = free[:free_count]
    cells = free_count * cap
    if cells > _SEARCH_CELLS:
        ordered, w, p, run_end = ratio_order(free, size, profit)
        chosen = np.zeros(free_count, dtype=np.bool_)
        g = size_gcd(w)
        nodes = min(_SEARCH_NODES, cells // _CELLS_PER_NODE)
        _, nodes_left = search_above(w, p, run_end, cap // g * g, -1.0, nodes, chosen)
        if nodes_left >= 0:  # its sum again, not the search's running one (which added and took back)
            take[ordered[chosen]] = True
            return value + p[chosen].sum(), take
        if cells > _DP_CELLS or cap > _DP_ROOM:  # the DP's tables would not fit in memory
            return value + _greedy_below_lp(ordered, w, p, cap, take), take
    free = free[np.argsort(size[free], kind="mergesort")]
    best = np.zeros(cap + 1)
    took = np.zeros((free_count, cap + 1), dtype=np.bool_)
    tops = np.full(free_count, -1, dtype=np.int64)
    reach = 0
    for t in range(free_count):
        j = free[t]
        w, p = size[j], profit[j]
        if w > cap:
            continue
        if w == 0:
            take[j] = True
            value += p
            continue
        top = min(cap, reach + w)
        for c in range(reach + 1, top + 1):  # "best within c" is flat past the items' total size
            best[c] = best[reach]
        for c in range(top, w - 1, -1):
            if best[c - w] + p > best[c]:
                best[c] = best[c - w] + p
                took[t, c] = True
        tops[t] = top
        reach = top
    c = cap
    for t in range(free_count - 1, -1, -1):
        if tops[t] < 0:
            continue
        c = min(c, tops[t])
        if took[t, c]:
            take[free[t]] = True
            c -= size[free[t]]
    return value + best[reach], take


@njit(cache=True)
def _greedy_below_lp(ordered: np.ndarray, w: np.ndarray, p: np.ndarray, room: int, take: np.ndarray) -> float:
    """The LP bound of the items `ordered` (best profit per size first; sizes `w`, profits `p` in that
    order) within `room`, and, marked in `take`, those a greedy fill in that order takes (feasible)."""
    bound, lp_left, left = 0.0, room, room
    for t in range(ordered.shape[0]):
        if lp_left > 0:
            part = min(1.0, lp_left / w[t]) if w[t] > 0 else 1.0
            bound += p[t] * part
            lp_left -= min(lp_left, w[t])
        if w[t] <= left:
            take[ordered[t]] = True
            left -= w[t]
    return bound


@njit(cache=True)
def dembo_hammer(size: np.ndarray, gain: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Dembo-Hammer reduction: the positions of the items (positive size, positive gain, fitting) in every
    optimum, and of those that may be in some. With the greedy (ratio order) value L as a lower bound and
    the break item's ratio r*, an item whose LP bound when left out, U − g + r*·w, falls below L is in
    every optimum; one whose bound when forced in, U + g − r*·w, falls below L is in none. Tested in
    floats with a margin far above their rounding (gains up to 2^62), so only clear cases are set aside:
    what is left is exact: every optimum is the first set plus an optimum of the second within the room the
    first leaves. About 7 in 8 of the DP's cells go (the certificate's merged rooms, 160 x 8, at 16- and
    256-token quanta). Integer gains (int64), sizes and capacity in one unit."""
    n = size.shape[0]
    fit = np.empty(n, dtype=np.int64)
    count, total = 0, 0
    for j in range(n):
        if 0 < size[j] <= capacity and gain[j] > 0:
            fit[count] = j
            count += 1
            total += size[j]
    fit = fit[:count]
    if total <= capacity:
        return fit, np.empty(0, dtype=np.int64)
    ratio = np.empty(count)
    for k in range(count):
        ratio[k] = -float(gain[fit[k]]) / float(size[fit[k]])
    order = fit[np.argsort(ratio, kind="mergesort")]
    used, brk, upper = 0, 0, 0.0
    while used + size[order[brk]] <= capacity:
        used += size[order[brk]]
        upper += float(gain[order[brk]])
        brk += 1
    break_ratio = float(gain[order[brk]]) / float(size[order[brk]])
    upper += break_ratio * (capacity - used)
    lower, left = 0, capacity
    for j in order:
        if size[j] <= left:
            lower += gain[j]
            left -= size[j]
    floor = float(lower) - (2.0 ** -40 * (abs(upper) + abs(float(lower))) + 1.0)
    fixed = np.zeros(n, dtype=np.bool_)
    kept = np.zeros(n, dtype=np.bool_)
    for k in range(count):
        j = order[k]
        g, w = float(gain[j]), float(size[j])
        if k < brk and upper - g + break_ratio * w < floor:
            fixed[j] = True
        elif k < brk or upper + g - break_ratio * w >= floor:
            kept[j] = True
    return np.nonzero(fixed)[0], np.nonzero(kept)[0]
