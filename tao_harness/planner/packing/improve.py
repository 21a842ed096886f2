"""Local improvement of a feasible placement: re-pack one room, or two rooms together, exactly.

For a room b, the sessions on b plus the unplaced ones eligible there form a 1-D knapsack (values as
they are on b); replacing b's content by its optimum never loses value. For two rooms a, b the same
knapsack runs on the merged room, and the choice is kept only if it splits back into a and b
(planner/packing/feasible.py's bounded bin-packing search). Used to raise the DP's incumbent (sharper
pruning) and the plan returned on fallback; it never claims optimality.
"""

from __future__ import annotations

from itertools import combinations, compress

from tao_harness.planner.packing.feasible import SearchLimit, pack_all
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.int_knapsack import surrogate_knapsack
from tao_harness.planner.shared.problem import Packer, Problem, Value

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
        self.problem = problem
        memo: dict[Value, int] = {}  # a row repeats its value triple on most nodes
        rows = [[0 if v is None else memo.get(v) or memo.setdefault(v, packer.pack(v)) for v in row]
                for row in problem.values]
        self.safe = sum(max(row, default=0) for row in rows) < _INT64_SAFE
        # gain[b][i]: session i's packed value on room b, 0 where it may not go (a knapsack's gain list)
        self.gain = [[row[b] for row in rows] for b in range(problem.m)]
        self.size = list(problem.size)
        # the sessions that may go to room b (a packed value is never 0: its count field is 1)
        self.usable = [set(compress(range(problem.n), column)) for column in self.gain]
        self.groups = [(b,) for b in range(problem.m)] + list(combinations(range(problem.m), 2))

    def improve(self, placement: dict[int, int], passes: int = 2, deadline: Deadline | None = None
                ) -> dict[int, int]:
        if not self.safe:
            return placement  # sums could overflow int64: keep the placement as it is
        best = dict(placement)
        for _ in range(passes):
            # a re-pack either raises the value or returns the placement it was given: a pass that
            # re-packed nothing leaves the value as it was
            changed = False
            held, unplaced = self._held(best)
            for group in self.groups:
                repacked = self._repack(best, group, held, unplaced, deadline)
                if repacked is None:
                    return best
                if repacked is not best:
                    best, changed = repacked, True
                    held, unplaced = self._held(best)
            if not changed:
                break
        return best

    def _held(self, placement: dict[int, int]) -> tuple[list[list[int]], set[int]]:
        """The sessions `placement` puts on each room, and those it leaves out."""
        held: list[list[int]] = [[] for _ in range(self.problem.m)]
        for i, b in placement.items():
            held[b].append(i)
        return held, set(range(self.problem.n)).difference(placement)

    def _repack(
        self, placement: dict[int, int], group: tuple[int, ...], held_on: list[list[int]], unplaced: set[int],
        deadline: Deadline | None,
    ) -> dict[int, int] | None:
        """Re-solve the rooms in `group` (one or two) over their sessions (`held_on` each room) and the
        `unplaced` ones eligible on all of them: the better placement, `placement` itself when there is
        none, None once `deadline` has passed (checked only when there is a knapsack to solve: a group
        skipped before it changes nothing)."""
        held = [i for b in group for i in held_on[b]]
        usable = [self.usable[b] for b in group]
        if not all(u.issuperset(held) for u in usable):
            return placement  # a session held here cannot move between the rooms: not a merged knapsack
        pool = held + list(unplaced.intersection(*usable))
        first = group[0]
        gain = self.gain[first]
        if len(group) == 2 and any(gain[i] != self.gain[group[1]][i] for i in pool):
            return placement  # values differ between the two rooms: not a merged knapsack
        if deadline is not None and deadline.passed():
            return None
        chosen = surrogate_knapsack(sorted(pool), self.size, gain, sum(self.problem.room[b] for b in group))
        if chosen is None or sum(gain[i] for i in chosen) <= sum(gain[i] for i in held):
            return placement
        if len(group) == 1:
            split = {i: first for i in chosen}
        else:
            try:
                found = pack_all(chosen, self.size, [self.problem.room[b] for b in group], node_limit=500)
            except SearchLimit:
                return placement
            if found is None:
                return placement
            split = {i: group[k] for i, k in found.items()}
        kept = {i: b for i, b in placement.items() if b not in group}
        return {**kept, **split}
