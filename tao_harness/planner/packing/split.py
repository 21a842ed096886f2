"""Splitting a chosen set of sessions into the real rooms: what turns a relaxation's choice into a plan.

The surrogate and nested bounds (planner/bounds/certificate.py, planner/packing/nested.py) merge the rooms and
forget eligibility; their choice reaches the bound only if it splits into the rooms, each session on one it
may use. Deciding that is bin packing, and the choices that matter are tight (the bound's T fills the merged
room to within a few quanta), where a session-by-session search rarely finishes: on 160 x 8 residuals
with eligibility subsets a largest-first depth-first search ran out of 20,000 nodes on every tight one.
Filling room after room exactly (each as full as a subset of the sessions left reaches, a subset-sum
bitset) splits them, once the fills are told which sessions to prefer and in which order to take the
rooms; which order works differs from one snapshot to the next, so `split` tries a few:

1. best fit, largest first, into the tightest room each may use (enough for loose packings);
2. rooms smallest first, the sessions with the fewest rooms to go to first (a fill prefers the sessions
   earlier in its list);
3. the restricted sessions best fit, then the others filling what they leave;
4. then further fills with the rooms in a shuffled order (largest first, then random) and the sessions
   shuffled within the restricted and the unrestricted ones, from a fixed seed: the same input always
   gives the same split.

Measured on the root choices of the residual search (40 draws each, 160 x 8): `eligible` 11 split by the
first two tries (all the planner had before), 24 more within sixteen, 1 more by 24, 4 by none; `all` 20,
13 more, 1, 6. A try costs ~0.1 ms there.
"""

from __future__ import annotations

import random
from typing import Collection, Iterable, Mapping, Sequence

from tao_harness.planner.shared.problem import sizes_gcd

Allowed = Mapping[int, Collection[int]]  # per item, the room positions it may use
FILL_BITS = 50_000_000  # items × room (bits of a subset-sum bitset) past which a room's fullest fill is not
# sought (~0.026 ns a bit: ~1.3 ms)


def split(
    items: list[int], size: Sequence[int], rooms: list[int], allowed: Allowed | None = None, tries: int = 2,
    worth: Sequence[int] | None = None,
) -> tuple[dict[int, int], list[int]]:
    """`items` into `rooms` (item i only into a room `allowed[i]` holds, when given): the first of
    `tries` attempts that places all of them; else, with `worth` (per item), the attempt placing the most
    of it (an incumbent), without, the first exact fill's (the search branches on what it leaves out).
    Returns the placement (item -> room position) and the items left out."""
    if tries < 2:
        raise ValueError("split needs two tries at least: best fit and the first exact fill")
    fitted = best_fit(items, size, rooms, allowed)
    if not fitted[1]:
        return fitted
    constrained = items if allowed is None else sorted(items, key=lambda i: len(allowed[i]))
    ascending = sorted(range(len(rooms)), key=lambda b: (rooms[b], b))
    first = fill_rooms(constrained, size, rooms, ascending, allowed)
    if not first[1]:
        return first
    kept = [first, fitted]
    restricted = [] if allowed is None else [i for i in constrained if len(allowed[i]) < len(rooms)]
    plain = [i for i in constrained if allowed is None or len(allowed[i]) == len(rooms)]
    if allowed is not None and restricted and plain and tries > 2:
        pinned = restricted_first(restricted, plain, size, rooms, allowed)
        if not pinned[1]:
            return pinned
        kept.append(pinned)
    shuffler = random.Random(len(items))  # a fixed seed: the same input, the same split
    for extra in range(tries - len(kept)):
        order = ascending[::-1] if extra == 0 else shuffler.sample(ascending, len(ascending))
        shuffler.shuffle(restricted)
        shuffler.shuffle(plain)
        filled = fill_rooms(restricted + plain, size, rooms, order, allowed)
        if not filled[1]:
            return filled
        kept.append(filled)
    if worth is None:
        return first
    return max(kept, key=lambda attempt: sum(worth[i] for i in attempt[0]))


