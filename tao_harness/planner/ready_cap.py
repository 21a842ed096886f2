"""The most ready sessions any plan can admit, proven by packing the smallest ones (exact, bounded).

Among sessions worth the same on every node (the residual after the certificate's forced placements),
R counts the admitted sessions with r = 1. If some packing admits r ready sessions, then the r smallest
ready sessions pack too: pair both sets in size order and put each small one where its partner sat.
So R* is the largest r whose r smallest ready sessions fit, and deciding that is a bin-packing
feasibility question. Knowing R* lets the DP cap the R field of its bound: the surrogate bound alone
counts ready sessions that only fit once the rooms are merged, and then prunes nothing.

The bin-packing search is a depth-first search (largest first, equal rooms tried once, pruned when the
room that no remaining session fits into exceeds the slack); past its node limit the answer is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass


class SearchLimit(Exception):
    """The bin-packing search used up its node limit."""


@dataclass(frozen=True, slots=True)
class ReadyCap:
    """R* and one packing that reaches it (item -> room index)."""

    count: int
    placement: dict[int, int]


def pack_all(
    items: list[int], size: list[int], rooms: list[int], node_limit: int, spent: list[int] | None = None
) -> dict[int, int] | None:
    """A placement of every item into `rooms`, None if none exists; raises `SearchLimit` past the limit.

    `spent` (a one-element counter) lets several searches share one node limit."""
    order = sorted(items, key=lambda i: (-size[i], i))
    sizes = [size[i] for i in order]
    rest_total = [0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        rest_total[j] = rest_total[j + 1] + sizes[j]
    left = list(rooms)
    chosen = [0] * len(order)
    nodes = [0] if spent is None else spent

    def visit(j: int) -> bool:
        if j == len(order):
            return True
        nodes[0] += 1
        if nodes[0] > node_limit:
            raise SearchLimit
        smallest = sizes[-1]  # sizes decrease, so the last one is the smallest still to place
        if sum(c for c in left if c >= smallest) < rest_total[j]:
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


def max_ready(
    ready: list[int], size: list[int], rooms: list[int], node_limit: int = 2_000
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
    for count in range(upper, -1, -1):
        try:
            placement = pack_all(by_size[:count], size, rooms, node_limit, spent)
        except SearchLimit:
            return None
        if placement is not None:
            return ReadyCap(count, placement)
    return ReadyCap(0, {})
