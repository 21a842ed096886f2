"""The size-nested surrogate bound: the merged-room knapsack, told which rooms large sessions fit.

For sessions worth the same on every node (the residual), merging all rooms into one bin (the surrogate
relaxation) lets a large session use the room of several small nodes together; that fragmentation is
where the bound and the true optimum part. Nested constraints repair most of it and stay one 1-D DP:

    for every size w:  Σ size of the admitted sessions of size ≥ w  ≤  cap(w) = Σ_b F_b(w)

where F_b(w) is the fullest fill of room b by a subset of the sessions of size ≥ w. Every feasible
placement meets them (what sits on b is such a subset), so the knapsack under them bounds the
optimum. Sessions are added largest first, and after each one the table is capped at Σ_b F_b over the
sessions added so far (any set of sessions gives a valid such constraint; these are the nested ones).
The maximizing choice comes back with the bound: when it splits into the real rooms, the bound is
reached and the split is optimal. Branch and bound (planner/packing/bins.py) evaluates many bounds that share
their large sessions, so the DP over those can be kept (`Prefix`) and finished per branch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tao_harness.planner.packing.split import fullest_total, with_item


@dataclass(frozen=True, slots=True)
class NestedBound:
    """The bound's value and one choice of sessions reaching it in the relaxation."""

    value: int  # ≥ the value of every feasible placement
    chosen: list[int]  # items whose gains sum to `value`; not necessarily splittable into the rooms


@dataclass(frozen=True, slots=True)
class Taken:
    """The walk back through the table for one run of items: which item raised which entry."""

    items: tuple[int, ...]  # in the order added (largest first)
    take: np.ndarray  # bool[len(items), table]: take[j, c] = item j raised best[c]
    caps: np.ndarray  # int64[len(items)]: the cap when item j was added


@dataclass(frozen=True, slots=True)
class Prefix:
    """The bound's DP after the items larger than `cut`, to finish for several sets of smaller items.

    The table after the larger items depends only on them and on the rooms larger than `cut` (a room
    ≤ cut holds none of them). Filling a room of size `cut` removes only items ≤ `cut` and that room, so
    the node and all its children share this work."""

    cut: int
    big_rooms: tuple[int, ...]  # the rooms larger than cut, sorted: the prefix serves only these
    best: np.ndarray  # the table after the larger items (read-only; users copy it)
    reach: int  # subset-sum bitset of the larger items' sizes
    taken: tuple[Taken, ...]  # the walk back through the larger items


def nested_prefix(items: list[int], size: list[int], gain: list[int], rooms: list[int], cut: int) -> Prefix:
    """The bound's DP over the items of `items` larger than `cut`, for `rooms`."""
    larger = [i for i in items if size[i] > cut]
    best, reach, taken = _run(larger, size, gain, rooms, np.zeros(sum(rooms) + 1, dtype=np.int64), 1, [])
    return Prefix(cut, _big(rooms, cut), best, reach, tuple(taken or []))


def _big(rooms: list[int], cut: int) -> tuple[int, ...]:
    return tuple(sorted(room for room in rooms if room > cut))


def nested_value(
    items: list[int], size: list[int], gain: list[int], rooms: list[int], prefix: Prefix | None = None
) -> int:
    """`nested_bound(...).value` without the bookkeeping for the choice (cheaper)."""
    best, reach, _ = _start(items, size, gain, rooms, prefix, record=False)
    return int(best[sum(_fills(reach, rooms))])


def nested_bound(
    items: list[int], size: list[int], gain: list[int], rooms: list[int], prefix: Prefix | None = None
) -> NestedBound:
    """The knapsack over `items` under the nested capacities of `rooms` (gains ≥ 0, sums < 2^63).

    With `prefix` (computed for the same items larger than its cut, and the same rooms larger than it)
    only the items ≤ its cut are processed here."""
    best, reach, taken = _start(items, size, gain, rooms, prefix, record=True)
    total = sum(_fills(reach, rooms))
    chosen, c = [i for i in items if size[i] == 0], total
    for run in reversed(taken or []):
        for j in range(len(run.items) - 1, -1, -1):
            i = run.items[j]
            w = size[i]
            if w == 0:
                continue  # chosen already
            c = min(c, int(run.caps[j]))  # the table past an earlier cap repeated best[cap]
            if c >= w and run.take[j, c]:
                chosen.append(i)
                c -= w
    return NestedBound(int(best[total]), chosen)


