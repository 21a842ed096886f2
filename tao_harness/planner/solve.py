"""The TAO planner entry point: exact lexicographic optimum of the discretized admission problem.

Cheapest proof first: the decomposition certificate (planner/certificate.py) settles the usual
snapshot with a few 1-D knapsacks. It is computed for each K-optimal placement of the credited sessions
(planner/credit.py; one, unless credits tie) and the best outcome kept. When its bound is not reached,
only the residual it leaves is searched (the K-optimal placements are provably in every optimum): R*,
the most ready sessions any plan admits, is settled by packing the smallest ready sessions
(planner/ready_cap.py) and seeds the incumbent; then a bin-completion branch and bound under the nested
bound (planner/bins.py, planner/nested.py) settles nearly all residuals within a small node limit: a
short search first, then, with its best placement repaired room by room (planner/improve.py), the rest
of the limit. What it leaves goes to the capacity-state DP (planner/dp.py), which also solves the whole
problem when the certificate does not apply. Past the DP's state budget, or once its growth projects
past it, the incumbent is returned with `fallback=True` (solver "bfd", or "split" when it came from the
certificate's residual). Pure function of the `Problem`; no I/O.
"""

from __future__ import annotations

from typing import Literal

from tao_harness.planner.bfd import best_fit_decreasing
from tao_harness.planner.bins import solve_residual
from tao_harness.planner.certificate import Certificate, best_fit, certified_placement, residual_problem
from tao_harness.planner.credit import k_optimal_options
from tao_harness.planner.dp import BudgetExceeded, exact_dp
from tao_harness.planner.improve import improve
from tao_harness.planner.problem import Packer, Problem, Solution, total_value
from tao_harness.planner.ready_cap import max_ready
from tao_harness.planner.spread import spread

Method = Literal["dp", "bfd"]

_TIE_OPTIONS = 4  # K-optimal options (credit ties) finished one by one before the DP takes the whole
_BRANCH_NODES = 80  # nested bounds the residual's branch and bound may evaluate (~0.2 ms each)
_QUICK_NODES = 16  # of which the first search, before the incumbent is repaired (enough for most)


def solve(problem: Problem, *, state_budget: int, method: Method = "dp") -> Solution:
    """Best placement of `problem`'s sessions; `method="bfd"` skips the exact search.

    Among equally valued placements the one spreading credit-less sessions over the nodes is returned.
    """
    packer = Packer.for_problem(problem)
    if method == "bfd" or problem.n == 0 or problem.m == 0:
        return best_fit_decreasing(problem, packer)
    solution = _solve_exact(problem, packer, state_budget)
    return Solution(placement=spread(problem, dict(solution.placement)), solver=solution.solver,
                    states=solution.states, fallback=solution.fallback)


def _solve_exact(problem: Problem, packer: Packer, state_budget: int) -> Solution:
    options = k_optimal_options(problem, _TIE_OPTIONS) or []
    certificates = [c for c in (certified_placement(problem, packer, forced) for forced in options) if c]
    if not certificates or len(certificates) < len(options):
        return _solve_by_dp(problem, packer, state_budget)
    # every optimal plan holds one of the K-optimal options: the best of the options' optima is optimal
    solutions = [_solve_certified(problem, c, state_budget) for c in certificates]
    best = max(solutions, key=lambda s: total_value(problem, packer, s.placement))
    if not any(s.fallback for s in solutions):
        return Solution(best.placement, best.solver, states=sum(s.states for s in solutions))
    return Solution(best.placement, "split" if best.solver == "dp" else best.solver,
                    states=sum(s.states for s in solutions), fallback=True)


def _solve_by_dp(problem: Problem, packer: Packer, state_budget: int) -> Solution:
    """The whole problem by the DP, from the repaired best-fit-decreasing placement."""
    incumbent = improve(problem, packer, best_fit_decreasing(problem, packer).placement)
    try:
        better, states = exact_dp(problem, packer, state_budget, total_value(problem, packer, incumbent))
    except BudgetExceeded as exc:
        return Solution(placement=incumbent, solver="bfd", states=exc.states, fallback=True)
    return Solution(placement=incumbent if better is None else better, solver="dp", states=states)


def _solve_certified(problem: Problem, certificate: Certificate, state_budget: int) -> Solution:
    """The best plan holding `certificate.forced`: the certificate's, or the residual finished."""
    if certificate.proven:
        return Solution(placement=certificate.placement, solver="dp")
    return _solve_residual(problem, certificate, state_budget)


def _solve_residual(problem: Problem, certificate: Certificate, state_budget: int) -> Solution:
    """What the certificate left open (the sessions outside its forced K-optimal placements): branch
    and bound, then the DP; the certificate's placement is the first incumbent."""
    sub, back = residual_problem(problem, certificate.forced)
    sub_packer = Packer.for_problem(sub)
    forward = {i: k for k, i in enumerate(back)}
    sub_incumbent = {forward[i]: b for i, b in certificate.placement.items() if i not in certificate.forced}
    cap = max_ready([k for k in range(sub.n) if sub.values[k][0][1] == 1], list(sub.size), list(sub.room))
    if cap is not None:
        seeded = _fill_around(sub, sub_packer, cap.placement)
        if total_value(sub, sub_packer, seeded) > total_value(sub, sub_packer, sub_incumbent):
            sub_incumbent = seeded
    # a short search settles most residuals; the rest get the repaired incumbent (it prunes more)
    searched = solve_residual(sub, sub_packer, sub_incumbent, cap, _QUICK_NODES)
    nodes = searched.nodes
    if not searched.proven:
        sub_incumbent = improve(sub, sub_packer, searched.placement)
        searched = solve_residual(sub, sub_packer, sub_incumbent, cap, _BRANCH_NODES - nodes)
        nodes += searched.nodes
    if searched.proven:
        return Solution(placement=_lift(certificate, back, searched.placement), solver="dp", states=nodes)
    if searched.placement != sub_incumbent:  # else it is the repaired incumbent already
        sub_incumbent = improve(sub, sub_packer, searched.placement)
    try:
        better, states = exact_dp(sub, sub_packer, state_budget, total_value(sub, sub_packer, sub_incumbent),
                                  ready_cap=None if cap is None else cap.count)
    except BudgetExceeded as exc:
        return Solution(placement=_lift(certificate, back, sub_incumbent), solver="split",
                        states=nodes + exc.states, fallback=True)
    solved = sub_incumbent if better is None else better
    return Solution(placement=_lift(certificate, back, solved), solver="dp", states=nodes + states)


def _lift(certificate: Certificate, back: list[int], placement: dict[int, int]) -> dict[int, int]:
    """A residual placement as a placement of the whole problem: the forced part plus it."""
    return {**certificate.forced, **{back[k]: b for k, b in placement.items()}}


def _fill_around(problem: Problem, packer: Packer, placed: dict[int, int]) -> dict[int, int]:
    """`placed` plus the other sessions, highest value first, best-fit into the rooms left."""
    left = list(problem.room)
    for i, b in placed.items():
        left[b] -= problem.size[i]
    gains = [packer.pack(row[0]) if row[0] is not None else 0 for row in problem.values]
    others = sorted((i for i in range(problem.n) if i not in placed), key=lambda i: (-gains[i], i))
    extra, _ = best_fit(others, list(problem.size), left)
    return {**placed, **extra}
