"""A K sub-problem's open pairs laid out as the compiled kernels read them (planner/k/dual.py,
planner/k/polish.py): grouped by node, and per session ranked best credit first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

OPEN = -2  # a session's place in a probe or a restriction while it keeps several ways (-1: on none)


@dataclass(frozen=True, slots=True)
class DualArrays:
    """A K sub-problem's open pairs, as the kernel reads them. Sessions are numbered 0..n−1 here
    (`sessions[s]`: the problem's session index)."""

    sessions: np.ndarray  # int64[n]: the problem's session of each local session
    size: np.ndarray  # int64[n]: its size, quanta
    room: np.ndarray  # int64[m]: the rooms left
    node_start: np.ndarray  # int64[m + 1]: node b's pairs are pair_session[node_start[b]:node_start[b + 1]]
    pair_session: np.ndarray  # int64[P]: the local session of each pair
    pair_credit: np.ndarray  # float64[P]: its credit k
    rank_start: np.ndarray  # int64[n + 1]: session s's pairs, best credit first (then lower node), are
    rank_pair: np.ndarray  # int64[P]: rank_pair[rank_start[s]:rank_start[s + 1]] (indices into pair_*)
    pair_node: np.ndarray  # int64[P]: the node of each pair
    by_credit: np.ndarray  # int64[n]: sessions by best credit, highest first: the repair's order
    shared: np.ndarray  # bool[n]: open on several nodes (only these carry a multiplier)

    def layout(self) -> tuple[np.ndarray, ...]:
        """The arrays in the order the kernels take them."""
        return (self.size, self.room, self.node_start, self.pair_session, self.pair_credit, self.rank_start,
                self.rank_pair, self.pair_node, self.by_credit, self.shared)

    def pairs_of(self, placement: dict[int, int]) -> tuple[np.ndarray, dict[int, int]]:
        """`placement` (problem session -> node) on these pairs: per local session the pair it sits on (-1:
        none), and the placed sessions that sit on no pair here (session -> node)."""
        at = np.full(len(self.sessions), -1, dtype=np.int64)
        if not placement or not len(self.sessions):
            return at, dict(placement)
        pair_at = self.pair_index()
        ids = np.fromiter(placement, dtype=np.int64, count=len(placement))
        nodes = np.fromiter(placement.values(), dtype=np.int64, count=len(placement))
        local = np.minimum(np.searchsorted(self.sessions, ids), len(self.sessions) - 1)
        pairs = np.where(self.sessions[local] == ids, pair_at[local, nodes], -1)
        at[local[pairs >= 0]] = pairs[pairs >= 0]
        return at, dict(zip(ids[pairs < 0].tolist(), nodes[pairs < 0].tolist()))

    def pair_index(self) -> np.ndarray:
        """Per local session and node, the index of their pair (-1: none)."""
        pair_at = np.full((len(self.sessions), len(self.room)), -1, dtype=np.int64)
        pair_at[self.pair_session, self.pair_node] = np.arange(len(self.pair_session))
        return pair_at

    def placement_of(self, at: np.ndarray, kept: dict[int, int]) -> dict[int, int]:
        """The inverse of `pairs_of`: the placement (problem session -> node) of the sessions on the pairs
        `at` and of those in `kept`."""
        placed = at >= 0
        return {**kept, **dict(zip(self.sessions[placed].tolist(), self.pair_node[at[placed]].tolist()))}

    @classmethod
    def of(cls, credit: list[dict[int, int]], room: list[int], size: np.ndarray) -> DualArrays:
        """The arrays of open pairs `credit[b]` (session -> k) within rooms `room`; `size`: int64, every
        session's size. (numpy sorts: built once per K level; a search's children come from `restricted`.)"""
        counts = np.array([len(column) for column in credit], dtype=np.int64)
        owner = np.fromiter((i for column in credit for i in column), dtype=np.int64, count=int(counts.sum()))
        pair_credit = np.fromiter((k for column in credit for k in column.values()), dtype=np.float64,
                                  count=len(owner))
        pair_node = np.repeat(np.arange(len(credit), dtype=np.int64), counts)
        sessions, pair_session = np.unique(owner, return_inverse=True)
        rank_pair = np.lexsort((pair_node, -pair_credit, pair_session))  # by session, best credit, lower node
        per_session = np.bincount(pair_session, minlength=len(sessions))
        rank_start = np.concatenate(([0], np.cumsum(per_session)))
        best = pair_credit[rank_pair[rank_start[:-1]]]
        return cls(
            sessions=sessions,
            size=size[sessions],
            room=np.array(room, dtype=np.int64),
            node_start=np.concatenate(([0], np.cumsum(np.bincount(pair_node, minlength=len(room))))),
            pair_session=pair_session.astype(np.int64),
            pair_credit=pair_credit,
            rank_start=rank_start,
            rank_pair=rank_pair.astype(np.int64),
            pair_node=pair_node,
            by_credit=np.lexsort((sessions, -best)).astype(np.int64),
            shared=per_session > 1,
        )

    def restricted(self, place: np.ndarray, drop: np.ndarray
                   ) -> tuple[DualArrays, dict[int, int], int] | None:
        """The sub-problem with each session s of `place[s]` ≥ 0 fixed on that node (-1: on none of its
        nodes; OPEN: still open) and the pairs of `drop` closed; the pairs left that no longer fit their
        room close too. Returns it, the sessions fixed on a node (problem session -> node) and the credit
        they collect; None when they overflow a room (compiled: a search builds one per sub-problem)."""
        built = _restrict(self.sessions, self.size, self.room, self.pair_session, self.pair_credit,
                          self.rank_pair, self.pair_node, place, drop)
        if built is None:
            return None
        value, *fields = built  # the DualArrays fields, in their order
        placed = place >= 0
        fixed = dict(zip(self.sessions[placed].tolist(), place[placed].tolist()))
        return DualArrays(*fields), fixed, int(value)


@njit(cache=True)
def _restrict(sessions, size, room, pair_session, pair_credit, rank_pair, pair_node, place, drop):
    """`DualArrays.restricted` over the arrays it reads: the kept pairs in their order (still grouped by node,
    and per session still best credit first), the kept sessions renumbered in theirs; None on overflow."""
    n, m, pairs = size.shape[0], room.shape[0], pair_session.shape[0]
    left = room.copy()
    for s in range(n):
        if place[s] >= 0:
            left[place[s]] -= size[s]
    for b in range(m):
        if left[b] < 0:
            return None
    value = 0.0
    new_pair = np.full(pairs, -1, dtype=np.int64)  # kept pairs renumbered in order, -1: closed
    per_session = np.zeros(n, dtype=np.int64)
    count = 0
    for p in range(pairs):
        s, b = pair_session[p], pair_node[p]
        if place[s] == b:
            value += pair_credit[p]
        elif place[s] == OPEN and not drop[p] and size[s] <= left[b]:
            new_pair[p] = count
            count += 1
            per_session[s] += 1
    local = np.full(n, -1, dtype=np.int64)  # old local session -> new
    kept = 0
    for s in range(n):
        if per_session[s] > 0:
            local[s] = kept
            kept += 1
    out_sessions = np.empty(kept, dtype=np.int64)
    out_size = np.empty(kept, dtype=np.int64)
    out_shared = np.empty(kept, dtype=np.bool_)
    out_rank_start = np.zeros(kept + 1, dtype=np.int64)
    for s in range(n):
        if local[s] >= 0:
            out_sessions[local[s]] = sessions[s]
            out_size[local[s]] = size[s]
            out_shared[local[s]] = per_session[s] > 1
            out_rank_start[local[s] + 1] = per_session[s]
    out_rank_start = np.cumsum(out_rank_start)
    out_node_start = np.zeros(m + 1, dtype=np.int64)
    out_pair_session = np.empty(count, dtype=np.int64)
    out_pair_credit = np.empty(count)
    out_pair_node = np.empty(count, dtype=np.int64)
    for p in range(pairs):
        q = new_pair[p]
        if q >= 0:
            out_pair_session[q] = local[pair_session[p]]
            out_pair_credit[q] = pair_credit[p]
            out_pair_node[q] = pair_node[p]
            out_node_start[pair_node[p] + 1] += 1
    out_node_start = np.cumsum(out_node_start)
    out_rank_pair = np.empty(count, dtype=np.int64)
    best = np.empty(kept)
    at = 0
    for r in range(pairs):  # old rank order: by session, best credit first, lower node
        q = new_pair[rank_pair[r]]
        if q >= 0:
            if at == out_rank_start[out_pair_session[q]]:
                best[out_pair_session[q]] = out_pair_credit[q]
            out_rank_pair[at] = q
            at += 1
    out_by_credit = np.argsort(-best, kind="mergesort")  # stable: equal best credit, lower session first
    return (value, out_sessions, out_size, left, out_node_start, out_pair_session, out_pair_credit,
            out_rank_start, out_rank_pair, out_pair_node, out_by_credit, out_shared)
