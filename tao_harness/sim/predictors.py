"""The simulator's tool predictor: the live `HistoryPredictor`, learning online, plus the oracle ablation.

Live and simulated runs predict the same way: from hints and from the calls that already finished in
this run (the history starts empty, as a fresh coordinator's would). The simulator tells the predictor
each call's true duration before the call starts (`reveal`) but only the oracle ablation
(`--oracle-readiness`) uses it.
"""

from __future__ import annotations

from tao_harness.config import ReadinessConfig
from tao_harness.coordinator.prediction import HistoryPredictor
from tao_harness.coordinator.records import ToolStart
from tao_harness.readiness.distribution import ReturnDistribution
from tao_harness.readiness.estimator import DurationHistory, Prediction
from tao_harness.readiness.family import family_key
from tao_harness.readiness.hints import Hints
from tao_harness.readiness.neighbors import CallKey


class SimPredictor(HistoryPredictor):
    """`HistoryPredictor` over a fresh history; with `oracle=True`, predictions are the true durations."""

    def __init__(self, config: ReadinessConfig, *, oracle: bool = False) -> None:
        super().__init__(DurationHistory(config), config)
        self._oracle = oracle
        self._true_s: dict[str, float] = {}
        self._described: dict[tuple[str, str | None, float | None, str], tuple[CallKey, Hints]] = {}

    def reveal(self, call_id: str, duration_s: float) -> None:
        """The call's true duration (kept only for the oracle ablation)."""
        if self._oracle:
            self._true_s[call_id] = duration_s

    def _key(self, start: ToolStart) -> tuple[CallKey, Hints]:
        """Memoized: traces repeat command lines often, and keys and hints depend only on them."""
        if start.args:
            return super()._key(start)
        memo = (start.name, start.command, start.env_timeout_s, start.session)
        found = self._described.get(memo)
        if found is None:
            found = self._described[memo] = super()._key(start)
        return found

    def predict(self, start: ToolStart, family: str, hints: Hints) -> Prediction:
        if self._oracle and start.call_id in self._true_s:
            seconds = self._true_s[start.call_id]  # an exact exposed deadline
            return Prediction(seconds, "hint", ReturnDistribution.point(seconds))
        return super().predict(start, family, hints)

    def forget(self, call_id: str) -> None:
        self._true_s.pop(call_id, None)

    def family_mean(self, tool_name: str, command: str | None) -> float | None:
        """Mean duration of the call's family so far (Continuum's pin rule), None before any call."""
        family = family_key(tool_name, command)
        return self.history.stats(family).mean if self.history.count(family) else None
