"""Bin-completion branch and bound for the residual: fill the smallest room, bound the rest, recurse.

The residual's sessions are worth the same on every node they may use, so a plan is a choice of contents
per room. Some may use only some nodes (eligibility subsets: the general path's rest around its
K-placement); the bound ignores that (a relaxation: still valid, only looser), the rest respects it.
A search node fixes the contents of some rooms; its bound is what it holds plus the nested bound of the
sessions left over the rooms left (planner/packing/nested.py). When the nested bound's own choice splits into
those rooms (best fit, or rooms filled fullest first), the bound is reached: that subtree is solved.
Otherwise the smallest usable room is filled every possible way — but only with maximal contents (no
left-over session still fits):
moving a session that fits into that room never lowers the value, so some optimum fills it maximally.
Small rooms hold few sessions, so their branching is narrow, and once they are fixed the large rooms
left are nearly free of the fragmentation the bound cannot see. With eligibility subsets "maximal" is
among the sessions that may use the room, and a session that may use no room left drops out.

Exact within its node limit (nested-bound evaluations) and deadline; past either the best placement found
is returned unproven, and the caller goes on to the DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping

from tao_harness.planner.packing.nested import NestedBound, Prefix, nested_bound, nested_prefix, nested_value
from tao_harness.planner.packing.feasible import SearchLimit
from tao_harness.planner.packing.split import split as split_into
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.int_knapsack import INT64_BITS
from tao_harness.planner.shared.problem import Packer, Problem, sizes_gcd, total_value

_MAX_CONTENTS = 200  # more ways to fill the smallest room than this: branch on one session instead
_CONTENTS_STEPS = 10_000  # items looked at while listing those ways, at most (~2 ms; the shapes' searches
# look at up to ~500)
_ROOT_TRIES = 16  # ways to split the root bound's choice (planner/packing/split.py, ~0.1 ms each at 160 x
# 8): on tight residuals it usually reaches the bound, and below the root the search's branching does the work
NODE_TRIES = 2  # below the root: the exact fills and best fit
_BOUND_CELLS = 1_000_000  # sessions × merged room (in the bound's grain) the nested bound's table may
# take (~1 ns a cell, so ~1 ms): at 16-token quanta a 160 x 8 residual's table was up to 13 M cells, and the
# rest's 3 ms share took 6-13 ms; past it the bound counts sizes in a coarser grain (see `_Grain`)


@dataclass(frozen=True, slots=True)
class BranchResult:
    """What the search established about a residual problem."""

    placement: dict[int, int]  # the best placement found (the incumbent when nothing beat it)
    proven: bool  # the search finished: `placement` is optimal
    nodes: int  # nested bounds evaluated


def solve_residual(
    problem: Problem, packer: Packer, incumbent: dict[int, int], node_limit: int,
    deadline: Deadline | None = None, root_tries: int = _ROOT_TRIES, ceiling: int | None = None,
) -> BranchResult:
    """Search the residual `problem` (every session worth the same on every node it may use) from
    `incumbent`, the root bound's choice split `root_tries` ways (planner/packing/split.py; a search again
    from a better incumbent has the same root and need not try again).

    `ceiling`, a bound on the packed value known to the caller, tightens the root bound. Below the root the
    bound ignores it: it stays valid, only looser (a choice that splits is feasible, so it never exceeds
    it)."""
    if packer.bits_without_k > INT64_BITS or (deadline is not None and deadline.passed()):
        return BranchResult(incumbent, False, 0)  # (the root's bound alone costs ~1 ms at 160 x 8)
    size, rooms = list(problem.size), list(problem.room)
    allowed = eligibility(problem)
    all_rooms = dict(enumerate(rooms))
    items = _usable(range(problem.n), size, all_rooms, allowed)
    firsts = [next(filter(None, row), None) for row in problem.values]  # its value wherever it may go
    gain = [0 if v is None else packer.pack(v) for v in firsts]
    if not items:
        return BranchResult(incumbent, True, 0)  # no session fits any room: nothing to place
    grain = _Grain.of(items, size, rooms)
    coarse, coarse_rooms = grain.size, grain.rooms(rooms)
    cut = grain.cut(_target_room(items, size, all_rooms, allowed)[1])
    prefix = nested_prefix(items, coarse, gain, coarse_rooms, cut)
    root = nested_bound(items, coarse, gain, coarse_rooms, prefix)
    limit = root.value if ceiling is None else min(root.value, ceiling)
    value = total_value(problem, packer, incumbent)
    if value >= limit:
        return BranchResult(incumbent, True, 1)
    search = _Search(size, gain, value, node_limit, deadline, allowed, root_tries, grain)
    try:
        search.visit(_Node(items, all_rooms, 0, {}, prefix), root)
    except SearchLimit:
        return BranchResult(search.found or incumbent, False, search.nodes)
    return BranchResult(search.found or incumbent, True, search.nodes)


@dataclass(frozen=True, slots=True)
class _Grain:
    """The unit the nested bounds count sizes in: each size and room divided by `scale`, rounded down.

    Still a bound: whatever sits in a room, Σ floor(w / s) ≤ floor(Σ w / s) ≤ floor(room / s). Exact when
    `scale` divides every size (the sizes' gcd: 256-token contexts planned in 16-token quanta); coarser
    only when the table would pass `_BOUND_CELLS`, and then looser but far cheaper (at 16-token quanta a
    160 x 8 residual's bound counts ~150-token units, still finer than the default quantum). Everything
    else (splits, fillings, the plan) uses the true sizes."""

    scale: int
    size: list[int]  # per session, its size in the grain

    @classmethod
    def of(cls, items: list[int], size: list[int], rooms: list[int]) -> _Grain:
        exact = sizes_gcd(items, size)
        cells = len(items) * (sum(rooms) // exact + 1)
        scale = exact * max(1, math.ceil(cells / _BOUND_CELLS))
        return cls(scale, size if scale == 1 else [w // scale for w in size])

    def rooms(self, rooms: Iterable[int]) -> list[int]:
        return [room // self.scale for room in rooms]

    def cut(self, room: int) -> int:
        """A prefix's cut for filling a room of `room`: the items above it in the grain are above it."""
        return room // self.scale


@dataclass(frozen=True, slots=True)
class _Node:
    """Sessions `items` still to place into `rooms`, on top of `placed` (worth `value`)."""

    items: list[int]
    rooms: dict[int, int]  # room index -> room left
    value: int
    placed: dict[int, int]
    prefix: Prefix | None = None  # the bound's work (in the grain) on the items larger than the last room
    # filled


class _Search:
    """Depth first. A node's children come with a cheap bound and are entered in its order while it can
    still beat the best; entering one bounds it for real (its value first, its choice only if needed)."""

    def __init__(
        self, size: list[int], gain: list[int], incumbent: int, node_limit: int, deadline: Deadline | None,
        allowed: list[frozenset[int]] | None = None, root_tries: int = _ROOT_TRIES,
        grain: _Grain | None = None,
    ) -> None:
        self.size, self.gain, self.node_limit, self.deadline = size, gain, node_limit, deadline
        self.grain = grain or _Grain(1, size)  # what the nested bounds count sizes in
        self.root_tries = root_tries
        self.allowed = allowed  # per session, the rooms it may use (None: every session every room)
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
            coarse, coarse_rooms = self.grain.size, self.grain.rooms(rooms)
            hope = nested_value(node.items, coarse, self.gain, coarse_rooms, node.prefix)
            if node.value + hope <= self.best:
                return
            bound = nested_bound(node.items, coarse, self.gain, coarse_rooms, node.prefix)
        if node.value + bound.value <= self.best:
            return
        room_ids = list(node.rooms)
        tries = self.root_tries if self.nodes == 1 else NODE_TRIES
        split, left = _split(bound.chosen, self.size, room_ids, rooms, self.allowed, tries)
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
        items, rooms, size, gain, allowed = node.items, node.rooms, self.size, self.gain, self.allowed
        target, cut = _target_room(items, size, rooms, allowed)
        fits = sorted((i for i in items if size[i] <= cut and (allowed is None or target in allowed[i])),
                      key=lambda i: (-size[i], i))
        # sessions of one kind give the same subproblem: same size and gain, and the same rooms left to use
        kinds = {i: (size[i], gain[i], None if allowed is None else allowed[i].intersection(rooms))
                 for i in fits}
        contents = maximal_contents(fits, size, kinds, cut, _MAX_CONTENTS)
        if contents is not None:
            others = {b: room for b, room in rooms.items() if b != target}
            grain = self.grain
            coarse_cut, coarse_others = grain.cut(cut), grain.rooms(others.values())
            shared = node.prefix if node.prefix is not None and node.prefix.cut == coarse_cut else \
                nested_prefix(items, grain.size, gain, coarse_others, coarse_cut)
            self.count_node()
            rest = nested_bound(items, grain.size, gain, coarse_others, shared).value
            worth = [(content, node.value + sum(gain[i] for i in content)) for content in contents]
            after = _usable(items, size, others, allowed)
            return [(_Node([i for i in after if i not in inside], others, value,
                           {**node.placed, **{i: target for i in content}}, shared), value + rest)
                    for content, value in worth for inside in [set(content)]]
        i = max(left, key=lambda i: (size[i], -i))
        others = [j for j in items if j != i]
        hope = node.value + bound.value  # nothing sharper without bounding each child
        out, tried = [], set()
        for b in sorted(rooms, key=lambda b: (rooms[b], b)):
            # rooms of one size give the same subproblem when every other session may use both or neither
            alike = rooms[b] if allowed is None else (rooms[b],
                                                      frozenset(j for j in others if b in allowed[j]))
            if rooms[b] >= size[i] and alike not in tried and (allowed is None or b in allowed[i]):
                tried.add(alike)
                shrunk = {**rooms, b: rooms[b] - size[i]}
                out.append((_Node(_usable(others, size, shrunk, allowed), shrunk, node.value + gain[i],
                                  {**node.placed, i: b}), hope))
        return out + [(_Node(others, rooms, node.value, node.placed), hope)]


def eligibility(problem: Problem) -> list[frozenset[int]] | None:
    """Per session, the rooms it may use; None when every session may use every room."""
    if not problem.restricted:
        return None
    return [frozenset(b for b, v in enumerate(row) if v is not None) for row in problem.values]


def _usable(items: Iterable[int], size: list[int], rooms: dict[int, int], allowed: list[frozenset[int]] | None
            ) -> list[int]:
    """The `items` that some room of `rooms` they may use still holds."""
    if allowed is None:
        top = max(rooms.values(), default=0)
        return [i for i in items if size[i] <= top]
    return [i for i in items if any(rooms.get(b, -1) >= size[i] for b in allowed[i])]


def _target_room(items: list[int], size: list[int], rooms: dict[int, int],
                 allowed: list[frozenset[int]] | None = None) -> tuple[int, int]:
    """The room to fill next and its size: the smallest that holds some item that may use it (`items`
    holds only sessions some room holds)."""
    if allowed is None:
        smallest = min(size[i] for i in items)
        target = min((b for b in rooms if rooms[b] >= smallest), key=lambda b: (rooms[b], b))
    else:
        target = min((b for i in items for b in allowed[i] if rooms.get(b, -1) >= size[i]),
                     key=lambda b: (rooms[b], b))
    return target, rooms[target]


def _split(items: list[int], size: list[int], room_ids: list[int], rooms: list[int],
           allowed: list[frozenset[int]] | None, tries: int) -> tuple[dict[int, int], list[int]]:
    """Place all of `items` into `rooms` (room `room_ids[k]` has `rooms[k]` left) if a few quick tries
    can (planner/packing/split.py). Returns positions in `rooms`."""
    where = None
    if allowed is not None:
        where = {i: [k for k, b in enumerate(room_ids) if b in allowed[i]] for i in items}
    return split_into(items, size, rooms, where, tries)


def maximal_contents(
    fits: list[int], size: list[int], kind: Mapping[int, Hashable], room: int, limit: int
) -> list[list[int]] | None:
    """Every subset of `fits` (largest first) within `room` that no other item of `fits` could join, up
    to swapping items of the same `kind` (the caller's key for items that give the same subproblem:
    equal size and gain, and where credit applies, the same other rooms); None when over `limit`, or when
    finding them takes over `_CONTENTS_STEPS` steps (many kinds in a large room: the subsets that are not
    maximal, never counted, grow exponentially; seen: a plan of 12 s under a fuzzer's snapshot)."""
    out: list[list[int]] = []
    chosen: list[int] = []
    ascending = fits[::-1]  # `fits` comes largest first
    steps = [0]

    def extend(start: int, left: int) -> None:
        skipped_kinds: set[Hashable] = set()
        extended = False
        steps[0] += len(fits) - start
        if steps[0] > _CONTENTS_STEPS:
            raise _TooMany
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
