"""Binary readiness r(t): every transition of DESIGN.md §4."""

from __future__ import annotations

import pytest

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.estimator import Prediction
from tao_harness.readiness.state import (
    ToolExecution,
    complete,
    consume_probe,
    readiness,
    readiness_reason,
    refresh,
    start_execution,
)

CONFIG = ReadinessConfig()  # H = 1 s, refresh 30 s


def running(z: float, predicted_at: float = 0.0) -> ToolExecution:
    return ToolExecution(started_at=0.0, predicted_completion=z, predicted_at=predicted_at)


def test_no_tool_is_not_ready() -> None:
    assert readiness(None, 5.0, CONFIG) == 0
    assert readiness_reason(None, 5.0, CONFIG) == "no_tool"


def test_observed_completion_is_ready_whatever_the_prediction() -> None:
    done = complete(running(z=100.0), completed_at=4.0)
    assert readiness(done, 5.0, CONFIG) == 1
    assert readiness(complete(running(z=1.0, predicted_at=-100.0), 2.0), 500.0, CONFIG) == 1


@pytest.mark.parametrize(
    ("z", "now", "expected", "reason"),
    [
        (10.0, 9.5, 1, "within_horizon"),
        (10.0, 9.0, 1, "within_horizon"),  # z = t + H exactly
        (10.0, 8.9, 0, "outside_horizon"),
        (10.0, 2.0, 0, "outside_horizon"),
    ],
)
def test_horizon(z: float, now: float, expected: int, reason: str) -> None:
    assert readiness(running(z), now, CONFIG) == expected
    assert readiness_reason(running(z), now, CONFIG) == reason


def test_horizon_follows_config() -> None:
    assert readiness(running(10.0), 7.0, ReadinessConfig(horizon_s=3.0)) == 1
    assert readiness(running(10.0), 7.0, ReadinessConfig(horizon_s=0.0)) == 0


def test_stale_prediction_gives_no_readiness() -> None:
    execution = running(z=40.0, predicted_at=0.0)
    assert readiness(execution, 30.0, CONFIG) == 0  # 30 s old: still fresh, but outside H
    assert readiness_reason(running(z=39.5), 39.0, CONFIG) == "stale"
    assert readiness(running(z=39.5), 39.0, CONFIG) == 0
    assert readiness(running(z=39.5, predicted_at=20.0), 39.0, CONFIG) == 1


def test_overdue_gives_one_probe_then_nothing_until_refreshed() -> None:
    execution = running(z=5.0)
    assert readiness_reason(execution, 6.0, CONFIG) == "probe"
    assert readiness(execution, 6.0, CONFIG) == 1
    used = consume_probe(execution, 6.0, CONFIG)
    assert used.probe_used and not execution.probe_used  # a new record, the old one untouched
    assert readiness(used, 6.0, CONFIG) == 0
    assert readiness(used, 60.0, CONFIG) == 0
    assert readiness_reason(used, 60.0, CONFIG) == "probe_used"
    renewed = refresh(used, Prediction(10.0, "family"), now=6.0)  # 6 s elapsed of a 10 s prediction
    assert renewed.predicted_completion == 10.0 and renewed.predicted_at == 6.0 and not renewed.probe_used
    assert readiness(renewed, 6.0, CONFIG) == 0
    assert readiness(renewed, 9.2, CONFIG) == 1


def test_consume_probe_leaves_other_states_alone() -> None:
    execution = running(z=10.0)
    assert consume_probe(execution, 9.5, CONFIG) is execution
    done = complete(execution, 3.0)
    assert consume_probe(done, 20.0, CONFIG) is done


def test_refresh_of_an_overrun_call_is_due_now() -> None:
    renewed = refresh(running(z=5.0), Prediction(5.0, "default"), now=12.0)
    assert renewed.predicted_completion == 12.0
    assert readiness_reason(renewed, 12.0, CONFIG) == "probe"


def test_start_execution_places_z_after_the_start() -> None:
    execution = start_execution(100.0, Prediction(2.5, "hint"))
    assert (execution.predicted_completion, execution.predicted_at, execution.completed_at) == (102.5, 100.0, None)
    assert readiness(execution, 100.0, CONFIG) == 0
    assert readiness(execution, 101.6, CONFIG) == 1


def test_parallel_calls_are_ready_only_together() -> None:
    from tao_harness.readiness.state import turn_readiness

    soon, late = running(z=10.0), running(z=20.0)
    assert turn_readiness([], 9.5, CONFIG) == 0
    assert turn_readiness([soon], 9.5, CONFIG) == 1
    assert turn_readiness([soon, late], 9.5, CONFIG) == 0
    assert turn_readiness([complete(soon, 9.0), running(z=19.5, predicted_at=0.0)], 19.0, CONFIG) == 1


def test_refreshing_an_overdue_call_with_the_same_bound_gives_no_second_probe() -> None:
    used = consume_probe(running(z=5.0), 6.0, CONFIG)
    again = refresh(used, Prediction(5.0, "family"), now=7.0)  # D = 5 s, 7 s elapsed: still due now
    assert again.predicted_completion == 7.0 and again.predicted_at == 7.0 and again.probe_used
    assert readiness(again, 7.0, CONFIG) == 0
    later = refresh(again, Prediction(12.0, "family"), now=8.0)  # a larger bound moves z ahead
    assert later.predicted_completion == 12.0 and not later.probe_used
    assert readiness(later, 12.5, CONFIG) == 1
