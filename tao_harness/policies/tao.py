"""TAO: admit the waiting sessions maximizing (K, R, T, N) lexicographically, exactly (paper §3).

One class serves the paper's Table 4 ablations through three switches: `solver="bfd"` (BFD instead of
the DP), `use_readiness=False` (r = 0 in the objective) and `use_cache=False` (k = 0). Interrupts follow
policies/interrupts.py with the same (possibly ablated) value triple. Assignments report the true value
triple, so plans of different policies compare on one scale; they are listed highest value first,
after the admissions of requests that reached the wait bound (policies/aging.py), which come before all.
"""

from __future__ import annotations

from time import perf_counter

from tao_harness.config import PlannerConfig
from tao_harness.planner import (Deadline, Method, Problem, Solution, Value, build_problem, objective, solve,
                                 warm_up)
from tao_harness.policies.common import assignment, by_value, make_plan
from tao_harness.policies.aging import Aged, admit_overdue
from tao_harness.policies.interrupts import kept_value, plan_interrupts
from tao_harness.types import Assignment, Plan, SessionView, Snapshot, objective_of


class TaoPolicy:
    admission_control = True
    plans_on_timer = False

    def __init__(
        self,
        config: PlannerConfig,
        *,
        name: str = "tao",
        solver: Method = "dp",
        use_readiness: bool = True,
        use_cache: bool = True,
    ) -> None:
        self.name = name
        self.config = config
        self.solver: Method = solver
        self.use_readiness = use_readiness
        self.use_cache = use_cache
        if solver == "dp":  # best-fit-decreasing runs no compiled kernel
            warm_up()  # the planner's compiled kernels loaded now, not within the first plan's deadline

    def view(self, snapshot: Snapshot) -> "_View":
        return _View(snapshot, self.use_cache, self.use_readiness)

    def admission_problem(self, snapshot: Snapshot) -> Problem:
        """The problem the exact program solves for `snapshot` (`Plan.solved` is its objective there): the
        waiting pool once the overdue sessions are admitted, valued as this policy sees it."""
        return self._admission(snapshot)[1]

    def _admission(self, snapshot: Snapshot) -> tuple[Aged, Problem]:
        aged = admit_overdue(snapshot, kept_value(snapshot, self.view(snapshot)))
        problem = build_problem(aged.rest, aged.rest.waiting, use_cache=self.use_cache,
                                use_readiness=self.use_readiness)
        return aged, problem

    def plan(self, snapshot: Snapshot) -> Plan:
        start = perf_counter()
        aged, problem = self._admission(snapshot)
        overdue = [assignment(snapshot, s, node_id) for s, node_id in aged.admitted]
        snapshot = aged.rest
        waiting = snapshot.waiting
        solution = solve(problem, state_budget=self.config.state_budget, method=self.solver,
                         deadline=Deadline.after(self.config.deadline_ms / 1000, self.config.deadline_clock,
                                                 self.config.min_cpu_ms / 1000))
        placement = dict(solution.placement)
        solved = objective(problem, placement)
        chosen = by_value(self._assignment(snapshot, problem, waiting[i], i, b) for i, b in placement.items())
        extra, interrupts = plan_interrupts(snapshot, problem, placement, waiting, self.view(snapshot),
                                            self.use_readiness)
        chosen = overdue + chosen + [assignment(snapshot, s, node_id) for s, node_id in extra]
        interrupts = [*aged.interrupts, *interrupts]
        return make_plan(self.name, solution.solver, chosen, interrupts=interrupts,
                         solve_ms=(perf_counter() - start) * 1000, states=solution.states,
                         fallback=solution.fallback, bound=_plan_bound(solution, solved, chosen),
                         solved=solved)

    def _assignment(
        self, snapshot: Snapshot, problem: Problem, session: SessionView, i: int, b: int
    ) -> Assignment:
        value = problem.values[i][b]
        if self.use_cache and self.use_readiness and value is not None:  # already the true triple
            return Assignment(session.id, problem.node_ids[b], value)
        return assignment(snapshot, session, problem.node_ids[b])


def _plan_bound(
    solution: Solution, solved: tuple[int, int, int, int], chosen: list[Assignment]
) -> tuple[int, int, int, int] | None:
    """The solver's bound moved onto the plan's objective: the plan's objective plus what the bound
    exceeds the solver's (possibly ablated) objective `solved` by, term by term. The interrupt-enabled
    admissions and the true values of ablated terms add the same to both, so the gap is the solver's."""
    if solution.bound is None:
        return None
    return tuple(p + b - s for p, b, s in zip(objective_of(chosen), solution.bound, solved))  # type: ignore


class _View:
    """The value triple as this policy sees it (ablated components zeroed)."""

    def __init__(self, snapshot: Snapshot, use_cache: bool, use_readiness: bool) -> None:
        self.snapshot, self.use_cache, self.use_readiness = snapshot, use_cache, use_readiness

    def __call__(self, session: SessionView, node_id: str) -> Value:
        k, r, t = self.snapshot.value(session, node_id)
        return (k if self.use_cache else 0, r if self.use_readiness else 0, t)