def _start(
    items: list[int], size: list[int], gain: list[int], rooms: list[int], prefix: Prefix | None, record: bool
) -> tuple[np.ndarray, int, list[Taken] | None]:
    if prefix is None:
        fresh = np.zeros(sum(rooms) + 1, dtype=np.int64)
        return _run(items, size, gain, rooms, fresh, 1, [] if record else None)
    assert prefix.big_rooms == _big(rooms, prefix.cut), "a prefix serves only the rooms it was made for"
    best = np.zeros(max(len(prefix.best), sum(rooms) + 1), dtype=np.int64)
    best[:len(prefix.best)] = prefix.best  # past the prefix's cap the table is stale and never read
    smaller = [i for i in items if size[i] <= prefix.cut]
    return _run(smaller, size, gain, rooms, best, prefix.reach, list(prefix.taken) if record else None)


def _fills(reach: int, rooms: list[int]) -> list[int]:
    """Per room, the largest total ≤ room in the subset-sum bitset `reach`."""
    return [fullest_total(reach, room) for room in rooms]


def _run(
    items: list[int], size: list[int], gain: list[int], rooms: list[int], best: np.ndarray, reach: int,
    taken: list[Taken] | None,
) -> tuple[np.ndarray, int, list[Taken] | None]:
    """Add `items` to the table largest first, each under cap = Σ fills of the items so far; record the
    walk back in `taken` unless it is None (only the value is wanted).

    The cap only counts items already seen, which is valid: what a feasible choice puts from them on a
    room is a subset of them fitting that room. best[c] is the most gain with total ≤ c for c ≤ cap;
    past the cap the table is not kept, and it is extended with best[cap] when the cap grows. The caps
    come from the subset-sum bitset here (Python ints: a shift and an or per item); the table's passes,
    one per item over up to Σ rooms entries, are compiled (`_table`: in numpy they were most of a
    residual search's time at 160 x 8)."""
    masks = [(1 << (room + 1)) - 1 for room in rooms]  # bits 0..room: the totals a room can hold
    everything = max(masks, default=1)
    fill = _fills(reach, rooms)
    start_cap = cap = sum(fill)
    open_rooms = [b for b in range(len(rooms)) if fill[b] < rooms[b]]  # a full room stays full
    order = sorted(items, key=lambda i: (-size[i], i))
    caps = []
    for i in order:
        w = size[i]
        if w:
            reach = with_item(reach, w, everything)
            if open_rooms:
                for b in open_rooms:
                    fill[b] = (reach & masks[b]).bit_length() - 1
                open_rooms = [b for b in open_rooms if fill[b] < rooms[b]]
            cap = max(cap, sum(fill))
        caps.append(cap)
    cap_array = np.array(caps, dtype=np.int64)
    take = _table(np.array([size[i] for i in order], dtype=np.int64),
                  np.array([gain[i] for i in order], dtype=np.int64), cap_array, start_cap, best,
                  taken is not None)
    if taken is not None:
        taken.append(Taken(tuple(order), take, cap_array))
    return best, reach, taken


@njit(cache=True)
def _table(sizes: np.ndarray, gains: np.ndarray, caps: np.ndarray, cap: int, best: np.ndarray,
           record: bool) -> np.ndarray:
    """The table's passes (see `_run`), in place on `best`; take[j, c]: item j raised best[c] (only when
    `record`, else an empty array)."""
    take = np.zeros((sizes.shape[0] if record else 0, best.shape[0]), dtype=np.bool_)
    for j in range(sizes.shape[0]):
        w, g = sizes[j], gains[j]
        if w == 0:
            best += g  # a session of no size is always taken
            continue
        if caps[j] > cap:
            best[cap + 1:caps[j] + 1] = best[cap]
            cap = caps[j]
        for c in range(cap, w - 1, -1):  # downwards: best[c - w] is still without item j
            candidate = best[c - w] + g
            if candidate > best[c]:
                best[c] = candidate
                if record:
                    take[j, c] = True
    return take
