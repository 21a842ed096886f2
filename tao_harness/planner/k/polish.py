"""Local search on a K-placement over a sub-problem's open pairs (planner/k/dual.py's layout), compiled
with numba: the polish each Lagrangian step applies to its repaired knapsack choices.

Two moves, repeated while either gains:
- shift in: each left-out session (highest best credit first) goes where it gains most: onto a node
  with room, or onto a node where one placed session v makes room by moving to another of its own
  nodes (gain k_ub + k_vc − k_vb);
- re-pack: each node's knapsack solved exactly over the sessions on it and the left-out ones it may
  hold (credit as on that node); its optimum replaces the node's content when it collects more.

Over arrays, so that every step's repair near the best can be polished (as Python dictionaries a polish
took milliseconds; here ~0.1 ms at 160 × 8); `polish_placement` polishes a placement of the whole K
problem (the K level's refill). Measured on the 38 `everywhere` 160 × 8 snapshots the planner left
unproven before: its plans were up to 1.07% short of K* (HiGHS MIP), with the polished steps 0.20%.

`exchanged_placement` adds a third move, for the K level's last placement when it is unproven and credit
is graded: a placed session moved to another of its nodes, alone or swapped with a session placed there
(~0.2-0.5 ms at 160 × 8, too slow for every step). Neither move above moves a placed session between
nodes for its own credit; with a repository's prompt cached on most replicas (the `fleet` shape) those
moves were what the plans missed: its unproven 160 × 8 plans' proven gap fell from 55 to 41 basis points
on average (worst 1.2% -> 0.95%).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.shared.knapsack import knapsack_kernel

_ROUNDS = 3  # rounds of (shift in, re-pack every node) at most; the third rarely gains
_EXCHANGE_ROUNDS = 4  # rounds of exchanges between nodes (each followed by the polish) at most


def polish_placement(arrays: DualArrays, placement: dict[int, int]) -> dict[int, int]:
    """`placement` (problem session -> node, feasible, each session on a pair of `arrays` or off them)
    polished; sessions off the arrays' pairs are kept as they are."""
    at, kept = arrays.pairs_of(placement)
    polish(*arrays.layout()[:9], at)
    return arrays.placement_of(at, kept)


def exchanged_placement(arrays: DualArrays, placement: dict[int, int]) -> dict[int, int]:
    """`placement` (as `polish_placement` takes it) polished with exchanges between nodes too: placed
    sessions moved to another of their nodes, alone or swapped with one session there, while that gains
    (see `_exchange`), each round followed by the polish."""
    at, kept = arrays.pairs_of(placement)
    layout = arrays.layout()[:9]
    polish(*layout, at)
    for _ in range(_EXCHANGE_ROUNDS):
        if _exchange(*layout[:8], at) <= 0:
            break
        polish(*layout, at)
    return arrays.placement_of(at, kept)


@njit(cache=True)
def _exchange(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node, at):
    """One pass over the placed sessions, each moved where it gains most (in place): onto another of its
    nodes with room, or swapped with a session v placed there that has a pair on its node (gain
    k_sb + k_va − k_sa − k_vb, both rooms holding). A swap that gains has a side that gains alone, so only
    those sessions start a move (one that fits its better node alone moves there, without trying swaps).
    Returns the K gained."""
    n = size.shape[0]
    left = room.copy()
    for s in range(n):
        if at[s] >= 0:
            left[pair_node[at[s]]] -= size[s]
    gained = 0.0
    for s in range(n):
        p = at[s]
        if p < 0:
            continue
        a = pair_node[p]
        best_gain, best_q, best_v, best_w = 0.0, -1, -1, -1
        for r in range(rank_start[s], rank_start[s + 1]):
            q = rank_pair[r]
            b = pair_node[q]
            own = pair_credit[q] - pair_credit[p]
            if b == a or own <= 0:
                continue
            if left[b] >= size[s]:
                if own > best_gain:
                    best_gain, best_q, best_v, best_w = own, q, -1, -1
                continue
            for vq in range(node_start[b], node_start[b + 1]):
                v = pair_session[vq]
                if at[v] != vq or left[b] + size[v] < size[s] or left[a] + size[s] < size[v]:
                    continue
                for r2 in range(rank_start[v], rank_start[v + 1]):
                    w = rank_pair[r2]
                    if pair_node[w] == a:
                        gain = own + pair_credit[w] - pair_credit[vq]
                        if gain > best_gain:
                            best_gain, best_q, best_v, best_w = gain, q, v, w
                        break
        if best_q < 0:
            continue
        b = pair_node[best_q]
        left[a] += size[s]
        left[b] -= size[s]
        at[s] = best_q
        if best_v >= 0:
            left[b] += size[best_v]
            left[a] -= size[best_v]
            at[best_v] = best_w
        gained += best_gain
    return gained


