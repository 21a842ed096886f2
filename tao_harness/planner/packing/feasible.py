"""Every item into the rooms, or proof that they do not fit: a bounded bin-packing feasibility search
(planner/packing/improve.py's check that a merged room's choice splits back into its two rooms).

A depth-first search (largest first, equal rooms tried once), pruned when the rooms left cannot hold the
items left even one room at a time: each room holds at most the fullest total ≤ it that some of those items
reach (they are the smallest ones: a subset-sum bitset per count, built once). Past its node limit the
answer is unknown.
"""

from __future__ import annotations

from tao_harness.planner.packing.split import FILL_BITS, fullest_total, with_item
from tao_harness.planner.shared.problem import sizes_gcd

_FILL_TOP = 1 << 17  # bits of one fill's bitset at most (16-token quanta: rooms of up to ~30,000 quanta)


class SearchLimit(Exception):
    """The bin-packing search used up its node limit."""


def pack_all(items: list[int], size: list[int], rooms: list[int], node_limit: int) -> dict[int, int] | None:
    """A placement of every item into `rooms`, None if none exists; raises `SearchLimit` past `node_limit`
    search nodes."""
    order = sorted(items, key=lambda i: (-size[i], i))
    sizes = [size[i] for i in order]
    rest_total = [0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        rest_total[j] = rest_total[j + 1] + sizes[j]
    fills = SmallestFills(sizes[::-1], max(rooms, default=0))
    left = list(rooms)
    chosen = [0] * len(order)
    nodes = [0]

    def visit(j: int) -> bool:
        if j == len(order):
            return True
        nodes[0] += 1
        if nodes[0] > node_limit:
            raise SearchLimit
        if not fills.may_hold(len(order) - j, left, rest_total[j]):  # those left: the smallest
            return False
        tried: set[int] = set()
        for b in sorted(range(len(left)), key=lambda b: (left[b], b)):  # tightest room first
            if left[b] < sizes[j] or left[b] in tried:
                continue
            tried.add(left[b])
            left[b] -= sizes[j]
            chosen[j] = b
            if visit(j + 1):
                return True
            left[b] += sizes[j]
        return False

    if not visit(0):
        return None
    return {i: chosen[j] for j, i in enumerate(order)}


class SmallestFills:
    """Per k, the totals that subsets of the k smallest of `sizes` (ascending) reach, as bitsets in the sizes'
    gcd up to `top` (a subset-sum table built once, one shift per size). Past `FILL_BITS` bits in all or
    `_FILL_TOP` in one (very fine quanta: each room's fill would cost microseconds a node) no bitsets: then
    the rooms the smallest size fits hold as much as they are."""

    def __init__(self, sizes: list[int], top: int) -> None:
        self.smallest = sizes[0] if sizes else 0
        self.grain = sizes_gcd(range(len(sizes)), sizes)
        self.reach: list[int] | None = None
        width = top // self.grain
        if width <= _FILL_TOP and len(sizes) * width <= FILL_BITS:
            mask = (1 << (width + 1)) - 1
            reach = [1]
            for w in sizes:
                reach.append(with_item(reach[-1], w // self.grain, mask))
            self.reach = reach

    def may_hold(self, k: int, rooms: list[int], total: int) -> bool:
        """Whether `rooms`, each filled as full as subsets of the k smallest sizes allow, hold `total` (so
        whether those k, of that total, may fit)."""
        if self.reach is None:
            return sum(room for room in rooms if room >= self.smallest) >= total
        reach, grain = self.reach[k], self.grain
        held = 0
        for room in rooms:
            held += grain * fullest_total(reach, room // grain)
            if held >= total:
                return True
        return False
