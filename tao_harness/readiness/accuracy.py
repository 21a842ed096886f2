"""Prediction accuracy on recorded calls, the way the paper reports it (MAE, share within 0.5 s).

`replay_accuracy` walks the calls in start order and predicts each one from what a live coordinator
would have known at its start: the calls that had *completed* by then (start + duration ≤ this start),
its family key and its hints. Calls still running at that moment are not yet in the history — counting
them would leak the future into the prediction. Each call joins the history once it ends.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.call import estimate_call
from tao_harness.readiness.estimator import DurationHistory


@dataclass(frozen=True)
class CallSample:
    """One recorded tool call, as the store keeps it."""

    started_at: float
    tool_name: str
    command: str | None
    args: Mapping[str, Any] | None
    duration_s: float
    env_timeout_s: float | None = None


@dataclass(frozen=True)
class SourceAccuracy:
    """Errors of the predictions one source produced."""

    source: str
    n: int
    mae_s: float
    within_share: float


@dataclass(frozen=True)
class AccuracyReport:
    """Replay result; `mae_s` and `within_share` are None when there were no calls."""

    n: int
    mae_s: float | None
    within_share: float | None
    """Share of predictions within `tolerance_s` of the real duration (the paper: 82.9% within 0.5 s)."""
    tolerance_s: float
    by_source: tuple[SourceAccuracy, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mae_s": self.mae_s,
            "within_share": self.within_share,
            "tolerance_s": self.tolerance_s,
            "by_source": [
                {"source": s.source, "n": s.n, "mae_s": s.mae_s, "within_share": s.within_share}
                for s in self.by_source
            ],
        }


def _summarize(errors: list[float], tolerance_s: float) -> tuple[float, float]:
    return sum(errors) / len(errors), sum(1 for e in errors if e <= tolerance_s) / len(errors)


def replay_accuracy(
    calls: Iterable[CallSample],
    config: ReadinessConfig | None = None,
    *,
    tolerance_s: float = 0.5,
) -> AccuracyReport:
    """Predict every call from the calls completed before it started; report absolute errors."""
    config = config or ReadinessConfig()
    history = DurationHistory(config)
    running: list[tuple[float, int, str, float]] = []  # (end, order, family, duration) of unfinished calls
    errors: list[float] = []
    by_source: dict[str, list[float]] = defaultdict(list)
    ordered = sorted(enumerate(calls), key=lambda item: (item[1].started_at, item[0]))
    for order, call in ordered:
        while running and running[0][0] <= call.started_at:
            _, _, done_family, done_duration = heapq.heappop(running)
            history.observe(done_family, done_duration)
        estimate = estimate_call(history, call.tool_name, call.command, call.args,
                                 env_timeout_s=call.env_timeout_s, config=config)
        error = abs(estimate.prediction.predicted_s - call.duration_s)
        errors.append(error)
        by_source[estimate.prediction.source].append(error)
        heapq.heappush(running, (call.started_at + call.duration_s, order, estimate.family, call.duration_s))
    if not errors:
        return AccuracyReport(n=0, mae_s=None, within_share=None, tolerance_s=tolerance_s)
    mae, within = _summarize(errors, tolerance_s)
    sources = tuple(
        SourceAccuracy(source, len(errs), *_summarize(errs, tolerance_s)) for source, errs in sorted(by_source.items())
    )
    return AccuracyReport(n=len(errors), mae_s=mae, within_share=within, tolerance_s=tolerance_s, by_source=sources)
