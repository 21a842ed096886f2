"""The TAO planner entry point: the lexicographic optimum of the discretized admission problem, or,
when its deadline passes first, the best plan found with a certified bound (`Solution.bound`).

Cheapest proof first: the decomposition certificate (planner/certificate.py) settles the usual
snapshot (credit on at most one node per session) with a few 1-D knapsacks. It is computed for each
K-optimal placement of the credited sessions (planner/credit.py; one, unless credits tie) and the best
outcome kept. When its bound is not reached, only the residual it leaves is searched (the K-optimal
placements are provably in every optimum): without eligibility subsets R*, the most ready sessions any
plan admits, is settled by packing the smallest ready sessions (planner/ready_cap.py) and seeds the
incumbent; then a bin-completion branch and bound under the nested bound (planner/bins.py,
planner/nested.py; eligibility subsets respected) settles most residuals within a small node limit: a
short search first, then, with its best placement repaired room by room (planner/improve.py), the rest
of the limit. What it leaves goes to the capacity-state DP (planner/dp.py).

Every other snapshot (credit on several nodes, credits tied more ways than a few) takes the general
path: the Lagrangian K level (planner/lagrange.py) proves a bound K̄ and finds a K-placement, usually
K-optimal; the rest of the sessions are packed and searched around it as above (on large problems with
eligibility subsets, repaired instead), and the whole problem's DP, from that incumbent, gets what is
left of the deadline (it settles small problems).

Every solution carries a lexicographic upper bound (planner/bound.py): equal to its objective when it is
proven optimal, else K̄ and the surrogate bound on (R, T, N), so its proven gap is explicit. Past the
DP's state budget or the deadline, the best incumbent is returned with `fallback=True`. Pure function of
the `Problem` (the deadline only stops the search early); no I/O.
"""

from __future__ import annotations

from typing import Literal

from tao_harness.planner.bfd import best_fit_decreasing
from tao_harness.planner.bins import NODE_TRIES, solve_residual
from tao_harness.planner.bound import bound_holding, lexicographic_bound
from tao_harness.planner.certificate import Certificate, certified_placement, residual_problem
from tao_harness.planner.credit import k_optimal_options
from tao_harness.planner.deadline import Deadline
from tao_harness.planner.dp import BudgetExceeded, exact_dp
from tao_harness.planner.improve import improve
from tao_harness.planner.k_unique import k_common_pairs, k_optimal_placements
from tao_harness.planner.lagrange import k_level
from tao_harness.planner.problem import Packer, Problem, Solution, objective, total_value
from tao_harness.planner.ready_cap import max_ready
from tao_harness.planner.split import best_fit
from tao_harness.planner.spread import spread
from tao_harness.planner.twins import with_better_twins

Method = Literal["dp", "bfd"]

_TIE_OPTIONS = 4  # K-optimal options (credit ties) finished one by one before the DP takes the whole
_BRANCH_NODES = 80  # nested bounds the residual's branch and bound may evaluate (~0.2 ms each)
_QUICK_NODES = 16  # of which the first search, before the incumbent is repaired (enough for most)
_K_SHARE = 0.85  # of the deadline, for the K level on the general path (K comes first)
_REST_SHARE = 0.3  # of the time left, for the search of (R, T, N) once K is settled: K is what matters most,
# and past a few milliseconds that search rarely finishes on large problems (the plan keeps its proven gap)
_REST_S = 0.003  # and at most this, whatever the deadline
_WHOLE_DP_SESSIONS = 30  # the general path's last try, the whole problem's DP, only up to this many


def solve(
    problem: Problem, *, state_budget: int, method: Method = "dp", deadline: Deadline | None = None
) -> Solution:
    """Best placement of `problem`'s sessions; `method="bfd"` skips the exact search. `deadline`
    stops the search: the best placement found is returned, unproven.

    Among equally valued placements the one spreading credit-less sessions over the nodes is returned.
    """
    packer = Packer.for_problem(problem)
    if problem.n == 0 or problem.m == 0:
        return Solution(placement={}, solver="dp", bound=(0, 0, 0, 0))
    if method == "bfd":
        return best_fit_decreasing(problem, packer)
    solution = _solve_exact(problem, packer, state_budget, deadline)
    return Solution(placement=spread(problem, dict(solution.placement)), solver=solution.solver,
                    states=solution.states, fallback=solution.fallback, bound=solution.bound)


def _solve_exact(problem: Problem, packer: Packer, state_budget: int, deadline: Deadline | None) -> Solution:
    options = k_optimal_options(problem, _TIE_OPTIONS) or []
    certificates = [c for c in (certified_placement(problem, packer, forced) for forced in options) if c]
    if not certificates or len(certificates) < len(options):
        return _solve_general(problem, packer, state_budget, deadline)
    # every optimal plan holds one of the K-optimal options: the best of the options' optima is optimal
    rest = None if deadline is None else deadline.share(_REST_SHARE, _REST_S)
    solutions = [_solve_certified(problem, packer, c, state_budget, rest) for c in certificates]
    best = max(solutions, key=lambda s: total_value(problem, packer, s.placement))
    states = sum(s.states for s in solutions)
    if not any(s.fallback for s in solutions):
        return Solution(best.placement, best.solver, states=states, bound=objective(problem, best.placement))
    # every plan at K* holds one of the options: the best bound around them holds for every plan
    k_star = objective(problem, options[0])[0]
    bound = max(bound_holding(problem, c.forced, k_star) for c in certificates)
    return Solution(best.placement, "split" if best.solver == "dp" else best.solver, states=states,
                    fallback=True, bound=bound)


