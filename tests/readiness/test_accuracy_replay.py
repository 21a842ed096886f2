"""Accuracy replay on a tiny history whose every prediction is worked out by hand."""

from __future__ import annotations

import pytest

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.accuracy import CallSample, checkpoints, replay_accuracy
from tao_harness.readiness.call import is_censored
from tao_harness.readiness.estimator import bernstein_bound
from tao_harness.readiness.neighbors import NeighborConfig


def call(start: float, command: str, duration: float, **args: object) -> CallSample:
    return CallSample(started_at=start, tool_name="Bash", command=command, args=args or None, duration_s=duration)


CALLS = [
    call(0.0, "make", 4.0),  # nothing known: default 5 -> error 1
    call(10.0, "make", 6.0),  # one `make` seen: its 4 s -> error 2
    call(20.0, "sleep 3", 3.1),  # a lone sleep is its own duration: 3 -> error 0.1
    call(30.0, "make", 5.0),  # {4, 6} equally alike: the weighted median is the lower, 4 -> error 1
    call(40.0, "timeout 2 pytest", 2.0),  # everything seen is longer than the 2 s limit -> 2, error 0
]


def test_replay_on_a_known_history() -> None:
    # replay sorts by start time itself; no prior of the harness's calls, so that the neighbours alone decide
    report = replay_accuracy(reversed(CALLS), neighbors=NeighborConfig(unbounded_prior_weight=0.0))
    assert report.n == 5
    assert report.mae_s == pytest.approx((1 + 2 + 0.1 + 1 + 0) / 5)
    assert report.within_share == pytest.approx(2 / 5)
    by_source = {s.source: s for s in report.by_source}
    assert set(by_source) == {"default", "neighbors", "hint"}
    assert by_source["default"].n == 1 and by_source["default"].mae_s == pytest.approx(1.0)
    assert by_source["hint"].n == 2 and by_source["hint"].mae_s == pytest.approx(0.05)


def test_baselines_are_scored_in_the_same_replay() -> None:
    overall = replay_accuracy(CALLS).overall
    assert overall is not None
    scores = overall.predictors
    assert scores["zero"].mae_s == pytest.approx((4 + 6 + 3.1 + 5 + 2) / 5)
    # online family median: nothing / {4} / no sleep yet / {4, 6} -> 5 / no pytest yet
    assert scores["family_median"].mae_s == pytest.approx((4 + 2 + 3.1 + 0 + 2) / 5)
    # in hindsight: make {4, 6, 5} -> 5, the others are alone in their family
    assert scores["hindsight_median"].mae_s == pytest.approx((1 + 1 + 0 + 0 + 0) / 5)
    make_bound = bernstein_bound(5.0, 2.0, 2.0, 2, 0.2)
    # the old predictor: default 5 twice (too few samples), the sleep 3 seen up to 5% late (no sleep seen
    # yet: 3.15), the make bound, clamped 2
    assert scores["bound"].mae_s == pytest.approx((1 + 1 + 0.05 + (make_bound - 5.0) + 0) / 5)
    assert overall.bounds["bound"].coverage == pytest.approx(4 / 5)  # 6 s > default 5 s


def test_the_bound_of_a_sleep_covers_what_sleeps_take_past_their_n() -> None:
    # A sleep returns a little after its N (5-85 ms in scripts/demo_history.py's history); a bound of N
    # covered none of its 109 sleeps. What sleeps took past N is learned whatever their N.
    overheads = [(2, 0.050), (5, 0.008), (1, 0.065), (5, 0.083), (10, 0.012), (2, 0.017), (5, 0.011), (1, 0.005)]
    sleeps = [call(20.0 * i, f"sleep {n}", n + over) for i, (n, over) in enumerate(overheads * 4)]
    family = replay_accuracy(sleeps).by_family["bash:sleep"]
    assert family.bounds["forecast"].coverage >= 0.75 and family.bounds["bound"].coverage >= 0.75
    assert family.predictors["forecast"].mae_s < 0.04  # the prediction itself stays N
    assert checkpoints(0.2) == [0.0]
    assert checkpoints(3.0) == [0.0, 0.5, 1.0, 2.0]
    overall = replay_accuracy(CALLS).overall
    assert overall is not None
    assert overall.questions == sum(len(checkpoints(c.duration_s)) for c in CALLS)
    assert sum(b.n for b in overall.reliability) == overall.questions
    # zero always answers "ready": wrong exactly for the questions more than H before the end
    wrong = sum(1 for c in CALLS for e in checkpoints(c.duration_s) if c.duration_s > e + 1.0)
    assert overall.predictors["zero"].brier == pytest.approx(wrong / overall.questions)


