"""Prediction accuracy on recorded calls: the forecast and the baselines, replayed side by side.

`replay_accuracy` walks the calls in start order and predicts each one from what a live coordinator
would have known at its start: the calls that had *completed* by then (start + duration ≤ this start),
its words, family, session, harness and hints. Calls still running at that moment are not yet in the
history — counting them would leak the future into the prediction. Each call joins the history once it
ends (a killed one as censored; see `call.is_censored`).

Every call is predicted by each `PREDICTORS` entry in the same replay:
- "forecast": the median of the return-time distribution (`call.Forecaster`, the scheduler's model);
- "zero": always 0 s;
- "family_median": the median duration of the family's completed calls so far (0 before any);
- "hindsight_median": the median of the family's calls in the whole replay (known only afterwards);
- "bound": the family's empirical-Bernstein bound with hints (`estimator.predict`: readiness until now).

Readiness is asked "does the call return within H?" at its start and again while it runs, so each call
is also scored at the elapsed times 0, ½, 1, 2, 4, ... s that it outlived: the forecast answers with
P(return within H | elapsed), a point predictor with 1 when its remaining time max(0, P − e) ≤ H, else
0. `accuracy_report` turns the rows into the tables.
"""

from __future__ import annotations

import heapq
import zlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.accuracy_report import AccuracyReport, CallRow, summarize
from tao_harness.readiness.call import CallSample, Forecaster, is_censored
from tao_harness.readiness.estimator import predict
from tao_harness.readiness.neighbors import NeighborConfig, NeighborHistory

__all__ = ["CallSample", "PREDICTORS", "checkpoints", "replay_accuracy", "session_folds"]

PREDICTORS = ("forecast", "zero", "family_median", "hindsight_median", "bound")


def checkpoints(duration_s: float, limit: int = 12) -> list[float]:
    """Elapsed times at which a running call is scored: 0, then ½ s doubling, while it has not returned."""
    points = [0.0]
    elapsed = 0.5
    while elapsed < duration_s and len(points) < limit:
        points.append(elapsed)
        elapsed *= 2
    return points


def session_folds(calls: Iterable[CallSample], folds: int) -> list[list[CallSample]]:
    """The calls split into `folds` groups of whole sessions (by a stable hash of the session id).

    Replaying each group alone, from an empty history, is how the forecast meets sessions it has never
    seen — as it will on another half of the data — and the spread over folds says what is noise.
    """
    groups: list[list[CallSample]] = [[] for _ in range(folds)]
    for call in calls:
        groups[zlib.crc32(call.session_id.encode()) % folds].append(call)
    return groups


def replay_accuracy(
    calls: Iterable[CallSample],
    config: ReadinessConfig | None = None,
    *,
    tolerance_s: float = 0.5,
    neighbors: NeighborConfig | None = None,
) -> AccuracyReport:
    """Predict every call from the calls completed before it started; report errors and calibration.
    `neighbors` overrides the kernel weights (for tuning scripts)."""
    config = config or ReadinessConfig()
    forecaster = Forecaster(config.model_copy(update={"estimator": "neighbors"}),
                            neighbors=NeighborHistory(neighbors))
    family_durations: dict[str, list[float]] = defaultdict(list)
    running: list[tuple[float, int, Any]] = []  # (end, order, what to learn) of unfinished calls
    rows: list[CallRow] = []
    ordered = sorted(enumerate(calls), key=lambda item: (item[1].started_at, item[0]))
    for order, call in ordered:
        while running and running[0][0] <= call.started_at:
            _, _, (key, hints, done) = heapq.heappop(running)
            forecaster.observe(key, hints, done.duration_s, done.status)
            family_durations[key.family].append(done.duration_s)
        key, hints = forecaster.describe_sample(call)
        estimate = forecaster.estimate(key, hints)
        bound = predict(forecaster.durations, key.family, hints, config).predicted_s
        seen = family_durations.get(key.family)
        points = {
            "forecast": estimate.prediction.predicted_s,
            "zero": 0.0,
            "family_median": float(np.median(seen)) if seen else 0.0,
            "bound": bound,
        }
        elapsed = checkpoints(call.duration_s)
        rows.append(CallRow(
            harness=call.harness or "?",
            family=key.family,
            source=estimate.prediction.source,
            duration_s=call.duration_s,
            censored=is_censored(call.duration_s, call.status, hints.max_s),
            points=points,
            bounds={"forecast": estimate.bound_s, "bound": bound},
            elapsed_s=tuple(elapsed),
            p_within=tuple(estimate.p_within(e, config.horizon_s) for e in elapsed),
        ))
        heapq.heappush(running, (call.started_at + call.duration_s, order, (key, hints, call)))
    hindsight = {family: float(np.median([r.duration_s for r in rows if r.family == family]))
                 for family in {r.family for r in rows}}
    for row in rows:
        row.points["hindsight_median"] = hindsight[row.family]
    return summarize(rows, PREDICTORS, tolerance_s=tolerance_s, horizon_s=config.horizon_s)
