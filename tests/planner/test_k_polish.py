"""The compiled local search on K-placements (planner/k/polish.py): it never loses K, keeps the placement
feasible and says what it is worth; it makes the moves it claims (a shift that makes room, an exact
re-pack of a node, and with exchanges a session moved to a better node alone or swapped with one there)."""

from __future__ import annotations

import random

import numpy as np

from tao_harness.planner.k.arrays import DualArrays
from tao_harness.planner.k.polish import exchanged_placement, polish, polish_placement
from test_k_dual import small_k_problems
from test_k_level import every_k_placement, k_of


def polished(arrays: DualArrays, at: np.ndarray) -> tuple[float, np.ndarray]:
    at = at.copy()
    layout = arrays.layout()
    return polish(*layout[:9], at), at


def check_feasible(arrays: DualArrays, at: np.ndarray) -> float:
    """K of the placement `at` (pair per local session), asserting each session on one of its own pairs
    and every room kept."""
    used = np.zeros(len(arrays.room), dtype=np.int64)
    value = 0.0
    for s, p in enumerate(at.tolist()):
        if p >= 0:
            assert arrays.pair_session[p] == s
            used[arrays.pair_node[p]] += arrays.size[s]
            value += arrays.pair_credit[p]
    assert (used <= arrays.room).all()
    return value


def random_placement(rng: random.Random, arrays: DualArrays) -> np.ndarray:
    """Sessions in random order, each on a random pair of its own that fits, or none."""
    at = np.full(len(arrays.sessions), -1, dtype=np.int64)
    left = arrays.room.copy()
    for s in rng.sample(range(len(arrays.sessions)), len(arrays.sessions)):
        pairs = arrays.rank_pair[arrays.rank_start[s]:arrays.rank_start[s + 1]].tolist()
        p = rng.choice(pairs + [-1])
        if p >= 0 and left[arrays.pair_node[p]] >= arrays.size[s]:
            at[s] = p
            left[arrays.pair_node[p]] -= arrays.size[s]
    return at


def test_polish_never_loses_k_and_stays_feasible() -> None:
    rng = random.Random("polish")
    for problem, credit in small_k_problems("polish-problems", 200):
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        optimum = max(k_of(problem, p) for p in every_k_placement(problem))
        start = random_placement(rng, arrays)
        before = check_feasible(arrays, start)
        value, after = polished(arrays, start)
        assert value == check_feasible(arrays, after)
        assert before <= value <= optimum


def single_node_arrays(credit: list[dict[int, int]], size: list[int], room: list[int]) -> DualArrays:
    return DualArrays.of(credit, room, np.array(size, dtype=np.int64))


def pair_of(arrays: DualArrays, session: int, node: int) -> int:
    s = int(np.searchsorted(arrays.sessions, session))
    return next(p for p in range(len(arrays.pair_session))
                if arrays.pair_session[p] == s and arrays.pair_node[p] == node)


def test_shift_makes_room_for_a_left_out_session() -> None:
    """Session 0 (credit 10, size 4) is left out of full node 0; session 1 (size 4) sits there but may
    move to node 1 for a little less credit: shifting it lets session 0 in."""
    credit = [{0: 10, 1: 5}, {1: 4}]
    arrays = single_node_arrays(credit, [4, 4], [4, 4])
    at = np.full(2, -1, dtype=np.int64)
    at[1] = pair_of(arrays, 1, 0)
    value, after = polished(arrays, at)
    assert value == 14
    assert after[0] == pair_of(arrays, 0, 0) and after[1] == pair_of(arrays, 1, 1)


def test_repack_replaces_a_node_content_by_its_knapsack_optimum() -> None:
    """Node 0 (room 6) holds session 0 (size 4, credit 5); left-out sessions 1 and 2 (size 3, credit 4
    each) together are worth more: the re-pack swaps them in."""
    arrays = single_node_arrays([{0: 5, 1: 4, 2: 4}], [4, 3, 3], [6])
    at = np.full(3, -1, dtype=np.int64)
    at[0] = pair_of(arrays, 0, 0)
    value, after = polished(arrays, at)
    assert value == 8
    assert after[0] == -1 and after[1] >= 0 and after[2] >= 0



def k_of_placement(credit: list[dict[int, int]], placement: dict[int, int]) -> int:
    return sum(credit[b][i] for i, b in placement.items())


def test_exchanges_never_lose_k_and_stay_feasible() -> None:
    """From random placements: a feasible placement on credited pairs, at least the plain polish's K (the
    exchanges start from it), at most the optimum, and on some problems more than the polish."""
    rng = random.Random("exchange")
    gained = 0
    for problem, credit in small_k_problems("exchange-problems", 200):
        arrays = DualArrays.of(credit, list(problem.room), np.array(problem.size))
        optimum = max(k_of(problem, p) for p in every_k_placement(problem))
        at = random_placement(rng, arrays)
        start = {int(arrays.sessions[s]): int(arrays.pair_node[p])
                 for s, p in enumerate(at.tolist()) if p >= 0}
        plain = k_of_placement(credit, polish_placement(arrays, start))
        exchanged = exchanged_placement(arrays, start)
        exchanged_at, kept = arrays.pairs_of(exchanged)
        assert not kept  # every session on one of its credited pairs
        assert check_feasible(arrays, exchanged_at) == k_of_placement(credit, exchanged)
        assert plain <= k_of_placement(credit, exchanged) <= optimum
        gained += plain < k_of_placement(credit, exchanged)
    assert gained > 0


def test_exchange_moves_a_session_to_a_better_node() -> None:
    """Session 0 sits on node 0 (credit 3) and is worth 7 on node 1, which has room: it moves."""
    arrays = single_node_arrays([{0: 3}, {0: 7}], [2], [2, 2])
    assert exchanged_placement(arrays, {0: 0}) == {0: 1}


def test_exchange_swaps_two_sessions_worth_more_on_each_other_s_node() -> None:
    """Full nodes: session 0 on node 0 (credit 2, 6 on node 1), session 1 on node 1 (credit 2, 6 on node 0);
    neither fits the other's node alone, no re-pack of one node gains, swapped they collect 12."""
    arrays = single_node_arrays([{0: 2, 1: 6}, {0: 6, 1: 2}], [3, 3], [3, 3])
    assert polish_placement(arrays, {0: 0, 1: 1}) == {0: 0, 1: 1}
    assert exchanged_placement(arrays, {0: 0, 1: 1}) == {0: 1, 1: 0}
