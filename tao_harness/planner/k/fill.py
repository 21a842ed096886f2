"""Node-by-node exact fills: starting placements for the K level with flat credit (planner/k/lagrange.py).

With flat credit (a session worth the same on each of its credit nodes) the K problem is a multiple
knapsack with assignment restrictions. Its first-phase heuristic (Martello and Toth's MTHM) fills the
nodes one after another, each with the most credit the still unplaced sessions can put there: an exact
1-D knapsack per node. On rooms of very different sizes (a live cluster's skewed replicas) it often
packs closer to the bound than the LP's whole placements refilled (those start without every session
the LP split between nodes); on the degenerate shape's equal-credit snapshots it reached the bound where
they stayed one or several credit steps below.
Which order of the nodes packs best depends on the snapshot, so both are offered: smallest rooms first
(they pick their fitting sessions before large rooms take them) and largest first.
"""

from __future__ import annotations

from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import knapsack


def node_fills(credit: list[dict[int, int]], size: tuple[int, ...], room: tuple[int, ...],
               deadline: Deadline | None = None) -> list[dict[int, int]]:
    """Placements (session -> node) filling the nodes one by one exactly, in two orders of their rooms;
    past `deadline` the nodes not filled yet stay empty (with credit on every node of a large snapshot
    the fills cost ~15 ms)."""
    by_room = sorted(range(len(room)), key=lambda b: (room[b], b))
    return [_fill(credit, size, room, order, deadline) for order in (by_room, by_room[::-1])]


def _fill(credit: list[dict[int, int]], size: tuple[int, ...], room: tuple[int, ...], order: list[int],
          deadline: Deadline | None) -> dict[int, int]:
    placed: dict[int, int] = {}
    for b in order:
        if deadline is not None and deadline.passed():
            break
        open_here = [i for i in credit[b] if i not in placed]
        _, chosen = knapsack(open_here, size, {i: float(credit[b][i]) for i in open_here}, room[b])
        placed.update((i, b) for i in chosen)
    return placed
