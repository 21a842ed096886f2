"""Among the K-optimal placements, prefer the one holding the ready sessions: swap in better twins.

The K level finds a K-optimal placement P (proven); when credits tie (whole caches observed whole
half-lives ago, sessions forked from one task template) many placements reach K*, and which one P is
decides what the rest of the plan can reach. Two sessions are twins on node b when they have the same
size, the same credit there and the same nodes they may use. Swapping a session of P on b for an unplaced
twin worth more in (r, t) keeps K and every room, and never lowers the best plan around it: a plan around
P that places the twin somewhere maps to one around the swapped P that places the session there instead
(same size, same room, a node it may use), worth the same; one that leaves the twin out is worth less
than the swapped P with the same rest.
"""

from __future__ import annotations

from collections import defaultdict

from tao_harness.planner.shared.problem import Problem


def with_better_twins(problem: Problem, placement: dict[int, int]) -> dict[int, int]:
    """`placement` (credited sessions on their credit nodes, K-optimal: else a plan around it may
    collect credit elsewhere, and a twin swapped in may be the session that would) with sessions
    swapped for unplaced twins worth more in (r, t), until none is left to swap."""
    placed = dict(placement)
    worth = [next(filter(None, row), (0, 0, 0))[1:] for row in problem.values]  # (r, t): the session's own
    # the nodes each may use, None for every node (most sessions: the tuple of flags costs more than the test)
    may_use = [tuple(v is not None for v in row) if None in row else None for row in problem.values]
    # (node, size, credit there, nodes it may use) -> the sessions of that kind, best (r, t) first
    twins: dict[tuple[int, int, int, tuple[bool, ...] | None], list[int]] = defaultdict(list)
    for j, row in enumerate(problem.values):
        for b, value in enumerate(row):
            if value is not None and value[0] > 0:
                twins[(b, problem.size[j], value[0], may_use[j])].append(j)
    for group in twins.values():
        group.sort(key=lambda j: worth[j], reverse=True)
    changed = True
    while changed:  # each swap raises the placed sessions' (r, t) total: it ends
        changed = False
        for i, b in list(placed.items()):
            value = problem.values[i][b]
            if value is None or value[0] <= 0:
                continue
            for j in twins[(b, problem.size[i], value[0], may_use[i])]:
                if worth[j] <= worth[i]:
                    break  # best first: no later twin is worth more
                if j not in placed:
                    del placed[i]
                    placed[j] = b
                    changed = True
                    break
    return placed
