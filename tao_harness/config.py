"""Configuration: one pydantic model per room, merged from file, environment and flags in one place.

Precedence, lowest to highest: defaults < config file (TOML or YAML) < environment (`TAO_*`) < flags.
Every constant of the scheduling rules (DESIGN.md §4) lives here, so an ablation or a test changes a
field, never a literal inside an algorithm.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Section(BaseModel):
    # inf and nan are refused in every number: `planner.max_wait_s = inf` passed validation, then every
    # plan failed (a snapshot's numbers must be finite). An absent bound is null (None) where one is allowed.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True, allow_inf_nan=False)


class ReadinessConfig(_Section):
    """Tool-return readiness and duration prediction (paper §3, appendix B)."""

    delta: float = Field(0.2, gt=0, lt=1)
    """Confidence parameter δ of the empirical-Bernstein upper bound on a family's duration."""

    min_samples: int = Field(2, ge=2)
    """Samples a family needs before its own bound is used; fewer falls back to the global history."""

    horizon_s: float = Field(1.0, ge=0)
    """H: a running tool counts as ready when its predicted completion is within this many seconds."""

    refresh_s: float = Field(30.0, gt=0)
    """A prediction older than this is stale and gives no readiness."""

    default_s: float = Field(5.0, gt=0)
    """Predicted duration when neither hints nor any history exist."""

    estimator: Literal["neighbors", "bernstein"] = "neighbors"
    """How a running tool's return is predicted: "neighbors" — a return-time distribution from the most
    similar earlier calls, ready when P(return within H | elapsed) ≥ ½; "bernstein" — the family's
    empirical-Bernstein bound as the prediction (the paper's rule; kept for comparisons)."""


