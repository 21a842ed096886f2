"""How the state machine predicts a tool call's return: hints + the call history (DESIGN.md §4).

`ToolPredictor` is the seam: the live coordinator and the simulator both use `HistoryPredictor`, which
sees only what a live system sees (tool name, command text, arguments, session, earlier calls) and
learns online from every finished call; the simulator's oracle ablation wraps it. The rules themselves
live in `tao_harness.readiness.call.Forecaster` — this module only wires them to `ToolStart`.
"""

from __future__ import annotations

from typing import Protocol

from tao_harness.config import ReadinessConfig
from tao_harness.coordinator.records import ToolStart
from tao_harness.readiness.call import Forecaster
from tao_harness.readiness.estimator import DurationHistory, Prediction
from tao_harness.readiness.hints import Hints
from tao_harness.readiness.neighbors import CallKey, NeighborHistory


class ToolPredictor(Protocol):
    """Family and hints (read once per call), predicted return, learning from finished calls."""

    def describe(self, start: ToolStart) -> tuple[str, Hints]: ...

    def predict(self, start: ToolStart, family: str, hints: Hints) -> Prediction: ...

    def observe(self, start: ToolStart, family: str, duration_s: float, censored: bool = False) -> None: ...


_MAX_OPEN_FORECASTS = 4096  # calls whose end is never reported (session dropped) must not pile up


class HistoryPredictor:
    """`Forecaster` over the coordinator's histories: the return-time distribution of similar earlier calls
    (or, with `readiness.estimator = "bernstein"`, the family's bound).

    A running call's distribution is computed once, at its first prediction, and reused by every refresh
    (which conditions it on the elapsed time): the neighbour search costs O(history), a refresh runs
    every planning round for every running call, and what finished meanwhile changes little.
    """

    def __init__(self, history: DurationHistory, config: ReadinessConfig = ReadinessConfig(),
                 neighbors: NeighborHistory | None = None) -> None:
        self.history = history
        self.forecaster = Forecaster(config, durations=history, neighbors=neighbors)
        self._open: dict[str, Prediction] = {}

    def _key(self, start: ToolStart) -> tuple[CallKey, Hints]:
        return self.forecaster.describe(start.name, start.command, start.args, env_timeout_s=start.env_timeout_s,
                                        session=start.session, harness=start.harness)

    def describe(self, start: ToolStart) -> tuple[str, Hints]:
        key, hints = self._key(start)
        return key.family, hints

    def predict(self, start: ToolStart, family: str, hints: Hints) -> Prediction:
        found = self._open.get(start.call_id)
        if found is None:
            found = self.forecaster.estimate(self._key(start)[0], hints).prediction
            if found.distribution is not None:  # a bound (no distribution) is cheap: re-derived each time
                self._open[start.call_id] = found
                if len(self._open) > _MAX_OPEN_FORECASTS:
                    del self._open[next(iter(self._open))]
        return found

    def observe(self, start: ToolStart, family: str, duration_s: float, censored: bool = False) -> None:
        """A call ended after `duration_s`; `censored`: its deadline stopped it (the work's length is unknown)."""
        self._open.pop(start.call_id, None)
        key, hints = self._key(start)
        self.forecaster.observe(key, hints, duration_s, "timeout" if censored else None)
