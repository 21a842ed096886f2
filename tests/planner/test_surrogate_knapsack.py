"""The merged-room knapsack (planner/shared/int_knapsack.py): optimal against brute force, exact on
packed values near 2^62 (where a float would round), and the same choice among equal optima as a plain 0-1
DP table."""

from __future__ import annotations

import itertools
import random

from tao_harness.planner.shared.int_knapsack import surrogate_knapsack


def best_gain(items: list[int], size: list[int], gain: list[int], capacity: int) -> int:
    return max(sum(gain[i] for i in subset)
               for k in range(len(items) + 1) for subset in itertools.combinations(items, k)
               if sum(size[i] for i in subset) <= capacity)


def table_choice(items: list[int], size: list[int], gain: list[int], capacity: int) -> list[int]:
    """The textbook DP over every capacity, an item taken only where strictly better, walked back from
    the last item: the choice the planner's plans were made with."""
    if sum(size[i] for i in items) <= capacity:
        return list(items)
    best = [0] * (capacity + 1)
    taken = []
    for i in items:
        w = size[i]
        if w == 0 or w > capacity:
            continue
        take = [False] * (capacity + 1)
        for c in range(capacity, w - 1, -1):
            if best[c - w] + gain[i] > best[c]:
                best[c], take[c] = best[c - w] + gain[i], True
        taken.append((i, take))
    chosen, c = [i for i in items if size[i] == 0], capacity
    for i, take in reversed(taken):
        if c >= size[i] and take[c]:
            chosen.append(i)
            c -= size[i]
    return chosen


def test_optimal_and_the_same_choice_as_the_plain_table() -> None:
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(0, 9)
        size = [rng.choice([0, rng.randint(1, 5), rng.randint(1, 20)]) for _ in range(n)]
        gain = [rng.choice([rng.randint(1, 4), rng.randint(1, 1 << 40)]) for _ in range(n)]  # ties and not
        items = rng.sample(range(n), rng.randint(0, n))
        capacity = rng.randint(0, 30)
        chosen = surrogate_knapsack(items, size, gain, capacity)
        assert sorted(chosen) == sorted(set(chosen)) and set(chosen) <= set(items)
        assert sum(size[i] for i in chosen) <= capacity
        assert sum(gain[i] for i in chosen) == best_gain(items, size, gain, capacity)
        assert chosen == table_choice(items, size, gain, capacity)


def test_packed_values_near_two_to_the_62_stay_exact() -> None:
    # the two gains differ by 1 in a value a float64 cannot tell apart: only integer sums pick the right one
    base = 1 << 61
    size, gain = [2, 1, 1], [base, base // 2, base // 2 + 1]
    assert float(gain[0]) == float(gain[1] + gain[2])
    assert sorted(surrogate_knapsack([0, 1, 2], size, gain, 2)) == [1, 2]


def test_many_items_and_packed_gains_as_the_plain_table() -> None:
    """Sessions' packed values (ready, then footprint, then one each: R·2^44 + T·2^12 + 1, footprints close
    to proportional to sizes) and rooms of a few thousand quanta: the items every optimum takes or none
    does are set aside before the DP, and the choice stays the plain table's."""
    rng = random.Random(11)
    for _ in range(60):
        n = rng.randint(10, 40)
        size = [rng.randint(1, 400) for _ in range(n)]
        gain = [(rng.random() < 0.4) * 2 ** 44 + (16 * size[i] - rng.randint(0, 15)) * 2 ** 12 + 1
                for i in range(n)]
        items = list(range(n))
        capacity = rng.randint(sum(size) // 4, sum(size) * 3 // 4)
        chosen = surrogate_knapsack(items, size, gain, capacity)
        assert sum(size[i] for i in chosen) <= capacity
        assert chosen == table_choice(items, size, gain, capacity)
