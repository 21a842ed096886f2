"""The admission problem in integer form, and the packing of the value triple into one integer.

`Problem` is what every solver sees: sessions × nodes with discretized sizes and rooms (quanta), value
triples per eligible pair, nothing else. The lexicographic objective (K, R, T, N) is packed into a
single Python int, one bit field per component, each field wide enough for its largest possible sum,
so integer addition and comparison *are* lexicographic addition and comparison and never overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from tao_harness.types import Snapshot, SessionView

Value = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Problem:
    """Waiting sessions i and nodes b of one decision, in integers. (r, t) are a session's own, the same on
    every node it may use, and credits at most types.MAX_TOKENS (2^40), as snapshots give them: the
    certificate and the float sums of the K level rely on both."""

    session_ids: tuple[str, ...]
    node_ids: tuple[str, ...]
    size: tuple[int, ...]  # w̄_i = ceil(w_i / Δ), quanta
    room: tuple[int, ...]  # C̄_b = floor(C_b / Δ), quanta
    values: tuple[tuple[Value | None, ...], ...]  # values[i][b] = (k, r, t), None when b is not eligible

    @property
    def restricted(self) -> bool:
        """Whether some session may not use some node (eligibility subsets)."""
        return any(None in row for row in self.values)

    @property
    def n(self) -> int:
        return len(self.session_ids)

    @property
    def m(self) -> int:
        return len(self.node_ids)


def build_problem(
    snapshot: Snapshot,
    sessions: Sequence[SessionView],
    free_tokens: Mapping[str, int] | None = None,
    *,
    use_cache: bool = True,
    use_readiness: bool = True,
) -> Problem:
    """Discretize `sessions` over the snapshot's nodes; `free_tokens` overrides C_b per node.

    `use_cache=False` zeroes k and `use_readiness=False` zeroes r (the paper's ablations).
    """
    quantum = snapshot.params.quantum_tokens
    free = {n.id: n.free_tokens for n in snapshot.nodes}
    free.update(free_tokens or {})
    node_ids = tuple(n.id for n in snapshot.nodes)
    index = {node_id: b for b, node_id in enumerate(node_ids)}
    values = []
    for session in sessions:
        r = session.ready if use_readiness else 0
        t = session.footprint
        cold: Value = (0, r, t)
        row: list[Value | None] = [cold] * len(node_ids)
        if use_cache:
            for node_id, entry in session.cache.items():  # a few entries, usually: not one look-up per node
                b = index.get(node_id)
                if b is not None:
                    row[b] = (entry.value(snapshot.now, snapshot.params), r, t)
        if session.eligible is not None:
            row = [v if session.may_use(node_id) else None for v, node_id in zip(row, node_ids)]
        values.append(tuple(row))
    return Problem(
        session_ids=tuple(s.id for s in sessions),
        node_ids=node_ids,
        size=tuple(-(-s.cost(snapshot.params) // quantum) for s in sessions),
        room=tuple(max(0, free[b]) // quantum for b in node_ids),
        values=tuple(values),
    )


@dataclass(frozen=True, slots=True)
class Packer:
    """Packs (k, r, t, count) into one int whose order is the lexicographic order of (K, R, T, N)."""

    shift_k: int
    shift_r: int
    shift_t: int
    mask_n: int
    mask_t: int
    mask_r: int

    @classmethod
    def for_problem(cls, problem: Problem) -> Packer:
        bits_n = max(1, problem.n.bit_length())
        # t is a property of the session, the same on every eligible node
        firsts = [next(filter(None, row), None) for row in problem.values]  # the first eligible value
        total_t = sum(v[2] for v in firsts if v is not None)
        bits_t = max(1, total_t.bit_length())
        shift_t = bits_n
        shift_r = shift_t + bits_t
        shift_k = shift_r + bits_n
        return cls(shift_k, shift_r, shift_t, (1 << bits_n) - 1, (1 << bits_t) - 1, (1 << bits_n) - 1)

    def pack(self, value: Value) -> int:
        k, r, t = value
        return (k << self.shift_k) | (r << self.shift_r) | (t << self.shift_t) | 1

    def unpack(self, total: int) -> tuple[int, int, int, int]:
        return (
            total >> self.shift_k,
            (total >> self.shift_r) & self.mask_r,
            (total >> self.shift_t) & self.mask_t,
            total & self.mask_n,
        )

    @property
    def bits_without_k(self) -> int:
        return self.shift_k


@dataclass(frozen=True, slots=True)
class Solution:
    """A solver's answer: session index -> node index, plus how it was obtained."""

    placement: Mapping[int, int]  # i -> b for the admitted sessions
    solver: str  # "dp" when proven optimal, "bfd" for best-fit-decreasing
    states: int = 0  # search effort: DP states created plus branch-and-bound nodes (0: certificate alone)
    fallback: bool = False  # the exact search ran out of its state budget or deadline
    bound: tuple[int, int, int, int] | None = None  # ≥ (K, R, T, N) of every placement, lexicographically


def total_value(problem: Problem, packer: Packer, placement: Mapping[int, int]) -> int:
    total = 0
    for i, b in placement.items():
        value = problem.values[i][b]
        assert value is not None, "placement on an ineligible node"
        total += packer.pack(value)
    return total


def objective(problem: Problem, placement: Mapping[int, int]) -> tuple[int, int, int, int]:
    """(K, R, T, N) of `placement`."""
    k = r = t = 0
    for i, b in placement.items():
        value = problem.values[i][b]
        assert value is not None, "placement on an ineligible node"
        k, r, t = k + value[0], r + value[1], t + value[2]
    return (k, r, t, len(placement))


def is_feasible(problem: Problem, placement: Mapping[int, int]) -> bool:
    """Each placed session eligible on its node and no node's room exceeded (discretized)."""
    used = [0] * problem.m
    for i, b in placement.items():
        if problem.values[i][b] is None:
            return False
        used[b] += problem.size[i]
    return all(u <= r for u, r in zip(used, problem.room))


def sizes_gcd(items: Iterable[int], size: Sequence[int]) -> int:
    """The gcd of the sizes of `items` (1 when there are none, or all are 0): every total of them is a
    multiple of it, so rooms and sizes divided by it keep every packing (planner/shared/knapsack.py's
    `size_gcd` does the same in compiled code, over an array)."""
    return math.gcd(*(size[i] for i in items)) or 1
