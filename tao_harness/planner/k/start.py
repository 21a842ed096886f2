"""Where the K level's multipliers start: the best of a few cheap guesses, by the bound L(λ) each gives.

A shared session's multiplier λ_i prices "at most one node": at the optimum of the Lagrangian dual it is
about what the session is worth beyond the room it takes on its best node but one. Two guesses of that:

- its second-best credit: right when rooms are ample (every session placed, only its best node should want
  it), far off when they are scarce: L then counts the multiplier of every session, placed or not (160 x 8
  snapshots whose rooms hold a third of the sessions: L 2.7 times K*, where λ = 0 gave 1.03 times);
- its credit net of the room it takes, priced per node at the break ratio of that node's greedy fill
  (credit per quantum of the first session that no longer fits), first or second best over its nodes: the
  LP's dual form, with each node's price guessed from its own sessions alone.

Each guess costs one knapsack per node (compiled, planner/k/dual.py); the lowest bound wins. The subgradient
steps (planner/k/dual.py) that follow then start near the dual's optimum instead of spending their first
steps, and each step's repair and polish (~1 ms on those 160 x 8 snapshots), coming down to it.
"""

from __future__ import annotations

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.dual import lagrangian_bound


def starting_multipliers(arrays: DualArrays, n: int) -> np.ndarray:
    """λ per problem session (`n` of them; 0 for those not shared in `arrays`): of the guesses above, the
    one whose L is lowest (the second-best credits on ties)."""
    lam = np.zeros(n)
    if not arrays.shared.any():
        return lam
    guesses = _guesses(arrays)
    bounds = [lagrangian_bound(arrays, guess) for guess in guesses]
    lam[arrays.sessions] = guesses[int(np.argmin(bounds))]
    return lam


def _guesses(arrays: DualArrays) -> list[np.ndarray]:
    """Per local session (0 unless shared): its second-best credit; its best and its second-best credit net
    of its room at each node's break ratio."""
    size = arrays.size[arrays.pair_session].astype(np.float64)
    price = _break_ratios(arrays)[arrays.pair_node]
    return [_ranked(arrays, arrays.pair_credit, 1)] + [
        _ranked(arrays, np.maximum(arrays.pair_credit - price * size, 0.0), rank) for rank in (1, 0)]


def _ranked(arrays: DualArrays, value: np.ndarray, rank: int) -> np.ndarray:
    """Per local session, the `rank`-th largest (0: the largest) of `value` over its pairs; 0 for the
    sessions not shared."""
    table = np.zeros((len(arrays.sessions), len(arrays.room)))
    table[arrays.pair_session, arrays.pair_node] = value
    table.sort(axis=1)
    return np.where(arrays.shared, table[:, -1 - rank], 0.0)


def _break_ratios(arrays: DualArrays) -> np.ndarray:
    """Per node, the credit per quantum of the first session its greedy fill (best ratio first) cannot take
    (0 when all fit)."""
    ratios = np.zeros(len(arrays.room))
    size = arrays.size[arrays.pair_session]
    ratio = arrays.pair_credit / np.maximum(size, 1)
    for b in range(len(arrays.room)):
        lo, hi = arrays.node_start[b], arrays.node_start[b + 1]
        order = np.argsort(-ratio[lo:hi], kind="stable")
        over = np.flatnonzero(np.cumsum(size[lo:hi][order]) > arrays.room[b])
        if len(over):
            ratios[b] = ratio[lo:hi][order[over[0]]]
    return ratios