@njit(cache=True)
def polish(size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node, by_credit,
           at):
    """Improve the placement `at` (per local session, the pair it sits on, -1: none) in place; return
    its K over the open pairs. `at` must be feasible within `room`."""
    m, n = room.shape[0], size.shape[0]
    left = room.copy()
    value = 0.0
    for s in range(n):
        if at[s] >= 0:
            left[pair_node[at[s]]] -= size[s]
            value += pair_credit[at[s]]
    dirty = np.ones(m, dtype=np.bool_)  # nodes whose re-pack may gain: their content or candidates changed
    for _ in range(_ROUNDS):
        gained = _shift_in(size, node_start, pair_session, rank_start, rank_pair, pair_node, pair_credit,
                           by_credit, at, left, dirty)
        for b in range(m):
            if dirty[b]:
                dirty[b] = False
                gained += _repack(b, size, room, node_start, pair_session, pair_credit, rank_start, rank_pair,
                                  pair_node, at, left, dirty)
        if gained <= 0:
            break
        value += gained
    return value


@njit(cache=True)
def _shift_in(size, node_start, pair_session, rank_start, rank_pair, pair_node, pair_credit, by_credit, at,
              left, dirty):
    """One pass of shift-in moves over the left-out sessions; the K gained. The nodes changed are marked
    `dirty`."""
    gained = 0.0
    for u in by_credit:
        if at[u] >= 0:
            continue
        best_gain, best_p, best_v, best_q = 0.0, -1, -1, -1
        for r in range(rank_start[u], rank_start[u + 1]):
            p = rank_pair[r]
            b = pair_node[p]
            if left[b] >= size[u]:
                if pair_credit[p] > best_gain:
                    best_gain, best_p, best_v, best_q = pair_credit[p], p, -1, -1
                continue
            need = size[u] - left[b]
            for pv in range(node_start[b], node_start[b + 1]):
                v = pair_session[pv]
                if at[v] != pv or size[v] < need:
                    continue
                for r2 in range(rank_start[v], rank_start[v + 1]):
                    q = rank_pair[r2]
                    c = pair_node[q]
                    if c == b or left[c] < size[v]:
                        continue
                    gain = pair_credit[p] + pair_credit[q] - pair_credit[pv]
                    if gain > best_gain:
                        best_gain, best_p, best_v, best_q = gain, p, v, q
        if best_p < 0:
            continue
        b = pair_node[best_p]
        if best_v >= 0:
            left[b] += size[best_v]
            left[pair_node[best_q]] -= size[best_v]
            at[best_v] = best_q
            dirty[pair_node[best_q]] = True
        dirty[b] = True
        left[b] -= size[u]
        at[u] = best_p
        gained += best_gain
    return gained


@njit(cache=True)
def _repack(b, size, room, node_start, pair_session, pair_credit, rank_start, rank_pair, pair_node, at, left,
            dirty):
    """Node b re-packed exactly over its sessions and the left-out ones it may hold; the K gained. The
    nodes of the sessions it leaves out are marked `dirty` (they may take them)."""
    lo, hi = node_start[b], node_start[b + 1]
    pool = np.empty(hi - lo, dtype=np.int64)  # pairs of node b in the knapsack
    count, held = 0, 0.0
    for q in range(lo, hi):
        s = pair_session[q]
        if at[s] == q:
            held += pair_credit[q]
        elif at[s] >= 0:
            continue
        pool[count] = q
        count += 1
    if count == 0:
        return 0.0
    pool = pool[:count]
    sizes = np.empty(count, dtype=np.int64)
    profits = np.empty(count)
    for k in range(count):
        sizes[k] = size[pair_session[pool[k]]]
        profits[k] = pair_credit[pool[k]]
    _, take = knapsack_kernel(sizes, profits, room[b])
    best = profits[take].sum()  # the packing's own (past the kernel's DP limits its value is only a bound)
    if best <= held + 0.5:  # credits are integers: no gain
        return 0.0
    left[b] = room[b]
    for k in range(count):
        q = pool[k]
        s = pair_session[q]
        if take[k]:
            at[s] = q
            left[b] -= size[s]
        elif at[s] == q:
            at[s] = -1
            for r in range(rank_start[s], rank_start[s + 1]):
                dirty[pair_node[rank_pair[r]]] = True
    dirty[b] = False
    return best - held
