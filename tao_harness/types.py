"""Snapshot and plan types: the frozen interface between the planners/policies and their callers.

The simulator (virtual time) and the live coordinator both build a `Snapshot`, hand it to a policy and
apply the `Plan` it returns. Both have a JSON form (docs/snapshot.md; replay with `tao plan`). Construction
validates: a bad snapshot raises `SnapshotError` naming the field (``sessions[3].cache: unknown node 'r9'``).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, Mapping, Sequence, TypeVar, get_args

from tao_harness.config import PlannerConfig

SessionState = Literal["waiting", "acting", "reasoning"]
SESSION_STATES: tuple[str, ...] = get_args(SessionState)
HOLDING_STATES: tuple[str, ...] = ("acting", "reasoning")
_T = TypeVar("_T")


class SnapshotError(ValueError):
    """A snapshot or plan that cannot be used; the message starts with the offending field's path."""


def _number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SnapshotError(f"{where}: expected a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise SnapshotError(f"{where}: must be >= {minimum:g}, got {value!r}")
    return float(value)


MAX_TOKENS = 2 ** 40  # a trillion: far past any context or KV cache, and low enough that the planner's
# float sums of credits (thousands of sessions) stay exact integers below 2^53 and its packed sums in int64


def _integer(value: Any, where: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError(f"{where}: expected an integer, got {value!r}")
    if value < minimum:
        raise SnapshotError(f"{where}: must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise SnapshotError(f"{where}: must be <= {maximum}, got {value}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SnapshotError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise SnapshotError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass as a JSON object; optional fields that are None are left out."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


def _int_tuple(value: Any, length: int, where: str) -> tuple[int, ...]:
    items = tuple(value)
    if len(items) == length and all(type(v) is int and v >= 0 for v in items):
        return items  # the common case, checked cheaply
    if len(items) != length:
        raise SnapshotError(f"{where}: expected {length} integers, got {len(items)}")
    return tuple(_integer(v, f"{where}[{k}]") for k, v in enumerate(items))


def _build(cls: type[_T], data: Any, where: str, **converted: Any) -> _T:
    """Construct `cls` from a JSON object: unknown and missing fields named, errors prefixed with `where`."""
    if not isinstance(data, Mapping):
        raise SnapshotError(f"{where or 'snapshot'}: expected a JSON object, got {type(data).__name__}")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    prefix = f"{where}." if where else ""
    extra = sorted(set(data) - set(names))
    if extra:
        raise SnapshotError(f"{prefix}{extra[0]}: unknown field (allowed: {', '.join(names)})")
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in data and f.default is MISSING and f.default_factory is MISSING:
            raise SnapshotError(f"{prefix}{f.name}: missing field")
    try:
        return cls(**{**data, **converted})
    except SnapshotError as exc:
        raise SnapshotError(f"{prefix}{exc}") from None
    except TypeError as exc:
        raise SnapshotError(f"{where or 'snapshot'}: {exc}") from None


@dataclass(frozen=True, slots=True)
class PlannerParams:
    """The constants of the value triple, carried in the snapshot so a plan can be replayed exactly."""

    half_life_s: float = 10.0  # h: cache credit halves every h seconds after it was observed
    horizon_s: float = 1.0  # H: readiness horizon the producer used to compute `ready` (informational)
    quantum_tokens: int = 256  # Δ: costs round up, capacities round down, to multiples of Δ
    reserve_tokens: int = 512  # added to a session's context tokens to form its admission cost w_i
    max_wait_s: float | None = None  # bound on a request's pool wait (policies/aging.py); None = no bound
    # Release acting holders by predicted tool time left, priced in reload time (policies/tool_time.py);
    # False: lowest value first, only where Σ v rises (the paper's rule, policies/interrupts.py). A snapshot
    # that does not say is read as the paper's rule (recorded snapshots predate the field); the planner's
    # config turns it on by default.
    tool_time_release: bool = False
    release_after_reloads: float = 3.0  # a holder is worth releasing with this many reload times of tool left
    recompute_tokens_per_s: float = 19_000.0  # a lost context's linear layers are prefilled again at this rate
    recompute_attention_tokens: float = 30_000.0  # ... and its attention doubles a token's cost at this context
    # The replicas' host KV tier: contexts load back from host memory at this rate; None = no host tier.
    host_tokens_per_s: float | None = None
    host_half_life_s: float = 600.0  # host-resident credit halves every this many seconds (host LRU turnover)

    def __post_init__(self) -> None:
        if _number(self.half_life_s, "half_life_s") <= 0:
            raise SnapshotError(f"half_life_s: must be > 0, got {self.half_life_s!r}")
        _number(self.horizon_s, "horizon_s")
        _integer(self.quantum_tokens, "quantum_tokens", minimum=1)
        _integer(self.reserve_tokens, "reserve_tokens")
        if self.max_wait_s is not None and _number(self.max_wait_s, "max_wait_s") <= 0:
            raise SnapshotError(f"max_wait_s: must be > 0, got {self.max_wait_s!r}")
        if not isinstance(self.tool_time_release, bool):
            raise SnapshotError(f"tool_time_release: expected true or false, got {self.tool_time_release!r}")
        _number(self.release_after_reloads, "release_after_reloads")
        for name in ("recompute_tokens_per_s", "recompute_attention_tokens", "host_half_life_s", "host_tokens_per_s"):
            value = getattr(self, name)
            if value is not None and _number(value, name) <= 0:
                raise SnapshotError(f"{name}: must be > 0, got {value!r}")

    @classmethod
    def from_config(cls, config: PlannerConfig) -> PlannerParams:
        return cls(config.half_life_s, config.horizon_s, config.quantum_tokens, config.reserve_tokens,
                   config.max_wait_s, config.tool_time_release, config.release_after_reloads,
                   config.recompute_tokens_per_s, config.recompute_attention_tokens, config.host_tokens_per_s,
                   config.host_half_life_s)

    def recompute_s(self, tokens: int) -> float:
        """Seconds to prefill a lost context of `tokens` again: linear layers, plus attention over the
        context computed so far (the engine profile's form: n / rate × (1 + n / (2 × attention tokens)))."""
        return tokens / self.recompute_tokens_per_s * (1.0 + tokens / (2.0 * self.recompute_attention_tokens))

    def reload_s(self, tokens: int) -> float:
        """Seconds for a released holder's context of `tokens` to come back: from host memory, else recomputed."""
        return self.recompute_s(tokens) if self.host_tokens_per_s is None else tokens / self.host_tokens_per_s

    def host_saving(self, tokens: int) -> float:
        """Share of a recompute of `tokens` that a host-tier reload saves (0 without a host tier)."""
        if self.host_tokens_per_s is None:
            return 0.0
        return max(0.0, 1.0 - self.reload_s(tokens) / self.recompute_s(max(1, tokens)))

    @classmethod
    def from_json(cls, data: Any, where: str = "params") -> PlannerParams:
        return _build(cls, data, where)

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True, slots=True)
class NodeState:
    """One replica (or data-parallel rank) as the planner sees it."""

    id: str  # replica id, unique within the snapshot
    capacity_tokens: int  # KV tokens the node can hold in total
    used_tokens: int = 0  # reservations of the sessions holding this node (acting + reasoning)
    running_requests: int = 0  # requests the engine is running now (request-level routers' load)
    waiting_requests: int = 0  # requests queued inside the engine
    kv_usage: float = 0.0  # engine-reported KV cache usage, 0..1
    active_tokens: int = 0  # tokens of the running requests (prompt + generated so far)

    def __post_init__(self) -> None:
        _text(self.id, "id")
        for name in ("capacity_tokens", "used_tokens", "active_tokens"):
            _integer(getattr(self, name), name, maximum=MAX_TOKENS)
        for name in ("running_requests", "waiting_requests"):
            _integer(getattr(self, name), name)
        if not 0.0 <= _number(self.kv_usage, "kv_usage") <= 1.0:
            raise SnapshotError(f"kv_usage: must be within 0..1, got {self.kv_usage!r}")

    @property
    def free_tokens(self) -> int:
        """C_b: capacity left for new admissions (never negative, even when over-reserved)."""
        return max(0, self.capacity_tokens - self.used_tokens)

    @property
    def load(self) -> int:
        """Requests on the node, running or queued: the request-level routers' load measure."""
        return self.running_requests + self.waiting_requests

    @classmethod
    def from_json(cls, data: Any, where: str) -> NodeState:
        return _build(cls, data, where)

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """Evidence that a session's prefix is cached on a node."""

    tokens: int  # k0: cached tokens observed (engine-reported cached_tokens, or an estimate)
    observed_at: float  # when it was observed, in the snapshot's clock (seconds)

    def __post_init__(self) -> None:
        _integer(self.tokens, "tokens", maximum=MAX_TOKENS)
        _number(self.observed_at, "observed_at", minimum=None)

    def credit(self, now: float, half_life_s: float) -> int:
        """k = round(k0 · 2^(−max(0, now − observed_at)/h)); half-way values round to even (Python round)."""
        age = max(0.0, now - self.observed_at)
        return int(round(self.tokens * 2.0 ** (-age / half_life_s)))

    def value(self, now: float, params: PlannerParams) -> int:
        """k on the node: the GPU-resident credit, or, with a host KV tier, what reloading the prefix from
        host memory saves against recomputing it, decaying as the host tier's LRU turns over."""
        gpu = self.credit(now, params.half_life_s)
        saving = params.host_saving(self.tokens)
        if saving <= 0.0:
            return gpu
        return max(gpu, int(round(saving * self.credit(now, params.host_half_life_s))))


@dataclass(frozen=True, slots=True)
class SessionView:
    """One agent session: waiting for admission, or holding a node (acting / reasoning)."""

    id: str  # session id, unique within the snapshot
    tokens: int  # context tokens the session's next request carries
    shared_tokens: int = 0  # tokens shared with other sessions (system prompt); t_i = tokens − shared
    ready: int = 0  # r_i: 1 if the session's tool returned or is predicted to return within H
    cache: Mapping[str, CacheEntry] = field(default_factory=dict)  # node id -> cached-prefix evidence
    eligible: tuple[str, ...] | None = None  # nodes it may be placed on; None = every node
    turn: int = 0  # LLM requests the session has made so far (1 = its first request is the next)
    state: SessionState = "waiting"  # waiting for admission, acting (tool running, holds node), reasoning
    node: str | None = None  # the node held, for acting / reasoning sessions
    arrived_at: float = 0.0  # when it entered the waiting pool (or was admitted): FCFS order
    has_request: bool = True  # its next LLM request has already arrived (False: admitted ahead of it)
    prefix_group: str | None = None  # sessions sharing a prompt prefix (same task / system prompt)
    returns_at: float | None = None  # acting: predicted end of its running tool calls; None = unknown
    waiting_since: float | None = None  # waiting with its request: when that request arrived; None = arrived_at
    # Its shared prefix is already reserved by another session of its prefix group — on its node (holding)
    # or on every node it may use (waiting) — so its cost leaves those tokens out: the engine keeps one copy.
    shared_resident: bool = False

    def __post_init__(self) -> None:
        _text(self.id, "id")
        _integer(self.tokens, "tokens", maximum=MAX_TOKENS)
        _integer(self.shared_tokens, "shared_tokens")
        if self.shared_tokens > self.tokens:
            raise SnapshotError(f"shared_tokens: {self.shared_tokens} exceeds tokens {self.tokens}")
        if self.ready not in (0, 1) or isinstance(self.ready, bool):
            raise SnapshotError(f"ready: must be 0 or 1, got {self.ready!r}")
        _integer(self.turn, "turn")
        if self.state not in SESSION_STATES:
            raise SnapshotError(f"state: must be one of {', '.join(SESSION_STATES)}, got {self.state!r}")
        if (self.node is None) == (self.state in HOLDING_STATES):
            must = "must" if self.node is None else "must not"
            raise SnapshotError(f"node: a {self.state} session {must} name a node")
        _number(self.arrived_at, "arrived_at", minimum=None)
        for name in ("has_request", "shared_resident"):
            if not isinstance(getattr(self, name), bool):
                raise SnapshotError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        for name in ("returns_at", "waiting_since"):
            if getattr(self, name) is not None:
                _number(getattr(self, name), name, minimum=None)
        for name in ("node", "prefix_group"):
            if getattr(self, name) is not None:
                _text(getattr(self, name), name)
        object.__setattr__(self, "cache", MappingProxyType(dict(self.cache)))
        if self.eligible is not None:
            object.__setattr__(self, "eligible", tuple(self.eligible))
            for k, node_id in enumerate(self.eligible):
                _text(node_id, f"eligible[{k}]")

    @property
    def footprint(self) -> int:
        """t_i: tokens that are this session's own (total minus shared)."""
        return self.tokens - self.shared_tokens

    def cost(self, params: PlannerParams) -> int:
        """w_i: tokens the session occupies once admitted (its shared prefix only if no one else holds it)."""
        return self.tokens + params.reserve_tokens - (self.shared_tokens if self.shared_resident else 0)

    def credit_on(self, node_id: str, now: float, params: PlannerParams) -> int:
        entry = self.cache.get(node_id)
        return 0 if entry is None else entry.value(now, params)

    def may_use(self, node_id: str) -> bool:
        return self.eligible is None or node_id in self.eligible

    @classmethod
    def from_json(cls, data: Any, where: str) -> SessionView:
        cache = data.get("cache", {}) if isinstance(data, Mapping) else {}
        if not isinstance(cache, Mapping):
            raise SnapshotError(f"{where}.cache: expected an object of node id -> entry")
        eligible = data.get("eligible") if isinstance(data, Mapping) else None
        if eligible is not None:
            eligible = tuple(_list(eligible, f"{where}.eligible"))
        entries = {node: _build(CacheEntry, entry, f"{where}.cache.{node}") for node, entry in cache.items()}
        return _build(cls, data, where, cache=entries, eligible=eligible)

    def to_json(self) -> dict[str, Any]:
        out = _plain(self)
        out["cache"] = {node: _plain(entry) for node, entry in self.cache.items()}
        if self.eligible is not None:
            out["eligible"] = list(self.eligible)
        return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A frozen view of the cluster at one restart decision: what every policy plans from."""

    now: float  # the snapshot's clock (seconds); cache ages are measured against it
    params: PlannerParams  # value-triple constants
    nodes: tuple[NodeState, ...]  # replicas, in a stable order (ties between equal nodes go to the first)
    sessions: tuple[SessionView, ...]  # waiting sessions and the ones holding a node

    def __post_init__(self) -> None:
        _number(self.now, "now", minimum=None)
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "sessions", tuple(self.sessions))
        node_ids = [n.id for n in self.nodes]
        seen: set[str] = set()
        for index, node_id in enumerate(node_ids):
            if node_id in seen:
                raise SnapshotError(f"nodes[{index}].id: duplicate node id {node_id!r}")
            seen.add(node_id)
        session_ids: set[str] = set()
        for index, session in enumerate(self.sessions):
            where = f"sessions[{index}]"
            if session.id in session_ids:
                raise SnapshotError(f"{where}.id: duplicate session id {session.id!r}")
            session_ids.add(session.id)
            for node_id in session.cache:
                if node_id not in seen:
                    raise SnapshotError(f"{where}.cache: unknown node {node_id!r}")
            for node_id in session.eligible or ():
                if node_id not in seen:
                    raise SnapshotError(f"{where}.eligible: unknown node {node_id!r}")
            if session.node is not None and session.node not in seen:
                raise SnapshotError(f"{where}.node: unknown node {session.node!r}")

    @property
    def waiting(self) -> tuple[SessionView, ...]:
        """Sessions in the waiting pool, in snapshot order."""
        return tuple(s for s in self.sessions if s.state == "waiting")

    def holding(self, node_id: str | None = None) -> tuple[SessionView, ...]:
        """Sessions holding a node (acting or reasoning), optionally only those on `node_id`."""
        return tuple(s for s in self.sessions if s.node is not None and node_id in (None, s.node))

    def releasable_tokens(self) -> dict[str, int]:
        """Per node, the used tokens its acting holders could free at most: its used tokens less its reasoning
        holders' reservations. Releasing a holder frees its reservation only up to this: a node may report
        fewer used tokens than its holders reserve, and room freed past what it reports would admit past
        its capacity."""
        left = {n.id: n.used_tokens for n in self.nodes}
        for s in self.sessions:
            if s.state == "reasoning" and s.node in left:
                left[s.node] -= s.cost(self.params)
        return {node_id: max(0, tokens) for node_id, tokens in left.items()}

    def node(self, node_id: str) -> NodeState:  # KeyError if there is none
        return {n.id: n for n in self.nodes}[node_id]

    def session(self, session_id: str) -> SessionView:  # KeyError if there is none
        return {s.id: s for s in self.sessions}[session_id]

    def value(self, session: SessionView, node_id: str) -> tuple[int, int, int]:
        """v_{i,b} = (k_{i,b}, r_i, t_i)."""
        return (session.credit_on(node_id, self.now, self.params), session.ready, session.footprint)

    @classmethod
    def from_json(cls, data: Any) -> Snapshot:
        if isinstance(data, Mapping):
            data = {"params": {}, **data}  # params may be left out: the paper's defaults
            nodes = _list(data.get("nodes", []), "nodes")
            sessions = _list(data.get("sessions", []), "sessions")
            return _build(
                cls, data, "",
                params=PlannerParams.from_json(data.get("params", {})),
                nodes=tuple(NodeState.from_json(item, f"nodes[{k}]") for k, item in enumerate(nodes)),
                sessions=tuple(SessionView.from_json(item, f"sessions[{k}]")
                               for k, item in enumerate(sessions)),
            )
        return _build(cls, data, "")

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now, "params": self.params.to_json(), "nodes": [n.to_json() for n in self.nodes],
                "sessions": [s.to_json() for s in self.sessions]}


@dataclass(frozen=True, slots=True)
class Assignment:
    """Admit one waiting session onto one node."""

    session: str  # session id
    node: str  # node id
    value: tuple[int, int, int]  # (k, r, t) of this pair at the snapshot's time

    def __post_init__(self) -> None:
        _text(self.session, "session"), _text(self.node, "node")
        object.__setattr__(self, "value", _int_tuple(self.value, 3, "value"))

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "node": self.node, "value": list(self.value)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Assignment:
        value = _list(data.get("value"), f"{where}.value") if isinstance(data, Mapping) else None
        return _build(cls, data, where, value=tuple(value or ()))


@dataclass(frozen=True, slots=True)
class Plan:
    """A policy's decision for one snapshot; the caller applies it (vLLM v1 SchedulerOutput style)."""

    policy: str  # name of the policy that made it
    solver: str  # "dp" (exact), "bfd" (best-fit-decreasing), or the baseline's rule name
    objective: tuple[int, int, int, int]  # (K, R, T, N) summed over the assignments
    assignments: tuple[Assignment, ...] = ()  # admissions, in the order they should be applied
    interrupts: tuple[str, ...] = ()  # acting sessions to release first, in order
    solve_ms: float = 0.0  # wall time the policy took
    states: int = 0  # DP states created (0 when no DP ran)
    fallback: bool = False  # True when the exact search hit its deadline or budget: best plan found
    bound: tuple[int, int, int, int] | None = None  # certified lexicographic upper bound on `objective`
    solved: tuple[int, int, int, int] | None = None  # (K, R, T, N) of the admissions the exact program chose
    # over the waiting pool, without the overdue ones placed before it and those that interrupts made room
    # for after it: what a check of the program against another solver of that problem compares (None: a
    # baseline's plan)

    def __post_init__(self) -> None:
        _text(self.policy, "policy")
        _text(self.solver, "solver")
        object.__setattr__(self, "objective", _int_tuple(self.objective, 4, "objective"))
        if self.bound is not None:
            object.__setattr__(self, "bound", _int_tuple(self.bound, 4, "bound"))
        if self.solved is not None:
            object.__setattr__(self, "solved", _int_tuple(self.solved, 4, "solved"))
        object.__setattr__(self, "assignments", tuple(self.assignments))
        object.__setattr__(self, "interrupts", tuple(_text(v, "interrupts") for v in self.interrupts))
        _number(self.solve_ms, "solve_ms")
        _integer(self.states, "states")
        if not isinstance(self.fallback, bool):
            raise SnapshotError(f"fallback: expected true or false, got {self.fallback!r}")

    @classmethod
    def make_empty(cls, policy: str, solver: str = "none") -> Plan:
        return cls(policy=policy, solver=solver, objective=(0, 0, 0, 0))

    @property
    def admitted(self) -> dict[str, str]:
        """session id -> node id."""
        return {a.session: a.node for a in self.assignments}

    @property
    def gap(self) -> tuple[str, float] | None:
        """The proven gap: the first term of (K, R, T, N) where the bound exceeds the objective and the
        relative shortfall there, ("", 0.0) when the plan is proven optimal; None without a bound."""
        if self.bound is None:
            return None
        for name, got, most in zip("KRTN", self.objective, self.bound):
            if most != got:
                return name, (most - got) / most if most > 0 else 0.0
        return "", 0.0

    @property
    def gap_text(self) -> str:
        """The proven gap for people: "0 (optimal)", "K ≤ 0.12%", or "-" without a bound."""
        gap = self.gap
        if gap is None:
            return "-"
        term, share = gap
        return "0 (optimal)" if not term else f"{term} ≤ {100 * share:.2f}%"

    def to_json(self) -> dict[str, Any]:
        out = _plain(self)
        out.update(objective=list(self.objective), assignments=[a.to_json() for a in self.assignments],
                   interrupts=list(self.interrupts), solve_ms=round(self.solve_ms, 4))
        if self.bound is not None:
            out["bound"] = list(self.bound)
        if self.solved is not None:
            out["solved"] = list(self.solved)
        return out

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        if not isinstance(data, Mapping):
            return _build(cls, data, "plan")
        items = _list(data.get("assignments", []), "assignments")
        return _build(
            cls, data, "",
            objective=tuple(_list(data.get("objective"), "objective")),
            assignments=tuple(Assignment.from_json(item, f"assignments[{k}]")
                              for k, item in enumerate(items)),
            interrupts=tuple(_list(data.get("interrupts", []), "interrupts")),
        )


def objective_of(assignments: Sequence[Assignment]) -> tuple[int, int, int, int]:
    """(K, R, T, N) of a list of assignments."""
    k, r, t = (sum(a.value[x] for a in assignments) for x in range(3))
    return (k, r, t, len(assignments))
