"""Bin completion for the K level with flat credit: an exact search for the placements the reshuffle
misses (planner/k/lagrange.py).

With flat credit (a session worth the same on each of its credit nodes) the K level is a multiple
knapsack whose sessions may use only some rooms. Its LP and Lagrangian bounds are usually reached, but
on fragmented rooms (few size kinds just over a third or a half of a room, or rooms of very different
sizes) the placement reaching them takes every room filled just right, which local search rarely finds.
This search is planner/packing/bins.py's, told where each session may go:

- a search node fixes the contents of some rooms; its bound is what it holds plus the size-nested
  surrogate bound (planner/packing/nested.py) of the sessions left that still fit an open room they may use —
  valid, as it only forgets which of those rooms;
- when the bound's own choice splits into the open rooms, each session on a room it may use (best fit,
  most constrained first; then rooms filled fullest first), the subtree is solved;
- else the smallest usable room is filled every maximal way from the sessions it may hold (moving such a
  session there never lowers K, so some optimum fills it maximally), sessions of equal size and credit
  that may use the same other rooms tried once; too many ways, and it branches on one session instead.

It stops when a placement reaches `target` (the caller's bound: that placement is optimal), at the
deadline or a small node limit (unproven; the caller's Lagrangian search goes on), or when the search
is exhausted: then the best placement it saw (or the incumbent) is optimal — a proof on the bound side.
"""

from __future__ import annotations

from dataclasses import dataclass

from tao_harness.planner.packing.bins import maximal_contents
from tao_harness.planner.packing.nested import nested_bound, nested_value
from tao_harness.planner.packing.ready_cap import SearchLimit
from tao_harness.planner.packing.split import best_fit, subset_sum_split
from tao_harness.planner.shared.deadline import Deadline

_MAX_CONTENTS = 40  # ways to fill the smallest room past which it branches on one session (the
# enumeration itself costs: with sessions that may use different rooms few of them are interchangeable)
_NODES = 30  # nested bounds evaluated at most: most placements it finds take fewer; a longer search is
# usually a proof on the bound side, which the Lagrangian search after it settles faster (measured on
# the adversarial and degenerate shapes, 32 x 4 to 160 x 8: 2000 nodes lost 32 x 4 proofs it made in ms)


@dataclass(frozen=True, slots=True)
class Completion:
    """What the search established."""

    placement: dict[int, int] | None  # the best placement found worth more than the incumbent, if any
    proven: bool  # the search ended with a proof: that placement (else the incumbent) is optimal
    nodes: int  # search nodes visited


def complete_flat(credit: list[dict[int, int]], size: tuple[int, ...], room: tuple[int, ...], incumbent: int,
                  target: int, deadline: Deadline | None) -> Completion:
    """Search for a K-placement over the flat credits `credit[b]` (session -> k, each fitting room b)
    worth more than `incumbent`, stopping at one worth `target` (≥ every placement's K)."""
    gain = [0] * len(size)
    allowed: dict[int, set[int]] = {}
    for b, column in enumerate(credit):
        for i, k in column.items():
            gain[i] = k
            allowed.setdefault(i, set()).add(b)
    search = _Search(list(size), gain, allowed, incumbent, target, deadline)
    try:
        search.visit(sorted(allowed), dict(enumerate(room)), 0, {})
    except _Reached:
        pass  # a placement reached the target: proven, as an exhausted search is
    except SearchLimit:
        return Completion(search.found, False, search.nodes)
    return Completion(search.found, True, search.nodes)


class _Reached(Exception):
    """A placement worth the target was found: nothing can beat it."""


class _Search:
    """Depth first from the smallest usable room; `best` is the value to beat, `found` its placement."""

    def __init__(self, size: list[int], gain: list[int], allowed: dict[int, set[int]], incumbent: int,
                 target: int, deadline: Deadline | None) -> None:
        self.size, self.gain, self.allowed, self.target, self.deadline = size, gain, allowed, target, deadline
        self.mask = {i: sum(1 << b for b in bs) for i, bs in allowed.items()}
        self.best = incumbent  # the value to beat
        self.found: dict[int, int] | None = None
        self.nodes = 0

    def count_node(self) -> None:
        self.nodes += 1
        if self.nodes > _NODES or (self.deadline is not None and self.deadline.passed()):
            raise SearchLimit

    def visit(self, items: list[int], rooms: dict[int, int], value: int, placed: dict[int, int]) -> None:
        """Search the sessions `items` over the open `rooms` (node -> room left), on top of `placed`."""
        self.count_node()
        size, allowed = self.size, self.allowed
        items = [i for i in items if any(b in rooms and rooms[b] >= size[i] for b in allowed[i])]
        bound = nested_bound(items, size, self.gain, list(rooms.values()))
        if value + bound.value <= self.best:
            return
        split, left = self._split(bound.chosen, rooms)
        if not left:
            self.best, self.found = value + bound.value, {**placed, **split}
            if self.best >= self.target:
                raise _Reached
            return
        usable = [b for b in rooms if any(b in allowed[i] and size[i] <= rooms[b] for i in items)]
        if not usable:
            return
        target = min(usable, key=lambda b: (rooms[b], b))
        others = {b: r for b, r in rooms.items() if b != target}
        fits = sorted((i for i in items if target in allowed[i] and size[i] <= rooms[target]),
                      key=lambda i: (-size[i], i))
        others_mask = sum(1 << b for b in others)
        kind = {i: (size[i], self.gain[i], self.mask[i] & others_mask) for i in fits}
        contents = maximal_contents(fits, size, kind, rooms[target], _MAX_CONTENTS)
        if contents is None:
            self._branch_on_one(items, rooms, value, placed, [i for i in bound.chosen if i not in split])
            return
        self.count_node()
        rest = nested_value(items, size, self.gain, list(others.values()))  # all items: a superset's bound
        worth = sorted(((content, value + sum(self.gain[i] for i in content)) for content in contents),
                       key=lambda pair: -pair[1])
        for content, held in worth:
            if held + rest <= self.best:
                break  # sorted: no later filling can do better either
            inside = set(content)
            self.visit([i for i in items if i not in inside], others, held,
                       {**placed, **{i: target for i in content}})

    def _branch_on_one(self, items: list[int], rooms: dict[int, int], value: int, placed: dict[int, int],
                       left: list[int]) -> None:
        """The largest session the split left out: on each open room it may use and fits, or left out."""
        size = self.size
        i = max(left, key=lambda i: (size[i], -i))
        others = [j for j in items if j != i]
        for b in sorted((b for b in self.allowed[i] if b in rooms and rooms[b] >= size[i]),
                        key=lambda b: (rooms[b], b)):
            self.visit(others, {**rooms, b: rooms[b] - size[i]}, value + self.gain[i], {**placed, i: b})
        self.visit(others, rooms, value, placed)

    def _split(self, items: list[int], rooms: dict[int, int]) -> tuple[dict[int, int], list[int]]:
        """Place all of `items` into the open `rooms`, each on a room it may use, if a quick try can."""
        ids = list(rooms)
        where = {i: [k for k, b in enumerate(ids) if b in self.allowed[i]] for i in items}
        room_list = list(rooms.values())
        constrained = sorted(items, key=lambda i: (len(where[i]), -self.size[i], i))
        split, left = best_fit(constrained, self.size, room_list, where, largest_first=False)
        if left:
            split, left = subset_sum_split(items, self.size, room_list, where)
        return {i: ids[k] for i, k in split.items()}, left
