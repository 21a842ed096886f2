"""Large-neighbourhood search for the K level: when its bound is still above its best placement, take
sessions off two nodes and refill (nodes nearly full with few size kinds need several sessions moved at
once, which no single move of the local search, planner/k/polish.py, finds)."""

from __future__ import annotations

import random
from typing import Callable

from tao_harness.planner.shared.deadline import Deadline

_STALE = 15  # reshuffle rounds without a better K before giving up: on large fragmented snapshots the
# rounds that pay come before; past it the K level's exact search, which settles the smaller ones the
# rounds miss, gets the time (measured: 25 left it too little on 64 × 8 adversarial snapshots, 8 too many)


def reshuffle(
    placement: dict[int, int], nodes: int, value_of: Callable[[dict[int, int]], int],
    refill: Callable[[dict[int, int]], dict[int, int]], target: int, rounds: int, deadline: Deadline | None,
) -> tuple[dict[int, int], int]:
    """Large-neighbourhood search from `placement`: take about half the sessions off two random nodes,
    `refill`, keep the result when its K is not lower; until K reaches `target`, `rounds` rounds pass,
    `_STALE` pass without a better K, or `deadline` does. Seeded: the same snapshot gives the same rounds."""
    rng = random.Random(0)
    best, value = placement, value_of(placement)
    since_better = 0
    for _ in range(rounds):
        if value >= target or since_better >= _STALE or nodes < 2:
            break
        if deadline is not None and deadline.passed():
            break
        emptied = rng.sample(range(nodes), 2)
        kept = {i: b for i, b in best.items() if b not in emptied or rng.random() >= 0.5}
        candidate = refill(kept)
        candidate_value = value_of(candidate)
        since_better = 0 if candidate_value > value else since_better + 1
        if candidate_value >= value:
            best, value = candidate, candidate_value
    return best, value
