"""The exact capacity-state DP: D_j(s) = lexmax{ D_{j−1}(s), max_b D_{j−1}(s − w̄_j e_b) + u_{j,b} }.

Invariant: after step j, `states` maps every reachable capacity vector of sessions order[:j] — up to a
permutation of nodes that no later session can tell apart — to the best packed value reaching it.
Two nodes are interchangeable for the suffix when every later session has the same value triple and
eligibility on both; their capacities are then sorted inside the state key, so symmetric placements
merge instead of multiplying. The stored capacities stay in physical node order, so the placement is
recovered without un-permuting anything. States whose value plus the best the suffix could add cannot
beat the incumbent are dropped (branch and bound). Past `budget` states the DP gives up (raises `BudgetExceeded`), and so it does as soon
as its layers, growing as they do, would pass the budget within two steps (`_projected_past`).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from tao_harness.planner.packing.split import with_item
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Packer, Problem

_INT64_SAFE = 1 << 62
_FILL_TABLE = 1 << 17  # quanta of room at most for the suffix fills' tables, a list of this many ints per
# session (~5 MB): 16-token quanta on 2M-token replicas

Link = Optional[tuple[int, int, "Link"]]  # (session, node, previous link): the placements so far


def _session_order(problem: Problem, candidates: list[int]) -> list[int]:
    """Node-distinguishing sessions first (so nodes merge early), then larger sessions first."""

    def uniform(i: int) -> bool:
        row = problem.values[i]
        return all(v is not None and v == row[0] for v in row)

    def pattern(i: int) -> tuple[tuple[int, int], ...]:
        return tuple((1, 0) if v is None else (0, -v[0]) for v in problem.values[i])

    return sorted(candidates, key=lambda i: (uniform(i), pattern(i), -problem.size[i], i))


def _node_classes(problem: Problem, order: list[int]) -> list[tuple[int, ...]]:
    """classes[j][b]: nodes with equal labels are interchangeable for sessions order[j:]."""
    classes = [tuple([0] * problem.m)]
    interned: dict[tuple[object, int], int] = {}
    for i in reversed(order):
        after = classes[-1]
        classes.append(tuple(interned.setdefault((problem.values[i][b], after[b]), len(interned))
                             for b in range(problem.m)))
    classes.reverse()
    return classes


def exact_dp(
    problem: Problem, packer: Packer, budget: int, incumbent: int = 0, deadline: Deadline | None = None,
) -> tuple[dict[int, int] | None, int]:
    """Optimal placement strictly better than `incumbent` (None if none exists), and states created.

    Raises `BudgetExceeded` past `budget` states, when growth projects past it (`_projected_past`), or
    past `deadline` (checked every few hundred states).
    """
    candidates = [
        i for i in range(problem.n)
        if any(v is not None and problem.size[i] <= r for v, r in zip(problem.values[i], problem.room))
    ]
    order = _session_order(problem, candidates)
    classes = _node_classes(problem, order)
    packed = [[None if v is None else packer.pack(v) for v in row] for row in problem.values]
    bound = _suffix_bounds(problem, order, packed)
    fills = _suffix_fills(problem, order)
    limits = _suffix_limits(order, bound, fills)

    def key_at(labels: tuple[int, ...]) -> Callable[[tuple[int, ...]], tuple[object, ...]]:
        """The state key for capacities `caps` under node labels `labels`."""
        if len(set(labels)) == 1:  # every node interchangeable (e.g. the residual): the sorted rooms
            return lambda caps: tuple(sorted(caps))
        return lambda caps: tuple(sorted(zip(labels, caps)))

    room = tuple(problem.room)
    states: dict[object, tuple[int, tuple[int, ...], Link]] = {key_at(classes[0])(room): (0, room, None)}
    created = 1
    for j, i in enumerate(order):
        size, labels, after = problem.size[i], classes[j], classes[j + 1]
        key_after = key_at(after)
        suffix = limits[j + 1]  # the most sessions order[j+1:] can still add, by total room
        fill = fills[j + 1]  # the part of a room that sessions order[j+1:] can actually fill
        nxt: dict[object, tuple[int, tuple[int, ...], Link]] = {}

        def put(value: int, caps: tuple[int, ...], link: Link) -> None:
            if suffix(value, caps) <= incumbent:
                return
            k = key_after(caps)
            old = nxt.get(k)
            if old is None:
                if created + len(nxt) >= budget:
                    raise BudgetExceeded(created + len(nxt))
                nxt[k] = (value, caps, link)
            elif value > old[0]:
                nxt[k] = (value, caps, link)

        for seen, (value, caps, link) in enumerate(states.values()):
            if deadline is not None and seen % 256 == 0 and deadline.passed():
                raise BudgetExceeded(created + len(nxt), late=True)
            put(value, caps, link)
            tried: set[tuple[int, int]] = set()
            for b, gain in enumerate(packed[i]):
                if gain is None or caps[b] < size or (labels[b], caps[b]) in tried:
                    continue
                tried.add((labels[b], caps[b]))
                put(value + gain, caps[:b] + (caps[b] - size,) + caps[b + 1:], (i, b, link))
        created += len(nxt)
        if _projected_past(budget, created, len(states), len(nxt), len(order) - j - 1):
            raise BudgetExceeded(created, projected=True)
        states = nxt
    if not states:
        return None, created
    _, _, link = max(states.values(), key=lambda entry: entry[0])
    placement: dict[int, int] = {}
    while link is not None:
        i, b, link = link
        placement[i] = b
    return placement, created


def _projected_past(budget: int, created: int, before: int, after: int, steps_left: int) -> bool:
    """Whether the next two steps, growing as the last one did, would pass `budget`.

    A DP that will blow its budget usually shows it early: the layers keep multiplying until the
    budget is gone, and all that work is wasted. Looking two steps ahead gives up early on most of those
    (at 32–128 sessions × 8 nodes, 26 of 26 eventual failures) while only 2 of 60 DPs that would have
    finished give up wrongly; one step ahead catches too few, three give up wrongly too often."""
    if after <= before or steps_left == 0:
        return False  # pruning is winning (or nothing is left): let it run to the budget
    growth = after / max(before, 1)
    ahead = after * growth + (after * growth * growth if steps_left > 1 else 0)
    return created + ahead >= budget


def _suffix_limits(order: list[int], bound: list, fills: list) -> list:
    """limits[j](value, caps): a bound on the best total reachable from `value` with sessions order[j:], the
    suffix's bound over the part of each room its sessions can fill."""

    def at(j: int) -> Callable[[int, tuple[int, ...]], int]:  # one closure per step: it runs once per state
        fill, plain = fills[j], bound[j]
        return lambda value, caps: value + plain(sum(map(fill, caps)))

    return [at(j) for j in range(len(order) + 1)]


