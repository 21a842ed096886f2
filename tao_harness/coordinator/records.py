"""Records of the session state machine: phases, the per-session record, event payloads, results.

`Session` is the state machine's private, mutable bookkeeping (one per live session); everything that
crosses a boundary — event payloads in, `ApplyResult` / `StateCounters` out — is frozen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Protocol

from tao_harness.readiness.hints import Hints
from tao_harness.readiness.state import ToolExecution
from tao_harness.types import CacheEntry, SessionView


class Phase(str, Enum):
    """Where a session is in its lifecycle (DESIGN.md §3)."""

    NEW = "new"  # started, no LLM request yet
    WAITING = "waiting"  # in the pool with its next request already here
    ADMITTED = "admitted"  # holds a node, admitted ahead of its next request (tool still running)
    REASONING = "reasoning"  # holds a node, LLM request in flight
    ACTING = "acting"  # holds a node, reply done, tool running / agent thinking
    INTERRUPTED = "interrupted"  # lost its hold (interrupt or give-back); in the pool, no request yet
    IDLE = "idle"  # request-level routing: between requests, holds nothing, not in the pool
    ENDED = "ended"


# Sessions in the waiting pool (what a plan may admit).
POOL_PHASES = frozenset({Phase.WAITING, Phase.INTERRUPTED})
# Sessions holding a reservation on a node.
HOLDING_PHASES = frozenset({Phase.ADMITTED, Phase.REASONING, Phase.ACTING})


class SessionStateError(ValueError):
    """An event that does not fit the session's lifecycle (unknown session, request while one is running)."""


@dataclass(frozen=True, slots=True)
class ToolStart:
    """A tool call the harness reported as started."""

    call_id: str  # harness call id; tool_end names the same id
    name: str  # tool name as the harness reports it (Bash, bash, Read, Monitor ...)
    command: str | None = None  # shell command text, when the tool runs one
    args: Mapping[str, Any] | None = None  # other tool input (timeout, run_in_background ...)
    env_timeout_s: float | None = None  # harness-level deadline (mini-SWE-agent environment.timeout)
    session: str = ""  # the session running it (set by the state machine): its earlier runs weigh most
    # Which harness sent it: the unit of its timeout arguments, and durations are learned per harness.
    harness: str | None = None


class UsageLike(Protocol):
    """Token usage of a finished request; None = not reported (the proxy's `Usage` has this shape)."""

    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def cached_tokens(self) -> int | None: ...
    @property
    def completion_tokens(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """Engine-reported load of one node (from vLLM /metrics or the simulated engine)."""

    running_requests: int = 0  # requests in the running batch
    waiting_requests: int = 0  # requests queued inside the engine
    kv_usage: float = 0.0  # KV cache usage, 0..1
    active_tokens: int = 0  # tokens of the running requests


@dataclass(frozen=True, slots=True)
class Admission:
    """One admission performed by `apply`."""

    session: str  # session id
    node: str  # node it now holds
    dispatch: bool  # True: its request is waiting and must be sent to `node` now


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What `apply` did with a plan."""

    admitted: tuple[Admission, ...] = ()  # admissions, in plan order
    interrupted: tuple[str, ...] = ()  # sessions released by the plan's interrupts
    discarded: tuple[str, ...] = ()  # assignments / interrupts dropped: session changed since the snapshot
    deferred: tuple[str, ...] = ()  # valid assignments past the longest feasible prefix (stay waiting)


@dataclass(frozen=True, slots=True)
class StateCounters:
    """Cumulative counters of the state machine."""

    admissions: int = 0  # sessions admitted onto a node (with or without a waiting request)
    interrupts: int = 0  # holding sessions released by a plan
    expirations: int = 0  # admissions given back because the request did not come in time
    discards: int = 0  # assignments or interrupts dropped by revalidation
    deferrals: int = 0  # assignments cut off by live capacity (outside the feasible prefix)
    plans: int = 0  # plans applied
    plans_discarded: int = 0  # plans with at least one discarded entry


@dataclass(slots=True)
class OpenCall:
    """A tool call that has started and not ended."""

    start: ToolStart
    family: str  # duration-history family (readiness.family_key)
    hints: Hints  # what its command and arguments say about its duration
    execution: ToolExecution  # its prediction and probe state (readiness.state)


@dataclass(slots=True)
class Session:
    """The state machine's bookkeeping for one session (private to `ClusterState`)."""

    id: str
    started_at: float
    prefix_group: str | None
    shared_tokens: int
    phase: Phase = Phase.NEW
    node: str | None = None  # node held (HOLDING_PHASES) or last dispatched to
    tokens: int = 0  # context tokens of the current / next request
    reserved: int = 0  # tokens reserved on `node` while holding
    turn: int = 0  # LLM requests made so far
    pool_since: float = 0.0  # entered the waiting pool (FCFS order)
    admitted_at: float | None = None  # admitted ahead of its request (for the give-back bound)
    version: int = 0  # bumped when the session enters/leaves the pool or changes node: the plan signature
    calls: dict[str, OpenCall] = field(default_factory=dict)
    tool_done_at: float | None = None  # the last tool call ended (all calls closed) at this time
    cache: dict[str, CacheEntry] = field(default_factory=dict)
    cache_stamp: int = 0  # bumped whenever `cache` changes (keys the view memo)
    view_memo: tuple[tuple[object, ...], SessionView] | None = None  # last view built and what it depended on
    avoid: frozenset[str] = frozenset()  # nodes that failed its current request: plans place it elsewhere
    request_at: float | None = None  # its current / waiting request arrived (the pool-wait bound counts from it)
    reply_done_at: float | None = None  # its last reply ended (the stream's end), None before the first
    gap_s: float | None = None  # running mean of reply end → next request: how long it stays quiet
    release_at_reply: bool = False  # interrupted while its next request was already running: release it then
