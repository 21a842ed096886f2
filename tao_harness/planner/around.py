"""The sessions around a fixed K-placement, packed with eligibility subsets (the general path's rest).

Given the credited sessions placed by the K level (`forced`), every other session is worth (r, t) on
each node it may use (a credit it could still collect only makes it worth more, never less). Merging
the rooms left into one bin gives the surrogate knapsack (planner/certificate.py) whose choice bounds
what the rest can add. That choice is split into the real rooms: the sessions restricted to some nodes
first, largest first, each into the tightest eligible room that holds it, then the unrestricted ones, rooms filled
fullest first (or best fit). When everything chosen is placed, the rest is optimal around `forced`;
otherwise what was not placed, and what was not chosen, goes best fit into the room left.
"""

from __future__ import annotations

from tao_harness.planner.certificate import best_fit, fullest_fills, subset_sum_split, surrogate_knapsack
from tao_harness.planner.problem import Packer, Problem


def pack_around(problem: Problem, packer: Packer, forced: dict[int, int]) -> tuple[dict[int, int], bool]:
    """`forced` plus the other sessions; and whether the surrogate bound around `forced` was reached."""
    size = list(problem.size)
    rooms = list(problem.room)
    for i, b in forced.items():
        rooms[b] -= size[i]
    allowed = {i: [b for b, v in enumerate(row) if v is not None and size[i] <= rooms[b]]
               for i, row in enumerate(problem.values) if i not in forced}
    rest = [i for i, bs in allowed.items() if bs]
    gain = [0] * problem.n
    for i in rest:
        _, r, t = problem.values[i][allowed[i][0]]  # type: ignore[misc]
        gain[i] = packer.pack((0, r, t))
    chosen = surrogate_knapsack(rest, size, gain, sum(fullest_fills(rest, size, rooms)))
    restricted = [i for i in chosen if len(allowed[i]) < problem.m]
    placement, left = best_fit(restricted, size, rooms, allowed)
    free = list(rooms)
    for i, b in placement.items():
        free[b] -= size[i]
    plain = [i for i in chosen if len(allowed[i]) == problem.m]
    split, unplaced = subset_sum_split(plain, size, free)
    if unplaced:
        split, unplaced = best_fit(plain, size, free)
    placement.update(split)
    if not left and not unplaced:
        return {**forced, **placement}, True
    for i, b in split.items():
        free[b] -= size[i]
    others = sorted((i for i in rest if i not in placement), key=lambda i: (-gain[i], i))
    extra, _ = best_fit(others, size, free, allowed, largest_first=False)
    return {**forced, **placement, **extra}, False
