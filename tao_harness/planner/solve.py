"""The TAO planner entry point: exact lexicographic optimum of the discretized admission problem.

Cheapest proof first: the decomposition certificate (planner/certificate.py) settles the usual
snapshot with a few 1-D knapsacks. When it applies but its bound is not reached, the capacity-state DP
(planner/dp.py) finishes only the residual problem it leaves (the K-optimal placements are provably in
every optimum). There R* — the most ready sessions any plan admits — is settled first by packing the
smallest ready sessions (planner/ready_cap.py); it caps the DP's bound and seeds its incumbent. Every
incumbent (best-fit-decreasing, the certificate's split, the R* packing) is repaired room by room and
pair by pair (planner/improve.py) before the DP starts, since a better incumbent prunes more. When the
certificate does not apply, the DP solves the whole problem. Past the state budget the incumbent is
returned with `fallback=True` (solver "bfd", or "split" when it came from the certificate's residual).
Pure function of the `Problem`; no I/O.
"""

from __future__ import annotations

from typing import Literal

from tao_harness.planner.bfd import best_fit_decreasing
from tao_harness.planner.certificate import Certificate, best_fit, certified_placement, residual_problem
from tao_harness.planner.dp import BudgetExceeded, exact_dp
from tao_harness.planner.improve import improve
from tao_harness.planner.problem import Packer, Problem, Solution, total_value
from tao_harness.planner.ready_cap import max_ready
from tao_harness.planner.spread import spread

Method = Literal["dp", "bfd"]


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
    certificate = certified_placement(problem, packer)
    if certificate is not None and certificate.proven:
        return Solution(placement=certificate.placement, solver="dp")
    incumbent, incumbent_solver = best_fit_decreasing(problem, packer).placement, "bfd"
    if certificate is not None:
        if total_value(problem, packer, certificate.placement) > total_value(problem, packer, incumbent):
            incumbent, incumbent_solver = certificate.placement, "split"
        return _solve_residual(problem, certificate, incumbent, incumbent_solver, state_budget)
    incumbent = improve(problem, packer, incumbent)
    try:
        better, states = exact_dp(problem, packer, state_budget, total_value(problem, packer, incumbent))
    except BudgetExceeded as exc:
        return Solution(placement=incumbent, solver=incumbent_solver, states=exc.states, fallback=True)
    return Solution(placement=incumbent if better is None else better, solver="dp", states=states)


def _solve_residual(
    problem: Problem, certificate: Certificate, incumbent: dict[int, int], incumbent_solver: str,
    state_budget: int,
) -> Solution:
    """DP over what the certificate left open: the sessions outside its forced K-optimal placements."""
    sub, back = residual_problem(problem, certificate.forced)
    sub_packer = Packer.for_problem(sub)
    forward = {i: k for k, i in enumerate(back)}
    # The incumbent is K-optimal (it is at least as good as the certificate's), so it holds `forced`.
    sub_incumbent = {forward[i]: b for i, b in incumbent.items() if i not in certificate.forced}
    cap = max_ready([k for k in range(sub.n) if sub.values[k][0][1] == 1], list(sub.size), list(sub.room))
    if cap is not None:
        seeded = _fill_around(sub, sub_packer, cap.placement)
        if total_value(sub, sub_packer, seeded) > total_value(sub, sub_packer, sub_incumbent):
            sub_incumbent, incumbent_solver = seeded, "split"
    improved = improve(sub, sub_packer, sub_incumbent)
    if improved != sub_incumbent:
        sub_incumbent, incumbent_solver = improved, "split"
    incumbent = {**certificate.forced, **{back[k]: b for k, b in sub_incumbent.items()}}
    try:
        better, states = exact_dp(sub, sub_packer, state_budget, total_value(sub, sub_packer, sub_incumbent),
                                  ready_cap=None if cap is None else cap.count)
    except BudgetExceeded as exc:
        return Solution(placement=incumbent, solver=incumbent_solver, states=exc.states, fallback=True)
    if better is None:
        better = sub_incumbent
    return Solution(placement={**certificate.forced, **{back[k]: b for k, b in better.items()}}, solver="dp",
                    states=states)


def _fill_around(problem: Problem, packer: Packer, placed: dict[int, int]) -> dict[int, int]:
    """`placed` plus the other sessions, highest value first, best-fit into the rooms left."""
    left = list(problem.room)
    for i, b in placed.items():
        left[b] -= problem.size[i]
    gains = [packer.pack(row[0]) if row[0] is not None else 0 for row in problem.values]
    others = sorted((i for i in range(problem.n) if i not in placed), key=lambda i: (-gains[i], i))
    extra, _ = best_fit(others, list(problem.size), left)
    return {**placed, **extra}
