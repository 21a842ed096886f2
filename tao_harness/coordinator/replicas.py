"""Replica registry: capacity discovery, load polling and health from vLLM's `/metrics`.

Capacity (KV tokens) comes from `vllm:cache_config_info` unless the config gives it: its
`kv_cache_size_tokens` label (one engine's cache; vLLM ≥ 0.3x), else `num_gpu_blocks × block_size`. On a
data-parallel server `num_gpu_blocks` is the sum over all engines, repeated on each engine's sample, so
it would count a rank's capacity N times. Load comes from `vllm:num_requests_running`, `vllm:num_requests_waiting` and
`vllm:kv_cache_usage_perc` (older servers: `vllm:gpu_cache_usage_perc`). A data-parallel server reports
one sample per engine (label `engine`); a replica that is one DP rank reads the sample of its rank.
A replica whose polls fail `down_after` times in a row is marked down; one good poll brings it back. A
poll that times out is no failure while the replica answered one within `unresponsive_s`: slow is busy,
not dead, and marking a busy replica down would send its holders back to the pool, adding to the load.

Cache evidence comes from the usage in the proxies' reports, and vLLM puts the cached-token count
there only with `--enable-prompt-tokens-details`; the registry notes which replicas never do, says so
once in the log, and shows it in `/v1/state` and `tao_replica_reports_cached_tokens`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from functools import cached_property

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tao_harness.config import ReplicaSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    # KV capacity in tokens (configured or discovered); None until known.
    capacity_tokens: int | None = None
    running_requests: int = 0
    waiting_requests: int = 0
    # Fraction of KV blocks in use, 0..1.
    kv_usage: float = 0.0
    # Whether the last `down_after` polls all failed.
    down: bool = False
    # time.time() of the last successful poll.
    polled_at: float | None = None


@dataclass(frozen=True, slots=True)
class MetricsSample:
    capacity_tokens: int | None
    running_requests: int
    waiting_requests: int
    kv_usage: float
    # Host KV tier in GiB (cache_config_info's kv_offloading_size; vLLM --kv-offloading-size), None without.
    host_tier_gib: float | None = None


def parse_vllm_metrics(text: str, dp_rank: int | None) -> MetricsSample:
    """Read the metrics the scheduler needs; raises ValueError on text that is not Prometheus format."""
    values: dict[str, float] = {}
    host_tier_gib: float | None = None
    per_engine: int | None = None  # Σ kv_cache_size_tokens over the engines read
    whole_server: int | None = None  # num_gpu_blocks × block_size (already a sum over engines)
    wanted_engine = str(dp_rank) if dp_rank is not None else None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            engine = sample.labels.get("engine")
            if wanted_engine is not None and engine is not None and engine != wanted_engine:
                continue
            if sample.name.startswith("vllm:cache_config_info"):
                labels = sample.labels
                tokens, blocks, size = (labels.get(k, "") for k in ("kv_cache_size_tokens", "num_gpu_blocks",
                                                                   "block_size"))
                host_tier_gib = _gib(labels.get("kv_offloading_size", "None"))
                if tokens.isdigit():
                    per_engine = (per_engine or 0) + int(tokens)
                elif blocks.isdigit() and size.isdigit():
                    whole_server = int(blocks) * int(size)
                continue
            # Several engines without a rank filter: sum counts, average usage.
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
            values[sample.name + "#n"] = values.get(sample.name + "#n", 0.0) + 1
    usage_name = "vllm:kv_cache_usage_perc" if "vllm:kv_cache_usage_perc" in values else "vllm:gpu_cache_usage_perc"
    usage = values.get(usage_name, 0.0) / max(1.0, values.get(usage_name + "#n", 1.0))
    return MetricsSample(
        capacity_tokens=per_engine if per_engine is not None else whole_server,
        running_requests=int(values.get("vllm:num_requests_running", 0)),
        waiting_requests=int(values.get("vllm:num_requests_waiting", 0)),
        kv_usage=min(1.0, max(0.0, usage)),
        host_tier_gib=host_tier_gib,
    )


def _gib(label: str) -> float | None:
    """vLLM renders an unset `kv_offloading_size` as "None"."""
    try:
        value = float(label)
    except ValueError:
        return None
    return value if value > 0 else None


@dataclass
class ReplicaRegistry:
    specs: tuple[ReplicaSpec, ...]
    down_after: int = 2
    # Seconds a replica may leave polls unanswered (timeouts) after its last answer before they count.
    unresponsive_s: float = 30.0
    loads: dict[str, ReplicaLoad] = field(default_factory=dict)
    # Per replica, once a usage report came: whether any carried a cached-token count.
    reports_cached_tokens: dict[str, bool] = field(default_factory=dict)
    # Whether the planner is told of a host KV tier (planner.host_tokens_per_s); a replica that reports one
    # it is not told of is logged once.
    host_tier_configured: bool = False
    _host_tier_noted: bool = False
    _failures: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for spec in self.specs:
            self.loads.setdefault(spec.id, ReplicaLoad(capacity_tokens=spec.capacity_tokens))

    def spec(self, replica_id: str) -> ReplicaSpec:
        """KeyError for an unknown id. (Every admission and lease asks: a lookup, not a scan.)"""
        return self._by_id[replica_id]

    @cached_property
    def _by_id(self) -> dict[str, ReplicaSpec]:
        return {spec.id: spec for spec in self.specs}  # fixed at start: `specs` never changes

    @cached_property
    def ids(self) -> frozenset[str]:
        return frozenset(self._by_id)

    def up(self) -> tuple[ReplicaSpec, ...]:
        return tuple(s for s in self.specs if not self.loads[s.id].down and self.loads[s.id].capacity_tokens)

    def record_failure(self, replica_id: str, why: str) -> bool:
        """Count a failed poll or connection; True when this marks the replica down."""
        count = self._failures.get(replica_id, 0) + 1
        self._failures[replica_id] = count
        load = self.loads[replica_id]
        if count >= self.down_after and not load.down:
            log.warning("replica %s is down (%s)", replica_id, why)
            self.loads[replica_id] = replace(load, down=True)
            return True
        return False

    def load_age_s(self, replica_id: str) -> float | None:
        """Seconds since the replica last answered a poll (its load is that old); None if it never did.
        A slow server keeps its last sample (see `poll_once`), so this says how stale the load may be."""
        polled_at = self.loads[replica_id].polled_at
        return None if polled_at is None else max(0.0, time.time() - polled_at)

    def _answered_within(self, replica_id: str, seconds: float) -> bool:
        age = self.load_age_s(replica_id)
        return age is not None and age < seconds

    def record_sample(self, replica_id: str, sample: MetricsSample) -> bool:
        """Fold in a good poll; True when the replica came back up."""
        spec = self.spec(replica_id)
        previous = self.loads[replica_id]
        self._failures[replica_id] = 0
        self.loads[replica_id] = ReplicaLoad(
            capacity_tokens=spec.capacity_tokens or sample.capacity_tokens or previous.capacity_tokens,
            running_requests=sample.running_requests, waiting_requests=sample.waiting_requests,
            kv_usage=sample.kv_usage, down=False, polled_at=time.time(),
        )
        if previous.down:
            log.info("replica %s is back up", replica_id)
        if sample.host_tier_gib is not None and not self.host_tier_configured and not self._host_tier_noted:
            self._host_tier_noted = True
            log.warning("replica %s has a %g GiB host KV tier (--kv-offloading-size) the planner is not told of: "
                        "set planner.host_tokens_per_s (host link bandwidth / KV bytes per token) so cache "
                        "credit counts contexts in host memory and releases are priced by their reload",
                        replica_id, sample.host_tier_gib)
        return previous.down

    def record_cache_report(self, replica_id: str, has_cached_tokens: bool) -> None:
        """Fold in whether a usage report of the replica said how many prompt tokens its cache served."""
        known = self.reports_cached_tokens.get(replica_id)
        if known:
            return
        self.reports_cached_tokens[replica_id] = has_cached_tokens
        if known is None and not has_cached_tokens:
            log.warning("replica %s reports no cached prompt tokens: TAO sees none of its prefix-cache hits "
                        "(start vLLM with --enable-prompt-tokens-details)", replica_id)

    async def poll_once(self, http: aiohttp.ClientSession, timeout_s: float = 2.0) -> list[str]:
        """Poll every replica's /metrics concurrently; returns ids whose up/down state changed."""

        async def poll(spec: ReplicaSpec) -> str | None:
            try:
                async with http.get(spec.base_url.rstrip("/") + "/metrics",
                                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                    if response.status != 200:
                        raise aiohttp.ClientResponseError(response.request_info, (), status=response.status)
                    sample = parse_vllm_metrics(await response.text(), spec.dp_rank)
            except asyncio.TimeoutError:  # aiohttp's connect and read timeouts included
                if self._answered_within(spec.id, self.unresponsive_s):
                    return None
                return spec.id if self.record_failure(spec.id, "/metrics unanswered") else None
            except (aiohttp.ClientError, ValueError) as exc:
                return spec.id if self.record_failure(spec.id, f"{type(exc).__name__} polling /metrics") else None
            return spec.id if self.record_sample(spec.id, sample) else None

        changed = await asyncio.gather(*(poll(spec) for spec in self.specs))
        return [rid for rid in changed if rid is not None]
