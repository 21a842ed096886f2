"""Local search for the K level: make room for a left-out session by shifting one placed session away.

The knapsack re-packs of planner/improve.py move sessions only within one node (or two nodes every
session of which may use both); with credit on several nodes, a node's room is often held by a session
that could sit on another of its credit nodes instead. For each left-out session u (highest credit
first) and each of its nodes b: if u fits, it goes there; else one session v on b moves to another node
c of its own where it fits, when that frees enough room on b and the total K rises (the credit of u,
plus v's credit on c, minus v's on b). Moves are applied at once (first improvement); it stops when a
pass changes nothing. Never loses K; it claims nothing about optimality.

When the K level's bound is still above its best placement, `reshuffle` perturbs and refills it (nodes
nearly full with few size kinds need several sessions moved at once, which no single move finds).
"""

from __future__ import annotations

import random
from typing import Callable

from tao_harness.planner.deadline import Deadline
from tao_harness.planner.problem import Problem

_PASSES = 3
_STALE = 15  # reshuffle rounds without a better K before giving up: on large fragmented snapshots the
# rounds that pay come before; past it the K level's exact search, which settles the smaller ones the
# rounds miss, gets the time (measured: 25 left it too little on 64 × 8 adversarial snapshots, 8 too many)


def shift_in(problem: Problem, placement: dict[int, int]) -> dict[int, int]:
    """`placement` with left-out sessions shifted in (see the module docstring); K on value[0]."""
    return Shifter(problem).shift_in(placement)


class Shifter:
    """`shift_in` for one problem, its tables built once (the K level refills many placements; with
    credit on most nodes building them was most of a refill's time)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.credit = [[None if v is None else v[0] for v in row] for row in problem.values]
        self.nodes_of = [[b for b, k in enumerate(row) if k is not None and k > 0] for row in self.credit]
        self.best = [max((row[b] for b in bs), default=0) for row, bs in zip(self.credit, self.nodes_of)]

    def shift_in(self, placement: dict[int, int]) -> dict[int, int]:
        """`placement` with left-out sessions shifted in (see the module docstring)."""
        problem, credit, nodes_of, best = self.problem, self.credit, self.nodes_of, self.best
        size = problem.size
        placed = dict(placement)
        left = list(problem.room)
        held: list[set[int]] = [set() for _ in range(problem.m)]
        for i, b in placed.items():
            left[b] -= size[i]
            held[b].add(i)
        for _ in range(_PASSES):
            moved = False
            out = sorted((i for i in range(problem.n) if i not in placed and nodes_of[i]),
                         key=lambda i: (-best[i], i))
            for u in out:
                move = _best_move(u, credit, nodes_of, size, left, held)
                if move is None:
                    continue
                b, shifted = move
                if shifted is not None:
                    v, c = shifted
                    held[b].discard(v)
                    held[c].add(v)
                    left[b] += size[v]
                    left[c] -= size[v]
                    placed[v] = c
                held[b].add(u)
                left[b] -= size[u]
                placed[u] = b
                moved = True
            if not moved:
                break
        return placed


def _best_move(u: int, credit: list[list[int | None]], nodes_of: list[list[int]], size: tuple[int, ...],
               left: list[int], held: list[set[int]]) -> tuple[int, tuple[int, int] | None] | None:
    """The move placing `u` that gains most: (its node, the shifted session and its new node, or None)."""
    best_gain, best = 0, None
    for b in nodes_of[u]:
        gain_u = credit[u][b]
        assert gain_u is not None
        if left[b] >= size[u]:
            if gain_u > best_gain:
                best_gain, best = gain_u, (b, None)
            continue
        need = size[u] - left[b]
        for v in held[b]:
            if size[v] < need:
                continue
            for c in nodes_of[v]:
                if c == b or left[c] < size[v]:
                    continue
                gain = gain_u + credit[v][c] - credit[v][b]  # type: ignore[operator]
                if gain > best_gain:
                    best_gain, best = gain, (b, (v, c))
    return best


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
        if value >= target or since_better >= _STALE or (deadline is not None and deadline.passed()) or nodes < 2:
            break
        emptied = rng.sample(range(nodes), 2)
        kept = {i: b for i, b in best.items() if b not in emptied or rng.random() >= 0.5}
        candidate = refill(kept)
        candidate_value = value_of(candidate)
        since_better = 0 if candidate_value > value else since_better + 1
        if candidate_value >= value:
            best, value = candidate, candidate_value
    return best, value
