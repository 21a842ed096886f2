"""Duration prediction: per-family history in memory, the empirical-Bernstein bound, hints on top.

`DurationHistory` keeps running statistics per family (Welford mean/variance, min/max, and a bounded
uniform sample for percentiles), loaded once from the store and updated as calls complete, so a
prediction is a dict lookup and a few float operations — no database query.

`predict` follows the trust order of DESIGN.md §4:
1. a parsed sleep (`hints.min_s`) is the "hint" prediction; the family's own bound replaces it only when
   it is larger and the family is not `bash:sleep` itself (whose history mixes unrelated N), so
   `sleep 2 && make` predicts max(2, D_make). `sleep N` alone predicts N plus a bound on what sleeps take
   past their N (`DurationHistory.sleep_bound`): a sleep never returns at exactly N, and a bound of N
   covered none (0 of 109 in scripts/demo_history.py's replay);
2. else the family bound D_f once the family has `min_samples` calls ("family");
3. else the bound over all calls ("global"); else `default_s` ("default").
The result is then clamped to the upper bound `hints.max_s` (timeouts, exposed deadlines); a clamp makes
the source "hint". The lower bound always holds because the sleep rule never predicts below it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.distribution import LIMIT_SLACK, ReturnDistribution
from tao_harness.readiness.hints import Hints

PredictionSource = Literal["hint", "neighbors", "family", "global", "default"]
SLEEP_FAMILY = "bash:sleep"
GLOBAL_FAMILY = "*"
_SAMPLE_SIZE = 1024


def bernstein_bound(mean: float, variance: float, value_range: float, n: int, delta: float) -> float:
    """Empirical-Bernstein upper confidence bound on the mean duration (Maurer & Pontil 2009 form).

    `D = mean + sqrt(2 s² ln(3/δ) / n) + 3 R ln(3/δ) / n`, where `variance` is the *sample* variance s²
    (divisor n − 1) and `value_range` is R = max − min of the observed durations.
    """
    if n < 1 or not 0 < delta < 1 or variance < 0 or value_range < 0:
        raise ValueError(f"bernstein_bound needs n >= 1, 0 < delta < 1, variance >= 0, range >= 0; "
                         f"got n={n}, delta={delta}, variance={variance}, range={value_range}")
    log_term = math.log(3.0 / delta)
    return mean + math.sqrt(2.0 * variance * log_term / n) + 3.0 * value_range * log_term / n


@dataclass(frozen=True)
class FamilyStats:
    """Summary of one family's durations, as `tao history tools` shows it (seconds)."""

    family: str
    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float
    bound: float | None
    """The Bernstein bound D_f, or None below `min_samples`."""


class _Running:
    # Welford running mean/variance, extremes, and a reservoir sample for percentiles.
    __slots__ = ("bound", "high", "low", "m2", "mean", "n", "sample")

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.low = math.inf
        self.high = -math.inf
        self.sample: list[float] = []
        self.bound: float | None = None

    def add(self, value: float, rng: random.Random, config: ReadinessConfig) -> None:
        self.n += 1
        step = value - self.mean
        self.mean += step / self.n
        self.m2 += step * (value - self.mean)
        self.low = min(self.low, value)
        self.high = max(self.high, value)
        if len(self.sample) < _SAMPLE_SIZE:
            self.sample.append(value)
        else:
            slot = rng.randrange(self.n)
            if slot < _SAMPLE_SIZE:
                self.sample[slot] = value
        # Cached here so a prediction does no math beyond a lookup.
        self.bound = (
            bernstein_bound(self.mean, self.m2 / (self.n - 1), self.high - self.low, self.n, config.delta)
            if self.n >= config.min_samples else None
        )

    def stats(self, family: str) -> FamilyStats:
        ordered = sorted(self.sample)
        return FamilyStats(family=family, n=self.n, mean=self.mean, p50=_percentile(ordered, 0.5),
                           p90=_percentile(ordered, 0.9), p99=_percentile(ordered, 0.99), max=self.high,
                           bound=self.bound)