def test_a_killed_call_is_censored_not_a_duration() -> None:
    killed = CallSample(0.0, "bash", "./serve.sh", None, 30.0, env_timeout_s=30.0, session_id="s", status="timeout")
    again = CallSample(40.0, "bash", "./serve.sh", None, 30.0, env_timeout_s=30.0, session_id="s", status="timeout")
    report = replay_accuracy([killed, again])
    rows = report.by_harness["?"].predictors["forecast"]
    assert rows.mae_s == pytest.approx((25.0 + 0.0) / 2)  # default 5 s first; then the kill at 30 s again
    assert is_censored(30.0, "timeout", None) and is_censored(29.0, None, 30.0)  # mini's kills jitter
    assert not is_censored(27.0, None, 30.0) and not is_censored(30.0, "error", None)


def test_tolerance_and_config_are_honoured() -> None:
    calls = [call(0.0, "make", 2.0)]
    assert replay_accuracy(calls, ReadinessConfig(default_s=2.3), tolerance_s=0.5).within_share == 1.0
    assert replay_accuracy(calls, ReadinessConfig(default_s=2.3), tolerance_s=0.1).within_share == 0.0


def test_empty_replay() -> None:
    report = replay_accuracy([])
    assert (report.n, report.mae_s, report.within_share, report.by_source) == (0, None, None, ())
    assert report.to_json()["n"] == 0


def test_forecast_json_keeps_the_documented_keys_and_adds_readiness() -> None:
    from tao_harness.readiness.call import Forecaster

    forecaster = Forecaster()
    key, hints = forecaster.describe("Bash", None, {"command": "npm test", "timeout": 15000})
    for duration in (20.0, 22.0):
        forecaster.observe(key, hints, duration)  # both ran past the 15 s limit: killed there
    estimate = forecaster.estimate(key, hints)
    shown = estimate.to_json(horizon_s=1.0, elapsed_s=14.5)
    assert {k: shown[k] for k in ("family", "hints", "predicted_s", "source")} == {
        "family": "bash:npm",
        "hints": {"min_s": None, "max_s": 15.0, "background": False},
        "predicted_s": 15.0,
        "source": "hint",
    }
    # At the limit, the bound allows the 5% by which recorded kills come back late (mini's 30 s: 29.2-30.8 s).
    assert shown["bound_s"] == pytest.approx(15.75) and shown["p_return_within_horizon"] == 1.0
    assert shown["remaining_s"] == pytest.approx(0.5)
    read_key, read_hints = forecaster.describe("Read", None, {"file_path": "/x"})
    assert forecaster.estimate(read_key, read_hints).prediction.source == "neighbors"  # the harness's calls


def test_readiness_answers_from_neighbours_keep_a_margin_exact_ones_do_not() -> None:
    from tao_harness.readiness.call import P_MARGIN, Forecaster

    forecaster = Forecaster()
    key, hints = forecaster.describe("Bash", None, {"command": "make all"}, session="s", harness="claude-code")
    for _ in range(5):
        forecaster.observe(key, hints, 10.0)
    estimate = forecaster.estimate(key, hints)
    assert estimate.p_within(0.0, 1.0) == pytest.approx(P_MARGIN)  # every neighbour took 10 s: unlikely, not 0
    assert estimate.p_within(9.5, 1.0) == pytest.approx(1.0 - P_MARGIN)
    sleep_key, sleep_hints = forecaster.describe("Bash", None, {"command": "sleep 3"})
    sleep = forecaster.estimate(sleep_key, sleep_hints)
    assert sleep.p_within(0.0, 1.0) == 0.0 and sleep.p_within(2.5, 1.0) == 1.0  # an exact deadline
