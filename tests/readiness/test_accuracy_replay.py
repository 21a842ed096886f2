"""Accuracy replay on a tiny history whose every prediction is worked out by hand."""

from __future__ import annotations

import pytest

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.accuracy import CallSample, replay_accuracy
from tao_harness.readiness.estimator import bernstein_bound


def call(start: float, command: str, duration: float, **args: object) -> CallSample:
    return CallSample(started_at=start, tool_name="Bash", command=command, args=args or None, duration_s=duration)


def test_replay_on_a_known_history() -> None:
    calls = [
        call(0.0, "make", 4.0),  # nothing known: default 5 -> error 1
        call(10.0, "make", 6.0),  # global over {4} has n=1: default 5 -> error 1
        call(20.0, "sleep 3", 3.1),  # parsed sleep: 3 -> error 0.1
        call(30.0, "make", 5.0),  # family {4, 6}: Bernstein bound
        call(40.0, "timeout 2 pytest", 2.0),  # global bound is larger, clamped to 2 -> error 0
    ]
    make_bound = bernstein_bound(5.0, 2.0, 2.0, 2, 0.2)
    report = replay_accuracy(reversed(calls))  # replay sorts by start time itself
    errors = [1.0, 1.0, 0.1, make_bound - 5.0, 0.0]
    assert report.n == 5
    assert report.mae_s == pytest.approx(sum(errors) / 5)
    assert report.within_share == pytest.approx(2 / 5)
    by_source = {s.source: s for s in report.by_source}
    assert set(by_source) == {"default", "hint", "family"}
    assert by_source["default"].n == 2 and by_source["default"].mae_s == pytest.approx(1.0)
    assert by_source["hint"].n == 2 and by_source["hint"].mae_s == pytest.approx(0.05)
    assert by_source["family"].mae_s == pytest.approx(make_bound - 5.0)


def test_calls_still_running_are_not_known_yet() -> None:
    calls = [call(0.0, "make", 100.0), call(1.0, "make", 100.0), call(2.0, "make", 7.0)]
    report = replay_accuracy(calls)
    assert {s.source for s in report.by_source} == {"default"}
    assert report.mae_s == pytest.approx((95 + 95 + 2) / 3)


def test_tolerance_and_config_are_honoured() -> None:
    calls = [call(0.0, "make", 2.0)]
    assert replay_accuracy(calls, ReadinessConfig(default_s=2.3), tolerance_s=0.5).within_share == 1.0
    assert replay_accuracy(calls, ReadinessConfig(default_s=2.3), tolerance_s=0.1).within_share == 0.0


def test_empty_replay() -> None:
    report = replay_accuracy([])
    assert (report.n, report.mae_s, report.within_share, report.by_source) == (0, None, None, ())
    assert report.to_json()["n"] == 0


def test_estimate_call_reads_the_command_from_args_and_has_the_cli_shape() -> None:
    from tao_harness.readiness.call import estimate_call
    from tao_harness.readiness.estimator import DurationHistory

    history = DurationHistory.from_samples([("bash:npm", 20.0), ("bash:npm", 22.0)])
    estimate = estimate_call(history, "Bash", None, {"command": "npm test", "timeout": 15000})
    assert estimate.to_json() == {
        "family": "bash:npm",
        "hints": {"min_s": None, "max_s": 15.0, "background": False},
        "predicted_s": 15.0,
        "source": "hint",
    }
    assert estimate_call(history, "Read", None, {"file_path": "/x"}).prediction.source == "global"
