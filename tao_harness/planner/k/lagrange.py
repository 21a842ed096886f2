"""The K level on any snapshot: a Lagrangian bound on K and a K-placement that usually meets it.

K counts cache credit, collected only by a session sitting on a node where it has credit, so the K
problem is a generalized assignment over the credited, eligible pairs: each session on at most one of
its credit nodes, no node's room exceeded (sizes do not depend on the node). Relaxing "at most one node"
with a multiplier λ_i ≥ 0 per session splits it into one 0-1 knapsack per node, items the sessions
credited there at profit k_ib − λ_i:

    L(λ) = Σ_i λ_i + Σ_b KP_b(λ)  ≥  K of every feasible placement        (weak duality)

Each KP_b is solved exactly (planner/shared/knapsack.py; the steps and the search's probes are compiled, in
planner/k/dual.py), so L(λ) is a proven bound for every λ; a session credited on one node only keeps
λ_i = 0; shared sessions start at the best of a few guesses (planner/k/start.py), and a few subgradient
steps settle most snapshots. What they leave at least `_LP_GAP` above the best placement (or, with flat
credits, everything) gets the LP relaxation (planner/k/lp.py, one HiGHS solve): its bound, its node prices as
multipliers when they bound better (L there is at most the LP bound), per pair a reduced-cost bound that
closes the pairs no better placement can use, and its whole placements, polished, as an incumbent. The
multipliers then follow a subgradient with Polyak steps toward the best placement found, and a depth-first
search splits what the root leaves (a session left uncredited leaves its larger twins so too). A small
root with flat credit (at most `_MIP_PAIRS` columns of HiGHS's model) gets the search for part of the time
and HiGHS's branch and cut for the rest (planner/k/mip.py): on tight packings (large sessions beside small
rooms) the Lagrangian bound sits up to a percent above the optimum, which splitting closes slowly and
HiGHS's cuts quickly. A root of few classes of alike sessions (forks of a few parents: at most
`_MIP_FIRST_COLUMNS` columns, whatever the credit) goes to HiGHS first: it counts each class per node,
where the search splits on copies one by one. A large graded root whose bound sits `_TWO_NODES_GAP` or more
above its best placement gives part of its time to re-solving the two nodes of most slack together
(planner/k/pairs.py), a move no node's re-pack or exchange makes.
Every K is a multiple of g, the gcd of the credits, so every bound is rounded down to one (with credits
in whole quanta or fixed amounts this alone closes many gaps). With flat credit a second bound comes from
packing alone (planner/k/ceiling.py, the size-nested surrogate): it caps every bound and ends the search
as soon as a placement reaches it.

Placements come from the knapsacks' choices: a session chosen on several nodes stays on its best one;
then left-out sessions are shifted in and each node is re-packed exactly over its sessions and the
unplaced ones, at every step whose repair is near the best one (compiled, planner/k/polish.py: the path's
many repairs polished find placements within ~0.1% of the optimum where the best one polished once was up
to 1% short), and once more on the best placement with pairs of rooms too (planner/packing/improve.py), or,
with graded credit and the bound not reached, with exchanges of sessions between nodes (planner/k/polish.py).
With flat credits (a session worth the same on each of its nodes) the LP's whole placements refilled
come first, then twenty polished steps from the LP's multipliers (the
packing-only ceiling computed after the first), each only while the best placement is short of the
bounds so far (copies snapshots at 160 x 8 settled by the first step: ~4.3 -> ~2.7 ms). Where they leave
the LP bound standing (it is usually tight: credits of a few sizes, fragmentation hides the placement
reaching it), the better of the LP's whole placements and the steps' placement is reshuffled toward that
bound. Where the steps bound K below the LP (small rooms, large sessions) the reshuffle is skipped for the
search.
When the placement's K reaches the bound it is proven K-optimal (at λ = 0 with credit on one node per
session this is the certificate's K level).

Bounded by iterations and the caller's deadline; the bound is valid whenever it stops (out of time before
the search, it is the best of the LP's and the first steps' bounds). Steps after the deadline are kept
few: a placement already refilled is not polished again (with credit on every node one polish takes
~10 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np

from tao_harness.planner.k.arrays import OPEN, DualArrays
from tao_harness.planner.k.ceiling import k_ceiling
from tao_harness.planner.k.dual import dual_steps, probe
from tao_harness.planner.k.lp import KRelaxation, k_relaxation
from tao_harness.planner.k.mip import Alike, k_branch_and_cut
from tao_harness.planner.k.pairs import pair_problem, widest_pair
from tao_harness.planner.k.polish import exchanged_placement, polish_placement
from tao_harness.planner.k.reshuffle import reshuffle
from tao_harness.planner.k.start import starting_multipliers
from tao_harness.planner.packing.improve import Improver
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import float_slack
from tao_harness.planner.shared.problem import Packer, Problem

_FIRST_ITERATIONS = 8  # subgradient steps before the LP relaxation is brought in (most settle by then)
_ITERATIONS = 40  # subgradient steps at most at the root (each solves the knapsacks whose profits changed)
_FLAT_STEPS = 20  # polished steps from the LP's multipliers that open the flat-credit path
_MIP_PAIRS = 300  # HiGHS's columns (planner/k/mip.py) at most for it to take over a flat search left open:
# the copies shape's hard roots have 170-220 pairs and HiGHS proves most in a few ms (150: 160 x 8 proven
# 91% -> 95%); the adversarial and degenerate ones (300-1,000) take it seconds either way
_MIP_FIRST_COLUMNS = 64  # HiGHS's columns at most for a root of alike sessions to go to it first, whatever
# the credit: independent 160 x 8 snapshots of forks in 11-14 classes (12-14 columns once the prices fixed
# the rest) it proves in 1-2 ms, where the search had left a 0.2-0.3% gap at 30 ms; with several shapes
# mixed (178-297 columns) it takes 50-300 ms
_MIP_FIRST_ALIKE = 4  # ... and only when its columns are this many times fewer than the pairs (sessions
# alike by fours on average): on small roots of sessions all unalike the search is faster (32 x 4 with any
# root of at most 64 columns first: multi 1.4 and eligible 1.5 times the time, the same proofs and optima)
_MIP_FIRST_SHARE = 0.9  # of the K level's time left, for HiGHS first (the search gets the rest if it proves
# none): on the clones shape at 160 x 8 it proved 25 of 40 given half, 32 given this (before its
# feasibility jump was turned off)
_LP_GAP = 0.005  # with graded credit, the LP relaxation (~1.2-1.6 ms at 160 x 8) only when the first steps
# leave the bound this share above the best placement: nearer, the search settles as often without it
# (160 x 8, 60 `everywhere` draws: 56 proven either way; independent multi-credit K levels 6.6 -> 5.8 ms)
_MIP_AFTER = 0.6  # of the K level's time left when the search starts, before HiGHS takes over
_TWO_NODES_GAP = 0.01  # the root's bound this share above its best placement or more, graded credit: ...
_TWO_NODES_PAIRS = 300  # ... on a root of at least this many open pairs (smaller ones the search proves more
# often given all the time: fleet 32 x 4, 88% -> 83% without this), ...
_TWO_NODES_AFTER = 0.6  # ... the search gets this share of the K level's time left, and the two nodes of most
# slack are re-solved together in the rest (planner/k/pairs.py). At 160 x 8 (the multipliers from
# planner/k/start.py) roots open at: independent `mixed` 1.25-1.6%, where the search proves none at 30 ms and
# the re-solve took mixed-3 from 0.5% to 0.1% short; `everywhere` 0.01-1.1%, where the search proves most of
# what it proves late (every graded root re-solved: proofs 94% -> 86%; re-solved before the search, in 30%
# of the time: 92.5% -> 90%); `fleet` 0.4-2.8%, `templates` 0.02-1.5%, none proven at 1% and above. A 1% gate
# against 1.5%: independent K +0.09%, fleet +0.009%, templates +0.003%, `everywhere` the same proofs
_CHILD_ITERATIONS = 6  # below the root (warm-started from the parent's multipliers), or before a split
_AFTER_PROBE_ITERATIONS = 2  # after probing closed or fixed pairs
_RESHUFFLES = 80  # rounds of the root's large-neighbourhood search at most (~1 ms each)
_RESHUFFLE_SHARE = 0.7  # of the K level's time left, for them
_NODES = 400  # sub-problems bounded at most (the caller's deadline usually ends the search first)
_STEP0 = 1.5  # the first subgradient step, as a share of the Polyak step toward the incumbent
_EXCHANGE_WORK = 400_000  # pairs x sessions at most for the unproven K level's last exchanges between nodes
# (planner/k/polish.py), which come after the K level's deadline: ~0.2-0.7 ms at 160 x 8 (fleet: ~200,000),
# where they gain; up to 4-6.5 ms on fleet 320 x 8 (~820,000) and 1-3 ms at 640 x 8


@dataclass(frozen=True, slots=True)
class KLevel:
    """What the Lagrangian established about K."""

    bound: int  # ≥ K of every feasible placement
    placement: dict[int, int]  # credited sessions on credit nodes; feasible
    value: int  # its K
    iterations: int = 0  # subgradient steps taken
    nodes: int = 0  # search nodes (sub-problems bounded)
    multipliers: np.ndarray | None = None  # λ per problem session, the root's latest as its probes narrowed
    # it (None: no step taken; any λ ≥ 0 bounds every sub-problem): where planner/k/unique.py's probes start
    # (its own steps from the second-best credits ended ~1% above K* after 30 steps on independent
    # multi-credit snapshots, and the probes found all the common pairs of 17 of 30; from these, of 22)
    arrays: DualArrays | None = None  # the credited pairs as the kernels read them (None: no credit), for
    # planner/k/unique.py's probes (building them again took ~0.3 ms at 160 x 8)
    step: int = 1  # the credits' gcd

    @property
    def proven(self) -> bool:
        return self.value >= self.bound


def credit_matrix(problem: Problem) -> list[dict[int, int]]:
    """credit[b]: session -> k for the eligible pairs with positive credit that fit node b's room."""
    credit: list[dict[int, int]] = [{} for _ in range(problem.m)]
    for i, row in enumerate(problem.values):
        for b, value in enumerate(row):
            if value is not None and value[0] > 0 and problem.size[i] <= problem.room[b]:
                credit[b][i] = value[0]
    return credit


