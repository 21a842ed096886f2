"""One call's estimate from its raw fields: family key, hints and prediction in one step.

The coordinator (at tool start), `tao history predict` and the accuracy replay all go from
(tool name, command, args, harness deadline) to a prediction the same way; this is that way, and
`CallEstimate.to_json()` is the JSON shape scripts rely on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.estimator import DurationHistory, Prediction, predict
from tao_harness.readiness.family import family_key
from tao_harness.readiness.hints import Hints, command_text, parse_hints


@dataclass(frozen=True)
class CallEstimate:
    """What is known about a call when it starts."""

    family: str
    hints: Hints
    prediction: Prediction

    def to_json(self) -> dict[str, Any]:
        """`{"family", "hints": {"min_s", "max_s", "background"}, "predicted_s", "source"}`."""
        return {
            "family": self.family,
            "hints": self.hints.to_json(),
            "predicted_s": self.prediction.predicted_s,
            "source": self.prediction.source,
        }


def estimate_call(
    history: DurationHistory,
    tool_name: str,
    command: str | None,
    args: Mapping[str, Any] | None = None,
    *,
    env_timeout_s: float | None = None,
    config: ReadinessConfig | None = None,
) -> CallEstimate:
    """Family, hints and predicted duration of a call; a missing `command` is read from `args["command"]`."""
    command = command_text(command, args)
    hints = parse_hints(tool_name, command, args, env_timeout_s=env_timeout_s)
    family = family_key(tool_name, command)
    return CallEstimate(family, hints, predict(history, family, hints, config or history.config))
