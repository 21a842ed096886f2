"""Return-time distributions: censoring, limits, and readiness conditioned on the elapsed time."""

from __future__ import annotations

import numpy as np
import pytest

from tao_harness.readiness.distribution import ReturnDistribution
from tao_harness.readiness.neighbors import CallKey, NeighborHistory, call_words


def dist(durations: list[float], censored: list[bool] | None = None, **bounds: float) -> ReturnDistribution:
    found = ReturnDistribution.from_samples(durations, [1.0] * len(durations),
                                            censored or [False] * len(durations), **bounds)
    assert found is not None
    return found


def test_censored_weight_moves_to_longer_calls_as_kaplan_meier_does() -> None:
    # 1, 2+ (killed at 2), 3, 4: KM gives 1 a quarter and splits the killed call's quarter over 3 and 4.
    found = dist([1.0, 2.0, 3.0, 4.0], [False, True, False, False])
    assert list(found.times) == [1.0, 3.0, 4.0]
    assert found.weights == pytest.approx([0.25, 0.375, 0.375])
    assert found.median() == 3.0  # ignoring the censoring would say 2


def test_a_censored_call_with_nothing_longer_stays_a_lower_bound() -> None:
    assert dist([0.1, 30.0, 30.0], [False, True, True]).median() == 30.0


def test_this_calls_own_limit_caps_the_samples() -> None:
    # A 60 s call returns at the 30 s limit here; a kill seen at 29.4 s (mini's kills jitter around 30 s)
    # stays where it was seen, a kill at 20 s (another limit) is only a lower bound.
    found = dist([0.1, 29.4, 60.0], [False, True, False], upper_s=30.0)
    assert list(found.times) == [0.1, 29.4, 30.0] and found.median() == 29.4
    assert list(dist([0.1, 20.0, 60.0], [False, True, False], upper_s=30.0).times) == [0.1, 30.0]
    assert found.p_within(29.5, 1.0) == 1.0  # the limit is within H
    assert dist([0.1, 0.2], lower_s=3.0).median() == 3.0  # a foreground sleep


def test_readiness_is_conditional_on_elapsed_time_heavy_tail() -> None:
    # Mostly 50 ms, one call in five runs 20 s: ready at the start, not once it outlived the short ones.
    found = dist([0.05] * 8 + [20.0] * 2)
    assert found.p_within(0.0, 1.0) == pytest.approx(0.8)
    assert found.p_within(2.0, 1.0) == 0.0
    assert found.remaining_s(2.0) == pytest.approx(18.0)
    assert found.p_within(19.5, 1.0) == 1.0


def test_past_every_sample_the_tail_is_lindy() -> None:
    found = dist([1.0, 2.0])
    assert found.p_within(9.0, 1.0) == pytest.approx(1.0 / 10.0)
    assert found.remaining_s(9.0) == 9.0
    assert dist([1.0, 2.0], upper_s=12.0).remaining_s(9.0) == 3.0


def test_estimate_is_the_median_unless_a_miss_costs() -> None:
    # 9 of 21 calls at 0.1 s, the rest spread over 2..33 s: the median (3 s) is near neither cluster
    found = dist([0.1] * 9 + [2.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 25.0, 28.0, 30.0, 33.0])
    assert found.median() == 3.0 and found.estimate(0.5, 0.0) == pytest.approx(3.0)
    # pricing a miss at 4 s moves it to where the 0.1 s calls are within 0.5 s (43% vs 5% at 3 s),
    # as far up as that allows (the absolute error of the long calls still counts)
    assert found.estimate(0.5, 4.0) == pytest.approx(0.6)
    assert dist([1.0, 1.2, 5.0]).estimate(0.5, 4.0) == pytest.approx(1.2)  # the median serves both


def test_the_estimate_lands_where_kills_are_seen() -> None:
    # Kills recorded 0.6-0.9 s before the 30 s limit (clock jumps): an estimate of exactly 30 s misses them all.
    kills = [29.1, 29.2, 29.3, 29.4, 29.4]
    found = dist([0.1, 0.2, *kills], [False, False, *[True] * len(kills)], upper_s=30.0)
    point = found.estimate(0.5, 4.0)
    assert all(abs(point - kill) <= 0.5 for kill in kills)


