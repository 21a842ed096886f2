from __future__ import annotations

from hypothesis import given, settings, strategies as st

from tao_harness.planner.shared.problem import Packer, Problem, is_feasible, total_value
from tao_harness.planner.spread import spread


def _problem(sizes: list[int], rooms: list[int], values: list[list[tuple[int, int, int] | None]]) -> Problem:
    return Problem(tuple(f"s{i}" for i in range(len(sizes))), tuple(f"n{b}" for b in range(len(rooms))),
                   tuple(sizes), tuple(rooms), tuple(tuple(row) for row in values))


def test_cold_sessions_are_spread_evenly() -> None:
    cold = (0, 1, 100)
    problem = _problem([4, 4, 4, 4], [40, 40], [[cold, cold]] * 4)
    result = spread(problem, {0: 0, 1: 0, 2: 0, 3: 0})
    assert sorted(result.values()).count(0) == 2 and sorted(result.values()).count(1) == 2


def test_a_session_with_credit_stays_on_its_node() -> None:
    problem = _problem([4, 4], [40, 40], [[(900, 1, 100), (0, 1, 100)], [(0, 1, 50), (0, 1, 50)]])
    assert spread(problem, {0: 0, 1: 0}) == {0: 0, 1: 1}


rows = st.integers(1, 5).flatmap(lambda m: st.tuples(
    st.just(m),
    st.lists(st.tuples(st.integers(1, 8), st.lists(st.sampled_from([None, (0, 1, 10), (0, 0, 10), (5, 1, 10)]),
                                                     min_size=m, max_size=m)), min_size=1, max_size=8),
    st.lists(st.integers(0, 30), min_size=m, max_size=m)))


@settings(max_examples=200, deadline=None)
@given(rows, st.randoms(use_true_random=False))
def test_objective_and_feasibility_unchanged(data, rng) -> None:
    m, sessions, rooms = data
    problem = _problem([s for s, _ in sessions], rooms, [list(v) for _, v in sessions])
    placement: dict[int, int] = {}
    used = [0] * m
    for i, (size, values) in enumerate(sessions):
        options = [b for b in range(m) if values[b] is not None and used[b] + size <= rooms[b]]
        if options:
            b = rng.choice(options)
            placement[i] = b
            used[b] += size
    result = spread(problem, placement)
    packer = Packer.for_problem(problem)
    assert is_feasible(problem, result)
    assert set(result) == set(placement)
    assert total_value(problem, packer, result) == total_value(problem, packer, placement)
