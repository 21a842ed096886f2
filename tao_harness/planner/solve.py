"""The TAO planner entry point: the lexicographic optimum of the discretized admission problem, or,
when its deadline passes first, the best plan found with a certified bound (`Solution.bound`).

Cheapest proof first: the decomposition certificate (planner/bounds/certificate.py) settles the usual
snapshot (credit on at most one node per session) with a few 1-D knapsacks. It is computed for each
K-optimal placement of the credited sessions (planner/bounds/credit.py; one, unless credits tie) and the best
outcome kept. When its bound is not reached, only the residual it leaves is searched (the K-optimal
placements are provably in every optimum; planner/rest/around.py).

Every other snapshot (credit on several nodes, credits tied more ways than a few) takes the general
path: the Lagrangian K level (planner/k/lagrange.py) proves a bound K̄ and finds a K-placement, usually
K-optimal; the rest of the sessions are packed and searched around it as above (with eligibility subsets
the incumbent is repaired first). When K̄ is reached, the Lagrangian's probes (planner/k/unique.py) find
the credited pairs every K-optimal placement holds: all of them (the plan is then optimal when the rest
is), or all but a few sessions' ways, and then, if at most `_LISTED_OPTIONS` K-optimal placements are
left (more on smaller problems), each is bounded and the rest is searched around them, highest bound first,
in the time left, until the best plan reaches the bound of those not searched (a proof). The whole
problem's DP, from the incumbent, gets what is left of the deadline (it settles small problems).

Every solution carries a lexicographic upper bound (planner/bounds/lexicographic.py): equal to its objective
when it is proven optimal, else K̄ and the surrogate bound on (R, T, N) around what every K-optimal plan holds
(the certificate's options, the common pairs, or each K-optimal placement listed), so its proven gap is
explicit. Past the DP's state budget or the deadline, the best incumbent, its rooms re-packed over every
session (the searches held its K placement fixed; planner/packing/improve.py), is returned with
`fallback=True`. Pure function of the `Problem` (the deadline only stops the search early); no I/O.
"""

from __future__ import annotations

from typing import Literal

from tao_harness.planner.bfd import best_fit_decreasing
from tao_harness.planner.bounds.certificate import certified_placement
from tao_harness.planner.bounds.credit import k_optimal_options
from tao_harness.planner.bounds.lexicographic import Objective, bound_holding, lexicographic_bound
from tao_harness.planner.k.lagrange import k_level
from tao_harness.planner.k.twins import with_better_twins
from tao_harness.planner.k.unique import k_common_pairs, k_optimal_placements
from tao_harness.planner.packing.improve import improve
from tao_harness.planner.rest.around import complete_around, solve_certified
from tao_harness.planner.rest.dp import BudgetExceeded, exact_dp
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.problem import Packer, Problem, Solution, objective, total_value
from tao_harness.planner.spread import spread

Method = Literal["dp", "bfd"]

_LISTED_OPTIONS = 16  # K-optimal placements the general path lists and searches around at 160 x 8, as
# time allows, times _smallness below (small lex-exact 164 -> 167 of 213 against 4; each search around one
# costs ~0.2 ms at 32 x 4)
_TIE_OPTIONS = 4  # K-optimal options (credit ties) finished one by one before the DP takes the whole
_K_SHARE = 0.85  # of the deadline, for the K level on the general path (K comes first)
_REST_SHARE = 0.3  # of the time left, for the search of (R, T, N) once K is settled: K is what matters most,
# and past a few milliseconds that search rarely finishes on large problems (the plan keeps its proven gap)
_REST_S = 0.003  # and at most this at 160 x 8 and past (the plan's 10 ms target there)
_LARGE_PAIRS = 160 * 8  # smaller problems get more (see _rest_deadline)
_REST_SHARE_MOST = 0.95  # of the time left, whatever the size (0.6 before: 32 x 8 residual searches cut at
# 15 ms missed the lexicographic optimum of 1 snapshot in 30 on each of five shapes; only 160 x 8 has a
# time target). What comes after shares the rest: at 24 x 4 and 20 x 8, where the whole DP follows, six
# shapes reached the optimum as often as before (335 -> 338 of 360)
_COMMON_S = 0.006  # at most, for the probes finding the pairs every K-optimal placement holds: with
# credit on several nodes for every session (160 x 8) they take 3-4 ms, and cut at 3 ms they proved none
# of 10 independent snapshots that they prove all of at 6 (each then optimal)
_REPACK_S = 0.002  # at most, for re-packing an unproven plan's rooms over every session (~1.2 ms at
# 160 x 8 on the `all` shape, 2.6 on `forks`; small lex-exact 123 -> 132-134 of 177, six shapes x 3 sizes)
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
    if solution.fallback:
        solution = _repacked(problem, packer, solution, deadline)
    return Solution(placement=spread(problem, dict(solution.placement)), solver=solution.solver,
                    states=solution.states, fallback=solution.fallback, bound=solution.bound)


