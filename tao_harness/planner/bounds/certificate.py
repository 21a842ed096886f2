"""An optimality certificate that answers most snapshots without the multi-dimensional DP.

Applies when every session has cache credit on at most one node (the usual case: a session's prefix
lives where it last ran), whatever nodes it may use. Then, lexicographically:

1. K only grows when a session sits on its credit node, and nodes do not share credited sessions, so
   K* = Σ_b (best credit subset of node b's credited sessions that fits C̄_b) — a 1-D knapsack per node
   (planner/bounds/credit.py). Every optimal plan contains one K-optimal subset X_b per node; the certificate
   is computed for one choice of them (`forced`: the only one, unless credits tie).
   (A credited session left out of X_b cannot fit beside it, so it is worth (0, r, t) anywhere else.)
2. Everything else is worth the same on every node it may use. Relaxing the residual rooms into one
   bin of their total size (and forgetting which nodes a session may use) gives a single 1-D knapsack
   whose optimum S* bounds (R, T, N) from above (the surrogate relaxation of the multiple knapsack, as
   in Pisinger's MULKNAP).
3. If S* can be split into the real residual rooms, each session on a node it may use (rooms filled
   exactly one after another in a few orders, or best fit: planner/packing/split.py), the bound is reached and
   the plan is optimal for the discretized problem.

If step 1 does not apply (credit on two nodes) the result is None; if step 3 fails the result is an
unproven placement and the forced part, and planner/solve.py finishes the residual (branch and bound,
then the exact DP). planner/solve.py's general path calls it with the Lagrangian K level's placement
(planner/k/lagrange.py) as `forced`: then the outcome is the best plan holding that placement, optimal
only if it is the only K-optimal one (planner/k/unique.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tao_harness.planner.bounds.credit import k_optimal_options
from tao_harness.planner.packing.split import (FILL_BITS, best_fit, fullest_total, split as split_into,
                                              with_item)
from tao_harness.planner.shared.int_knapsack import INT64_BITS, surrogate_knapsack
from tao_harness.planner.shared.problem import Packer, Problem, sizes_gcd

_SPLIT_TRIES = 4  # ways to split the surrogate's choice tried (planner/packing/split.py; ~0.1 ms each at
# 160 x 8): few, as the residual's search tries sixteen on its own root bound's (tighter) choice right after


def fullest_fills(items: list[int], size: list[int], rooms: list[int]) -> list[int]:
    """Per room, at most the room and at least the largest total ≤ room that some subset of `items`
    reaches (a valid room, usually tighter): that total itself unless the subset-sum bitset, counted in
    the sizes' gcd (exact), would pass `FILL_BITS` bit operations (planner/packing/split.py); then the room,
    down to what all the items together take. (At 1-token quanta on large replicas the bitset of 10^8-10^9
    bits took seconds.)"""
    total = sum(size[i] for i in items)
    top = min(max(rooms, default=0), total)  # a room holding every item is filled by all of them
    grain = sizes_gcd(items, size)
    if len(items) * (top // grain) > FILL_BITS:
        return [min(room, total) for room in rooms]
    mask = (1 << (top // grain + 1)) - 1
    reach = 1
    for i in items:
        reach = with_item(reach, size[i] // grain, mask)
    return [total if room >= total else grain * fullest_total(reach, room // grain) for room in rooms]


@dataclass(frozen=True, slots=True)
class Certificate:
    """What the decomposition established about one problem."""

    placement: dict[int, int]  # feasible; optimal when `proven`
    proven: bool  # the surrogate bound was reached
    forced: dict[int, int]  # the K-placement held: the certificate's K-optimal subsets (in every optimum
    # when they are the only ones), or the general path's K level placement


def residual_problem(problem: Problem, forced: dict[int, int]) -> tuple[Problem, list[int]]:
    """The sessions outside `forced`, valued (0, r, t) on every node they may use, in the rooms `forced`
    leaves.

    Exact when `forced` is K-optimal: a left-over credited session cannot fit beside it on a node where
    it has credit (else `forced` would not be K-optimal), so its credit can never be collected. Returns
    the problem and the map from its session indices back to the original ones.
    """
    rooms = list(problem.room)
    for i, b in forced.items():
        rooms[b] -= problem.size[i]
    rest = [i for i in range(problem.n) if i not in forced]
    values = []
    for i in rest:
        row = problem.values[i]
        _, r, t = next(filter(None, row), (0, 0, 0))
        values.append(tuple(None if v is None else (0, r, t) for v in row))
    sub = Problem(
        session_ids=tuple(problem.session_ids[i] for i in rest), node_ids=problem.node_ids,
        size=tuple(problem.size[i] for i in rest), room=tuple(rooms), values=tuple(values),
    )
    return sub, rest


def certified_placement(
    problem: Problem, packer: Packer, forced: dict[int, int] | None = None
) -> Certificate | None:
    """The certificate's outcome given the K-optimal placement `forced` (planner/bounds/credit.py; by default
    the only one, None when there are several), or None when it does not apply to this problem.

    With eligibility subsets the surrogate ignores them (still a bound) and its choice is split with
    them (planner/packing/split.py: room after room filled exactly, restricted sessions preferred).
    When the bound is not reached the placement is still a good feasible one (K-optimal, residual
    packed as far as the split got, the rest best-fit): the DP's incumbent.
    """
    if forced is None:
        options = k_optimal_options(problem, limit=1)
        if options is None:
            return None
        forced = options[0]
    if packer.bits_without_k > INT64_BITS:
        return None
    size = list(problem.size)
    rooms = list(problem.room)
    for i, b in forced.items():
        rooms[b] -= size[i]
    allowed = _rooms_allowed(problem, rooms, forced)
    rest = [i for i in range(problem.n) if i not in forced and (allowed is None or allowed[i])
            and size[i] <= max(rooms, default=0)]
    gain = [0] * problem.n
    for i in rest:
        _, r, t = next(filter(None, problem.values[i]))  # type: ignore[misc]
        gain[i] = packer.pack((0, r, t))
    chosen_rest = surrogate_knapsack(rest, size, gain, sum(fullest_fills(rest, size, rooms)))
    if chosen_rest is None:  # no bound to reach: the sessions best fit, unproven
        split, left = {}, rest
    else:
        split, left = split_into(chosen_rest, size, rooms, allowed, _SPLIT_TRIES, gain)
    if not left:
        return Certificate({**forced, **split}, True, forced)
    used = [0] * problem.m
    for i, b in split.items():
        used[b] += size[i]
    spare = [room - u for room, u in zip(rooms, used)]
    others = sorted((i for i in rest if i not in split), key=lambda i: (-gain[i], i))
    extra, _ = best_fit(others, size, spare, allowed, largest_first=False)
    return Certificate({**forced, **split, **extra}, False, forced)


def _rooms_allowed(problem: Problem, rooms: list[int], forced: dict[int, int]) -> dict[int, list[int]] | None:
    """Per session outside `forced`, the rooms it may use that still hold it; None when every session
    may use every node."""
    if not problem.restricted:
        return None
    return {i: [b for b, v in enumerate(row) if v is not None and problem.size[i] <= rooms[b]]
            for i, row in enumerate(problem.values) if i not in forced}
