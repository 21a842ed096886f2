"""The most ready sessions any plan can admit, proven by packing the smallest ones (exact, bounded).

Among sessions worth the same on every node (the residual after the certificate's forced placements),
R counts the admitted sessions with r = 1. If some packing admits r ready sessions, then the r smallest
ready sessions pack too: pair both sets in size order and put each small one where its partner sat.
So R* is the largest r whose r smallest ready sessions fit, and deciding that is a bin-packing
feasibility question. Knowing R* lets the DP cap the R field of its bound: the surrogate bound alone
counts ready sessions that only fit once the rooms are merged, and then prunes nothing.

The bin-packing search is a depth-first search (largest first, equal rooms tried once), pruned when the
rooms left cannot hold the sessions left even one room at a time: each room holds at most the fullest
total ≤ it that some of those sessions reach (they are the smallest ones: a subset-sum bitset per count,
built once for all the counts tried).
Past its node limit the answer is unknown. (Without the fills only rooms no session fits counted as
lost, and proving that R* + 1 ready sessions do not fit took the search past 2,000 nodes, ~6 ms, on a
third of the independent `ties` residuals at 160 x 8; most are now proven at the root.)
"""

from __future__ import annotations

from dataclasses import dataclass

from tao_harness.planner.packing.split import FILL_BITS, fullest_total, with_item
from tao_harness.planner.shared.problem import sizes_gcd

_NODE_LIMIT = 200  # search nodes for all the counts together: with the fills' pruning 71 of 76 residuals (the
# independent ties and skewed snapshots and ours, 160 x 8) settle within 100, one more within 300, one more
# within 2,000 (3 not within 100,000); a node costs ~5-8 µs, so a failed search ~1.5 ms
_FILL_TOP = 1 << 17  # bits of one fill's bitset at most (16-token quanta: rooms of up to ~30,000 quanta)


class SearchLimit(Exception):
    """The bin-packing search used up its node limit."""


@dataclass(frozen=True, slots=True)
class ReadyCap:
    """R* and one packing that reaches it (item -> room index)."""

    count: int
    placement: dict[int, int]


def pack_all(
    items: list[int], size: list[int], rooms: list[int], node_limit: int, spent: list[int] | None = None,
    fills: SmallestFills | None = None
) -> dict[int, int] | None:
    """A placement of every item into `rooms`, None if none exists; raises `SearchLimit` past the limit.

    `spent` (a one-element counter) lets several searches share one node limit; `fills` (built over these
    items' sizes, or over a list they are the smallest of) lets them share one table."""
    order = sorted(items, key=lambda i: (-size[i], i))
    sizes = [size[i] for i in order]
    rest_total = [0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        rest_total[j] = rest_total[j + 1] + sizes[j]
    if fills is None:
        fills = SmallestFills(sizes[::-1], max(rooms, default=0))
    left = list(rooms)
    chosen = [0] * len(order)
    nodes = [0] if spent is None else spent

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


def max_ready(
    ready: list[int], size: list[int], rooms: list[int], node_limit: int = _NODE_LIMIT
) -> ReadyCap | None:
    """R* for the `ready` items, or None if the searches together ran out of `node_limit` nodes."""
    by_size = sorted(ready, key=lambda i: (size[i], i))
    upper, total = 0, 0
    for i in by_size:  # merged rooms: the smallest ones first, as many as fit
        total += size[i]
        if total > sum(rooms):
            break
        upper += 1
    spent = [0]
    fills = SmallestFills([size[i] for i in by_size[:upper]], max(rooms, default=0))
    for count in range(upper, -1, -1):
        try:
            placement = pack_all(by_size[:count], size, rooms, node_limit, spent, fills)
        except SearchLimit:
            return None
        if placement is not None:
            return ReadyCap(count, placement)
    return ReadyCap(0, {})
