"""The empirical-Bernstein bound, the in-memory history and the prediction trust order."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.estimator import (
    DurationHistory,
    Prediction,
    bernstein_bound,
    predict,
    remaining_s,
)
from tao_harness.readiness.hints import NO_HINTS, Hints

CONFIG = ReadinessConfig()
# Durations 1, 2, 3, 6: mean 3, sample variance (4+1+0+9)/3 = 14/3, range 5, ln(3/0.2) = ln 15 = 2.708050201.
# sqrt(2 * 14/3 * 2.708050201 / 4) = 2.513719118 ; 3 * 5 * 2.708050201 / 4 = 10.155188254
HAND_BOUND = 3.0 + 2.513719118 + 10.155188254


def test_bernstein_matches_the_hand_computed_value() -> None:
    assert bernstein_bound(3.0, 14 / 3, 5.0, 4, 0.2) == pytest.approx(HAND_BOUND, abs=1e-8)


def test_history_bound_uses_sample_variance_and_range() -> None:
    history = DurationHistory.from_samples([("bash:pytest", d) for d in (1.0, 2.0, 3.0, 6.0)])
    assert history.bound("bash:pytest") == pytest.approx(HAND_BOUND, abs=1e-8)


@pytest.mark.parametrize("bad", [{"n": 0}, {"delta": 0.0}, {"delta": 1.0}, {"variance": -1.0}, {"value_range": -1}])
def test_bernstein_rejects_impossible_inputs(bad: dict[str, float]) -> None:
    arguments = {"mean": 1.0, "variance": 1.0, "value_range": 1.0, "n": 3, "delta": 0.2} | bad
    with pytest.raises(ValueError):
        bernstein_bound(**arguments)  # type: ignore[arg-type]


def test_bound_needs_min_samples_then_falls_back_to_global() -> None:
    history = DurationHistory()
    history.observe("Read", 0.1)
    assert history.bound("Read") is None and history.global_bound() is None
    history.observe("Edit", 0.3)
    assert history.bound("Read") is None
    expected_global = bernstein_bound(0.2, statistics.variance([0.1, 0.3]), 0.2, 2, 0.2)
    assert history.global_bound() == pytest.approx(expected_global)
    prediction = predict(history, "Read", NO_HINTS, CONFIG)
    assert prediction.source == "global" and prediction.predicted_s == pytest.approx(expected_global)


def test_stricter_config_needs_more_samples() -> None:
    history = DurationHistory.from_samples([("x", 1.0), ("x", 2.0)], ReadinessConfig(min_samples=3))
    assert history.bound("x") is None
    history.observe("x", 3.0)
    assert history.bound("x") is not None


def test_invalid_durations_are_ignored() -> None:
    history = DurationHistory()
    assert not history.observe("x", float("nan"))
    assert not history.observe("x", -1.0)
    assert not history.observe("x", float("inf"))
    assert history.observe("x", 0.0)
    assert history.count("x") == 1 and len(history) == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4), min_size=2, max_size=300))
def test_running_stats_match_numpy(durations: list[float]) -> None:
    history = DurationHistory.from_samples(("f", d) for d in durations)
    stats = history.stats("f")
    values = np.array(durations)
    assert stats.n == len(durations)
    assert stats.mean == pytest.approx(values.mean(), rel=1e-9, abs=1e-9)
    assert stats.max == values.max()
    assert stats.p50 == pytest.approx(np.percentile(values, 50), rel=1e-9, abs=1e-9)
    assert stats.p99 == pytest.approx(np.percentile(values, 99), rel=1e-9, abs=1e-9)
    expected = bernstein_bound(values.mean(), values.var(ddof=1), values.max() - values.min(), len(values), 0.2)
    assert stats.bound == pytest.approx(expected, rel=1e-7, abs=1e-7)


def test_percentile_sample_stays_bounded_and_representative() -> None:
    history = DurationHistory.from_samples(("f", float(i % 100)) for i in range(5_000))
    stats = history.stats("f")
    assert stats.n == 5_000 and stats.max == 99.0
    assert 40 <= stats.p50 <= 60 and stats.p90 >= 80


def test_stats_and_families() -> None:
    history = DurationHistory.from_samples([("b", 1.0), ("a", 2.0)])
    assert history.families() == ["a", "b"]
    global_stats = history.global_stats()
    assert global_stats is not None and global_stats.n == 2 and global_stats.family == "*"
    with pytest.raises(KeyError):
        history.stats("missing")
    assert DurationHistory().global_stats() is None


def _history(family: str, durations: list[float]) -> DurationHistory:
    return DurationHistory.from_samples((family, d) for d in durations)


def test_default_when_nothing_is_known() -> None:
    assert predict(DurationHistory(), "bash:make", NO_HINTS, CONFIG) == Prediction(5.0, "default")
    assert predict(DurationHistory(), "x", NO_HINTS, ReadinessConfig(default_s=2.0)).predicted_s == 2.0


def test_family_bound_is_used_once_known() -> None:
    history = _history("bash:make", [10.0, 10.0, 10.0])
    assert predict(history, "bash:make", NO_HINTS, CONFIG) == Prediction(10.0, "family")


def test_sleep_hint_beats_history_unless_the_family_takes_longer() -> None:
    sleep_five = Hints(min_s=5.0, max_s=None, background=False, sources=("sleep",))
    slow = _history("bash:make", [30.0, 30.0])
    fast = _history("bash:cat", [0.1, 0.1])
    assert predict(slow, "bash:make", sleep_five, CONFIG) == Prediction(30.0, "family")
    assert predict(fast, "bash:cat", sleep_five, CONFIG) == Prediction(5.0, "hint")
    # A sleep family mixes unrelated N: the parsed N wins even against a longer history, as a bound (a
    # sleep returns a little late): up to 5% late until what sleeps take past their N has been seen.
    sleeps = _history("bash:sleep", [60.0, 60.0, 60.0])
    assert predict(sleeps, "bash:sleep", sleep_five, CONFIG) == Prediction(5.25, "hint")
    for asked, took in ((1.0, 1.02), (10.0, 10.04), (2.0, 2.03)):
        sleeps.observe_sleep(asked, took)
    learned = predict(sleeps, "bash:sleep", sleep_five, CONFIG)
    assert learned.source == "hint" and 5.04 < learned.predicted_s < 5.25
    # A global-only history does not override a parsed sleep.
    assert predict(slow, "bash:other", sleep_five, CONFIG) == Prediction(5.0, "hint")


def test_upper_bound_clamps_and_reports_hint() -> None:
    history = _history("bash:pytest", [100.0, 120.0])
    capped = Hints(min_s=None, max_s=30.0, background=False, sources=("timeout",))
    assert predict(history, "bash:pytest", capped, CONFIG) == Prediction(30.0, "hint")
    assert predict(DurationHistory(), "Monitor", Hints(None, 2.0, False), CONFIG) == Prediction(2.0, "hint")
    loose = Hints(min_s=None, max_s=1000.0, background=False)
    assert predict(history, "bash:pytest", loose, CONFIG).source == "family"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=100), max_size=5),
    st.one_of(st.none(), st.floats(min_value=0.01, max_value=100)),
    st.one_of(st.none(), st.floats(min_value=0.01, max_value=100)),
)
def test_prediction_respects_both_bounds(durations: list[float], low: float | None, high: float | None) -> None:
    if low is not None and high is not None and low > high:
        low, high = high, low
    prediction = predict(_history("f", durations), "f", Hints(low, high, False), CONFIG)
    assert math.isfinite(prediction.predicted_s) and prediction.predicted_s >= 0
    if low is not None:
        assert prediction.predicted_s >= low
    if high is not None:
        assert prediction.predicted_s <= high


def test_remaining_time() -> None:
    prediction = Prediction(8.0, "family")
    assert remaining_s(prediction, 3.0) == 5.0
    assert remaining_s(prediction, 9.5) == 0.0