class PlannerConfig(_Section):
    """The value triple and the DP planner (paper §3, appendix A)."""

    half_life_s: float = Field(10.0, gt=0)
    """h: cache credit halves every h seconds since it was observed."""

    horizon_s: float = Field(1.0, ge=0)
    """H, as carried in snapshots (kept equal to readiness.horizon_s by load_config)."""

    quantum_tokens: int = Field(256, ge=1)
    """Δ: capacities and admission costs are discretized to multiples of this many tokens."""

    reserve_tokens: int = Field(512, ge=0)
    """Per-session reserve added to its context tokens to form its admission cost w_i."""

    state_budget: int = Field(20_000, ge=1)
    """Most DP states created before the planner stops and returns its best plan found with a proven
    gap. A state costs ~30 µs in Python, so 20k bounds a plan at ~0.6 s; `deadline_ms` usually ends first."""

    deadline_ms: float = Field(30.0, gt=0)
    """Wall time the exact search may take per plan; past it the best plan found is returned with its
    certified bound (`Plan.bound`, the proven gap)."""

    deadline_clock: Literal["wall", "cpu"] = "wall"
    """What `deadline_ms` counts: wall time (the live coordinator), or the planning thread's CPU time
    (benchmarks and simulations on a busy machine, where wall time depends on the other processes)."""

    min_cpu_ms: float = Field(5.0, ge=0)
    """CPU time of the planning thread the exact search always gets, whatever `deadline_ms` says: a
    planner descheduled on a busy machine still finishes small snapshots exactly (they take well under
    this), so a plan does not depend on the machine's load. On a quiet machine it never binds."""

    dump_snapshots: str | None = None
    """A folder where every snapshot handed to the policy is written as JSON (tao_harness/snapshot_dump.py;
    replay with `tao plan FILE` or `scripts/bench_planner.py --replay DIR`). None: nothing written."""

    max_wait_s: float | None = Field(30.0, gt=0)
    """Bound on a request's wait in the pool (tao policies; seconds of the scheduler's clock, emulated in
    time-scaled fleets). From half of it a request is admitted before any other, releasing acting
    holders whatever their value (policies/aging.py) but sparing, less and less as its wait nears the
    bound, those whose tools are about to end; if its node is full of running requests it reserves that
    node until they finish, which the bound does not cover. A tighter bound interrupts more holders, so
    it costs cache hits when replicas are oversubscribed: simulated swe-lite at 64 workers on 2 replicas
    gives mean latency 603 / 661 / 873 s and p99 TTFT 113 / 61 / 39 s at 120 / 60 / 30 (vllm-ca: 1,270 s
    and 40 s). None (null) = no bound (not inf, which is refused like every non-finite number)."""

    tool_time_release: bool = True
    """Release acting holders for waiting requests, and for requests past half the wait bound, by
    predicted tool time left, priced in the time their context takes to come back: only holders whose
    tool has `release_after_reloads` reload times left, longest first (policies/tool_time.py). False: the
    paper's rule, lowest value first and only where the value triple's sum rises, and the bound releasing
    any holder not about to return. Simulated (2 replicas x 64 workers, 96 sessions, seeds 0-2): mean task
    latency on terminal-bench 4,284 / 5,311 / 4,518 -> 2,306 / 2,668 / 2,420 s (ThunderAgent 2,446 /
    2,838 / 2,823), p99 TTFT 117-129 -> 286-391 s (ThunderAgent 1,307-1,497); swe-lite +2-3%; the bound
    then holds only where releasing pays (waits up to 503 s on terminal-bench)."""

    release_after_reloads: float = Field(3.0, ge=0)
    """A holder is worth releasing when its tool has at least this many reload times left."""

    recompute_tokens_per_s: float = Field(19_000.0, gt=0)
    """Rate at which the linear layers prefill again a context whose cache is lost (Qwen3-32B TP2 on
    2xH100: ~19k tok/s; engine/profiles.py)."""

    recompute_attention_tokens: float = Field(30_000.0, gt=0)
    """Context length at which attention doubles a prefilled token's cost (30k for Qwen3-32B on 2xH100;
    engine/profiles.py): a cold prefill of n tokens takes n / rate × (1 + n / (2 × this)), so a 200k-token
    context takes 45 s to rebuild, not the 20 s a flat 10k tok/s says."""

    host_tokens_per_s: float | None = Field(None, gt=0)
    """The replicas' host KV tier (vLLM --kv-offloading-size): the rate a context loads back from host
    memory (50 GB/s / 256 KiB per token ≈ 190k tok/s for Qwen3-32B); None = no host tier. With it, cache
    credit counts a context in host memory at what its reload saves against a recompute."""

    host_half_life_s: float = Field(600.0, gt=0)
    """Host-resident credit halves every this many seconds (the host tier's LRU turnover)."""


class StoreConfig(_Section):
    """The tool-duration history and request log."""

    url: str | None = None
    """SQLAlchemy database URL; None means a SQLite file in the user's data directory."""

    batch_size: int = Field(256, ge=1)
    """Rows buffered before a write batch is flushed."""

    flush_interval_s: float = Field(0.2, gt=0)
    """Longest time a buffered row waits before it is written."""

    redact: bool = True
    """Redact obvious secrets (API keys, Authorization headers, URL tokens) from command text."""

    redact_patterns: tuple[str, ...] = ()
    """Extra regular expressions whose matches are redacted, on top of the built-in ones."""


class ReplicaSpec(_Section):
    """One vLLM replica (or one data-parallel rank of a vLLM server) the cluster schedules onto."""

    id: str = Field(min_length=1)
    """Name used in plans, logs and metrics (e.g. "r0")."""

    base_url: str = Field(min_length=1)
    """Server root without `/v1`, e.g. "http://10.0.0.5:8000"."""

    dp_rank: int | None = Field(None, ge=0)
    """Data-parallel rank pinned with `X-data-parallel-rank`; None when the server has one rank."""

    capacity_tokens: int | None = Field(None, gt=0)
    """KV capacity in tokens; None = discovered from `vllm:cache_config_info` on `/metrics`."""

    headers: dict[str, str] = {}
    """Extra headers sent with every request pinned to this replica."""


class ClusterConfig(_Section):
    """The replicas behind the proxy."""

    replicas: tuple[ReplicaSpec, ...] = ()
    """Replicas from the config file; flags may add more."""