def credit_step(credit: list[dict[int, int]]) -> int:
    """g, the gcd of the credits: every K is a multiple of it."""
    return math.gcd(*(k for column in credit for k in column.values()))


def k_level(problem: Problem, deadline: Deadline | None = None) -> KLevel:
    """A proven bound on K and the best K-placement found (see the module docstring)."""
    credit = credit_matrix(problem)
    if not any(credit):
        return KLevel(0, {}, 0)
    arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size, dtype=np.int64))
    flat = _flat(credit)
    # re-packing two nodes together needs a session worth the same on both: flat credit (else skipped)
    pairs_repacked = cache(lambda: _pair_improver(problem, credit)) if flat else None

    def value_of(placement: dict[int, int]) -> int:
        return sum(credit[b][i] for i, b in placement.items())

    def refill(placement: dict[int, int], until: Deadline | None = None, enough: float = math.inf
               ) -> dict[int, int]:
        """Left-out sessions shifted in and each node re-packed exactly (compiled, planner/k/polish.py); with
        flat credit then, unless that reaches `enough` (a bound), pairs of nodes re-packed together
        (planner/packing/improve.py), as many as `until` allows (with credit on every node, re-packing all
        pairs of nodes takes ~10 ms)."""
        polished = polish_placement(arrays, placement)
        if pairs_repacked is None or value_of(polished) >= enough:
            return polished
        return pairs_repacked().improve(polished, passes=1, deadline=until)

    def polish(placement: dict[int, int]) -> tuple[dict[int, int], int]:
        """`placement` refilled (as far as the deadline allows), and its K."""
        better = refill(placement, deadline)
        return better, value_of(better)

    def reshuffle_toward(placement: dict[int, int], target: int) -> tuple[dict[int, int], int]:
        """`placement` reshuffled toward K = `target` (planner/k/reshuffle.py), and its K; its rounds, and the
        re-packs within a round, stop at the reshuffle's share of the deadline."""
        until = None if deadline is None else deadline.share(_RESHUFFLE_SHARE)
        return reshuffle(placement, problem.m, value_of, lambda kept: refill(kept, until), target,
                         _RESHUFFLES, until)

    step = credit_step(credit)
    shared = bool(arrays.shared.any())  # some session credited on several nodes
    search = _Search(step, deadline, polish, math.inf, _larger_twins(credit, problem.size))
    lam = starting_multipliers(arrays, problem.n)  # read for a sub-problem's shared sessions only
    root: _Sub | None = _Sub(arrays, {}, 0)
    relaxation, first = None, math.inf
    if shared and not flat:  # a few cheap steps first: most K levels are settled by them
        first, first_lam = search.dual(root, lam, _FIRST_ITERATIONS)  # type: ignore[arg-type]
        if first <= search.best_value:
            root = None
        else:
            lam = first_lam
    if shared and root is not None and (flat or first - search.best_value > _LP_GAP * first):
        relaxation = k_relaxation(arrays)
    if relaxation is not None:
        if flat or relaxation.bound < first:  # its multipliers, when they are the better start
            lam = np.zeros(problem.n)
            for i, x in relaxation.multipliers.items():
                lam[i] = x
        # with flat credit (fresh, whole caches) the LP bound is usually tight and the search for a
        # placement reaching it is what is hard: the LP's whole placements, refilled, are the start that is
        # reshuffled toward it (filling the nodes one by one with exact knapsacks, as a second start, changed
        # no K nor proof on 580 flat-credit plans, 6 shapes, 8 x 2 to 160 x 8: removed)
        lp_floor = search.floor(relaxation.bound)
        start = refill(relaxation.whole, deadline, enough=lp_floor)
        search.offer(start, value_of(start))
        # with flat credit, polished steps from the LP's multipliers: often a better start, and with small
        # rooms or sessions large beside them a bound well below the LP's (each knapsack is exact), often
        # reached at once; none once the deadline has passed (with credit on every node of 640 x 8 a step is
        # ~20 ms). The first step alone settles many (credit copies: its bound is reached); only then comes
        # the packing-only ceiling (~1 ms at 160 x 8), which ends the other steps once a placement reaches
        # it (equal credits on rooms of very different sizes). With graded credit the ceiling never ended a
        # search earlier (multi, all and crowded shapes).
        for steps in (1, _FLAT_STEPS - 1) if flat else ():
            if steps > 1 and search.best_value < min(first, lp_floor):
                ceiling = k_ceiling(credit, problem.size, problem.room)
                search.ceiling = math.inf if ceiling is None else ceiling
            if search.best_value >= min(first, lp_floor, search.ceiling):
                break  # K-optimal: what follows would only confirm it
            if deadline is None or not deadline.passed():
                bound, steps_lam = search.dual(root, lam, steps)  # type: ignore[arg-type]
                if bound < min(first, relaxation.bound):
                    lam = steps_lam
                first = min(first, bound)
        if flat and search.best_value < min(first, lp_floor, search.ceiling):  # not settled yet
            if search.best_value > value_of(start):
                start = search.best_placement
            target = int(min(lp_floor, search.ceiling, first))
            # the reshuffle looks for a placement reaching a tight LP bound (credits of a few sizes); below it
            # the Lagrangian search gets the time. (Bin completion after it, an exact search of what the
            # reshuffle missed, changed no K nor proof on 550 flat-credit plans, 5 shapes, 8 x 2 to 160 x 8:
            # removed.)
            if search.best_value < target and first >= lp_floor:
                search.offer(*reshuffle_toward(start, target))
        if search.best_value >= min(first, lp_floor):
            root = None
        else:
            root = _fix_by_prices(root, relaxation, search)  # type: ignore[arg-type]
    two_nodes = False  # the two nodes of most slack re-solved after the search (below)
    # the first steps' and the LP's bound, before the search
    root_bound = first if relaxation is None else min(first, search.floor(relaxation.bound))
    if root is None:
        open_bound = -1
    elif relaxation is not None and search.stopped():  # no time left for the search: the bounds so far
        open_bound = int(root_bound)
    else:
        # few classes of alike sessions (forks): HiGHS first, counting each class per node; a small flat
        # root: the search for a share of the time, HiGHS for the rest (with graded credit and sessions
        # unalike HiGHS proved none in the time left, and the search, given it, proves some)
        classes = Alike.of(root.arrays)
        columns, pairs = len(classes.column_pair), len(root.arrays.pair_session)
        mip_first = columns <= _MIP_FIRST_COLUMNS and pairs >= _MIP_FIRST_ALIKE * columns
        handover = not mip_first and flat and columns <= _MIP_PAIRS and deadline is not None
        # with graded credit and a wide gap at the root, part of the time goes to re-solving the two nodes of
        # most slack together after the search
        wide = root_bound - search.best_value > _TWO_NODES_GAP * max(search.best_value, 1)
        two_nodes = (wide and pairs >= _TWO_NODES_PAIRS and not mip_first and not flat and problem.m > 2
                     and deadline is not None)
        first_bound = None  # HiGHS's, when it went first
        if mip_first and deadline is not None:
            first_bound = _branch_and_cut(root, classes, search, deadline.share(_MIP_FIRST_SHARE))
        if handover:
            search.deadline = deadline.share(_MIP_AFTER)  # type: ignore[union-attr]
        if two_nodes:
            search.deadline = deadline.share(_TWO_NODES_AFTER)  # type: ignore[union-attr]
        if first_bound is not None and first_bound <= search.best_value:
            open_bound = first_bound  # proven by HiGHS: nothing left to search
        else:
            open_bound = search.node(root, lam, _ITERATIONS)
            if first_bound is not None:
                open_bound = min(open_bound, first_bound)
        if handover and open_bound > search.best_value and not deadline.passed():  # type: ignore[union-attr]
            proven = _branch_and_cut(root, classes, search, deadline)  # type: ignore[arg-type]
            if proven is not None:
                open_bound = min(open_bound, proven)
    if relaxation is not None:
        open_bound = int(min(open_bound, root_bound))
    placement, value = search.best_placement, search.best_value
    bound = int(min(max(value, open_bound), search.ceiling))
    if value < bound and two_nodes and search.root_multipliers is not None and not deadline.passed():
        placement, value = _two_nodes_resolved(problem, credit, arrays, placement, value,
                                               search.root_multipliers, deadline)  # type: ignore[arg-type]
    exchanges = not flat and len(arrays.pair_session) * len(arrays.sessions) <= _EXCHANGE_WORK
    if value < bound and exchanges:  # unproven: exchanges between nodes too (with flat credit none gains)
        placement = exchanged_placement(arrays, placement)
        value = value_of(placement)
    elif value < bound and not search.polished:  # unproven: each node re-packed exactly around the best
        placement, value = polish(placement)
    return KLevel(max(value, bound), placement, value, search.iterations, search.nodes,
                  search.root_multipliers, arrays, step)


