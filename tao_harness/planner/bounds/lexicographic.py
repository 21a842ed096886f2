"""A certified lexicographic upper bound on (K, R, T, N): every plan carries its own proven gap.

The bound is (K̄, R̄, T̄, N̄): K̄ ≥ K of every feasible placement (the certificate's K* or the Lagrangian
bound, planner/k/lagrange.py), and (R̄, T̄, N̄) ≥ (R, T, N) of every feasible placement, compared
lexicographically, whatever its K. So every placement's (K, R, T, N) is ≤ the bound, lexicographically:
below K̄ in K, or equal in K and below in the rest. The (R, T, N) part is the surrogate relaxation over
all sessions: every node's room merged into one bin (each room first cut to the fullest fill any subset
of sessions reaches), each session worth its best (r, t, 1), solved as one 1-D knapsack on the packed
value; on large problems its LP relaxation (weaker, much cheaper) instead. The merged bin lets sessions
that only one room can take (eligibility, or the only room they fit) spill into the others' room; when
they overflow their room the confined bound (their room's knapsack, every other session whole) is taken
where it is lower. When every plan reaching K̄ holds a known placement (the general path's common pairs,
planner/k/unique.py) or one of a few (the certificate's K-optimal options, or the K-optimal placements
listed), `bound_holding` bounds the rest around it, or around each, instead.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter

from tao_harness.planner.bounds.certificate import fullest_fills
from tao_harness.planner.shared.int_knapsack import INT64_BITS, surrogate_knapsack
from tao_harness.planner.shared.problem import Packer, Problem, Value, objective

Objective = tuple[int, int, int, int]

_RT = itemgetter(1, 2)  # a value triple's (r, t)
_EXACT_WORK = 200_000  # sessions × merged room past which the LP bound replaces the exact knapsack


def rest_bound(problem: Problem, packer: Packer) -> int:
    """(R̄, T̄, N̄) packed (K field 0): ≥ the (R, T, N) of every feasible placement. The merged room's bound,
    or with sessions pinned to one room the confined one, whichever is lower."""
    merged = merged_bound(problem, packer)
    confined = confined_bound(problem, packer)
    return merged if confined is None else min(merged, confined)


def merged_bound(problem: Problem, packer: Packer) -> int:
    """(R̄, T̄, N̄) packed (K field 0) from every room merged into one (each first cut to the fullest fill
    the sessions reach), each session worth its best (r, t, 1) among the rooms that hold it."""
    gain = _best_gains(problem, packer)
    items = [i for i, worth in enumerate(gain) if worth]
    size = list(problem.size)
    capacity = sum(fullest_fills(items, size, list(problem.room)))
    return _knapsack_bound(items, size, gain, capacity, packer)


def _best_gains(problem: Problem, packer: Packer) -> list[int]:
    """Per session its best (r, t, 1), packed, among the nodes it may use whose room holds it; 0 when none
    does (a packed value counts the session: never 0 otherwise)."""
    gain = [0] * problem.n
    m = problem.m
    by_room = sorted(range(m), key=lambda b: -problem.room[b])  # a size fits a prefix of these
    rooms_up = sorted(problem.room)
    for i, (row, size_i) in enumerate(zip(problem.values, problem.size)):
        fit = m - bisect_left(rooms_up, size_i)  # rooms that hold the session
        usable = filter(None, row if fit == m else map(row.__getitem__, by_room[:fit]))  # eligible
        # (r, t) are the session's own in a snapshot; a bare Problem may vary them by node
        best = max(usable, key=_RT, default=None)
        if best is not None:
            gain[i] = packer.pack((0, best[1], best[2]))
    return gain


def confined_bound(problem: Problem, packer: Packer) -> int | None:
    """(R̄, T̄, N̄) packed (K field 0) from the sessions only one room can take (the one they fit among the
    nodes they may use: pinned tenants, failed replicas): those of each room packed into it by a 1-D
    knapsack, every other session counted whole. None unless the pinned sessions of some room overflow it
    (else this bound is no tighter than the merged one). The merged room lets the sessions pinned to a full
    room spill into the others' room; on eligibility snapshots whose pinned sessions crowd one replica this
    is the tighter bound, often the optimum itself (independent `tenants-3`: R̄ 47 -> 44, the plan's)."""
    room, size, values = problem.room, problem.size, problem.values
    if problem.m < 2:
        return None  # one room: the merged bound's
    by_room = sorted(range(problem.m), key=lambda b: -room[b])
    second = room[by_room[1]]  # without eligibility subsets only a session past the second room is pinned
    candidates = range(problem.n) if problem.restricted else [i for i, s in enumerate(size) if s > second]
    pinned: list[list[int]] = [[] for _ in room]
    for i in candidates:
        only = _only_room(values[i], size[i], room, by_room)
        if only is not None:
            pinned[only].append(i)
    if all(sum(size[i] for i in items) <= room[b] for b, items in enumerate(pinned)):
        return None
    gain, alone = _best_gains(problem, packer), {i for items in pinned for i in items}
    free = sum(worth for i, worth in enumerate(gain) if i not in alone)
    return free + sum(_knapsack_bound(items, list(size), gain, room[b], packer)
                      for b, items in enumerate(pinned) if items)


def _only_room(row: tuple[Value | None, ...], size: int, room: tuple[int, ...], by_room: list[int]
               ) -> int | None:
    """The one node whose room holds a session of `size` among those `row` lets it use; None when it may
    use none or several (`by_room`: the nodes, largest room first)."""
    found = None
    for b in by_room:
        if room[b] < size:
            break
        if row[b] is not None:
            if found is not None:
                return None
            found = b
    return found


def _knapsack_bound(items: list[int], size: list[int], gain: list[int], capacity: int, packer: Packer) -> int:
    """The most `gain` of `items` within `capacity`: exact, or past int64 or `_EXACT_WORK` its LP bound."""
    chosen = None
    if packer.bits_without_k <= INT64_BITS and len(items) * capacity <= _EXACT_WORK:
        chosen = surrogate_knapsack(items, size, gain, capacity)
    return _fractional(items, size, gain, capacity) if chosen is None else sum(gain[i] for i in chosen)


def _fractional(items: list[int], size: list[int], gain: list[int], capacity: int) -> int:
    """The merged knapsack's LP bound (Dantzig): best gain per quantum first, the last one in part,
    rounded down (the integer optimum is an integer below it). Python ints: no overflow."""
    total, left = sum(gain[i] for i in items if size[i] == 0), capacity
    # gain·M // size orders the ratios exactly: two different ratios of sizes ≤ S differ by ≥ 1/S² = 1/M
    scale = max(size, default=1) ** 2
    for i in sorted((i for i in items if size[i] > 0), key=lambda i: -(gain[i] * scale // size[i])):
        if size[i] <= left:
            total += gain[i]
            left -= size[i]
        else:
            return total + gain[i] * left // size[i]
    return total


def lexicographic_bound(problem: Problem, packer: Packer, k_bound: int) -> Objective:
    """(K̄, R̄, T̄, N̄) for a proven K̄ = `k_bound`."""
    _, r, t, n = packer.unpack(rest_bound(problem, packer))
    return (k_bound, r, t, n)


def bound_holding(problem: Problem, held: dict[int, int], k_bound: int) -> Objective:
    """(K̄, R̄, T̄, N̄) ≥ (K, R, T, N) of every plan holding the placement `held` (whatever else it holds),
    for a proven K̄ = `k_bound`: `held`'s own (R, T, N) plus the surrogate bound of the other sessions in
    the rooms it leaves. When every plan reaching K̄ holds one of a few known placements, this is much
    tighter than the whole problem's surrogate, which lets their sessions use their room twice over."""
    rooms = list(problem.room)
    for i, b in held.items():
        rooms[b] -= problem.size[i]
    rest = [i for i in range(problem.n) if i not in held]
    # rows as they are: the surrogate takes each session's best (r, t) over the rooms that hold it
    sub = Problem(tuple(problem.session_ids[i] for i in rest), problem.node_ids,
                  tuple(problem.size[i] for i in rest), tuple(rooms), tuple(problem.values[i] for i in rest))
    _, r, t, n = objective(problem, held)
    sub_packer = Packer.for_problem(sub)
    _, rest_r, rest_t, rest_n = sub_packer.unpack(rest_bound(sub, sub_packer))
    return (k_bound, r + rest_r, t + rest_t, n + rest_n)
