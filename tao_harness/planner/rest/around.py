"""The best plan holding a K placement: the certificate around it, else its residual searched.

planner/solve.py fixes a K-optimal placement (the certificate's K-optimal subsets, or the Lagrangian K level's
placement) and needs the best plan holding it. The certificate (planner/bounds/certificate.py) packs the other
sessions by the surrogate bound and proves it when the bound's choice splits into the rooms. When it does not,
the residual (the other sessions, worth (0, r, t) wherever they may go, in the rooms left) is searched:
with eligibility subsets the incumbent is repaired room by room first (planner/packing/improve.py). (Settling
R*, the most ready sessions any plan admits, by packing the smallest ready sessions, to seed the incumbent and
cap the searches' bounds, changed no K nor K proof on 740 plans, 7 shapes, 16 x 4 to 160 x 8, and moved exact
plans by ±1 and T both ways: removed.) A bin-completion branch and bound under the nested bound
(planner/packing/bins.py; at its root also the confined bound of the sessions only one room can take,
planner/bounds/lexicographic.py) settles most residuals within a small node limit: a short search first, then,
from its best placement repaired, the rest of the limit. A small residual with eligibility subsets that the
short search leaves open goes to the K level's machinery in between, its values packed into one credit
(planner/rest/packed_level.py). What they leave goes to the capacity-state DP (planner/rest/dp.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from tao_harness.planner.bounds.certificate import Certificate, certified_placement, residual_problem
from tao_harness.planner.bounds.lexicographic import confined_bound
from tao_harness.planner.packing.bins import NODE_TRIES, solve_residual
from tao_harness.planner.packing.improve import Improver
from tao_harness.planner.packing.split import best_fit
from tao_harness.planner.rest.dp import BudgetExceeded, exact_dp
from tao_harness.planner.rest.packed_level import packed_level
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Packer, Problem, Solution, total_value

_BRANCH_NODES = 80  # nested bounds the residual's branch and bound may evaluate (~0.2 ms each)
_LEVEL_SHARE = 0.6  # of the rest's time left, for the packed K level (planner/rest/packed_level.py)
_LEVEL_PAIRS = 512  # residual sessions x nodes at most for it: 32 x 8 and 64 x 8 residuals (160 x 8 ones
# have ~1,000 pairs, where its LP and steps ran past the 3 ms the rest has there and proved none more)
_LEVEL_MIN_S = 0.006  # and only with this much of the rest's time left: its LP, steps and refills take 3-6 ms
# on a 60 x 8 residual whatever its share, so at 160 x 8 (3 ms for the whole rest) a small residual's level
# ran ~5 ms past the rest's deadline (independent `all4` snapshots, one plan 12.7 ms in the rest)
_QUICK_NODES = 16  # of which the first search, before the incumbent is repaired (enough for most)


def complete_around(
    problem: Problem, packer: Packer, forced: dict[int, int], state_budget: int, deadline: Deadline | None
) -> Solution:
    """`forced` plus the other sessions, packed as well as the deadline allows; `fallback` unless it is
    proven the best plan holding `forced` (with the other sessions worth (0, r, t))."""
    certificate = certified_placement(problem, packer, forced)
    if certificate is None:  # packed values past int64 (the surrogate and the search add them): best fit
        rooms = list(problem.room)
        for i, b in forced.items():
            rooms[b] -= problem.size[i]
        allowed = {i: [b for b, v in enumerate(row) if v is not None] for i, row in enumerate(problem.values)}
        others = [i for i in range(problem.n) if i not in forced]
        extra, _ = best_fit(others, list(problem.size), rooms, allowed)
        return Solution({**forced, **extra}, "bfd", fallback=True)
    return solve_certified(problem, packer, certificate, state_budget, deadline)


def solve_certified(
    problem: Problem, packer: Packer, certificate: Certificate, state_budget: int, deadline: Deadline | None
) -> Solution:
    """The best plan holding `certificate.forced`: the certificate's, or the residual finished."""
    if certificate.proven:
        return Solution(placement=certificate.placement, solver="dp")
    return _solve_residual(problem, packer, certificate, state_budget, deadline)