@dataclass(frozen=True, slots=True)
class _Sub:
    """A K sub-problem of the search: the pairs still open and the rooms left (as the kernels read them),
    the placements fixed."""

    arrays: DualArrays  # the open pairs, each fitting its room
    fixed: dict[int, int]
    fixed_value: int

    def changed(self, place: np.ndarray, drop: np.ndarray) -> _Sub | None:
        """With each local session s of `place[s]` ≥ 0 fixed on that node (-1: on none of its credit nodes,
        OPEN: still open) and the pairs `drop` closed; None when the fixed sessions overflow a room."""
        restricted = self.arrays.restricted(place, drop)
        if restricted is None:
            return None
        arrays, fixed, value = restricted
        return _Sub(arrays, {**self.fixed, **fixed}, self.fixed_value + value)

    def fixing(self, s: int, b: int | None, larger_twins: dict[int, list[int]]) -> _Sub | None:
        """With local session s fixed on node b (None: on none of its credit nodes, and then so are its
        larger twins, see `_larger_twins`)."""
        sessions = self.arrays.sessions
        place = np.full(len(sessions), OPEN, dtype=np.int64)
        place[s] = -1 if b is None else b
        if b is None:
            for j in larger_twins.get(int(sessions[s]), ()):
                local = int(np.searchsorted(sessions, j))
                if local < len(sessions) and sessions[local] == j:
                    place[local] = -1
        return self.changed(place, np.zeros(len(self.arrays.pair_session), dtype=np.bool_))


