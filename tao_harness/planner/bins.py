"""Bin-completion branch and bound for the residual: fill the smallest room, bound the rest, recurse.

The residual's sessions are worth the same on every node, so a plan is a choice of contents per room.
A search node fixes the contents of some rooms; its bound is what it holds plus the nested bound of the
sessions left over the rooms left (planner/nested.py). When the nested bound's own choice splits into
those rooms (best fit, or rooms filled fullest first), the bound is reached: that subtree is solved. Otherwise the smallest usable
room is filled every possible way — but only with maximal contents (no left-over session still fits):
moving a session that fits into that room never lowers the value, so some optimum fills it maximally.
Small rooms hold few sessions, so their branching is narrow, and once they are fixed the large rooms
left are nearly free of the fragmentation the bound cannot see.

Exact within its node limit (nested-bound evaluations) and deadline; past either the best placement found
is returned unproven, and the caller goes on to the DP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Mapping

from tao_harness.planner.certificate import INT64_BITS, best_fit, subset_sum_split
from tao_harness.planner.deadline import Deadline
from tao_harness.planner.nested import NestedBound, Prefix, nested_bound, nested_prefix, nested_value
from tao_harness.planner.problem import Packer, Problem, total_value
from tao_harness.planner.ready_cap import ReadyCap, SearchLimit

_MAX_CONTENTS = 200  # more ways to fill the smallest room than this: branch on one session instead


@dataclass(frozen=True, slots=True)
class BranchResult:
    """What the search established about a residual problem."""

    placement: dict[int, int]  # the best placement found (the incumbent when nothing beat it)
    proven: bool  # the search finished: `placement` is optimal
    nodes: int  # nested bounds evaluated


def solve_residual(
    problem: Problem, packer: Packer, incumbent: dict[int, int], cap: ReadyCap | None, node_limit: int,
    deadline: Deadline | None = None,
) -> BranchResult:
    """Search the residual `problem` (every session worth the same on every node) from `incumbent`.

    `cap` (R*, planner/ready_cap.py) tightens the root bound. Below the root the bound ignores R*: it
    stays valid, only looser (a choice that splits is feasible, so it never exceeds R*)."""
    if packer.bits_without_k > INT64_BITS:
        return BranchResult(incumbent, False, 0)
    size, rooms = list(problem.size), list(problem.room)
    items = [i for i in range(problem.n) if size[i] <= max(rooms, default=0)]
    gain = [packer.pack(row[0]) for row in problem.values]  # type: ignore[arg-type]
    if not items:
        return BranchResult(incumbent, True, 0)  # no session fits any room: nothing to place
    prefix = nested_prefix(items, size, gain, rooms, _target_room(items, size, dict(enumerate(rooms)))[1])
    root = nested_bound(items, size, gain, rooms, prefix)
    limit = root.value
    if cap is not None and root.value >> packer.shift_r > cap.count:
        plain = [packer.pack((0, 0, row[0][2])) for row in problem.values]  # type: ignore[index]
        limit = (cap.count << packer.shift_r) + nested_bound(items, size, plain, rooms).value
    value = total_value(problem, packer, incumbent)
    if value >= limit:
        return BranchResult(incumbent, True, 1)
    search = _Search(size, gain, value, node_limit, deadline)
    try:
        search.visit(_Node(items, dict(enumerate(rooms)), 0, {}, prefix), root)
    except SearchLimit:
        return BranchResult(search.found or incumbent, False, search.nodes)
    return BranchResult(search.found or incumbent, True, search.nodes)


@dataclass(frozen=True, slots=True)
class _Node:
    """Sessions `items` still to place into `rooms`, on top of `placed` (worth `value`)."""

    items: list[int]
    rooms: dict[int, int]  # room index -> room left
    value: int
    placed: dict[int, int]
    prefix: Prefix | None = None  # the bound's work on the items larger than the last room filled


class _Search:
    """Depth first. A node's children come with a cheap bound and are entered in its order while it can
    still beat the best; entering one bounds it for real (its value first, its choice only if needed)."""

    def __init__(
        self, size: list[int], gain: list[int], incumbent: int, node_limit: int, deadline: Deadline | None
    ) -> None:
        self.size, self.gain, self.node_limit, self.deadline = size, gain, node_limit, deadline
        self.best = incumbent  # the value to beat
        self.found: dict[int, int] | None = None  # the best placement worth more than the incumbent
        self.nodes = 0

    def count_node(self) -> None:
        self.nodes += 1
        if self.nodes > self.node_limit or (self.deadline is not None and self.deadline.passed()):
            raise SearchLimit

    def visit(self, node: _Node, bound: NestedBound | None = None) -> None:
        self.count_node()
        rooms = list(node.rooms.values())
        if bound is None:  # most nodes are pruned here: the value alone first, the choice only if needed
            if node.value + nested_value(node.items, self.size, self.gain, rooms, node.prefix) <= self.best:
                return
            bound = nested_bound(node.items, self.size, self.gain, rooms, node.prefix)
        if node.value + bound.value <= self.best:
            return
        room_ids = list(node.rooms)
        split, left = _split(bound.chosen, self.size, rooms)
        if not left:
            self.best = node.value + bound.value
            self.found = {**node.placed, **{i: room_ids[k] for i, k in split.items()}}
            return
        for child, hope in sorted(self.children(node, bound, left), key=lambda pair: -pair[1]):
            if hope <= self.best:
                break  # sorted: no later child can do better either
            self.visit(child)

    def children(self, node: _Node, bound: NestedBound, left: list[int]) -> list[tuple[_Node, int]]:
        """Every maximal filling of the smallest usable room, or, when those are too many, the largest
        session the split left out on each room it fits (rooms of equal size tried once), or left out.

        Each child comes with a cheap bound: for a filling, its value plus the other rooms bounded for
        all of `node`'s items (a superset of what the filling leaves), so most are dropped unbounded."""
        items, rooms, size, gain = node.items, node.rooms, self.size, self.gain
        target, cut = _target_room(items, size, rooms)
        fits = sorted((i for i in items if size[i] <= cut), key=lambda i: (-size[i], i))
        contents = maximal_contents(fits, size, {i: (size[i], gain[i]) for i in fits}, cut, _MAX_CONTENTS)
        if contents is not None:
            others = {b: room for b, room in rooms.items() if b != target}
            shared = node.prefix if node.prefix is not None and node.prefix.cut == cut else \
                nested_prefix(items, size, gain, list(others.values()), cut)
            self.count_node()
            rest = nested_bound(items, size, gain, list(others.values()), shared).value
            worth = [(content, node.value + sum(gain[i] for i in content)) for content in contents]
            return [(_Node([i for i in items if i not in inside], others, value,
                           {**node.placed, **{i: target for i in content}}, shared), value + rest)
                    for content, value in worth for inside in [set(content)]]
        i = max(left, key=lambda i: (size[i], -i))
        others = [j for j in items if j != i]
        hope = node.value + bound.value  # nothing sharper without bounding each child
        out, tried = [], set()
        for b in sorted(rooms, key=lambda b: (rooms[b], b)):
            if rooms[b] >= size[i] and rooms[b] not in tried:
                tried.add(rooms[b])
                out.append((_Node(others, {**rooms, b: rooms[b] - size[i]}, node.value + gain[i],
                                  {**node.placed, i: b}), hope))
        return out + [(_Node(others, rooms, node.value, node.placed), hope)]


