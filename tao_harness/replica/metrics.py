"""`/metrics` in vLLM's Prometheus names, one label set per data-parallel rank (vLLM's `engine` label).

A custom collector reads each rank's `EngineCore.metrics()` at scrape time, so there is no second copy
of the numbers to keep in sync, and each app owns its own `CollectorRegistry` (no global registry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tao_harness.engine.api import EngineMetrics
from tao_harness.engine.host_tier import HostTierStats
from tao_harness.replica.generation import RankDriver

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ["model_name", "engine"]

Reading = Callable[[RankDriver, EngineMetrics], float]
# (family, name without the counter's _total suffix, help text, reading) — names and help as vLLM's.
_SERIES: tuple[tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, str, Reading], ...] = (
    (
        GaugeMetricFamily,
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        lambda d, m: m.kv_cache_usage,
    ),
    (
        GaugeMetricFamily,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        lambda d, m: m.num_running,
    ),
    (
        GaugeMetricFamily,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        lambda d, m: m.num_waiting,
    ),
    (
        CounterMetricFamily,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        lambda d, m: m.prefix_cache_queries,
    ),
    (
        CounterMetricFamily,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        lambda d, m: m.prefix_cache_hits,
    ),
    (
        CounterMetricFamily,
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        lambda d, m: m.num_preemptions,
    ),
    (
        CounterMetricFamily,
        "vllm:prompt_tokens",
        "Number of prefill tokens processed.",
        lambda d, m: d.counters.prompt_tokens,
    ),
    (
        CounterMetricFamily,
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        lambda d, m: d.counters.generation_tokens,
    ),
)
# The host KV tier's series (vLLM 0.32's offloading connector, `offloading/metrics.py`, and the scheduler's
# external prefix-cache counters), present only on ranks started with --kv-offloading-size.
HostReading = Callable[[HostTierStats], float]
_HOST_SERIES: tuple[tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, str, HostReading], ...] = (
    (CounterMetricFamily, "vllm:external_prefix_cache_queries",
     "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of "
     "queried tokens.", lambda h: h.queried_tokens),
    (CounterMetricFamily, "vllm:external_prefix_cache_hits",
     "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of "
     "cached tokens.", lambda h: h.hit_tokens),
    (CounterMetricFamily, "vllm:kv_offload_load_bytes", "Bytes loaded by KV offloading.", lambda h: h.loaded_bytes),
    (CounterMetricFamily, "vllm:kv_offload_store_bytes", "Bytes stored by KV offloading.", lambda h: h.stored_bytes),
    (CounterMetricFamily, "vllm:kv_offload_load_time", "Seconds spent loading by KV offloading.",
     lambda h: h.load_time_s),
    (GaugeMetricFamily, "vllm:kv_offload_cpu_cache_usage_perc", "CPU KV cache usage. 1 means 100 percent usage.",
     lambda h: h.resident_blocks / h.num_blocks),
)
# vLLM's finished_reason label values, each series present from the start as on vLLM.
_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def _finished(driver: RankDriver, reason: str) -> int:
    if reason == "abort":
        return driver.counters.aborted_requests
    return driver.counters.finished_by_reason[reason]


class ReplicaCollector(Collector):
    """Yields the vLLM gauges and counters for every rank."""

    def __init__(self, drivers: Sequence[RankDriver], model_name: str) -> None:
        self.drivers = drivers
        self.model_name = model_name

    def collect(self) -> Iterator[Metric]:
        readings = [(driver, driver.engine.metrics()) for driver in self.drivers]
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=["engine", "num_gpu_blocks", "block_size", "kv_cache_size_tokens", "enable_prefix_caching",
                    "kv_offloading_size", "kv_offloading_backend"],
        )
        # As in vLLM 0.32 with --data-parallel-size N: num_gpu_blocks is the sum over all N engines,
        # repeated on each engine's series; kv_cache_size_tokens is the engine's own capacity.
        total_blocks = sum(m.num_gpu_blocks for _, m in readings)
        for driver, m in readings:
            labels = [str(driver.rank), str(total_blocks), str(m.block_size), str(m.num_gpu_blocks * m.block_size)]
            offloading = driver.engine.config.kv_offloading_size_gib  # vLLM renders an unset field as None
            info.add_metric([*labels, "True", str(offloading), "None" if offloading is None else "native"], 1.0)
        yield info
        hosts = [(driver, m.host) for driver, m in readings if m.host is not None]
        for family, name, help_text, read_host in _HOST_SERIES if hosts else ():
            metric = family(name, help_text, labels=_LABELS)
            for driver, host in hosts:
                metric.add_metric([self.model_name, str(driver.rank)], read_host(host))
            yield metric
        for family, name, help_text, read in _SERIES:
            metric = family(name, help_text, labels=_LABELS)
            for driver, m in readings:
                metric.add_metric([self.model_name, str(driver.rank)], read(driver, m))
            yield metric
        success = CounterMetricFamily(
            "vllm:request_success", "Count of successfully processed requests.", labels=[*_LABELS, "finished_reason"]
        )
        for driver, _ in readings:
            for reason in _FINISH_REASONS:
                success.add_metric([self.model_name, str(driver.rank), reason], _finished(driver, reason))
        yield success


def render_metrics(drivers: Sequence[RankDriver], model_name: str) -> bytes:
    """The Prometheus text exposition of all ranks."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReplicaCollector(drivers, model_name))
    return generate_latest(registry)