def _solve_exact(problem: Problem, packer: Packer, state_budget: int, deadline: Deadline | None) -> Solution:
    options = k_optimal_options(problem, _TIE_OPTIONS) or []
    certificates = [c for c in (certified_placement(problem, packer, forced) for forced in options) if c]
    if not certificates or len(certificates) < len(options):
        return _solve_general(problem, packer, state_budget, deadline)
    # every optimal plan holds one of the K-optimal options: the best of the options' optima is optimal
    rest = _rest_deadline(problem, deadline)
    solutions = [solve_certified(problem, packer, c, state_budget, rest) for c in certificates]
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
    rest = _rest_deadline(problem, deadline)
    # twins swap only within K-optimal placements: around one short of K* a twin may hold credit elsewhere
    forced = with_better_twins(problem, level.placement) if level.proven else level.placement
    around = complete_around(problem, packer, forced, state_budget, rest)
    placement, states = dict(around.placement), around.states
    if not level.proven:
        bound = lexicographic_bound(problem, packer, level.bound)
        if objective(problem, placement) == bound:
            return Solution(placement, "dp", states=states, bound=bound)
    else:  # the bounds below hold the common pairs: at least as tight as the whole problem's (~0.6 ms)
        common = k_common_pairs(problem, level.value, None if deadline is None else
                                deadline.share(_REST_SHARE, _COMMON_S), level)
        if not around.fallback and common.only(forced):
            # the best plan holding the only K-optimal credited pairs: the optimum
            return Solution(placement, "dp", states=states, bound=objective(problem, placement))
        listed = round(_LISTED_OPTIONS * _smallness(problem))
        options = None if common.complete else k_optimal_placements(problem, common, level.value, listed)
        options_bound = None
        if options and forced in options:
            # every K-optimal plan holds one of them: the best plan around each, as the certificate's ties,
            # in what the search around `forced` left of the rest's time
            finished, options_bound = _around_each(problem, packer, options, forced, around, level.bound,
                                                   state_budget, rest)
            placement, states = dict(finished.placement), states + finished.states
            if not finished.fallback:
                return Solution(placement, "dp", states=states, bound=objective(problem, placement))
        # the options' bound, else (no options, or not all of them bounded in time) the rest around the
        # common pairs, which every K-optimal plan holds, bounds its (R, T, N)
        bound = options_bound or bound_holding(problem, common.pairs, level.bound)
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
                 around: Solution, k_bound: int, state_budget: int, rest: Deadline | None
                 ) -> tuple[Solution, Objective | None]:
    """The best plan around the K-optimal placements of `options` (every K-optimal plan holds one of them;
    `around` is the plan around `searched`, done already), and a bound on every plan: each searched, as far
    as `rest` allows, highest bound (planner/bounds/lexicographic.py) first, until the best plan reaches the
    bound of those left. `fallback` unless that proves the best plan optimal; the bound is None when `rest`
    passed before every option was bounded (~0.1 ms each at 32 x 8, 0.4 at 160 x 8)."""
    scored = []
    for option in options:
        if rest is not None and rest.passed():
            return Solution(around.placement, around.solver, fallback=True), None
        if option != searched:
            scored.append((bound_holding(problem, option, k_bound), option))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    best, best_objective, states = around, objective(problem, around.placement), 0
    unsettled = [bound_holding(problem, searched, k_bound)] if around.fallback else []
    for option_bound, option in scored:
        if option_bound <= best_objective:
            break  # neither this option nor those after it (lower bounds) holds a better plan
        if rest is not None and rest.passed():
            unsettled.append(option_bound)  # the highest bound of the options left
            break
        solution = complete_around(problem, packer, option, state_budget, rest)
        states += solution.states
        if solution.fallback:
            unsettled.append(option_bound)
        found = objective(problem, solution.placement)  # tuples order as the packed values do
        if found > best_objective:
            best, best_objective = solution, found
    bound = max([best_objective, *unsettled])
    return Solution(best.placement, best.solver, states=states, fallback=bound != best_objective), bound


def _repacked(problem: Problem, packer: Packer, solution: Solution, deadline: Deadline | None) -> Solution:
    """An unproven plan with its rooms re-packed over every session, as far as `deadline` allows
    (planner/packing/improve.py). The searches before held a K placement fixed and packed the rest around it;
    a re-pack may trade a placed credited session for an unplaced one worth the same credit there and more
    (r, t) (K cannot drop: the packed value is lexicographic). Proven when it reaches the bound."""
    until = None if deadline is None else deadline.share(1.0, _REPACK_S)
    placement = improve(problem, packer, dict(solution.placement), deadline=until)
    if placement == solution.placement:
        return solution
    proven = objective(problem, placement) == solution.bound
    return Solution(placement, "dp" if proven else solution.solver, states=solution.states,
                    fallback=not proven, bound=solution.bound)


def _rest_deadline(problem: Problem, deadline: Deadline | None) -> Deadline | None:
    """When the search of (R, T, N) around the K placements stops: a share of the time left, at most
    `_REST_S` at 160 x 8 and past, more on smaller problems, in proportion to the square of how much
    smaller: their K level is quick, and their rest searches cut at 3 ms (later at 15 ms, 32 x 8) missed
    optima they reach within the deadline. 32 x 8 and smaller get nearly the whole deadline."""
    if deadline is None:
        return None
    scale = _smallness(problem)
    return deadline.share(min(_REST_SHARE * scale, _REST_SHARE_MOST), _REST_S * scale * scale)


def _smallness(problem: Problem) -> float:
    """How many times smaller than 160 x 8 (sessions x nodes) `problem` is, at least 1: the time and the
    K-optimal placements its search of (R, T, N) may take grow by as much."""
    return max(1.0, _LARGE_PAIRS / max(1, problem.n * problem.m))
