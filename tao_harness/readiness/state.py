"""Binary tool-return readiness r_i(t) of DESIGN.md §4, as pure functions over a frozen record.

    r = 1  if the tool's completion was observed;
    else   if z ≤ t (overdue): 1 once — the probe — then 0 until the prediction is refreshed;
    else 1 iff a tool execution is established, its prediction was made within `refresh_s` (30 s)
           and z ≤ t + H (H = `horizon_s`, 1 s).

The probe is one planning round's chance for a session whose tool ran past its prediction. Granting it
is explicit: the caller that put r = 1 into a snapshot calls `consume_probe`, which returns a new record;
nothing here mutates. `refresh` records a new prediction (call it for running tools at least every
`refresh_s`, e.g. when building each snapshot); one that moves z into the future brings a new probe chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tao_harness.config import ReadinessConfig
from tao_harness.readiness.estimator import Prediction, remaining_s

ReadinessReason = Literal["observed", "probe", "probe_used", "within_horizon", "outside_horizon", "stale",
                          "no_tool"]


@dataclass(frozen=True)
class ToolExecution:
    """One running (or finished) tool call of a session, with its current prediction. Times in seconds."""

    started_at: float
    """When the call started (same clock as `now` everywhere below)."""
    predicted_completion: float
    """z: the predicted completion time."""
    predicted_at: float
    """When z was last predicted or refreshed."""
    completed_at: float | None = None
    """When completion was observed; None while running."""
    probe_used: bool = False
    """The one-time overdue probe for the current prediction has been given."""


def start_execution(started_at: float, prediction: Prediction) -> ToolExecution:
    """A new call predicted to end `prediction.predicted_s` after it started."""
    return ToolExecution(started_at=started_at, predicted_completion=started_at + prediction.predicted_s,
                         predicted_at=started_at)


def refresh(execution: ToolExecution, prediction: Prediction, now: float) -> ToolExecution:
    """Re-predict at `now` from the call's elapsed time: z = now + max(0, D − elapsed).

    Only a prediction that moves z past `now` gives a new probe chance: re-deriving the same bound for
    an overdue call yields z = now again, and refreshing every round must not turn the one-time probe
    into a probe every round.
    """
    completion = now + remaining_s(prediction, now - execution.started_at)
    still_overdue = completion <= now
    return replace(execution, predicted_completion=completion, predicted_at=now,
                   probe_used=execution.probe_used and still_overdue)


def complete(execution: ToolExecution, completed_at: float) -> ToolExecution:
    """The call's end was observed."""
    return replace(execution, completed_at=completed_at)


def readiness_reason(execution: ToolExecution | None, now: float, config: ReadinessConfig) -> ReadinessReason:
    """Which rule decides r at `now` (see the module docstring)."""
    if execution is None:
        return "no_tool"
    if execution.completed_at is not None:
        return "observed"
    if execution.predicted_completion <= now:
        return "probe_used" if execution.probe_used else "probe"
    if now - execution.predicted_at > config.refresh_s:
        return "stale"
    if execution.predicted_completion <= now + config.horizon_s:
        return "within_horizon"
    return "outside_horizon"


_READY: frozenset[ReadinessReason] = frozenset({"observed", "probe", "within_horizon"})


def readiness(execution: ToolExecution | None, now: float, config: ReadinessConfig) -> int:
    """r_i(t) ∈ {0, 1}."""
    return 1 if readiness_reason(execution, now, config) in _READY else 0


def consume_probe(execution: ToolExecution, now: float, config: ReadinessConfig) -> ToolExecution:
    """The record after a snapshot at `now` used it: the probe is spent if it was what made r = 1."""
    return snapshot_readiness(execution, now, config)[1]


def snapshot_readiness(execution: ToolExecution, now: float, config: ReadinessConfig) -> tuple[int, ToolExecution]:
    """`readiness` and `consume_probe` together, from one `readiness_reason` (a snapshot asks both of every
    running call)."""
    reason = readiness_reason(execution, now, config)
    return (1 if reason in _READY else 0), (replace(execution, probe_used=True) if reason == "probe" else execution)


def turn_readiness(executions: Sequence[ToolExecution], now: float, config: ReadinessConfig) -> int:
    """r for a turn whose tool calls run in parallel (Claude Code may issue several): the agent's next
    request waits for all of them, so the turn is ready only when every call is; no calls → 0."""
    if not executions:
        return 0
    return 1 if all(readiness(execution, now, config) for execution in executions) else 0
