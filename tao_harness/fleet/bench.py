"""`tao bench live`: every router on the same trace, fresh replicas per run, repeated, medians and spread.

Each (workers, repeat, router) run starts its own emulated replicas so every router meets the same cold
caches. Routers run in turn inside each repeat, so slow drift of a shared machine touches all of them.
A difference between TAO and the best other router that lies within the spread of either is reported as
inconclusive.
"""

from __future__ import annotations

import asyncio
import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import aiohttp

from tao_harness.engine.api import EngineConfig
from tao_harness.engine.profiles import get_profile, host_tokens_per_s
from tao_harness.fleet.driver import (FleetMetrics, failure_reasons, run_fleet, with_pool_waits,
                                      with_programs_left)
from tao_harness.fleet.processes import ProcessGroup
from tao_harness.fleet.routers import RouterInfo, start_router
from tao_harness.clock import ScaledClock
from tao_harness.fleet.session import SessionResult
from tao_harness.sim.trace import TraceSession

# Metric, higher is better, label.
COLUMNS: tuple[tuple[str, bool, str], ...] = (
    ("mean_latency_s", False, "mean task latency (s)"),
    ("mean_ttft_s", False, "mean TTFT (s)"),
    ("p95_ttft_s", False, "p95 TTFT (s)"),
    ("p99_ttft_s", False, "p99 TTFT (s)"),
    ("max_ttft_s", False, "max TTFT (s)"),
    ("max_pool_wait_s", False, "max pool wait (s)"),
    ("decode_tok_s", True, "decode tok/s"),
    ("prefix_hit_rate", True, "prefix hit rate"),
    ("makespan_s", False, "makespan (s)"),
    ("failed_requests", False, "failed requests"),
    ("failed_sessions", False, "failed sessions"),
    ("programs_left", False, "programs left in router"),
)


@dataclass(frozen=True, slots=True)
class LiveBenchConfig:
    routers: tuple[str, ...]
    workers: tuple[int, ...]
    replicas: int
    time_scale: float
    num_gpu_blocks: int
    repeats: int = 3
    policy: str = "tao"
    profile: str | None = None
    peers_bin: Path | None = None
    log_dir: Path | None = None  # where peer routers' output goes, a file per run (else discarded)
    kv_offloading_size_gib: float | None = None  # each replica's host KV tier (vLLM's --kv-offloading-size)

    @property
    def host_tokens_per_s(self) -> float | None:
        """The replicas' host reload rate as their profile and default link give it, for TAO's planner."""
        if self.kv_offloading_size_gib is None:
            return None
        engine = EngineConfig()
        return host_tokens_per_s(get_profile(self.profile or engine.profile), engine.host_bandwidth_gb_s * 1e9)


@dataclass
class RunRecord:
    router: str
    workers: int
    repeat: int
    metrics: FleetMetrics
    results: list[SessionResult] = field(default_factory=list)
    pool_waits: tuple[float, ...] = ()  # the router's own pool waits (TAO), for the wait CDF
    # What went wrong, one line each (failed requests by reason, stalls, unconfirmed releases, leaked
    # programs): a router's failures are results, listed under the table.
    findings: tuple[str, ...] = ()


async def run_one(trace: Sequence[TraceSession], config: LiveBenchConfig, router: str, workers: int,
                  on_session_done: Callable[[SessionResult], None] | None = None, repeat: int = 0,
                  ) -> tuple[RunRecord, RouterInfo]:
    clock = ScaledClock(config.time_scale)
    async with ProcessGroup() as processes:
        urls = await asyncio.gather(*(processes.start_replica(time_scale=config.time_scale, profile=config.profile,
                                                              num_gpu_blocks=config.num_gpu_blocks,
                                                              kv_offloading_size_gib=config.kv_offloading_size_gib)
                                      for _ in range(config.replicas)))
        capacity = config.num_gpu_blocks * 16
        log = config.log_dir / f"{router}-w{workers}-run{repeat + 1}.log" if config.log_dir else None
        async with start_router(router, urls, capacity, clock, processes, policy=config.policy,
                                peers_bin=config.peers_bin, log=log,
                                host_tokens_per_s=config.host_tokens_per_s) as (endpoints, info):
            metrics, results = await run_fleet(trace, endpoints, workers, clock, on_session_done,
                                               stall_after_s=stall_limit(trace))
            waits: tuple[float, ...] = ()
            if endpoints.events_url is not None:
                metrics, waits = await with_pool_waits(metrics, endpoints.events_url)
            findings = [f"{count} × {reason}" for reason, count in failure_reasons(results).most_common()]
            findings += [f"{count} × release not confirmed: {answer}"
                         for answer, count in endpoints.release_failures.most_common()]
            if endpoints.programs_url is not None:
                try:
                    metrics, programs = await with_programs_left(metrics, endpoints.programs_url)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    findings.append(f"GET /programs after the run failed: {type(exc).__name__}: {exc}")
                else:
                    findings += [f"left in the router after its session released it: {pid} {state}"
                                 for pid, state in sorted(programs.items())]
    return RunRecord(router, workers, repeat, metrics, results, waits, tuple(findings)), info