class ProxyConfig(_Section):
    """`tao proxy`: the agents' LLM endpoint."""

    host: str = "127.0.0.1"
    """Address to bind."""

    port: int = Field(8400, ge=0, le=65535)
    """Port to bind (0 = any free port, printed at start)."""

    coordinator_url: str | None = None
    """Coordinator root URL; None routes by local cache affinity only (no admission control)."""

    admission_poll_s: float = Field(10.0, gt=0)
    """Longest single admission long-poll; the proxy polls again while the session waits in the pool."""

    coordinator_grace_s: float = Field(2.0, gt=0)
    """Extra time past a long-poll before the proxy stops waiting for its answer (and polls again)."""

    coordinator_unresponsive_s: float = Field(60.0, gt=0)
    """A coordinator that takes connections but has answered nothing for this long is hung: the proxy fails
    open (routes by cache affinity). A refused or reset connection fails open at once; a slow answer is
    waited for, since failing open would flood the replicas with every request waiting in the pool."""

    connect_retries: int = Field(2, ge=0)
    """Replicas tried again elsewhere when connecting fails before the first byte."""

    connect_timeout_s: float = Field(5.0, gt=0)
    """One attempt to connect to a replica (see `connect_patience_s`)."""

    connect_patience_s: float = Field(60.0, gt=0)
    """How long a replica whose connects time out is tried again before it counts as failed. A refused or
    reset connection is a dead replica at once; a slow connect is a busy replica (or a busy proxy), and
    sending the request elsewhere, or answering 503, would only add to the load."""

    admission_leases: bool = True
    """Follow the coordinator's holder table (pushed over the proxy's channel) and send a session that
    still holds its replica straight there, telling the coordinator afterwards (saves the admission round
    trip on most requests). False asks the coordinator over HTTP for every request; the channel stays
    open either way (reports, and the liveness that keeps this proxy's requests from being ended)."""

    require_token: bool = False
    """Refuse requests (401) that do not present `TAO_TOKEN` as their API key (`Authorization: Bearer`
    or `x-api-key`); every path but /healthz, since the proxy forwards any path to a replica."""


class ReplicaConfig(_Section):
    """`tao replica`: the emulated vLLM server."""

    host: str = "127.0.0.1"
    """Address to bind."""

    port: int = Field(8000, ge=0, le=65535)
    """Port to bind (0 = any free port; the bound URL is printed as the first stdout line)."""

    data_parallel_size: int = Field(1, ge=1, le=64)
    """Data-parallel ranks, each with its own engine and KV cache, chosen by `X-data-parallel-rank`."""

    time_scale: float = Field(1.0, gt=0)
    """Engine seconds per wall second: 10 runs the emulated GPU ten times faster than real time."""

    profile: str = "qwen3-32b-2xh100"
    """Step-time profile of the engine model (see tao_harness.engine.profiles)."""

    num_gpu_blocks: int | None = Field(None, ge=1)
    """KV capacity per rank in blocks of 16 tokens; None = the profile's default."""

    kv_offloading_size: float | None = Field(None, gt=0)
    """Host (CPU) KV tier per rank in GiB, as vLLM's `--kv-offloading-size` (native backend); None = none."""

    scenario: str = "swe-short"
    """Reply script: a built-in scenario name or a YAML/JSON file path."""

    served_model_name: str = "tao-replica"
    """Model id listed by /v1/models; requests may name any model unless `strict_model_name` is set."""

    strict_model_name: bool = False
    """Answer 404 to a request naming another model than `served_model_name`, as vLLM does. Off by
    default: scripted agents and harnesses name whatever model they were configured with."""

    enable_prompt_tokens_details: bool = True
    """vLLM's flag of the same name: usage carries `prompt_tokens_details` (cached and newly cached
    tokens). The coordinator needs it (README, "Running against real vLLM"); off emulates a server
    started without it (`null` in whole responses, absent from streamed usage)."""

    reasoning_parser: str | None = None
    """vLLM's `--reasoning-parser`: with any name set, a reply's thinking (the padding that makes it cost
    its output tokens) streams as `delta.reasoning` / Anthropic thinking blocks instead of as text, as
    vLLM does for a reasoning model such as Qwen3."""

    max_step_wall_s: float = Field(0.004, gt=0)
    """Longest wall time one driver macro-step covers; bounds how late a token can be delivered."""

    require_token: bool = False
    """Refuse requests (401) that do not present `TAO_TOKEN` as their API key (`Authorization: Bearer`
    or `x-api-key`); /health and /metrics stay open (the coordinator polls /metrics), as in vLLM."""