def _suffix_fills(problem: Problem, order: list[int]) -> list:
    """fills[j](room): the fullest total ≤ room that a subset of sessions order[j:] reaches.

    Room no later session combination can use is dead; leaving it out tightens the bound for free.
    Each fills[j] is a list's `__getitem__` (the DP calls it once per room per state), built from the
    subset-sum bitset with numpy: the last reachable total at or below each room. Rooms past
    `_FILL_TABLE` quanta (1-token quanta on large replicas: a table per session of billions of entries)
    are cut to what the sessions after j take together instead, a looser cap."""
    top = max(problem.room, default=0)
    if top > _FILL_TABLE:
        after = [0]
        for i in reversed(order):
            after.append(after[-1] + problem.size[i])
        return [lambda room, total=total: min(room, total) for total in reversed(after)]
    totals = np.arange(top + 1)
    mask = (1 << (top + 1)) - 1
    reach = 1
    fills = [[0] * (top + 1)]
    for j in range(len(order) - 1, -1, -1):
        reach = with_item(reach, problem.size[order[j]], mask)
        bits = np.unpackbits(np.frombuffer(reach.to_bytes((top + 8) // 8, "little"), dtype=np.uint8),
                             bitorder="little")[: top + 1]
        fills.append(np.maximum.accumulate(np.where(bits == 1, totals, 0)).tolist())
    fills.reverse()
    return [table.__getitem__ for table in fills]


def _suffix_bounds(problem: Problem, order: list[int], packed: list[list[int | None]]) -> list:
    """bound[j](room): an upper bound on what sessions order[j:] add given `room` quanta in total.

    The surrogate relaxation (all rooms merged into one, each session at its best value) solved as a
    1-D knapsack per suffix with numpy when the sums fit in int64; else the plain sum of best values.
    """
    best = [max(p for p in packed[i] if p is not None) for i in order]
    plain = [0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        plain[j] = plain[j + 1] + best[j]
    capacity = min(sum(problem.room), sum(problem.size[i] for i in order))
    if plain[0] >= _INT64_SAFE or capacity > 50_000:
        return [lambda room, total=total: total for total in plain]
    table = np.zeros(capacity + 1, dtype=np.int64)
    tables = [table]
    for j in range(len(order) - 1, -1, -1):
        w = problem.size[order[j]]
        table = table + best[j] if w == 0 else table.copy()
        if 0 < w <= capacity:
            np.maximum(table[w:], tables[-1][:-w] + best[j], out=table[w:])
        tables.append(table)
    tables.reverse()
    return [lambda room, t=t: int(t[min(room, capacity)]) for t in tables]


class BudgetExceeded(Exception):
    """The DP created more states than its budget allows, was about to (`projected`), or ran out of time."""

    def __init__(self, states: int, projected: bool = False, late: bool = False) -> None:
        what = "ran past its deadline" if late else \
            "was projected to exceed its state budget" if projected else "exceeded its state budget"
        super().__init__(f"DP {what} after {states} states")
        self.states = states
        self.projected = projected
