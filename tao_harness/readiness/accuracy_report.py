"""Tables of an accuracy replay: per predictor MAE, share within tolerance, Brier score; bound coverage and
overshoot; the reliability table of the forecast's P(return within H | elapsed). Overall, per harness and
per family (`accuracy.replay_accuracy` produces the rows)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

RELIABILITY_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class CallRow:
    """One replayed call: what each predictor said at its start, and the forecast while it ran."""

    harness: str
    family: str
    source: str
    """Evidence behind the forecast (`Prediction.source`)."""
    duration_s: float
    censored: bool
    """Killed at its timeout: `duration_s` is when it returned, not how long it would have run."""
    points: dict[str, float]
    """Predicted duration per predictor."""
    bounds: dict[str, float]
    """Conservative bound per predictor that has one."""
    elapsed_s: tuple[float, ...]
    """Elapsed times the readiness question was scored at (0 and the ones the call outlived)."""
    p_within: tuple[float, ...]
    """The forecast's P(return within H | elapsed) at each of them."""


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    n: int
    mean_p: float | None
    observed: float | None
    """Share of the questions in the bin whose call did return within H."""


@dataclass(frozen=True)
class PredictorScore:
    mae_s: float
    within_share: float
    brier: float
    """Brier score of the readiness answers (a point predictor answers 0 or 1)."""


@dataclass(frozen=True)
class BoundScore:
    coverage: float
    """Share of calls whose duration was at most the bound."""
    median_overshoot_s: float | None
    """Median of bound − duration over the covered calls."""


@dataclass(frozen=True)
class GroupAccuracy:
    n: int
    predictors: dict[str, PredictorScore]
    bounds: dict[str, BoundScore]
    questions: int
    """Readiness questions scored (calls × elapsed checkpoints)."""
    reliability: tuple[ReliabilityBin, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "questions": self.questions,
            "predictors": {name: vars(score) for name, score in self.predictors.items()},
            "bounds": {name: vars(score) for name, score in self.bounds.items()},
            "reliability": [vars(b) for b in self.reliability],
        }


@dataclass(frozen=True)
class SourceAccuracy:
    """Errors of the forecasts one kind of evidence produced."""

    source: str
    n: int
    mae_s: float
    within_share: float


@dataclass(frozen=True)
class AccuracyReport:
    """Replay result; `mae_s` and `within_share` (the forecast's) are None when there were no calls."""

    n: int
    mae_s: float | None
    within_share: float | None
    """Share of forecasts within `tolerance_s` of the real duration (the paper: 82.9% within 0.5 s)."""
    tolerance_s: float
    horizon_s: float = 1.0
    by_source: tuple[SourceAccuracy, ...] = field(default=())
    overall: GroupAccuracy | None = None
    by_harness: dict[str, GroupAccuracy] = field(default_factory=dict)
    by_family: dict[str, GroupAccuracy] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mae_s": self.mae_s,
            "within_share": self.within_share,
            "tolerance_s": self.tolerance_s,
            "horizon_s": self.horizon_s,
            "by_source": [vars(s) for s in self.by_source],
            "overall": self.overall.to_json() if self.overall else None,
            "by_harness": {name: group.to_json() for name, group in self.by_harness.items()},
            "by_family": {name: group.to_json() for name, group in self.by_family.items()},
        }


def _readiness_answers(row: CallRow, name: str, horizon_s: float) -> np.ndarray:
    if name == "forecast":
        return np.asarray(row.p_within)
    remaining = np.maximum(0.0, row.points[name] - np.asarray(row.elapsed_s))
    return (remaining <= horizon_s).astype(float)


def _group(rows: Sequence[CallRow], predictors: Sequence[str], tolerance_s: float, horizon_s: float) -> GroupAccuracy:
    actual = np.array([r.duration_s for r in rows])
    outcomes = np.concatenate([actual[i] <= np.asarray(r.elapsed_s) + horizon_s for i, r in enumerate(rows)])
    scores = {}
    for name in predictors:
        errors = np.abs(np.array([r.points[name] for r in rows]) - actual)
        answers = np.concatenate([_readiness_answers(r, name, horizon_s) for r in rows])
        scores[name] = PredictorScore(float(errors.mean()), float((errors <= tolerance_s).mean()),
                                      float(np.mean((answers - outcomes) ** 2)))
    bounds = {}
    for name in rows[0].bounds:
        bound = np.array([r.bounds[name] for r in rows])
        covered = actual <= bound
        overshoot = bound[covered] - actual[covered]
        bounds[name] = BoundScore(float(covered.mean()), float(np.median(overshoot)) if covered.any() else None)
    return GroupAccuracy(len(rows), scores, bounds, len(outcomes),
                         reliability(np.concatenate([r.p_within for r in rows]), outcomes))


def reliability(p: np.ndarray, outcomes: np.ndarray) -> tuple[ReliabilityBin, ...]:
    """Questions binned by forecast probability: mean forecast vs. observed frequency per bin."""
    bins = np.clip(np.digitize(p, RELIABILITY_EDGES[1:-1]), 0, len(RELIABILITY_EDGES) - 2)
    table = []
    for index, (low, high) in enumerate(zip(RELIABILITY_EDGES, RELIABILITY_EDGES[1:])):
        inside = bins == index
        count = int(inside.sum())
        table.append(ReliabilityBin(low, high, count, float(p[inside].mean()) if count else None,
                                    float(outcomes[inside].mean()) if count else None))
    return tuple(table)


def summarize(rows: Sequence[CallRow], predictors: Sequence[str], *, tolerance_s: float, horizon_s: float
              ) -> AccuracyReport:
    if not rows:
        return AccuracyReport(n=0, mae_s=None, within_share=None, tolerance_s=tolerance_s, horizon_s=horizon_s)
    overall = _group(rows, predictors, tolerance_s, horizon_s)
    groups: dict[str, dict[str, list[CallRow]]] = {"harness": defaultdict(list), "family": defaultdict(list),
                                                   "source": defaultdict(list)}
    for row in rows:
        groups["harness"][row.harness].append(row)
        groups["family"][row.family].append(row)
        groups["source"][row.source].append(row)
    by_source = tuple(
        SourceAccuracy(source, len(members), overall_score.mae_s, overall_score.within_share)
        for source, members in sorted(groups["source"].items())
        for overall_score in [_group(members, ("forecast",), tolerance_s, horizon_s).predictors["forecast"]]
    )
    forecast = overall.predictors["forecast"]
    return AccuracyReport(
        n=len(rows), mae_s=forecast.mae_s, within_share=forecast.within_share, tolerance_s=tolerance_s,
        horizon_s=horizon_s, by_source=by_source, overall=overall,
        by_harness={k: _group(v, predictors, tolerance_s, horizon_s) for k, v in sorted(groups["harness"].items())},
        by_family={k: _group(v, predictors, tolerance_s, horizon_s)
                   for k, v in sorted(groups["family"].items(), key=lambda item: (-len(item[1]), item[0]))},
    )