class _Search:
    """Depth-first branch and bound over the K sub-problems: each bounded by the Lagrangian, its pairs
    fixed or closed by probing (planner/k/dual.py's `probe`), then split on one session's surviving
    placements."""

    def __init__(self, step: int, deadline: Deadline | None,
                 polish: Callable[[dict[int, int]], tuple[dict[int, int], int]], ceiling: float,
                 larger_twins: dict[int, list[int]]) -> None:
        self.step, self.deadline, self.polish = step, deadline, polish
        # a bound on K proven apart from this search (planner/k/ceiling.py)
        self.ceiling = ceiling
        self.best_value, self.best_placement = -1, {}
        self.polished = True  # the best placement is a refill's output: polishing it again gains nothing
        self.iterations = self.nodes = 0
        self.root_multipliers: np.ndarray | None = None  # the root's latest, as its probes narrow it
        self.larger_twins = larger_twins  # per session, those it takes along when left uncredited

    def floor(self, bound: float) -> int:
        """The largest K a placement can have at most `bound`: every K is a multiple of `step`."""
        return math.floor(bound + float_slack(float(bound))) // self.step * self.step

    def offer(self, placement: dict[int, int], value: int) -> None:
        """A refilled placement (as far as its deadline allowed) and its K, kept when better than the best."""
        if value > self.best_value:
            self.best_value, self.best_placement, self.polished = value, placement, True

    def stopped(self) -> bool:
        """Out of nodes or time, or the best placement reaches the ceiling (nothing can beat it)."""
        return (self.nodes >= _NODES or self.best_value >= self.ceiling
                or (self.deadline is not None and self.deadline.passed()))

    def node(self, sub: _Sub, lam: np.ndarray, iterations: int) -> int:
        """Search `sub`; returns a bound on the K it left unsettled (-1 when settled)."""
        self.nodes += 1
        retried = False
        while True:
            bound, lam = self.dual(sub, lam, iterations)
            if bound > self.best_value and self.nodes == 1 and not self.polished:
                # the root is not settled by its knapsacks: a better incumbent prunes the whole search
                self.offer(*self.polish(self.best_placement))
                self.polished = True
            if bound <= self.best_value:
                return -1
            if self.stopped():
                return bound
            outcome = probe(sub.arrays, _multipliers(sub.arrays, lam), sub.fixed_value, self.best_value,
                            self.step, self.deadline)
            if outcome is None:  # out of time while probing
                return bound
            if outcome.settled:
                return -1  # some session has no placement left that could beat the best
            if outcome.narrowed:  # the multipliers still fit the smaller problem: re-probe soon
                narrowed = sub.changed(outcome.place, outcome.drop)
                if narrowed is None:
                    return -1  # the sessions fixed overflow a room: nothing here beats the best
                sub, iterations = narrowed, _AFTER_PROBE_ITERATIONS
                continue
            if retried:
                break
            retried, iterations = True, _CHILD_ITERATIONS  # no progress: better multipliers, then split
        unsettled = -1
        for child_bound, i, b in outcome.split:
            if child_bound <= self.best_value:
                continue
            child = sub.fixing(i, b, self.larger_twins)
            if child is None:
                continue
            if self.stopped():
                unsettled = max(unsettled, child_bound)
                continue
            unsettled = max(unsettled, self.node(child, lam, _CHILD_ITERATIONS))
        return unsettled

    def dual(self, sub: _Sub, lam: np.ndarray, iterations: int) -> tuple[int, np.ndarray]:
        """Subgradient steps on the multipliers of `sub`'s shared sessions (planner/k/dual.py); the best
        bound found (floored) and its multipliers. The best repaired knapsack choice is offered as the
        incumbent."""
        arrays = sub.arrays
        outcome = dual_steps(arrays, _multipliers(arrays, lam), iterations, sub.fixed_value, self.best_value,
                             self.step, _STEP0, self.ceiling, self.deadline)
        self.iterations += outcome.steps
        if outcome.placement is not None:
            self.best_value = sub.fixed_value + outcome.value
            self.best_placement, self.polished = {**sub.fixed, **outcome.placement}, False
        best_lam = lam.copy()
        best_lam[arrays.sessions] = outcome.multipliers
        if self.nodes <= 1:  # the root, as its probes narrow it: the latest multipliers, the most refined
            self.root_multipliers = best_lam
        return self.floor(outcome.bound), best_lam