def stall_limit(trace: Sequence[TraceSession]) -> float:
    """Emulated seconds without any turn ending after which a run counts as stalled: twice the trace's longest
    tool call (every session may be in one), and at least 10 emulated minutes."""
    longest_tool = max((t.tool.duration_s for s in trace for t in s.turns if t.tool is not None), default=0.0)
    return max(600.0, 2 * longest_tool)


def _median_and_spread(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """None when the router does not report the metric (pool waits of routers other than TAO)."""
    known = [v for v in values if v is not None]
    return (statistics.median(known), min(known), max(known)) if known else None


def write_results(records: Sequence[RunRecord], infos: dict[str, RouterInfo], out: Path, title: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        names = list(FleetMetrics.__dataclass_fields__)
        writer.writerow(["router", "workers", "repeat", *names])
        for r in records:
            writer.writerow([r.router, r.workers, r.repeat, *(getattr(r.metrics, n) for n in names)])
    lines = [f"# {title}", ""]
    for workers in sorted({r.workers for r in records}):
        routers = list(dict.fromkeys(r.router for r in records if r.workers == workers))
        cells: dict[tuple[str, str], tuple[float, float, float] | None] = {}
        for router in routers:
            runs = [r.metrics for r in records if r.workers == workers and r.router == router]
            for metric, _, _ in COLUMNS:
                cells[(router, metric)] = _median_and_spread([getattr(m, metric) for m in runs])
        lines += [f"## {workers} workers (median of {len(runs)} runs; [min–max])", "",
                  "| router | " + " | ".join(label for _, _, label in COLUMNS) + " |",
                  "|---" * (len(COLUMNS) + 1) + "|"]
        for router in routers:
            row = []
            for metric, higher, _ in COLUMNS:
                cell = cells[(router, metric)]
                if cell is None:
                    row.append("–")
                    continue
                median, low, high = cell
                values = [c[0] for r in routers if (c := cells[(r, metric)]) is not None]
                best = max(values) if higher else min(values)
                text = f"{median:.3g} [{low:.3g}–{high:.3g}]"
                row.append(f"**{text}**" if median == best and len(values) > 1 else text)
            lines.append(f"| {router} | " + " | ".join(row) + " |")
        if "tao" in routers and len(routers) > 1:
            lines.append("| TAO vs best other | " + " | ".join(
                _versus(cells, routers, metric, higher) for metric, higher, _ in COLUMNS) + " |")
        lines.append("")
    failed = [r for r in records if r.findings]
    if failed:
        lines += ["## Failures, stalls and leaks", ""]
        for r in failed:
            lines.append(f"- {r.router}, {r.workers} workers, run {r.repeat + 1}:")
            lines += [f"  - {finding}" for finding in r.findings]
        lines.append("")
    lines += ["## Routers", ""] + [f"- `{name}`: {info.description}" for name, info in infos.items()]
    path = out / "results.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _versus(cells: dict[tuple[str, str], tuple[float, float, float] | None], routers: list[str], metric: str,
            higher: bool) -> str:
    others = [r for r in routers if r != "tao" and cells[(r, metric)] is not None]
    ours = cells[("tao", metric)]
    if not others or ours is None:
        return "n/a"
    best = max(others, key=lambda r: cells[(r, metric)][0]) if higher else \
        min(others, key=lambda r: cells[(r, metric)][0])  # type: ignore[index]
    theirs = cells[(best, metric)]
    assert theirs is not None
    if theirs[0] == 0:
        return "n/a"
    gain = (ours[0] - theirs[0]) / abs(theirs[0]) * (1 if higher else -1) * 100
    overlap = ours[1] <= theirs[2] and theirs[1] <= ours[2]
    return f"{gain:+.1f}% vs {best}" + (" (inconclusive)" if overlap else "")
