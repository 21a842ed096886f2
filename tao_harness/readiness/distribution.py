"""The distribution of a call's return time, and what readiness asks of it given the elapsed time.

A `ReturnDistribution` is a weighted sample of return times (seconds after the call started). It is
built from earlier calls' durations, some of them censored: a call the harness killed at its timeout
(mini-SWE-agent's 30 s) says only "longer than this", not how long it would have run. `from_samples`
handles that the way Kaplan–Meier does (Efron's redistribute-to-the-right): a censored sample's weight
moves, in proportion, onto the completed samples longer than it. For the call being predicted, the
harness's own limit U (`upper_s`) caps everything: a sample longer than U, censored or not, becomes a
return at U (this call would be killed there too), so where U equals the recorded calls' timeout the
killed calls come back as the mass at U they really are — each at the time its kill was recorded when
that lies within 5% of U (mini-SWE-agent's 30 s kills are seen at 29.2–30.8 s), so that the point
estimate lands where kills are really seen. A censored sample with nothing longer after
it and no U stays where it was, as the least it could be.

Heavy tails make the prior and the conditional on elapsed time very different: a family that mostly
returns in 50 ms but sometimes runs 30 s is, after 2 s, almost surely one of the 30 s calls.
`p_within(elapsed, horizon)` is P(R ≤ e + H | R > e). Past the last sample the data says nothing, so the
tail is taken to be Pareto with index 1 — the Lindy rule, P(R ≤ e + H | R > e) = H / (e + H): the longer
it has run, the longer it is expected to run. A lower bound L (a foreground `sleep`) shifts shorter
samples up to L.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A duration within this share of a limit is a kill at that limit (recorded kills jitter around it).
LIMIT_SLACK = 0.05


@dataclass(frozen=True)
class ReturnDistribution:
    """Weighted return times, sorted ascending; weights sum to 1. Never empty."""

    times: np.ndarray
    weights: np.ndarray
    upper_s: float | None = None
    """The call's own limit U: it returns by then at the latest (None: no limit known)."""

    @classmethod
    def from_samples(
        cls,
        durations: Sequence[float],
        weights: Sequence[float],
        censored: Sequence[bool],
        *,
        lower_s: float | None = None,
        upper_s: float | None = None,
    ) -> ReturnDistribution | None:
        """Return times of a call bounded by [lower_s, upper_s] from weighted, partly censored samples.

        None when no sample carries weight.
        """
        times = np.asarray(durations, dtype=float)
        mass = np.asarray(weights, dtype=float)
        cut = np.asarray(censored, dtype=bool)
        keep = (mass > 0) & np.isfinite(times) & (times >= 0)
        times, mass, cut = times[keep], mass[keep], cut[keep]
        if not len(times):
            return None
        if upper_s is not None:
            # Anything at or past this call's own limit returns at the limit (killed there), or when its
            # own kill was seen if that was within LIMIT_SLACK of the limit.
            at_limit = times >= np.where(cut, (1.0 - LIMIT_SLACK) * upper_s, upper_s)
            near = np.abs(times - upper_s) <= LIMIT_SLACK * upper_s
            times = np.where(at_limit & ~near, upper_s, times)
            cut = cut & ~at_limit
        times, mass = _redistribute_censored(times, mass, cut)
        if lower_s is not None:
            times = np.maximum(times, lower_s)
        order = np.argsort(times, kind="stable")
        times, mass = times[order], mass[order]
        return cls(times=times, weights=mass / mass.sum(), upper_s=upper_s)

    @classmethod
    def point(cls, seconds: float) -> ReturnDistribution:
        """A call known to return at exactly `seconds` (an exposed deadline; the simulator's oracle)."""
        return cls(times=np.array([float(seconds)]), weights=np.array([1.0]), upper_s=float(seconds))

    def quantile(self, q: float) -> float:
        """Smallest time t with P(R ≤ t) ≥ q (a weighted sample quantile; q = 0.5 is the weighted median)."""
        cumulative = np.cumsum(self.weights)
        index = int(np.searchsorted(cumulative, q * cumulative[-1] - 1e-12))
        return float(self.times[min(index, len(self.times) - 1)])

    def median(self) -> float:
        return self.quantile(0.5)

    def estimate(self, tolerance_s: float, miss_cost_s: float) -> float:
        """The duration estimate: the time p minimising E|R − p| + miss_cost · P(|R − p| > tolerance).

        With `miss_cost_s` = 0 this is the median (least absolute error). A positive cost also rewards
        landing within `tolerance_s` of the real duration, which moves the estimate from between two
        clusters of durations (a median that matches neither) to the likelier cluster. Candidates are
        the sample times and the times `tolerance_s` either side of them (window edges), all ≥ 0.
        """
        times, weights = self.times, self.weights
        candidates = np.unique(np.concatenate((times, times + tolerance_s, np.maximum(times - tolerance_s, 0.0))))
        mass = np.concatenate(([0.0], np.cumsum(weights)))
        moment = np.concatenate(([0.0], np.cumsum(weights * times)))
        below = np.searchsorted(times, candidates, side="right")
        absolute = (candidates * mass[below] - moment[below]) + (moment[-1] - moment[below]) \
            - candidates * (mass[-1] - mass[below])
        low = np.searchsorted(times, candidates - tolerance_s, side="left")
        high = np.searchsorted(times, candidates + tolerance_s, side="right")
        missed = mass[-1] - (mass[high] - mass[low])
        return float(candidates[int(np.argmin(absolute + miss_cost_s * missed))])

    def survival(self, elapsed_s: float) -> float:
        """P(R > elapsed)."""
        return float(self.weights[self.times > elapsed_s].sum())

    def p_within(self, elapsed_s: float, horizon_s: float) -> float:
        """P(R ≤ elapsed + horizon | R > elapsed): the call, running for `elapsed_s`, returns within H."""
        if self.upper_s is not None and elapsed_s + horizon_s >= self.upper_s:
            return 1.0
        alive = self.times > elapsed_s
        beyond = float(self.weights[alive].sum())
        if beyond <= 0.0:
            return _lindy_p_within(elapsed_s, horizon_s)
        inside = float(self.weights[alive & (self.times <= elapsed_s + horizon_s)].sum())
        return inside / beyond

    def remaining_s(self, elapsed_s: float) -> float:
        """Conditional median of the time left, R − e given R > e: readiness with P ≥ ½ is remaining ≤ H."""
        if self.upper_s is not None and elapsed_s >= self.upper_s:
            return 0.0
        alive = self.times > elapsed_s
        if not alive.any():
            lindy = elapsed_s  # Pareto(1) tail: the median of what is left equals what has passed
            return lindy if self.upper_s is None else min(lindy, self.upper_s - elapsed_s)
        later = ReturnDistribution(self.times[alive], self.weights[alive] / self.weights[alive].sum())
        return later.median() - elapsed_s


def _lindy_p_within(elapsed_s: float, horizon_s: float) -> float:
    total = elapsed_s + horizon_s
    return 1.0 if total <= 0 else horizon_s / total


def _redistribute_censored(
    times: np.ndarray, mass: np.ndarray, censored: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    # The weighted Kaplan–Meier estimate (equivalently Efron's redistribute-to-the-right): in time order,
    # each completion ends a share w_i / (weight still at risk) of what survives; a censored sample ends
    # nothing, so its weight ends up spread over the later completions. What survives the last completion
    # stays on the last censored sample — the least the longest calls took.
    if not censored.any():
        return times, mass
    order = np.lexsort((censored, times))  # at equal times, completions count as before the censoring
    times, mass, censored = times[order], mass[order], censored[order]
    at_risk = np.cumsum(mass[::-1])[::-1]
    hazard = np.where(censored, 0.0, mass / at_risk)
    surviving = np.cumprod(1.0 - hazard)
    before = np.concatenate(([1.0], surviving[:-1]))
    km_mass = (before - surviving) * mass.sum()
    if censored[-1]:
        km_mass[-1] = surviving[-1] * mass.sum()
    keep = km_mass > 1e-12 * mass.sum()
    return times[keep], km_mass[keep]