def restricted_first(restricted: list[int], plain: list[int], size: Sequence[int], rooms: list[int],
                     allowed: Allowed) -> tuple[dict[int, int], list[int]]:
    """The restricted items best fit into the rooms they may use, then the others filling what is left."""
    placement, left = best_fit(restricted, size, rooms, allowed)
    free = list(rooms)
    for i, b in placement.items():
        free[b] -= size[i]
    filled, unplaced = fill_rooms(plain, size, free, sorted(range(len(free)), key=lambda b: (free[b], b)))
    return {**placement, **filled}, left + unplaced


def fill_rooms(items: list[int], size: Sequence[int], rooms: list[int], order: Iterable[int],
               allowed: Allowed | None = None) -> tuple[dict[int, int], list[int]]:
    """Fill the rooms in `order`, each as full as a subset of the remaining items (those `allowed[i]`
    holds the room for, when given) reaches, preferring items earlier in `items` (see `fullest_subset`).

    Returns the placement and the items left over (empty when everything was placed)."""
    left = list(items)
    placement: dict[int, int] = {}
    for b in order:
        here = left if allowed is None else [i for i in left if b in allowed[i]]
        for i in fullest_subset(here, size, rooms[b]):
            placement[i] = b
        left = [i for i in left if i not in placement]
    return placement, left


def with_item(reach: int, size: int, mask: int) -> int:
    """The subset-sum bitset `reach` (bits within `mask`) with one more item of `size` (in the bitset's
    grain): an item past the mask adds no total, and shifting by its size first would build an int as wide
    as it (sizes of billions of quanta beside small rooms: seconds and gigabytes per shift)."""
    if size >= mask.bit_length():
        return reach
    return (reach | (reach << size)) & mask


def fullest_total(reach: int, room: int) -> int:
    """The largest total ≤ `room` in the subset-sum bitset `reach` (bit t set: some subset totals t)."""
    return (reach & ((1 << (room + 1)) - 1)).bit_length() - 1


def fullest_subset(items: list[int], size: Sequence[int], room: int) -> list[int]:
    """A subset of `items` filling `room` as full as any does, an item taken only where the fill needs it
    (so earlier items are preferred): a subset-sum bitset, in the sizes' gcd. Past `FILL_BITS` bit
    operations, the items in order, each taken while it fits (at 1-token quanta on large replicas a room's
    bitset has 10^8 bits and more)."""
    if sum(size[i] for i in items) <= room:
        return list(items)
    grain = sizes_gcd(items, size)
    if len(items) * (room // grain) > FILL_BITS:
        taken, free = [], room
        for i in items:
            if size[i] <= free:
                taken.append(i)
                free -= size[i]
        return taken
    mask = (1 << (room // grain + 1)) - 1
    reach, layers = 1, []
    for i in items:
        layers.append(reach)
        reach = with_item(reach, size[i] // grain, mask)
    c = reach.bit_length() - 1  # the fullest fill, in grains
    taken = []
    for i, before in zip(reversed(items), reversed(layers)):  # an item is taken only when needed for c
        if not (before >> c) & 1:
            taken.append(i)
            c -= size[i] // grain
    return taken


def best_fit(
    items: list[int], size: Sequence[int], rooms: list[int],
    allowed: Mapping[int, Iterable[int]] | None = None, largest_first: bool = True,
) -> tuple[dict[int, int], list[int]]:
    """Largest first (or in the given order) into the tightest room that holds it, among `allowed[i]`
    when given; returns placement and the items left over."""
    left = list(rooms)
    everywhere = range(len(left))
    placement: dict[int, int] = {}
    unplaced = []
    for i in sorted(items, key=lambda i: (-size[i], i)) if largest_first else items:
        fits = [b for b in (everywhere if allowed is None else allowed[i]) if left[b] >= size[i]]
        if not fits:
            unplaced.append(i)
            continue
        b = min(fits, key=lambda b: (left[b], b))
        placement[i] = b
        left[b] -= size[i]
    return placement, unplaced
