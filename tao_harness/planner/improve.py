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
from tao_harness.planner.deadline import Deadline
from tao_harness.planner.problem import Packer, Problem, Value, total_value
from tao_harness.planner.ready_cap import SearchLimit, pack_all

_INT64_SAFE = 1 << 62  # the knapsack sums packed values in int64


def improve(
    problem: Problem, packer: Packer, placement: dict[int, int], passes: int = 2, deadline: Deadline | None = None
) -> dict[int, int]:
    """A placement at least as valuable as `placement` (the same one if nothing improves); it stops
    early, keeping what it has, once `deadline` passes."""
    return Improver(problem, packer).improve(placement, passes, deadline)


class Improver:
    """`improve` for one problem, its tables built once (the K level polishes many placements)."""

    def __init__(self, problem: Problem, packer: Packer) -> None:
        self.problem, self.packer = problem, packer
        memo: dict[Value, int] = {}  # a row repeats its value triple on most nodes
        self.packed = [[None if v is None else memo.get(v) or memo.setdefault(v, packer.pack(v)) for v in row]
                       for row in problem.values]
        self.safe = sum(max((p for p in row if p is not None), default=0) for row in self.packed) < _INT64_SAFE
        usable = [{i for i in range(problem.n) if self.packed[i][b] is not None} for b in range(problem.m)]
        self.groups = [(b,) for b in range(problem.m)] + list(combinations(range(problem.m), 2))
        self.everywhere = {group: set.intersection(*(usable[b] for b in group)) for group in self.groups}

    def improve(self, placement: dict[int, int], passes: int = 2, deadline: Deadline | None = None
                ) -> dict[int, int]:
        if not self.safe:
            return placement  # sums could overflow int64: keep the placement as it is
        best = dict(placement)
        for _ in range(passes):
            before = total_value(self.problem, self.packer, best)
            for group in self.groups:
                if deadline is not None and deadline.passed():
                    return best
                best = _repack(self.problem, self.packed, best, group, self.everywhere[group])
            if total_value(self.problem, self.packer, best) == before:
                break
        return best


def _repack(
    problem: Problem, packed: list[list[int | None]], placement: dict[int, int], group: tuple[int, ...],
    everywhere: set[int],
) -> dict[int, int]:
    """Re-solve the rooms in `group` (one or two) over their sessions and the unplaced ones; `everywhere`:
    the sessions eligible on every room of the group."""
    first = group[0]
    held = [i for i, b in placement.items() if b in group]
    if any(i not in everywhere for i in held):
        return placement  # a session held here cannot move between the rooms: not a merged knapsack
    pool = held + [i for i in everywhere if i not in placement]
    if len(group) == 2 and any(packed[i][group[0]] != packed[i][group[1]] for i in pool):
        return placement  # values differ between the two rooms: not a merged knapsack
    size = list(problem.size)
    gain = [0] * problem.n
    for i in pool:
        gain[i] = packed[i][first] or 0
    chosen = surrogate_knapsack(sorted(pool), size, gain, sum(problem.room[b] for b in group))
    old = sum(gain[i] for i in held)
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