def _solve_general(problem: Problem, packer: Packer, state_budget: int, deadline: Deadline | None) -> Solution:
    """The Lagrangian K level, the rest packed around it (around each K-optimal placement, when the
    probes leave a few), then (small problems) the whole DP."""
    level = k_level(problem, None if deadline is None else deadline.share(_K_SHARE))
    rest = None if deadline is None else deadline.share(_REST_SHARE, _REST_S)
    # twins swap only within K-optimal placements: around one short of K* a twin may hold credit elsewhere
    forced = with_better_twins(problem, level.placement) if level.proven else level.placement
    around = _complete(problem, packer, forced, state_budget, rest)
    placement, states = dict(around.placement), around.states
    bound = lexicographic_bound(problem, packer, level.bound)
    if objective(problem, placement) == bound:
        return Solution(placement, "dp", states=states, bound=bound)
    if level.proven:
        common = k_common_pairs(problem, level.value, None if deadline is None else
                                deadline.share(_REST_SHARE, _REST_S))
        if not around.fallback and common.only(forced):
            # the best plan holding the only K-optimal credited pairs: the optimum
            return Solution(placement, "dp", states=states, bound=objective(problem, placement))
        options = None if common.complete else k_optimal_placements(problem, common, level.value, _TIE_OPTIONS)
        if options and forced in options:
            # every K-optimal plan holds one of them: the best plan around each, as the certificate's ties,
            # in what the search around `forced` left of the rest's time
            finished = _around_each(problem, packer, options, forced, around, state_budget, rest)
            placement, states = dict(finished.placement), states + finished.states
            if not finished.fallback:
                return Solution(placement, "dp", states=states, bound=objective(problem, placement))
            bound = min(bound, max(bound_holding(problem, option, level.bound) for option in options))
        else:  # every K-optimal plan holds the common pairs: the rest around them bounds its (R, T, N)
            bound = min(bound, bound_holding(problem, common.pairs, level.bound))
        if objective(problem, placement) == bound:
            return Solution(placement, "dp", states=states, bound=bound)
    if problem.n > _WHOLE_DP_SESSIONS:
        return Solution(placement, "lagrange", states=states, fallback=True, bound=bound)
    try:
        better, more = exact_dp(problem, packer, state_budget, total_value(problem, packer, placement),
                                deadline=deadline)
    except BudgetExceeded as exc:
        return Solution(placement, "lagrange", states=states + exc.states, fallback=True, bound=bound)
    solved = placement if better is None else better
    return Solution(solved, "dp", states=states + more, bound=objective(problem, solved))


def _around_each(problem: Problem, packer: Packer, options: list[dict[int, int]], searched: dict[int, int],
                 around: Solution, state_budget: int, rest: Deadline | None) -> Solution:
    """The best plan around each K-optimal placement of `options` (`around` is the one around `searched`,
    done already) as far as `rest` allows; `fallback` unless each was proven the best around its placement."""
    solutions, unfinished = [around], False
    for option in options:
        if option == searched:
            continue
        if rest is not None and rest.passed():
            unfinished = True  # the options left are not searched: no proof
            break
        solutions.append(_complete(problem, packer, option, state_budget, rest))
    best = max(solutions, key=lambda s: total_value(problem, packer, s.placement))
    return Solution(best.placement, best.solver, states=sum(s.states for s in solutions[1:]),
                    fallback=unfinished or any(s.fallback for s in solutions))


def _complete(
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
    return _solve_certified(problem, packer, certificate, state_budget, deadline)


def _solve_certified(
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
    if sub.restricted:
        # with eligibility subsets a large residual's search (~0.5 ms a node at 160 x 8) often ends
        # unproven on the incumbent it started from: repaired first (~0.3 ms there), that is never worse
        # than the repair alone the planner used to return
        sub_incumbent = improve(sub, sub_packer, sub_incumbent, passes=1, deadline=deadline)
    cap = None  # R* by packing the smallest ready sessions: with eligibility subsets that proves nothing
    if not sub.restricted:
        cap = max_ready([k for k in range(sub.n) if sub.values[k][0][1] == 1], list(sub.size), list(sub.room))
    if cap is not None:
        seeded = _fill_around(sub, sub_packer, cap.placement)
        if total_value(sub, sub_packer, seeded) > total_value(sub, sub_packer, sub_incumbent):
            sub_incumbent = seeded
    # a short search settles most residuals; the rest get the repaired incumbent (it prunes more)
    searched = solve_residual(sub, sub_packer, sub_incumbent, cap, _QUICK_NODES, deadline)
    nodes = searched.nodes
    if not searched.proven:
        sub_incumbent = improve(sub, sub_packer, searched.placement, deadline=deadline)
        searched = solve_residual(sub, sub_packer, sub_incumbent, cap, _BRANCH_NODES - nodes, deadline,
                                  root_tries=NODE_TRIES)  # the same root as the first search's
        nodes += searched.nodes
    if searched.proven:
        return Solution(placement=_lift(certificate, back, searched.placement), solver="dp", states=nodes)
    if searched.placement != sub_incumbent:  # else it is the repaired incumbent already
        sub_incumbent = improve(sub, sub_packer, searched.placement, deadline=deadline)
    if deadline is not None and deadline.passed():  # the DP's set-up alone would overrun it
        return Solution(placement=_lift(certificate, back, sub_incumbent), solver="split", states=nodes,
                        fallback=True)
    try:
        better, states = exact_dp(sub, sub_packer, state_budget, total_value(sub, sub_packer, sub_incumbent),
                                  ready_cap=None if cap is None else cap.count, deadline=deadline)
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
