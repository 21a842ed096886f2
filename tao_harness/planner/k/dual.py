"""The Lagrangian K level's subgradient steps and its search's probes (planner/k/lagrange.py), compiled with
numba.

A K sub-problem is laid out as arrays: its open pairs grouped by node (`DualArrays.pair_*`, node b's
pairs at `node_start[b]:node_start[b + 1]`), and per session the same pairs ranked best credit first
(`rank_*`). Each step solves the knapsacks whose profits k − λ changed (planner/shared/knapsack.py), bounds K
by L(λ), repairs the knapsacks' choices into a placement, polishes it by local search when it is near the
best so far (planner/k/polish.py), and moves the shared sessions' multipliers along the subgradient. A
probe bounds every way to place each session (each node's knapsack with it forced in or out). Steps are a
few tens of microseconds here, against about a millisecond as Python dictionaries, and the hard snapshots
take hundreds of them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from tao_harness.planner.k.arrays import OPEN, DualArrays
from tao_harness.planner.k.forced import forced_tables, forced_values
from tao_harness.planner.k.polish import polish
from tao_harness.planner.shared.deadline import Deadline
from tao_harness.planner.shared.knapsack import float_slack, knapsack_kernel

_SLACK = 0.003  # how far below the best raw repair so far a repair is still polished (measured on the
# everywhere shape, 160 x 8: 0 polishes too few, every repair costs a third more time for no better K)
_CHECK_EVERY_S = 0.0003  # time between deadline checks: a chunk is as many steps as took this long before
# (a step is ~50 µs at 160 x 8, but ~20 ms at 640 x 8 with credit on every node: fixed chunks of two
# steps overran a 30 ms deadline by 40 ms there)
_CHUNK_MAX = 8  # steps per chunk at most
_STALL = 4  # steps without a better bound before the step size halves
_SEARCH_CELLS = 20_000  # positive items x room past which a probe searches its forced values
# (planner/k/forced.py), in at most ...
_CELLS_PER_NODE = 2  # ... half as many search nodes as the tables' cells, else the tables
_SEARCH_NODE_S = 6e-9  # a search node's time, and ...
_TABLE_CELL_S = 3e-9  # ... a table cell's (measured at 160 x 8, rooms of thousands of quanta)
_BATCH_CELLS = 200_000  # pairs x room summed over the nodes up to which a probe solves every node in one
# compiled call, its deadline checked once before (at most ~0.6 ms of tables; at 32 x 8 the calls and checks
# node by node cost more than the knapsacks)
_NO_DEADLINE_S = 1e6  # the time a probe without a deadline may take (finite: it becomes a node count)


@dataclass(frozen=True, slots=True)
class DualOutcome:
    """What the steps established: the best bound L(λ), its multipliers, and the best placement the
    repairs found when it beats the incumbent given."""

    bound: float  # not floored to the credits' step (the caller does)
    multipliers: np.ndarray  # float64[n], 0 for sessions open on one node
    steps: int
    placement: dict[int, int] | None  # problem session -> node, the open sessions only
    value: int  # its K over the open pairs (without the sub-problem's fixed value)


def dual_steps(arrays: DualArrays, lam: np.ndarray, iterations: int, fixed_value: int, best_value: int,
               step: int, first_step: float, ceiling: float, deadline: Deadline | None = None) -> DualOutcome:
    """Up to `iterations` subgradient steps from multipliers `lam`, stopping once the bound reaches the
    incumbent `best_value` (K of the whole sub-problem, fixed part included), a placement reaches
    `ceiling`, or `deadline` passes (checked after the first step, then every `_CHECK_EVERY_S` or so: one
    step is always taken, so the bound is a number). `step`: every K is a multiple of it."""
    m, n = len(arrays.room), len(arrays.sessions)
    path = _Path(lam.copy(), lam.copy(), np.zeros(len(arrays.pair_session), dtype=np.bool_), np.zeros(m),
                 np.ones(m, dtype=np.bool_), np.full(n, -1, dtype=np.int64),
                 np.array([np.inf, first_step, 0.0, -1.0, -1.0, float(best_value)]))
    steps, chunk = 0, 1  # the first step alone: its time sizes the chunks
    while steps < iterations:
        count = iterations - steps if deadline is None else min(chunk, iterations - steps)
        started = time.perf_counter()
        taken, done = _steps(*arrays.layout(), *path.layout(), count, float(fixed_value), float(best_value),
                             float(step), float(min(ceiling, 2.0 ** 62)))
        steps += taken
        if done or (deadline is not None and deadline.passed()):
            break
        per_step = (time.perf_counter() - started) / taken
        chunk = max(1, min(_CHUNK_MAX, int(_CHECK_EVERY_S / max(per_step, 1e-9))))
    best_bound, value = path.state[_BEST_BOUND], path.state[_BEST_FOUND]
    found = None
    if value + fixed_value > best_value:
        found = {int(arrays.sessions[s]): int(b) for s, b in enumerate(path.placement) if b >= 0}
    return DualOutcome(best_bound, path.best_lam, steps, found, int(round(value)))


# the subgradient path's scalars, as `_Path.state` holds them
_BEST_BOUND, _MOVE, _STALLED, _BEST_RAW, _BEST_FOUND, _INCUMBENT = range(6)


@dataclass(frozen=True, slots=True)
class _Path:
    """The subgradient path between chunks of steps (the kernel updates these in place)."""

    lam: np.ndarray  # float64[n]: the current multipliers
    best_lam: np.ndarray  # float64[n]: those of the best bound
    chosen: np.ndarray  # bool[P]: the knapsacks' choices at `lam`
    node_value: np.ndarray  # float64[m]: each node's knapsack value at `lam`
    dirty: np.ndarray  # bool[m]: the nodes whose profits changed since their knapsack was solved
    placement: np.ndarray  # int64[n]: the best placement found (a node per session, -1: none)
    state: np.ndarray  # float64: best bound, step size, steps stalled, best raw repair's K, best placement's
    # K (over the open pairs), the incumbent's K (fixed part included)

    def layout(self) -> tuple[np.ndarray, ...]:
        return self.lam, self.best_lam, self.chosen, self.node_value, self.dirty, self.placement, self.state


@njit(cache=True)
def _steps(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node, by_credit,
           shared, lam, best_lam, chosen, node_value, dirty, best_placement, state, iterations, fixed_value,
           given, step, ceiling):
    """Up to `iterations` steps along the path (`given`: the incumbent's K the path started from); the
    steps taken and whether the path is done (bound reached, ceiling reached or no conflict left)."""
    m, n = room.shape[0], size.shape[0]
    best_bound, move_size, stall = state[_BEST_BOUND], state[_MOVE], int(state[_STALLED])
    best_raw, best_found, best_value = state[_BEST_RAW], state[_BEST_FOUND], state[_INCUMBENT]
    at = np.full(n, -1, dtype=np.int64)  # the repair's placement: per session, its pair (-1: none)
    count = np.zeros(n, dtype=np.int64)
    left = np.empty(m, dtype=np.int64)
    steps, done = 0, False
    for _ in range(iterations):
        steps += 1
        for b in range(m):
            if dirty[b]:
                sizes, profits = _node_items(b, size, node_start, pair_session, pair_credit, lam)
                node_value[b], take = knapsack_kernel(sizes, profits, room[b])
                chosen[node_start[b]:node_start[b + 1]] = take
                dirty[b] = False
        bound = _lagrangian(fixed_value, node_value, shared, lam)
        if bound < best_bound - float_slack(best_bound):
            best_bound, stall = bound, 0
            best_lam[:] = lam
        else:
            stall += 1
        # repair: a session chosen on several nodes stays on its best; the others, highest credit first,
        # go to their best node with room; then the local search (planner/k/polish.py)
        count[:] = 0
        raw = 0.0
        at[:] = -1
        left[:] = room
        for s in range(n):
            for r in range(rank_start[s], rank_start[s + 1]):
                p = rank_pair[r]
                if chosen[p]:
                    count[s] += 1
                    if at[s] < 0:
                        at[s] = p
                        left[pair_node[p]] -= size[s]
                        raw += pair_credit[p]
        for s in by_credit:
            if at[s] < 0:
                for r in range(rank_start[s], rank_start[s + 1]):
                    p = rank_pair[r]
                    if left[pair_node[p]] >= size[s]:
                        at[s] = p
                        left[pair_node[p]] -= size[s]
                        raw += pair_credit[p]
                        break
        value = raw
        # polished when the raw repair does not reach the bound already and is near the best raw one (a
        # polish costs a few knapsacks; most repairs far below the best do not polish into a better one)
        below_bound = fixed_value + raw < math.floor(best_bound + float_slack(best_bound)) // step * step
        if below_bound and raw >= best_raw * (1 - _SLACK):
            value = polish(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair,
                           pair_node, by_credit, at)
        best_raw = max(best_raw, raw)
        if value > best_found:
            best_found = value
            for s in range(n):
                best_placement[s] = pair_node[at[s]] if at[s] >= 0 else -1
            if fixed_value + value > best_value:
                best_value = fixed_value + value
        floored = math.floor(best_bound + float_slack(best_bound)) // step * step
        if floored <= best_value or best_value >= ceiling:
            done = True
            break
        norm = 0.0
        for s in range(n):
            if shared[s]:
                norm += (1 - count[s]) ** 2
        if norm == 0:
            done = True
            break  # no conflict, every priced session chosen once: L is attained by the placement
        if stall >= _STALL:
            move_size, stall = move_size / 2, 0
        # the Polyak step aims at the raw repairs (or the incumbent given), not the polished ones: aiming
        # higher shortens the steps, and the bound then converges slower (measured: 40 steps left it 1%
        # higher)
        aim = max(given, fixed_value + best_raw)
        move = move_size * max(bound - aim, 1.0) / norm
        for s in range(n):
            if shared[s]:
                new = max(0.0, lam[s] - move * (1 - count[s]))
                if new != lam[s]:
                    lam[s] = new
                    for r in range(rank_start[s], rank_start[s + 1]):
                        dirty[pair_node[rank_pair[r]]] = True
    state[_BEST_BOUND], state[_MOVE], state[_STALLED] = best_bound, move_size, stall
    state[_BEST_RAW], state[_BEST_FOUND], state[_INCUMBENT] = best_raw, best_found, best_value
    return steps, done


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What probing every way to place each session established (see `probe`)."""

    settled: bool  # some session has no way left that beats the incumbent: nothing in the sub-problem does
    place: np.ndarray  # int64[n]: the one way left of each local session (a node, -1: on none), else OPEN
    drop: np.ndarray  # bool[P]: the pairs closed
    split: list[tuple[int, int, int | None]]  # the most ambiguous session's ways: (bound, local session,
    # node or None), highest bound first

    @property
    def narrowed(self) -> bool:
        """Whether a pair was closed or a session fixed."""
        return bool(self.drop.any() or (self.place != OPEN).any())


def probe(arrays: DualArrays, lam: np.ndarray, fixed_value: int, best_value: int, step: int,
          deadline: Deadline | None = None) -> ProbeOutcome | None:
    """Bound, at multipliers `lam`, every way to place each session: on one of its open nodes, or on
    none (KP of each node with the session forced in or out). A way whose bound cannot beat `best_value`
    is closed; a session with one way left is fixed to it; the session whose best way bounds lowest (then
    with the fewest ways left) is the one to split on, ways highest bound first: its children's bounds
    are the lowest, so the fewest of them survive (measured on the everywhere shape, 160 x 8: 423 search
    nodes over 100 snapshots, against 757 splitting on the session with the most ways).

    Each node's knapsack first, then its forced ones: their sum L(λ) tells how much a way may lose on one
    node before it is closed, and no forced knapsack needs to be exact below that (planner/k/forced.py;
    on rooms of thousands of quanta the tables took 0.28 ms a node on average, up to 12, the searches 0.05).

    None when `deadline` passes before every node's forced knapsacks are found (checked before each
    node's: at 640 x 8 with credit on most nodes a probe takes ~20 ms, and one begun just before a 30 ms
    deadline overran it by 25 ms; up to `_BATCH_CELLS`, once before them all), or when a node's would take
    longer than the time left."""
    m, pairs = len(arrays.room), len(arrays.pair_session)
    node_value, forced_in, forced_out = np.zeros(m), np.zeros(pairs), np.zeros(pairs)
    take = np.zeros(pairs, dtype=np.bool_)
    layout = arrays.layout()
    if deadline is not None and deadline.passed():
        return None
    if deadline is None or int((np.diff(arrays.node_start) * arrays.room).sum()) <= _BATCH_CELLS:
        seconds = _NO_DEADLINE_S if deadline is None else deadline.left()
        if not _probe_nodes(*layout, lam, float(fixed_value), float(best_value), float(step), take,
                            node_value, forced_in, forced_out, seconds):
            return None
    else:
        for b in range(m):
            if b and deadline.passed():
                return None
            node_value[b] = _node_knapsack(b, *layout, lam, take)
        # a way loses at least this much on one node: closed, so no forced value below it needs to be exact
        floor_loss = _lagrangian(float(fixed_value), node_value, arrays.shared, lam) - best_value - step / 2
        for b in range(m):
            if deadline.passed():
                return None
            if not _node_forced(b, *layout, lam, node_value[b], take, floor_loss, forced_in, forced_out,
                                deadline.left()):
                return None
    settled, place, drop, split_session, way_bound = _ways(
        *layout, lam, node_value, forced_in, forced_out, float(fixed_value), float(best_value), float(step))
    split: list[tuple[int, int, int | None]] = []
    if not settled and split_session >= 0:
        lo, hi = arrays.rank_start[split_session], arrays.rank_start[split_session + 1]
        nodes = arrays.pair_node[arrays.rank_pair[lo:hi]].tolist()
        ways: list[tuple[int, int, int | None]] = [(int(way_bound[k]), split_session, b)
                                                   for k, b in enumerate(nodes)]
        ways.append((int(way_bound[hi - lo]), split_session, None))
        split = sorted((w for w in ways if w[0] > best_value), key=lambda w: (-w[0], w[2] is None, w[2] or 0))
    return ProbeOutcome(bool(settled), place, drop, split)


def lagrangian_bound(arrays: DualArrays, lam: np.ndarray) -> float:
    """L(λ) of the whole sub-problem (no fixed part) at multipliers `lam` (per local session; read for the
    shared ones only): every node's knapsack solved once, nothing repaired."""
    return float(node_values(arrays, lam).sum() + lam[arrays.shared].sum())


def node_values(arrays: DualArrays, lam: np.ndarray) -> np.ndarray:
    """Per node, its knapsack's value at profits k − λ (`lam` per local session, every one read)."""
    return _node_values(arrays.size, arrays.room, arrays.node_start, arrays.pair_session, arrays.pair_credit,
                        lam)


@njit(cache=True)
def _node_values(size, room, node_start, pair_session, pair_credit, lam):
    """Each node's knapsack over its open pairs at profits k − λ."""
    m = room.shape[0]
    value = np.zeros(m)
    for b in range(m):
        sizes, profits = _node_items(b, size, node_start, pair_session, pair_credit, lam)
        value[b], _ = knapsack_kernel(sizes, profits, room[b])
    return value


@njit(cache=True)
def _lagrangian(fixed_value, node_value, shared, lam):
    """L(λ): the fixed value, every node's knapsack and the shared sessions' multipliers (the steps' bound,
    and the one each way's bound in a probe is taken from)."""
    total = fixed_value + node_value.sum()
    for s in range(shared.shape[0]):
        if shared[s]:
            total += lam[s]
    return total


@njit(cache=True)
def _probe_nodes(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node,
                 by_credit, shared, lam, fixed_value, best_value, step, take, node_value, forced_in,
                 forced_out, seconds):
    """Every node's knapsack, then its forced ones, as `probe` does node by node (without its deadline
    checks between nodes); False when a node's forced knapsacks would take longer than `seconds`."""
    m = room.shape[0]
    for b in range(m):
        node_value[b] = _node_knapsack(b, size, room, node_start, pair_session, pair_credit, rank_start,
                                       rank_pair, pair_node, by_credit, shared, lam, take)
    floor_loss = _lagrangian(fixed_value, node_value, shared, lam) - best_value - step / 2  # as in `probe`
    for b in range(m):
        if not _node_forced(b, size, room, node_start, pair_session, pair_credit, rank_start, rank_pair,
                            pair_node, by_credit, shared, lam, node_value[b], take, floor_loss, forced_in,
                            forced_out, seconds):
            return False
    return True


@njit(cache=True)
def _node_knapsack(b, size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node,
                   by_credit, shared, lam, take):
    """Node b's knapsack at `lam`: its value, the pairs it takes marked in `take`."""
    sizes, profits = _node_items(b, size, node_start, pair_session, pair_credit, lam)
    value, took = knapsack_kernel(sizes, profits, room[b])
    take[node_start[b]:node_start[b + 1]] = took
    return value


@njit(cache=True)
def _node_forced(b, size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node,
                 by_credit, shared, lam, value, take, floor_loss, forced_in, forced_out, seconds):
    """Per pair of node b, its knapsack with the pair's session forced in and out (written into
    `forced_in`, `forced_out`; planner/k/forced.py): searched when the tables would be large, the tables
    when they are small or the search runs past its nodes. False, nothing written, when the search and
    the tables would take more than `seconds` (estimated: a probe stopped before a deadline it would
    overrun; on a room of 70,000 quanta one node's tables took 53 ms)."""
    lo, hi = node_start[b], node_start[b + 1]
    sizes, profits = _node_items(b, size, node_start, pair_session, pair_credit, lam)
    positive, total = 0, 0
    for j in range(hi - lo):
        if profits[j] > 0:
            positive += 1
            total += sizes[j]
    cells = positive * min(room[b], total)  # the tables'
    if cells > _SEARCH_CELLS:
        nodes = min(cells // _CELLS_PER_NODE, int(seconds / _SEARCH_NODE_S))
        found, took_in, took_out = forced_values(sizes, profits, room[b], value, take[lo:hi], floor_loss,
                                                 nodes)
        if not found and cells * _TABLE_CELL_S > seconds - nodes * _SEARCH_NODE_S:
            return False
    if cells <= _SEARCH_CELLS or not found:
        _, took_in, took_out = forced_tables(sizes, profits, room[b])
    forced_in[lo:hi] = took_in
    forced_out[lo:hi] = took_out
    return True


@njit(cache=True)
def _ways(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node, by_credit,
          shared, lam, node_value, forced_in, forced_out, fixed_value, best_value, step):
    """Every way of each session bounded from the nodes' tables (see `probe`): whether some session has no
    way left, the fixed places, the closed pairs, the session to split on and its ways' bounds."""
    n, pairs = size.shape[0], pair_session.shape[0]
    total = _lagrangian(fixed_value, node_value, shared, lam)
    slack = float_slack(total)  # every way's bound is a sum of that magnitude
    place = np.full(n, OPEN, dtype=np.int64)
    drop = np.zeros(pairs, dtype=np.bool_)
    split_session, split_ways, split_top = -1, 0, np.inf
    way_bound = np.empty(1)
    for s in range(n):
        lo, hi = rank_start[s], rank_start[s + 1]
        bounds = np.empty(hi - lo + 1)
        out_total = 0.0
        for r in range(lo, hi):
            q = rank_pair[r]
            out_total += node_value[pair_node[q]] - forced_out[q]  # KP_b − KP_b without s
        alive, alive_way, top = 0, -1, -np.inf
        for r in range(lo, hi + 1):
            if r < hi:
                q = rank_pair[r]
                b = pair_node[q]
                loss_out = node_value[b] - forced_out[q]
                raw = total - (node_value[b] - forced_in[q]) - (out_total - loss_out)
            else:
                raw = total - lam[s] - out_total
            bound = np.floor(raw + slack) // step * step
            bounds[r - lo] = bound
            if bound > best_value:
                alive += 1
                alive_way = r
                top = max(top, bound)
            elif r < hi:
                drop[rank_pair[r]] = True
        if alive == 0:
            return True, place, drop, -1, way_bound
        if alive == 1:
            place[s] = -1 if alive_way == hi else pair_node[rank_pair[alive_way]]
        elif top < split_top or (top == split_top and alive < split_ways):
            split_session, split_ways, split_top, way_bound = s, alive, top, bounds
    return False, place, drop, split_session, way_bound


@njit(cache=True)
def _node_items(b, size, node_start, pair_session, pair_credit, lam):
    """Node b's knapsack items: the sizes of its open pairs' sessions and their profits k − λ."""
    lo, hi = node_start[b], node_start[b + 1]
    sizes = np.empty(hi - lo, dtype=np.int64)
    profits = np.empty(hi - lo)
    for q in range(lo, hi):
        sizes[q - lo] = size[pair_session[q]]
        profits[q - lo] = pair_credit[q] - lam[pair_session[q]]
    return sizes, profits