def test_point_distribution_is_an_exact_deadline() -> None:
    found = ReturnDistribution.point(4.0)
    assert found.median() == 4.0 and found.remaining_s(1.0) == 3.0 and found.p_within(3.0, 1.0) == 1.0
    assert found.p_within(2.0, 1.0) == 0.0


def test_no_weight_no_distribution() -> None:
    assert NeighborHistory().distribution(_key("ls")) is None
    assert ReturnDistribution.from_samples([1.0], [0.0], [False]) is None
    assert ReturnDistribution.from_samples([], [], []) is None


def _key(command: str, session: str = "s1", harness: str = "mini") -> CallKey:
    family = f"bash:{command.split()[0]}"
    return CallKey(call_words("bash", family, command, None), family, session, harness)


def test_neighbors_split_a_family_by_its_arguments_and_session() -> None:
    history = NeighborHistory()
    for session in ("a", "b", "c"):
        history.observe(_key("python train.py --epochs 5", session), 25.0)
        history.observe(_key("python -c print(1)", session), 0.05)
    slow = history.distribution(_key("python train.py --epochs 9", "d"))
    fast = history.distribution(_key("python -c print(2)", "d"))
    assert slow is not None and fast is not None
    assert slow.median() == 25.0 and fast.median() == 0.05
    history.observe(_key("python train.py", harness="openhands"), 9.0)
    other = history.distribution(_key("python train.py", harness="openhands"))
    assert other is not None and other.median() == 9.0  # per harness
    unnamed = history.distribution(_key("python train.py", harness=""))
    assert unnamed is not None and len(unnamed.times) == 7  # no harness named: all of them
    # the same session's own run of the same command outweighs other sessions' runs
    history.observe(_key("python train.py --epochs 5", "d"), 2.0)
    history.observe(_key("python train.py --epochs 5", "d"), 2.0)
    mine = history.distribution(_key("python train.py --epochs 5", "d"))
    assert mine is not None and mine.median() == 2.0


def test_an_unlike_call_gets_its_family_then_its_harness() -> None:
    history = NeighborHistory()
    history.observe(_key("make all"), 7.0)
    history.observe(_key("ls -la"), 0.01)
    unlike = history.distribution(_key("make"))  # shares words with `make all` only
    assert unlike is not None and unlike.median() == 7.0
    unseen = history.distribution(CallKey(frozenset({"zzz"}), "bash:zzz", "s9", "mini"))
    assert unseen is not None and set(np.round(unseen.times, 2)) == {0.01, 7.0}


def test_without_a_limit_one_long_neighbour_does_not_decide() -> None:
    history = NeighborHistory()
    for index in range(20):
        history.observe(_key(f"ls dir{index}", f"s{index}"), 0.05)
    history.observe(_key("apt-get update && apt-get install -y llvm-dev", "s"), 265.0)
    query = _key("apt-get install -y llvm-14-dev", "s")
    unbounded = history.distribution(query)
    assert unbounded is not None and unbounded.median() == 0.05  # the harness's calls outweigh one match
    assert unbounded.quantile(0.9) == 265.0  # ... but the long return stays possible
    limited = history.distribution(query, upper_s=600.0)
    assert limited is not None and limited.median() == 265.0  # a known limit: the neighbour decides
    # A family with calls of its own is its own prior: the harness's 120 s subagents do not make `cat` slow.
    for index in range(60):
        history.observe(_key(f"agent run job{index}", f"a{index}"), 120.0)
    for index in range(6):
        history.observe(_key(f"cat file{index}.txt", f"c{index}"), 0.05)
    cat = history.distribution(_key("cat other.txt", "new"))
    assert cat is not None and cat.median() == 0.05


def test_history_keeps_at_most_twice_its_window() -> None:
    from tao_harness.readiness.neighbors import NeighborConfig

    history = NeighborHistory(NeighborConfig(max_calls=4))
    for index in range(20):
        history.observe(_key(f"cmd{index}"), float(index))
    assert 4 <= len(history) <= 8
    history.observe(_key("bad"), float("nan"))
    assert len(history) <= 8