class RunConfig(_Section):
    """`tao-run` and the shims: the local event relay, delivery to the coordinator and the spool."""

    spool_dir: str | None = None
    """Directory of undelivered tool events (JSONL); None = `spool` under the user's data directory."""

    delivery_timeout_s: float = Field(5.0, gt=0)
    """Longest wait for the coordinator to accept one batch of events before it counts as unreachable."""

    retry_s: float = Field(1.0, gt=0)
    """After a failed delivery, events go straight to the spool for this long before trying again."""

    final_delivery_s: float = Field(3.0, ge=0)
    """At the agent's exit, time allowed to deliver what is pending; the rest stays spooled."""

    batch_max: int = Field(500, ge=1)
    """Most events sent in one `POST /v1/events`."""

    hook_timeout_s: int = Field(5, ge=1)
    """Timeout Claude Code applies to each hook request to the relay (the relay answers at once)."""

    job_poll_s: float = Field(0.5, gt=0)
    """How often the Claude Code transcript is read for the ends of background jobs and Monitor watches
    (the job's end time is Claude Code's own timestamp, so this only delays the record)."""


class SessionsConfig(_Section):
    """The session state machine shared by the coordinator and the simulator (DESIGN.md §3)."""

    admission_ttl_s: float = Field(5.0, gt=0)
    """A session admitted ahead of its next request (tool about to return) gives its reservation back
    if the request has not arrived within this many seconds."""

    proxy_grace_s: float = Field(10.0, gt=0)
    """A proxy with no channel open and not heard from for this many (wall) seconds is gone: the requests
    it forwarded and never reported are ended and their reservations freed. Longer than a channel takes
    to reconnect; a waiting admission nobody polls for this long is withdrawn too."""

    unowned_request_ttl_s: float = Field(600.0, gt=0)
    """A request admitted for a client that names no proxy (`/v1/admit` without `proxy`) and not
    reported within this many (wall) seconds is ended and its reservation freed."""


class TaoConfig(_Section):
    """Everything configurable, one section per room."""

    readiness: ReadinessConfig = ReadinessConfig()
    planner: PlannerConfig = PlannerConfig()
    store: StoreConfig = StoreConfig()
    cluster: ClusterConfig = ClusterConfig()
    proxy: ProxyConfig = ProxyConfig()
    replica: ReplicaConfig = ReplicaConfig()
    run: RunConfig = RunConfig()
    sessions: SessionsConfig = SessionsConfig()


class ConfigError(ValueError):
    """A config file, variable or flag that cannot be used; the message names it."""


# Environment variables understood, as (variable, dotted field).
ENV_FIELDS: tuple[tuple[str, str], ...] = (
    ("TAO_DB_URL", "store.url"),
    ("TAO_COORDINATOR_URL", "proxy.coordinator_url"),
)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"config file {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    target[leaf] = value


def load_config(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> TaoConfig:
    """Merge defaults, `path`, `TAO_*` variables and `overrides` (dotted keys, e.g. "store.url")."""
    merged: dict[str, Any] = _read_file(path) if path is not None else {}
    env = os.environ if environ is None else environ
    for variable, dotted in ENV_FIELDS:
        if env.get(variable):
            _set_dotted(merged, dotted, env[variable])
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(merged, dotted, value)
    try:
        config = TaoConfig.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"config field {where}: {first['msg']}") from None
    if config.planner.horizon_s != config.readiness.horizon_s and "horizon_s" not in merged.get("planner", {}):
        config = config.model_copy(
            update={"planner": config.planner.model_copy(update={"horizon_s": config.readiness.horizon_s})}
        )
    return config
