"""One call's forecast from its raw fields, and learning from its outcome: the one way everything predicts.

The coordinator (at tool start and at each refresh), `tao history predict` and the accuracy replay all go
from (tool name, command, args, harness deadline, session, harness) to a forecast through `Forecaster`:

- the duration estimate (what `predicted_s` reports): the time p minimising E|R − p| plus `MISS_COST_S`
  times P(|R − p| > 0.5 s) — the median, pulled to the likelier cluster when durations are bimodal
  (`ReturnDistribution.estimate`; a miss priced at 4 s was chosen by session-wise 2-fold
  cross-validation on real histories, and anything from 1 to 8 s scores within noise of it);
- `distribution`: the return-time distribution, from which readiness takes P(return within H | elapsed);
- `bound_s`: a conservative bound for callers that want one — the larger of the family's
  empirical-Bernstein bound on the mean and the distribution's 90th percentile; where that reaches the
  call's own timeout (within 5%), the timeout plus the 5% by which recorded kills come back late.

A call is described by its family, hints and words (`neighbors.call_words`); the words of a script the
same session wrote earlier are added when the command runs it (`session_files`), and the body of a
heredoc written to a file is left out (it is data: the write returns at once).

Trust order: an exposed limit or a parsed sleep bounds everything (a lone `sleep N` is exactly N); then
the most similar earlier calls (`neighbors`); with no history for the harness yet, the Bernstein rules
of `estimator.predict` (family, global, default). `ReadinessConfig.estimator = "bernstein"` restores the
old behaviour (the bound as the prediction) for comparisons.

A call killed at its timeout is censored: it is recorded as "at least this long", never as a duration.
That is a status of "timeout", or, where no status is known (mini-SWE-agent's kills), a duration within
5% of the call's own limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tao_harness import outcomes
from tao_harness.config import ReadinessConfig
from tao_harness.readiness.distribution import LIMIT_SLACK, ReturnDistribution
from tao_harness.readiness.estimator import SLEEP_FAMILY, DurationHistory, Prediction, predict
from tao_harness.readiness.family import family_key
from tao_harness.readiness.hints import Hints, canonical_harness, command_text, parse_hints
from tao_harness.readiness.neighbors import CallKey, NeighborConfig, NeighborHistory, call_words
from tao_harness.readiness.session_files import SessionFiles

BOUND_QUANTILE = 0.9
POINT_TOLERANCE_S = 0.5
MISS_COST_S = 4.0
# No answer to "returns within H?" is certain: on real histories the forecast's 1-2% answers came true 6.6%
# of the time and its 99% ones 97%. Shrinking the answers by 4% toward ½ was best in both halves of a
# session-wise 2-fold split (Brier 0.0773/0.0749 -> 0.0757/0.0735). Readiness itself, which compares the
# conditional median with H (P ≥ ½), is unchanged by it; a limit within H or an exact deadline stays certain.
P_MARGIN = 0.04


@dataclass(frozen=True)
class CallSample:
    """One recorded tool call, as the store keeps it."""

    started_at: float
    tool_name: str
    command: str | None
    args: Mapping[str, Any] | None
    duration_s: float
    env_timeout_s: float | None = None
    session_id: str = ""
    harness: str | None = None
    status: str | None = None


LAUNCH_SUFFIX = "@launch"
JOB_SUFFIX = "@job"


@dataclass(frozen=True)
class CallEstimate:
    """What is known about a call when it starts."""

    family: str
    hints: Hints
    prediction: Prediction
    """The forecast: `predicted_s` is the point estimate, `distribution` what readiness conditions."""
    bound_s: float
    """Conservative bound on the duration (see the module docstring)."""
    key: CallKey

    def p_within(self, elapsed_s: float, horizon_s: float) -> float:
        """P(the call returns within `horizon_s` | it has run `elapsed_s`)."""
        distribution = self.prediction.distribution or ReturnDistribution.point(self.prediction.predicted_s)
        p = distribution.p_within(elapsed_s, horizon_s)
        limit = distribution.upper_s
        if limit is not None and (elapsed_s + horizon_s >= limit or distribution.times.tolist() == [limit]):
            return p  # the limit falls within H, or an exact deadline (a lone sleep): certain
        return P_MARGIN + (1.0 - 2.0 * P_MARGIN) * p

    def to_json(self, horizon_s: float, elapsed_s: float = 0.0) -> dict[str, Any]:
        """`{"family", "hints", "predicted_s", "source"}` (the documented keys) plus `bound_s`, `elapsed_s`,
        `horizon_s`, `p_return_within_horizon`, `remaining_s`, `predicted_at_start_s` and the quartiles of
        the return time. A call that has run (`elapsed_s` > 0) is predicted to last `elapsed_s` plus what
        is left of it (the conditional median), never less than it has already run."""
        distribution = self.prediction.distribution
        remaining = (distribution.remaining_s(elapsed_s) if distribution is not None
                     else max(0.0, self.prediction.predicted_s - elapsed_s))
        return {
            "family": self.family,
            "hints": self.hints.to_json(),
            "predicted_s": elapsed_s + remaining if elapsed_s > 0 else self.prediction.predicted_s,
            "source": self.prediction.source,
            "bound_s": self.bound_s,
            "elapsed_s": elapsed_s,
            "horizon_s": horizon_s,
            "p_return_within_horizon": self.p_within(elapsed_s, horizon_s),
            "remaining_s": remaining,
            "predicted_at_start_s": self.prediction.predicted_s,
            "quantiles_s": {f"p{round(q * 100)}": distribution.quantile(q) for q in (0.25, 0.5, 0.75, 0.9)}
            if distribution is not None else None,
        }


def describe_call(
    tool_name: str,
    command: str | None,
    args: Mapping[str, Any] | None = None,
    *,
    env_timeout_s: float | None = None,
    harness: str | None = None,
    kind: str = "call",
) -> tuple[str, Hints]:
    """(family, hints) of a call; a missing `command` is read from `args["command"]`.

    Work that does not hold the agent's turn is kept out of the foreground family's statistics: a
    background launch (it returns at once) is `<family>@launch`, a background job or Monitor watch
    (`kind="job"`, its real life) is `<family>@job`.
    """
    command = command_text(command, args)
    hints = parse_hints(tool_name, command, args, env_timeout_s=env_timeout_s, harness=harness)
    family = family_key(tool_name, command)
    if kind == "job":
        family += JOB_SUFFIX
    elif hints.background:
        family += LAUNCH_SUFFIX
    return family, hints


def is_censored(duration_s: float, status: str | None, limit_s: float | None) -> bool:
    """The call was killed at its timeout: `status` says so, or it ran to within 5% of its own limit."""
    if outcomes.is_censored(status):
        return True
    return limit_s is not None and duration_s >= (1.0 - LIMIT_SLACK) * limit_s


class Forecaster:
    """Both histories (per-family Bernstein statistics, per-harness neighbour calls) and the rules above."""

    def __init__(
        self,
        config: ReadinessConfig | None = None,
        *,
        durations: DurationHistory | None = None,
        neighbors: NeighborHistory | None = None,
    ) -> None:
        self.config = config or ReadinessConfig()
        self.durations = durations if durations is not None else DurationHistory(self.config)
        self.neighbors = neighbors if neighbors is not None else NeighborHistory(NeighborConfig())
        self.files = SessionFiles()

    def describe(
        self,
        tool_name: str,
        command: str | None,
        args: Mapping[str, Any] | None = None,
        *,
        env_timeout_s: float | None = None,
        session: str = "",
        harness: str | None = None,
    ) -> tuple[CallKey, Hints]:
        """Family (see `describe_call`), word set and hints of a call."""
        family, hints = describe_call(tool_name, command, args, env_timeout_s=env_timeout_s, harness=harness)
        text, sources = self.files.read(session, command_text(command, args), args)
        words = call_words(tool_name, family, text, args) | sources
        return CallKey(words=words, family=family, session=session, harness=canonical_harness(harness) or ""), hints

    def describe_sample(self, sample: CallSample) -> tuple[CallKey, Hints]:
        return self.describe(sample.tool_name, sample.command, sample.args, env_timeout_s=sample.env_timeout_s,
                             session=sample.session_id, harness=sample.harness)

    def learn(self, samples: Iterable[CallSample]) -> Forecaster:
        """Observe recorded calls (e.g. the store's, in completion order); returns self."""
        for sample in samples:
            self.observe(*self.describe_sample(sample), sample.duration_s, sample.status)
        return self

    def estimate(self, key: CallKey, hints: Hints) -> CallEstimate:
        """The forecast for a call described by `describe` (trust order in the module docstring)."""
        old = predict(self.durations, key.family, hints, self.config)
        bound = old.predicted_s
        if self.config.estimator == "bernstein":
            return CallEstimate(key.family, hints, old, bound, key)
        distribution = self._distribution(key, hints)
        if distribution is None:
            return CallEstimate(key.family, hints, old, bound, key)
        point = distribution.estimate(POINT_TOLERANCE_S, MISS_COST_S)
        source = "hint" if point in (hints.min_s, hints.max_s) else "neighbors"
        bound = max(bound, distribution.quantile(BOUND_QUANTILE))
        if hints.max_s is not None and bound >= (1.0 - LIMIT_SLACK) * hints.max_s:
            bound = (1.0 + LIMIT_SLACK) * hints.max_s  # killed there, and a kill is seen up to 5% late
        return CallEstimate(key.family, hints, Prediction(point, source, distribution), bound, key)

    def _distribution(self, key: CallKey, hints: Hints) -> ReturnDistribution | None:
        if key.family == SLEEP_FAMILY and hints.min_s is not None:
            return ReturnDistribution.point(hints.min_s)  # sleep's own history mixes unrelated N
        return self.neighbors.distribution(key, lower_s=hints.min_s, upper_s=hints.max_s)

    def observe(self, key: CallKey, hints: Hints, duration_s: float, status: str | None = None) -> None:
        """A call ended after `duration_s`; a killed one (see `is_censored`) counts only as a lower bound
        for the neighbours, and not at all for the Bernstein statistics (they have no censoring: its
        duration is the deadline, not the work's length)."""
        censored = is_censored(duration_s, status, hints.max_s)
        if not censored:
            self.durations.observe(key.family, duration_s)
            if key.family == SLEEP_FAMILY and hints.min_s is not None:
                self.durations.observe_sleep(hints.min_s, duration_s)
        self.neighbors.observe(key, duration_s, censored=censored)
