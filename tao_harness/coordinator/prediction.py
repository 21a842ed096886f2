"""How the state machine predicts a tool call's duration: hints + duration history (DESIGN.md §4).

`ToolPredictor` is the seam: the live coordinator and the simulator both use `HistoryPredictor`, which
sees only what a live system sees (tool name, command text, arguments, earlier durations) and learns
online from every finished call; the simulator's oracle ablation wraps it. The rules themselves live in
`tao_harness.readiness` — this module only wires them to `ToolStart`.
"""

from __future__ import annotations

from typing import Protocol

from tao_harness.config import ReadinessConfig
from tao_harness.coordinator.records import ToolStart
from tao_harness.readiness.estimator import DurationHistory, Prediction, predict
from tao_harness.readiness.family import family_key
from tao_harness.readiness.hints import Hints, parse_hints


class ToolPredictor(Protocol):
    """Family and hints (read once per call), predicted total duration, learning from finished calls."""

    def describe(self, start: ToolStart) -> tuple[str, Hints]: ...

    def predict(self, start: ToolStart, family: str, hints: Hints) -> Prediction: ...

    def observe(self, family: str, duration_s: float) -> None: ...


class HistoryPredictor:
    """Hints first, then the family's Bernstein bound, the global bound, the default (readiness.estimator)."""

    def __init__(self, history: DurationHistory, config: ReadinessConfig = ReadinessConfig()) -> None:
        self.history = history
        self._config = config

    def describe(self, start: ToolStart) -> tuple[str, Hints]:
        hints = parse_hints(start.name, start.command, start.args, env_timeout_s=start.env_timeout_s)
        return family_key(start.name, start.command), hints

    def predict(self, start: ToolStart, family: str, hints: Hints) -> Prediction:
        return predict(self.history, family, hints, self._config)

    def observe(self, family: str, duration_s: float) -> None:
        self.history.observe(family, duration_s)
