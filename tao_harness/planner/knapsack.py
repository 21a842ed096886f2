"""The exact 0-1 knapsack of one node over float profits: the K level's inner step (planner/k_dual.py,
once per node per Lagrangian step, profits k − λ) and its node-by-node fills (planner/fill.py).

Compiled with numba (`knapsack_kernel`): the Lagrangian solves thousands of these per hard snapshot,
and in Python their bookkeeping, not the DP, was most of the planner's time. numba caches the machine
code beside this file (or in the user's cache when that is read-only); the first call of a new install
compiles it, about a second.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_EPS = 1e-6  # float slack in comparisons of sums of profits (integers minus multipliers) ...
_RELATIVE_EPS = 2.0 ** -40  # ... plus this share of their magnitude: a float sum of up to ~2^11 terms errs
# by at most 2^-42 of it (with credits of 2^36 an absolute 1e-6 alone closed a way a K-optimal plan takes)


@njit(cache=True)
def float_slack(magnitude: float) -> float:
    """The slack for comparing float sums of profits of this magnitude with each other (or flooring one);
    an infinite one (no bound yet) compares as it is."""
    return _EPS + _RELATIVE_EPS * abs(magnitude) if math.isfinite(magnitude) else _EPS


def knapsack(items: list[int], size: tuple[int, ...], profit: dict[int, float], room: int
             ) -> tuple[float, list[int]]:
    """The most profit of a subset of `items` (positive profits only) within `room`, and that subset."""
    if not items:
        return 0.0, []
    value, take = knapsack_kernel(np.array([size[i] for i in items], dtype=np.int64),
                                  np.array([profit[i] for i in items], dtype=np.float64), room)
    return value, [i for i, taken in zip(items, take) if taken]


@njit(cache=True)
def knapsack_kernel(size: np.ndarray, profit: np.ndarray, room: int) -> tuple[float, np.ndarray]:
    """The exact knapsack of items j (`size[j]` int64, `profit[j]` float64) within `room`: its value and
    which items it takes (items of profit ≤ 0 never).

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