def _percentile(ordered: list[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default), over the reservoir sample.
    rank = q * (len(ordered) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


class DurationHistory:
    """Per-family duration statistics served from memory; `observe` as calls complete."""

    def __init__(self, config: ReadinessConfig | None = None, *, seed: int = 0) -> None:
        self.config = config or ReadinessConfig()
        self._families: dict[str, _Running] = {}
        self._global = _Running()
        self._rng = random.Random(seed)  # percentile reservoir only; seeded so reports are repeatable
        # What lone `sleep N` calls took past their N (process start, shell, the harness's hooks): the same
        # whatever N, unlike their durations. Its own reservoir stream, so the families' percentiles are
        # those of before it.
        self._sleep_overhead = _Running()
        self._sleep_rng = random.Random(seed)

    @classmethod
    def from_samples(
        cls, samples: Iterable[tuple[str, float]], config: ReadinessConfig | None = None
    ) -> DurationHistory:
        """Build from (family, duration_s) pairs, e.g. the rows of the store."""
        history = cls(config)
        for family, duration_s in samples:
            history.observe(family, duration_s)
        return history

    def observe(self, family: str, duration_s: float) -> bool:
        """Add one completed call; a negative, NaN or infinite duration is ignored (returns False)."""
        if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)):
            return False
        if not math.isfinite(duration_s) or duration_s < 0:
            return False
        running = self._families.get(family)
        if running is None:
            running = self._families[family] = _Running()
        running.add(float(duration_s), self._rng, self.config)
        self._global.add(float(duration_s), self._rng, self.config)
        return True

    def observe_sleep(self, asked_s: float, duration_s: float) -> None:
        """A lone `sleep asked_s` took `duration_s`; one that returned early (interrupted) says nothing."""
        overhead = duration_s - asked_s
        if math.isfinite(overhead) and overhead >= 0:
            self._sleep_overhead.add(overhead, self._sleep_rng, self.config)

    def sleep_bound(self, asked_s: float) -> float:
        """Bound on a lone `sleep asked_s`'s duration: `asked_s` plus the Bernstein bound on the overhead
        seen; before `min_samples` sleeps, `asked_s` seen up to LIMIT_SLACK late, as a kill at a limit is."""
        overhead = self._sleep_overhead.bound
        return asked_s + overhead if overhead is not None else (1.0 + LIMIT_SLACK) * asked_s

    def __len__(self) -> int:
        return self._global.n

    def count(self, family: str) -> int:
        running = self._families.get(family)
        return running.n if running is not None else 0

    def bound(self, family: str) -> float | None:
        """D_f, or None while the family has fewer than `min_samples` calls."""
        running = self._families.get(family)
        return running.bound if running is not None else None

    def global_bound(self) -> float | None:
        """The bound over every call of every family (None below `min_samples` calls)."""
        return self._global.bound

    def stats(self, family: str) -> FamilyStats:
        """Summary of one family; KeyError if it has no calls."""
        running = self._families.get(family)
        if running is None:
            raise KeyError(f"no calls recorded for family {family!r}")
        return running.stats(family)

    def global_stats(self) -> FamilyStats | None:
        """Summary over all calls (family "*"), or None when empty."""
        return self._global.stats(GLOBAL_FAMILY) if self._global.n else None

    def families(self) -> list[str]:
        """Known families, sorted by name."""
        return sorted(self._families)


@dataclass(frozen=True)
class Prediction:
    """A call's predicted duration and which evidence produced it."""

    predicted_s: float
    """Point estimate of the duration (the Bernstein bound itself for `predict`; a median for forecasts)."""
    source: PredictionSource
    distribution: ReturnDistribution | None = None
    """The return-time distribution behind it, when there is one: readiness conditions it on elapsed time."""


def predict(history: DurationHistory, family: str, hints: Hints, config: ReadinessConfig) -> Prediction:
    """Predicted duration of a call of `family` with `hints` (trust order in the module docstring)."""
    family_bound = history.bound(family)
    prediction: Prediction
    if hints.min_s is not None:
        if family == SLEEP_FAMILY:
            prediction = Prediction(history.sleep_bound(hints.min_s), "hint")
        elif family_bound is not None and family_bound > hints.min_s:
            prediction = Prediction(family_bound, "family")
        else:
            prediction = Prediction(hints.min_s, "hint")
    elif family_bound is not None:
        prediction = Prediction(family_bound, "family")
    else:
        global_bound = history.global_bound()
        prediction = (Prediction(global_bound, "global") if global_bound is not None
                      else Prediction(config.default_s, "default"))
    if hints.max_s is not None and prediction.predicted_s > hints.max_s:
        prediction = Prediction(hints.max_s, "hint")
    return prediction


def remaining_s(prediction: Prediction, elapsed_s: float) -> float:
    """Predicted time left for a call running for `elapsed_s`: the conditional median of what is left
    when the prediction has a distribution (readiness r = 1 ⟺ P(return within H | elapsed) ≥ ½), else
    d(t) = max(0, D − e(t))."""
    if prediction.distribution is not None:
        return prediction.distribution.remaining_s(elapsed_s)
    return max(0.0, prediction.predicted_s - elapsed_s)
