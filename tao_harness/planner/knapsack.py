"""The exact 0-1 knapsack of one node over float profits: the K level's inner step (planner/lagrange.py,
once per node per Lagrangian step, profits k − λ) and its node-by-node fills (planner/fill.py)."""

from __future__ import annotations

import numpy as np

_EPS = 1e-6  # float slack in the reduction's comparisons (profits are integers minus multipliers)


def knapsack(items: list[int], size: tuple[int, ...], profit: dict[int, float], room: int
             ) -> tuple[float, list[int]]:
    """The most profit of a subset of `items` (positive profits only) within `room`, and that subset.

    Dembo-Hammer reduction first: with the greedy (ratio order) value as a lower bound and the break
    item's ratio r*, an item whose fractional bound when left out, U − p + r*·w, falls below it is in
    every optimum, one whose bound when forced in, U + p − r*·w, falls below it is in none; the
    capacity DP (numpy) runs over the rest only."""
    items = [i for i in items if profit[i] > 0 and size[i] <= room]
    if sum(size[i] for i in items) <= room:
        return float(sum(profit[i] for i in items)), items
    fixed, free, room = _reduce(items, size, profit, room)
    # "best within c" over the items so far is flat past their total size (`reach`): only [w, reach + w]
    # changes with an item of size w, smallest items first; past it, read the table at its end
    best = np.zeros(room + 1)
    taken = []
    reach = 0
    for i in sorted(free, key=lambda i: size[i]):
        w = size[i]
        if w > room:
            continue
        if w == 0:
            best += profit[i]
            taken.append((i, None, room))
            continue
        top = min(room, reach + w)
        best[reach + 1:top + 1] = best[reach]  # the flat part this item reaches, unwritten until now
        cand = best[:top + 1 - w] + profit[i]
        take = cand > best[w:top + 1]
        np.maximum(best[w:top + 1], cand, out=best[w:top + 1])
        taken.append((i, take, top))
        reach = top
    chosen, c = list(fixed), room
    for i, take, top in reversed(taken):
        c = min(c, top)
        if take is None:
            chosen.append(i)
        elif c >= size[i] and take[c - size[i]]:
            chosen.append(i)
            c -= size[i]
    return float(best[reach]) + sum(profit[i] for i in fixed), chosen


def _reduce(items: list[int], size: tuple[int, ...], profit: dict[int, float], room: int
            ) -> tuple[list[int], list[int], int]:
    """Items in every optimum, items still open, and the room the open ones share (see `knapsack`)."""
    order = sorted(items, key=lambda i: -profit[i] / max(size[i], 1e-9))
    used, upper, brk = 0, 0.0, len(order)
    for k, i in enumerate(order):
        if used + size[i] > room:
            brk = k
            upper += profit[i] * (room - used) / size[i]
            break
        used += size[i]
        upper += profit[i]
    ratio = profit[order[brk]] / size[order[brk]]
    lower, left = 0.0, room
    for i in order:  # greedy past the break item: a feasible value
        if size[i] <= left:
            lower += profit[i]
            left -= size[i]
    fixed: list[int] = []
    free: list[int] = []
    for i in order[:brk]:
        (fixed if upper - profit[i] + ratio * size[i] < lower - _EPS else free).append(i)
    free += [i for i in order[brk:] if upper + profit[i] - ratio * size[i] >= lower - _EPS]
    return fixed, free, room - sum(size[i] for i in fixed)
