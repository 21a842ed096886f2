"""Among equally valued plans, prefer the one that spreads sessions over the nodes.

The objective (K, R, T, N) is blind to where a session with no cache credit goes: every node gives it
the same value. Packing such sessions onto one replica while another idles is optimal on paper but slow
in practice (one batch does all the decoding). So after the solver, the sessions whose value triple is the
same on every node are re-placed worst-fit — largest first, each on the node with the most room left —
beside the sessions that must stay where they are. If that re-placement does not fit them all, the
solver's placement is kept. Same set of sessions, same values: the objective never changes.
"""

from __future__ import annotations

from tao_harness.planner.shared.problem import Problem


def spread(problem: Problem, placement: dict[int, int]) -> dict[int, int]:
    values = problem.values
    movable = [i for i in placement if None not in values[i] and values[i].count(values[i][0]) == problem.m]
    if not movable or problem.m < 2:
        return placement
    left = list(problem.room)
    moving = set(movable)
    settled = {i: b for i, b in placement.items() if i not in moving}
    for i, b in settled.items():
        left[b] -= problem.size[i]
    for i in sorted(movable, key=lambda i: (-problem.size[i], i)):
        b = left.index(max(left))  # the most room left, the first such node on ties
        if left[b] < problem.size[i]:
            return placement
        settled[i] = b
        left[b] -= problem.size[i]
    return settled