def _two_nodes_resolved(problem: Problem, credit: list[dict[int, int]], arrays: DualArrays,
                        placement: dict[int, int], value: int, lam: np.ndarray, deadline: Deadline
                        ) -> tuple[dict[int, int], int]:
    """`placement` (worth `value`) with the two nodes of most slack at `lam` re-solved together over their
    sessions and those left out, as a K level of its own until `deadline` (planner/k/pairs.py), when that
    collects more; `arrays`: the credited pairs of `credit`."""
    nodes = widest_pair(arrays, placement, lam)
    pair, pool = pair_problem(problem, credit, placement, nodes)
    level = k_level(pair, deadline)
    held = sum(credit[b][i] for i, b in placement.items() if b in nodes)
    if level.value <= held:
        return placement, value
    kept = {i: b for i, b in placement.items() if b not in nodes}
    return {**kept, **{pool[i]: nodes[b] for i, b in level.placement.items()}}, value - held + level.value


def _branch_and_cut(sub: _Sub, alike: Alike, search: _Search, deadline: Deadline) -> int | None:
    """HiGHS on `sub` (planner/k/mip.py; `alike`: its classes) until `deadline`, from the search's best
    placement: its placement offered, its bound on the K of `sub` returned (None when it proved none)."""
    found = k_branch_and_cut(sub.arrays, search.best_placement, search.step, deadline.left(), alike)
    if found.placement is not None:
        search.offer({**sub.fixed, **found.placement}, sub.fixed_value + found.value)
    return None if found.bound is None else max(sub.fixed_value + found.bound, search.best_value)