def _solve_residual(
    problem: Problem, packer: Packer, certificate: Certificate, state_budget: int, deadline: Deadline | None
) -> Solution:
    """What the certificate left open (the sessions outside its forced K-optimal placements): branch
    and bound, then the DP; the certificate's placement is the first incumbent."""
    if deadline is not None and deadline.passed():  # credit ties: the K-optimal options before took the time
        return Solution(placement=certificate.placement, solver="split", fallback=True)
    sub, back = residual_problem(problem, certificate.forced)
    sub_packer = Packer.for_problem(sub)
    forward = {i: k for k, i in enumerate(back)}
    sub_incumbent = {forward[i]: b for i, b in certificate.placement.items() if i not in certificate.forced}
    improver = cache(lambda: Improver(sub, sub_packer))  # its tables built once, when a repair below needs
    # them (~0.5 ms at 160 x 8)
    if sub.restricted:
        # with eligibility subsets a large residual's search (~0.5 ms a node at 160 x 8) often ends
        # unproven on the incumbent it started from: repaired first (~0.3 ms there), that is never worse
        # than the repair alone the planner used to return
        sub_incumbent = improver().improve(sub_incumbent, passes=1, deadline=deadline)
    # the searches' bound merges the rooms: sessions pinned to a full one spill over
    # (planner/bounds/lexicographic.py)
    ceiling = confined_bound(sub, sub_packer)
    # a short search settles most residuals; the rest get the repaired incumbent (it prunes more)
    searched = solve_residual(sub, sub_packer, sub_incumbent, _QUICK_NODES, deadline, ceiling=ceiling)
    nodes = searched.nodes
    if (not searched.proven and sub.restricted and sub.n * sub.m <= _LEVEL_PAIRS
            and (deadline is None or deadline.left() >= _LEVEL_MIN_S)):
        # eligibility subsets: the search's nested bound forgets them, the K level's knapsacks keep them
        level = packed_level(sub, sub_packer, None if deadline is None else deadline.share(_LEVEL_SHARE))
        if level is not None and level.proven:
            return Solution(placement=_lift(certificate, back, level.placement), solver="dp", states=nodes)
        if level is not None and (total_value(sub, sub_packer, level.placement)
                                  > total_value(sub, sub_packer, searched.placement)):
            searched = replace(searched, placement=level.placement)
    if not searched.proven:
        sub_incumbent = improver().improve(searched.placement, deadline=deadline)
        searched = solve_residual(sub, sub_packer, sub_incumbent, _BRANCH_NODES - nodes, deadline,
                                  root_tries=NODE_TRIES, ceiling=ceiling)  # the same root as the first's
        nodes += searched.nodes
    if searched.proven:
        return Solution(placement=_lift(certificate, back, searched.placement), solver="dp", states=nodes)
    if searched.placement != sub_incumbent:  # else it is the repaired incumbent already
        sub_incumbent = improver().improve(searched.placement, deadline=deadline)
    if deadline is not None and deadline.passed():  # the DP's set-up alone would overrun it
        return Solution(placement=_lift(certificate, back, sub_incumbent), solver="split", states=nodes,
                        fallback=True)
    try:
        better, states = exact_dp(sub, sub_packer, state_budget, total_value(sub, sub_packer, sub_incumbent),
                                  deadline=deadline)
    except BudgetExceeded as exc:
        return Solution(placement=_lift(certificate, back, sub_incumbent), solver="split",
                        states=nodes + exc.states, fallback=True)
    solved = sub_incumbent if better is None else better
    return Solution(placement=_lift(certificate, back, solved), solver="dp", states=nodes + states)


def _lift(certificate: Certificate, back: list[int], placement: dict[int, int]) -> dict[int, int]:
    """A residual placement as a placement of the whole problem: the forced part plus it."""
    return {**certificate.forced, **{back[k]: b for k, b in placement.items()}}
