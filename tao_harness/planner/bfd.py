"""Best-fit-decreasing: the fast, inexact planner (`tao-bfd`, and the DP's fallback).

Sessions in decreasing order of their best value triple (ties: larger first); each goes to the eligible
node where its value is highest, and among equal values to the tightest fit (least room left after).
"""

from __future__ import annotations

from tao_harness.planner.shared.problem import Packer, Problem, Solution


def best_fit_decreasing(problem: Problem, packer: Packer) -> Solution:
    left = list(problem.room)
    gains = [{v: packer.pack(v) for v in set(row) if v is not None} for row in problem.values]
    order = sorted(range(problem.n), key=lambda i: (-max(gains[i].values(), default=0), -problem.size[i], i))
    placement: dict[int, int] = {}
    for i in order:
        size, gain = problem.size[i], gains[i]
        best: tuple[int, int, int] | None = None  # (packed value, -room left after, -node index)
        for b, value in enumerate(problem.values[i]):
            if value is None or left[b] < size:
                continue
            key = (gain[value], size - left[b], -b)
            if best is None or key > best:
                best = key
        if best is not None:
            b = -best[2]
            placement[i] = b
            left[b] -= size
    return Solution(placement=placement, solver="bfd")
