"""Frozen records the rest of the system hands to the store; one per table.

Timestamps are Unix epoch seconds (float). A field left as None means "not known by this event": the
writer upserts by id and keeps the value already stored, so a `tool_start` record followed by a
`tool_end` record for the same call id ends as one complete row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class SessionRecord:
    """One agent session (a harness run, or one SWE-bench worker's task)."""

    id: str
    harness: str | None = None  # "claude_code", "opencode", "mini_swe_agent", ...
    started_at: float | None = None
    ended_at: float | None = None
    labels: Mapping[str, str] | None = None  # free-form tags: benchmark, task id, host ...
    # The clock every record of this session is on, as its rate against the wall clock: 1.0 = the wall
    # clock (real agents); 25.0 = an emulated fleet (`tao demo`) whose times and durations are emulated.
    time_scale: float | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call; written at tool start and completed at tool end (same `id`)."""

    id: str  # the harness's call id (tool_use_id, callID, ...)
    session_id: str
    harness: str | None = None
    tool_name: str | None = None
    family: str | None = None  # readiness family key, e.g. "bash:pytest", "Read"
    command: str | None = None  # shell command text, redacted before it is stored
    args: Mapping[str, Any] | None = None  # the tool's own argument object, redacted likewise
    hints: Mapping[str, Any] | None = None  # parsed hints as seen at tool start (Hints.to_json())
    timeout_s: float | None = None  # the call's effective upper bound, if it declared one
    env_timeout_s: float | None = None  # harness-wide deadline (mini-SWE-agent environment.timeout)
    background: bool | None = None
    started_at: float | None = None
    ended_at: float | None = None
    duration_s: float | None = None
    status: str | None = None  # tao_harness.outcomes: "ok", "error", "timeout", "killed", "cancelled"
    exit_code: int | None = None
    # "shim" (the harness's hooks) or "proxy" (read from the LLM traffic): a shim's values win (store.upsert)
    source: str | None = None


@dataclass(frozen=True)
class LLMRequestRecord:
    """One LLM request as its client saw it: the usage the answer reported, the client's TTFT and latency,
    across all the replicas that produced it (`attempts`; `replica` is the last)."""

    id: str  # X-Request-Id or a proxy-generated id
    session_id: str
    replica: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    queue_wait_s: float | None = None  # admission wait in the coordinator's pool
    ttft_s: float | None = None
    latency_s: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    status: str | None = None
    attempts: int | None = None  # upstream attempts the answer took (1 unless a replica failed)


@dataclass(frozen=True)
class LLMAttemptRecord:
    """One upstream attempt of an LLM request, with that replica's own usage report (a continuation's
    prompt includes the answer text already sent; a cut attempt reports no usage of its own)."""

    id: str  # "<request id>#<attempt>"
    request_id: str
    attempt: int  # 1, 2, ...
    session_id: str
    replica: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None  # from the request's arrival at the proxy
    latency_s: float | None = None  # likewise, to the attempt's end
    started_at: float | None = None
    ended_at: float | None = None
    status: str | None = None  # "ok", "error", "cancelled", "connect_error"


@dataclass(frozen=True)
class PlanRecord:
    """One planner decision, written by the coordinator (insert-only, no id of its own)."""

    created_at: float
    policy: str  # "tao", "thunderagent", ...
    solver: str  # "dp", "bfd", ...
    solve_ms: float
    n_waiting: int
    n_assigned: int
    fallback: bool = False  # the DP hit its state budget and BFD decided
    discarded: bool = False  # the plan failed re-validation and was not applied
    objective: Sequence[float] = field(default_factory=tuple)  # Σ value triple (k, r, t) of the plan


StoreRecord = SessionRecord | ToolCallRecord | LLMRequestRecord | LLMAttemptRecord | PlanRecord
