"""A K sub-problem's arrays (planner/k/arrays.py): the compiled restriction a search builds its children
with agrees with building the smaller problem's arrays from scratch."""

from __future__ import annotations

import random

import numpy as np

from tao_harness.planner.k.arrays import OPEN, DualArrays


def from_scratch(arrays: DualArrays, place: np.ndarray, drop: np.ndarray
                 ) -> tuple[DualArrays, dict[int, int], int] | None:
    """The restriction rebuilt by `DualArrays.of` over the pairs left (in the same order)."""
    sessions, size = arrays.sessions.tolist(), arrays.size.tolist()
    room = arrays.room.tolist()
    fixed, value = {}, 0
    for s, b in enumerate(place.tolist()):
        if b >= 0:
            room[b] -= size[s]
            fixed[sessions[s]] = b
    if min(room, default=0) < 0:
        return None
    credit: list[dict[int, int]] = [{} for _ in room]
    for p, (s, b, k) in enumerate(zip(arrays.pair_session.tolist(), arrays.pair_node.tolist(),
                                      arrays.pair_credit.tolist())):
        if place[s] == b:
            value += int(k)
        elif place[s] == OPEN and not drop[p] and size[s] <= room[b]:
            credit[b][sessions[s]] = int(k)
    every_size = np.zeros(max(sessions) + 1, dtype=np.int64)
    every_size[arrays.sessions] = arrays.size
    return DualArrays.of(credit, room, every_size), fixed, value


def test_restriction_matches_building_from_scratch() -> None:
    rng = random.Random("restrict")
    for _ in range(300):
        m, n = rng.randint(1, 4), rng.randint(1, 9)
        ids = sorted(rng.sample(range(20), n))
        size = np.zeros(20, dtype=np.int64)
        size[ids] = [rng.randint(1, 6) for _ in ids]
        room = [rng.randint(0, 14) for _ in range(m)]
        credit = [{i: rng.choice([1, 2, 3, 5]) for i in ids if rng.random() < 0.6 and size[i] <= room[b]}
                  for b in range(m)]
        arrays = DualArrays.of(credit, room, size)
        if not len(arrays.sessions):
            continue
        place = np.full(len(arrays.sessions), OPEN, dtype=np.int64)
        for s in range(len(arrays.sessions)):  # some sessions fixed: on one of their nodes, or on none
            nodes = arrays.pair_node[arrays.rank_pair[arrays.rank_start[s]:arrays.rank_start[s + 1]]]
            if rng.random() < 0.3:
                place[s] = rng.choice([-1, *nodes.tolist()])
        drop = np.array([rng.random() < 0.2 for _ in arrays.pair_session], dtype=np.bool_)
        expected, got = from_scratch(arrays, place, drop), arrays.restricted(place, drop)
        assert (expected is None) == (got is None)
        if got is None:
            continue
        (want, want_fixed, want_value), (have, have_fixed, have_value) = expected, got
        assert have_fixed == want_fixed and have_value == want_value
        for field in DualArrays.__dataclass_fields__:
            assert np.array_equal(getattr(have, field), getattr(want, field)), field