def _fix_by_prices(sub: _Sub, relaxation: KRelaxation, search: _Search) -> _Sub | None:
    """`sub` (the root: the pairs the relaxation was solved over) without the pairs whose LP bound
    (reduced cost) cannot beat the search's best, and with the sessions left one way to go fixed to it;
    None when some session has no way left (then nothing beats the best)."""
    arrays, best, step = sub.arrays, search.best_value, search.step
    drop = relaxation.with_pair // step * step <= best
    out_alive = relaxation.without // step * step > best
    ways = np.bincount(arrays.pair_session[~drop], minlength=len(arrays.sessions)) + out_alive
    if not ways.all():
        return None
    place = np.full(len(arrays.sessions), OPEN, dtype=np.int64)
    place[(ways == 1) & out_alive] = -1
    only = ~drop & (ways == 1)[arrays.pair_session]  # the one way left is this pair
    place[arrays.pair_session[only]] = arrays.pair_node[only]
    return sub.changed(place, drop)


def _larger_twins(credit: list[dict[int, int]], size: tuple[int, ...]) -> dict[int, list[int]]:
    """Per credited session, the sessions with the same credit on the same nodes and a larger size (equal:
    a later index). Some K-optimal placement credits, of each such class, the smallest sessions only: a
    credited session with a smaller twin left uncredited gives its place to that twin (it fits, and
    collects the same), so the search may take a session left uncredited to leave its larger twins so
    too (benchmark workers forked from one task template: dozens of twins)."""
    ways: dict[int, list[tuple[int, int]]] = {}
    for b, column in enumerate(credit):
        for i, k in column.items():
            ways.setdefault(i, []).append((b, k))
    classes: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for i, pairs in ways.items():
        classes.setdefault(tuple(pairs), []).append(i)
    larger: dict[int, list[int]] = {}
    for members in classes.values():
        members.sort(key=lambda i: (size[i], i))
        for at, i in enumerate(members[:-1]):
            larger[i] = members[at + 1:]
    return larger


def _flat(credit: list[dict[int, int]]) -> bool:
    """Whether every session has the same credit on each of its credit nodes."""
    seen: dict[int, int] = {}
    return all(seen.setdefault(i, k) == k for column in credit for i, k in column.items())


def _multipliers(arrays: DualArrays, lam: np.ndarray) -> np.ndarray:
    """`lam` (per problem session) over the arrays' sessions: 0 for those open on one node."""
    return np.where(arrays.shared, lam[arrays.sessions], 0.0)


def _pair_improver(problem: Problem, credit: list[dict[int, int]]) -> Improver:
    """planner/packing/improve.py's re-packs on `problem` with value (k, 0, 0) on credited pairs only: the K
    level alone."""
    values = tuple(
        tuple((credit[b][i], 0, 0) if i in credit[b] else None for b in range(problem.m))
        for i in range(problem.n))
    k_problem = Problem(problem.session_ids, problem.node_ids, problem.size, problem.room, values)
    return Improver(k_problem, Packer.for_problem(k_problem))
