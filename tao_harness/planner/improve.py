"""Local improvement of a feasible placement: re-pack one room, or two rooms together, exactly.

For a room b, the sessions on b plus the unplaced ones eligible there form a 1-D knapsack (values as
they are on b); replacing b's content by its optimum never loses value. For two rooms a, b the same
knapsack runs on the merged room, and the choice is kept only if it splits back into a and b
(planner/ready_cap.py's bounded bin-packing search). Used to raise the DP's incumbent (sharper pruning)
and the plan returned on fallback; it never claims optimality.
"""

from __future__ import annotations

from itertools import combinations

from tao_harness.planner.certificate import surrogate_knapsack
from tao_harness.planner.problem import Packer, Problem, total_value
from tao_harness.planner.ready_cap import SearchLimit, pack_all

_INT64_SAFE = 1 << 62  # the knapsack sums packed values in int64


def improve(problem: Problem, packer: Packer, placement: dict[int, int], passes: int = 2) -> dict[int, int]:
    """A placement at least as valuable as `placement` (the same one if nothing improves)."""
    packed = [[None if v is None else packer.pack(v) for v in row] for row in problem.values]
    if sum(max((p for p in row if p is not None), default=0) for row in packed) >= _INT64_SAFE:
        return placement  # sums could overflow int64: keep the placement as it is
    best = dict(placement)
    for _ in range(passes):
        before = total_value(problem, packer, best)
        for group in [(b,) for b in range(problem.m)] + list(combinations(range(problem.m), 2)):
            best = _repack(problem, packed, best, group)
        if total_value(problem, packer, best) == before:
            break
    return best


def _repack(
    problem: Problem, packed: list[list[int | None]], placement: dict[int, int], group: tuple[int, ...]
) -> dict[int, int]:
    """Re-solve the rooms in `group` (one or two) over their sessions and the unplaced ones."""
    first = group[0]
    pool = [i for i in range(problem.n)
            if placement.get(i, first) in group and all(packed[i][b] is not None for b in group)]
    pinned = [i for i in range(problem.n) if placement.get(i, -1) in group and i not in pool]
    if pinned or (len(group) == 2 and any(packed[i][group[0]] != packed[i][group[1]] for i in pool)):
        return placement  # values or eligibility differ between the two rooms: not a merged knapsack
    size = list(problem.size)
    gain = [packed[i][first] or 0 for i in range(problem.n)]
    chosen = surrogate_knapsack(pool, size, gain, sum(problem.room[b] for b in group))
    old = sum(gain[i] for i in pool if i in placement)
    if sum(gain[i] for i in chosen) <= old:
        return placement
    if len(group) == 1:
        split = {i: first for i in chosen}
    else:
        try:
            found = pack_all(chosen, size, [problem.room[b] for b in group], node_limit=500)
        except SearchLimit:
            return placement
        if found is None:
            return placement
        split = {i: group[k] for i, k in found.items()}
    kept = {i: b for i, b in placement.items() if b not in group}
    return {**kept, **split}
