"""What a simulation measured: `SimMetrics` (the issue's keys) and the recorder that observes a run.

The simulator calls the recorder's hooks at the moments things happen; entities never keep metrics.
Definitions:
- latency: session start (a worker picked it up) → session end; `mean_latency_s` averages sessions.
- TTFT: a request issued by the agent → its first token visible (includes waiting in the pool).
- tool end → first token: the same, for requests that follow a tool (every turn after the first).
- pause wait (pool wait): request issued → sent to an engine (time held back by admission control).
- tails: p95 / p99 / max of TTFT and of the pause wait (numpy's linear-interpolation percentiles);
  `waits_over_bound`: pause waits longer than the planner's `max_wait_s` (0 without a bound).
- `decode_tok_s`: generated tokens of the whole run / makespan (cluster decode throughput).
- `prefix_hit_rate`: engine-reported cached prompt tokens / prompt tokens, over all requests.
- `fallback_rate`: plans answered by BFD after the DP hit its state budget / plans made.
- `discard_rate`: applied plans with at least one entry dropped by revalidation / plans applied.
- `pinned_requests`: requests sent with a Continuum KV pin (0 unless pinning is on).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


# Keys measured on the machine running the simulation (real solve time): everything else is
# deterministic for a trace, a config and a seed.
MEASURED_KEYS: tuple[str, ...] = ("solve_ms_p50", "solve_ms_p95")


@dataclass(frozen=True, slots=True)
class SimMetrics:
    """One run's results; `to_json()` keys are the issue's names plus a few extras."""

    mean_latency_s: float
    mean_ttft_s: float
    decode_tok_s: float
    prefix_hit_rate: float
    makespan_s: float
    mean_tool_end_to_first_token_s: float
    mean_pause_wait_s: float
    admissions: int
    interrupts: int
    solve_ms_p50: float
    solve_ms_p95: float
    fallback_rate: float
    discard_rate: float
    p95_ttft_s: float
    p99_ttft_s: float
    max_ttft_s: float
    p99_pause_wait_s: float
    max_pause_wait_s: float
    waits_over_bound: int
    sessions: int
    requests: int
    plans: int
    expirations: int
    preemptions: int
    pinned_requests: int

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def deterministic_json(self) -> dict[str, Any]:
        """`to_json()` without the machine-measured keys: equal across runs of one trace, config and seed."""
        return {k: v for k, v in self.to_json().items() if k not in MEASURED_KEYS}


@dataclass(slots=True)
class _Request:
    issued_at: float
    after_tool: bool
    dispatched_at: float | None = None
    first_token_at: float | None = None


class MetricsRecorder:
    """Hooks the simulator calls; `finish()` turns what it saw into `SimMetrics`."""

    def __init__(self, wait_bound_s: float | None = None) -> None:
        self._wait_bound_s = wait_bound_s
        self._session_start: dict[str, float] = {}
        self._latencies: list[float] = []
        self._open: dict[str, _Request] = {}
        self._ttft: list[float] = []
        self._tool_to_first: list[float] = []
        self._pause: list[float] = []
        self._prompt = 0
        self._cached = 0
        self._completion = 0
        self._requests = 0
        self._pinned = 0
        self._solve_ms: list[float] = []
        self._fallbacks = 0
        self._first_start: float | None = None
        self._last_end = 0.0
        self.timeline: list[tuple[float, int]] = []

    def session_started(self, session: str, now: float) -> None:
        self._session_start[session] = now
        self._first_start = now if self._first_start is None else min(self._first_start, now)

    def session_ended(self, session: str, now: float) -> None:
        self._latencies.append(now - self._session_start.pop(session))
        self._last_end = max(self._last_end, now)

    def request_issued(self, session: str, now: float, after_tool: bool) -> None:
        self._open[session] = _Request(now, after_tool)
        self._requests += 1

    def request_dispatched(self, session: str, now: float, pinned: bool) -> None:
        self._pinned += int(pinned)
        request = self._open[session]
        request.dispatched_at = now
        self._pause.append(now - request.issued_at)

    def first_token(self, session: str, now: float) -> None:
        request = self._open[session]
        if request.first_token_at is None:  # a preempted request's recompute does not restart TTFT
            request.first_token_at = now
            self._ttft.append(now - request.issued_at)
            if request.after_tool:
                self._tool_to_first.append(now - request.issued_at)

    def request_finished(self, session: str, prompt: int, cached: int, completion: int) -> None:
        del self._open[session]
        self._prompt += prompt
        self._cached += cached
        self._completion += completion

    def plan_made(self, solve_ms: float, fallback: bool) -> None:
        self._solve_ms.append(solve_ms)
        self._fallbacks += int(fallback)

    def running(self, now: float, count: int) -> None:
        """Requests running on engines changed; only changes are kept."""
        if not self.timeline or self.timeline[-1][1] != count:
            if self.timeline and self.timeline[-1][0] == now:
                self.timeline[-1] = (now, count)
            else:
                self.timeline.append((now, count))

    @property
    def ttft_samples(self) -> tuple[float, ...]:
        return tuple(self._ttft)

    @property
    def wait_samples(self) -> tuple[float, ...]:
        """Pause (pool) waits, seconds, in dispatch order."""
        return tuple(self._pause)

    def finish(self, *, admissions: int, interrupts: int, expirations: int, plans_applied: int,
               plans_discarded: int, preemptions: int) -> SimMetrics:
        makespan = self._last_end - (self._first_start or 0.0)
        plans = len(self._solve_ms)
        return SimMetrics(
            mean_latency_s=_mean(self._latencies),
            mean_ttft_s=_mean(self._ttft),
            decode_tok_s=self._completion / makespan if makespan > 0 else 0.0,
            prefix_hit_rate=self._cached / self._prompt if self._prompt else 0.0,
            makespan_s=makespan,
            mean_tool_end_to_first_token_s=_mean(self._tool_to_first),
            mean_pause_wait_s=_mean(self._pause),
            admissions=admissions,
            interrupts=interrupts,
            solve_ms_p50=_percentile(self._solve_ms, 50),
            solve_ms_p95=_percentile(self._solve_ms, 95),
            fallback_rate=self._fallbacks / plans if plans else 0.0,
            discard_rate=plans_discarded / plans_applied if plans_applied else 0.0,
            p95_ttft_s=_percentile(self._ttft, 95),
            p99_ttft_s=_percentile(self._ttft, 99),
            max_ttft_s=max(self._ttft, default=0.0),
            p99_pause_wait_s=_percentile(self._pause, 99),
            max_pause_wait_s=max(self._pause, default=0.0),
            waits_over_bound=0 if self._wait_bound_s is None else sum(w > self._wait_bound_s for w in self._pause),
            sessions=len(self._latencies),
            requests=self._requests,
            plans=plans,
            expirations=expirations,
            preemptions=preemptions,
            pinned_requests=self._pinned,
        )