def _target_room(items: list[int], size: list[int], rooms: dict[int, int]) -> tuple[int, int]:
    """The room to fill next and its size: the smallest that holds some item (`items` not empty)."""
    smallest = min(size[i] for i in items)
    target = min((b for b in rooms if rooms[b] >= smallest), key=lambda b: (rooms[b], b))
    return target, rooms[target]


def _split(items: list[int], size: list[int], rooms: list[int]) -> tuple[dict[int, int], list[int]]:
    """Place all of `items` into `rooms` if a quick try can: best fit, then rooms filled fullest first."""
    split, left = best_fit(items, size, rooms)
    if left:
        split, left = subset_sum_split(items, size, rooms)
    return split, left


def maximal_contents(
    fits: list[int], size: list[int], kind: Mapping[int, Hashable], room: int, limit: int
) -> list[list[int]] | None:
    """Every subset of `fits` (largest first) within `room` that no other item of `fits` could join, up
    to swapping items of the same `kind` (the caller's key for items that give the same subproblem:
    equal size and gain, and where credit applies, the same other rooms); None when over `limit`."""
    out: list[list[int]] = []
    chosen: list[int] = []
    ascending = fits[::-1]  # `fits` comes largest first

    def extend(start: int, left: int) -> None:
        skipped_kinds: set[Hashable] = set()
        extended = False
        for k in range(start, len(fits)):
            i = fits[k]
            if size[i] > left or kind[i] in skipped_kinds:
                continue
            extended = True
            chosen.append(i)
            extend(k + 1, left - size[i])
            chosen.pop()
            skipped_kinds.add(kind[i])  # later items of this kind, after skipping one, give repeats
        if extended:
            return
        taken = set(chosen)
        if next((size[i] for i in ascending if i not in taken), left + 1) > left:  # nothing else fits
            out.append(list(chosen))
            if len(out) > limit:
                raise _TooMany

    try:
        extend(0, room)
    except _TooMany:
        return None
    return out


class _TooMany(Exception):
    """More maximal contents than the caller wants to branch on."""
