"""Prometheus metrics of one coordinator, in a registry of its own (no process-global state).

Counters and gauges are read from the coordinator at scrape time by a collector, so the mechanism
keeps no metric objects of its own; only the queue-wait histogram is observed as admissions happen,
and the solve-time histogram is rebuilt from the recent solve times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from tao_harness.coordinator.service import Coordinator

SOLVE_MS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000)


class _StateCollector(Collector):
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        coordinator = self.coordinator
        state, counters = coordinator.state, coordinator.state.counters
        yield GaugeMetricFamily("tao_pool_sessions", "Sessions waiting in the pool", value=state.pool_size())
        yield GaugeMetricFamily("tao_holding_sessions", "Sessions holding a replica",
                                value=state.holding_count())
        yield GaugeMetricFamily("tao_pool_oldest_wait_seconds", "Wait so far of the longest-waiting request",
                                value=coordinator.oldest_wait())
        bound = coordinator.config.planner.max_wait_s
        if bound is not None:
            yield GaugeMetricFamily("tao_pool_wait_bound_seconds", "Configured bound on a request's pool wait",
                                    value=bound)
        reserved = GaugeMetricFamily("tao_reserved_tokens", "Tokens reserved per replica", labels=["replica"])
        capacity = GaugeMetricFamily("tao_capacity_tokens", "KV capacity per replica", labels=["replica"])
        down = GaugeMetricFamily("tao_replica_down", "1 when the replica failed its health checks",
                                 labels=["replica"])
        cache_reports = GaugeMetricFamily(
            "tao_replica_reports_cached_tokens",
            "1 when the replica's usage reports carry cached prompt tokens, 0 when none has (vLLM without "
            "--enable-prompt-tokens-details); absent before its first usage report", labels=["replica"])
        for spec in coordinator.registry.specs:
            load = coordinator.registry.loads[spec.id]
            reserved.add_metric([spec.id], state.used_tokens(spec.id))
            capacity.add_metric([spec.id], load.capacity_tokens or 0)
            down.add_metric([spec.id], 1.0 if load.down else 0.0)
            reports = coordinator.registry.reports_cached_tokens.get(spec.id)
            if reports is not None:
                cache_reports.add_metric([spec.id], 1.0 if reports else 0.0)
        yield from (reserved, capacity, down, cache_reports)
        for name, help_text, value in (
            ("tao_admissions", "Sessions admitted onto a replica", counters.admissions),
            ("tao_interrupts", "Acting sessions released under pressure", counters.interrupts),
            ("tao_admission_expirations", "Early admissions given back unused", counters.expirations),
            ("tao_plan_discards", "Plan entries dropped by revalidation", counters.discards),
            ("tao_plans", "Plans solved", coordinator.counters.plans),
            ("tao_plan_fallbacks", "Plans whose exact search hit its deadline or budget (best plan found)",
             coordinator.counters.fallbacks),
            ("tao_plans_proven_optimal", "Plans whose certified bound equals their objective (proven gap 0)",
             coordinator.counters.proven_optimal),
            ("tao_plans_k_unproven", "Plans whose cache-credit term K is not proven optimal",
             coordinator.counters.k_unproven),
            ("tao_leased_requests", "Requests a proxy sent on an admission lease", coordinator.counters.leased_requests),
            ("tao_lease_races", "Requests sent on a lease revoked just before (ran unscheduled)",
             coordinator.counters.lease_races),
            ("tao_pool_waits_over_bound", "Requests admitted after waiting past the pool-wait bound",
             coordinator.counters.waits_over_bound),
        ):
            yield CounterMetricFamily(name, help_text, value=value)
        if coordinator.writer is not None:
            yield CounterMetricFamily("tao_store_refused_records",
                                      "Records the history store refused for good (logged; input validation "
                                      "should leave none)", value=coordinator.writer.unwritable)
        yield GaugeMetricFamily("tao_plan_worst_k_gap", "Largest proven relative gap in K of any plan so far",
                                value=coordinator.counters.worst_k_gap)
        solve = sorted(coordinator.counters.solve_ms)
        buckets = [(str(b), float(sum(1 for v in solve if v <= b))) for b in SOLVE_MS_BUCKETS]
        yield HistogramMetricFamily("tao_plan_solve_ms", "Planner solve time (recent plans), ms",
                                    buckets=[*buckets, ("+Inf", float(len(solve)))], sum_value=sum(solve))


class CoordinatorMetrics:
    def __init__(self, coordinator: Coordinator) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(coordinator))
        self.queue_wait = Histogram("tao_admission_wait_seconds", "Time requests waited for admission",
                                    buckets=(0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
                                    registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
