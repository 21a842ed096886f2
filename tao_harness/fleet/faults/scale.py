"""The scale soak: thousands of concurrent scripted sessions, with every fault the smaller scripts test alone.

`scale_sessions` agent sessions start at once (2,048 in the full campaign) on the emulated replicas, far
more than they hold, so most wait in the pool and the planner interrupts acting sessions to admit ready
ones. Each turn streams, each tool call is reported to the coordinator as the shims would, and each
session ends its session at the end. Meanwhile clients hang up on `scale_cuts` streams, and the proxy
is SIGKILLed and restarted; the agents retry a turn cut by the kill, as harnesses do. Afterwards nothing
may be left: no session, no reservation, no request running on a replica, and every session must have
finished (no deadlock). Tool events must be accepted well within the shims' delivery timeout (p99 of the
first deliveries), and none lost: an event not accepted is sent again, as the shims' spool replays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

import aiohttp

from tao_harness.config import RunConfig
from tao_harness.fleet.driver import run_fleet
from tao_harness.fleet.faults.cluster import FaultCluster
from tao_harness.fleet.faults.common import (FaultRow, FaultSettings, agent_trace, failed_requests,
                                             wait_until, zero_goal)
from tao_harness.fleet.faults.runs import MIB, hang_up, reserved_tokens
from tao_harness.fleet.session import Endpoints, SessionResult
from tao_harness.sim.trace import TraceSession, TraceTool

PREFIX = "scale-"
LONG_TOOL_S = 150.0
SAMPLE_S = 2.0
FAULT = "scale soak"
# A turn cut by the proxy kill is sent again a second later, up to this many times (the restart takes seconds).
RETRIES = 60


def _trace(settings: FaultSettings) -> list[TraceSession]:
    """The fault fleet's short sessions, every fourth one with long `sleep` tool calls: while those act,
    the planner may interrupt them to admit ready sessions waiting in the pool."""
    base = agent_trace(PREFIX + "s", settings.scale_sessions, settings.scale_turns, settings.tool_s, settings.seed,
                       first_input_tokens=settings.scale_first_tokens)
    long_tool = TraceTool("bash", f"sleep {LONG_TOOL_S:g}", LONG_TOOL_S)
    return [replace(session, turns=tuple(replace(turn, tool=long_tool) if turn.tool is not None else turn
                                         for turn in session.turns)) if index % 4 == 0 else session
            for index, session in enumerate(base)]


def _failures(results: list[SessionResult]) -> str:
    """What the failed turns were: transport errors that outlasted the retries, answers that were not
    200, replies cut short."""
    errors = Counter((r.error or "").split(":")[0] for r in results if r.error)
    not_ok = Counter((t.error or "?")[:160] for r in results for t in r.turns if not t.ok)
    short = sum(1 for r in results for t in r.turns if t.ok and (t.completion_tokens or 0) == 0)
    return (f"{sum(errors.values())} sessions ended on a transport error ({dict(errors)}), "
            f"{sum(not_ok.values())} turns answered in error ({dict(not_ok.most_common(3))}), "
            f"{short} answered without usage")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def _left(cluster: FaultCluster, http: aiohttp.ClientSession) -> tuple[int, int, int]:
    """(soak sessions the coordinator still has, tokens reserved, requests running on the replicas)."""
    state = await cluster.state(http)
    running = sum(await asyncio.gather(*(cluster.replica_running(http, i) for i in range(len(cluster.replica_urls)))))
    return sum(1 for s in state["sessions"] if s["id"].startswith(PREFIX)), reserved_tokens(state), running


@dataclass
class _Peaks:
    """The coordinator seen every `SAMPLE_S` during the run: largest pool, its RSS, plans made. Read from
    its `/metrics`: `/v1/state` lists every session, and encoding 2,000 of them every 2 s took a sixth of
    a loaded coordinator's time."""

    pool: int = 0
    rss: int = 0
    plans: int = 0

    async def follow(self, cluster: FaultCluster, http: aiohttp.ClientSession) -> None:
        while True:
            try:
                metrics = await cluster.coordinator_metrics(http)
                self.pool = max(self.pool, int(metrics["tao_pool_sessions"]))
                self.plans = int(metrics["tao_plans_total"])
                self.rss = max(self.rss, cluster.coordinator_rss())  # the proxy is killed meanwhile
            except (aiohttp.ClientError, TimeoutError, KeyError):
                pass
            await asyncio.sleep(SAMPLE_S)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """This process plays thousands of agents at once, and times their tool events: its own garbage
    collector pauses would count as the coordinator's latency (full collections walked every module and the
    whole trace: 2.5 s pauses on the loaded 2-core machine). What exists before the fleet starts stays out
    of the collector's reach until it ends; real agents are processes of their own."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def scale_soak(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    trace = _trace(settings)
    with frozen_heap():
        return await _scale_soak(cluster, settings, trace)


async def _scale_soak(cluster: FaultCluster, settings: FaultSettings,
                      trace: list[TraceSession]) -> list[FaultRow]:
    sessions = settings.scale_sessions
    latencies: list[float] = []
    endpoints = Endpoints((cluster.proxy_url,), cluster.coordinator_url, retries=RETRIES, event_latencies=latencies,
                          event_resends=RETRIES)
    rss_start = cluster.coordinator_rss()
    peaks = _Peaks()
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        counters_start = (await cluster.state(http))["counters"]
        sampler = asyncio.create_task(peaks.follow(cluster, http))
        fleet = asyncio.create_task(run_fleet(trace, endpoints, sessions, cluster.clock))

        async def loaded() -> bool:  # the kill hits a full pool, not the fleet's start-up
            return peaks.pool >= sessions // 4

        await wait_until(loaded, timeout_s=settings.scale_kill_after_s, interval_s=0.5)
        killed_at = time.monotonic() - started
        await cluster.kill_proxy()
        await cluster.restart_proxy()
        # Streams cut by their clients, while the pool is full: they wait for admission like every session.
        cuts = asyncio.gather(*(hang_up(http, cluster.proxy_url, f"{PREFIX}cut-{i}")
                                for i in range(settings.scale_cuts)))
        done, _ = await asyncio.wait([fleet, cuts], timeout=settings.scale_deadline_s)
        finished_s = time.monotonic() - started
        for task in {fleet, cuts} - done:
            task.cancel()
        results = (await fleet)[1] if fleet in done else []
        cut = await cuts if cuts in done else []
        sampler.cancel()
        for index in range(settings.scale_cuts):
            async with http.post(f"{cluster.coordinator_url}/v1/sessions/{PREFIX}cut-{index}/end") as response:
                await response.read()

        async def settled() -> bool:
            return await _left(cluster, http) == (0, 0, 0)

        await wait_until(settled, timeout_s=30.0, interval_s=0.5)
        left = await _left(cluster, http)
        counters = (await cluster.state(http))["counters"]
    rss_end = cluster.coordinator_rss()
    run = (f"{settings.scale_sessions} sessions × {settings.scale_turns} turns started at once, "
           f"{sum(len(r.turns) for r in results)} requests, {len(latencies)} tool events, finished in "
           f"{finished_s:.0f} s wall; pool peak {peaks.pool}, {peaks.plans - counters_start['plans']} plans; proxy "
           f"killed {killed_at:.0f} s in ({sum(r.retries for r in results)} attempts cut or refused by it, sent "
           f"again); {sum(cut)} of {settings.scale_cuts} streams cut by their clients")
    return _rows(settings, run, counters_start, counters, results, trace,
                 (latencies, endpoints.event_failures, endpoints.events_lost), fleet in done, left,
                 (rss_start, peaks.rss, rss_end))


def _rows(settings: FaultSettings, run: str, counters_start: dict[str, int], counters: dict[str, int],
          results: list[SessionResult], trace: list[TraceSession],
          events: tuple[list[float], Counter[str], int], finished: bool,
          left: tuple[int, int, int], rss: tuple[int, int, int]) -> list[FaultRow]:
    timeout_s = RunConfig().delivery_timeout_s
    latencies, event_failures, events_lost = events
    accepted = [t for t in latencies if math.isfinite(t)]
    p99 = _percentile(latencies, 0.99)  # first deliveries that failed count as infinitely late
    interrupts = counters["interrupts"] - counters_start["interrupts"]
    sessions_left, tokens_left, running_left = left
    growth = (rss[2] - rss[0]) / MIB
    return [
        zero_goal(FAULT, "sessions unfinished at the deadline (deadlock)",
                  0 if finished else settings.scale_sessions - len(results), run),
        zero_goal(FAULT, "agent requests failed", failed_requests(results, trace) if finished else float("nan"),
                  _failures(results)),
        FaultRow(FAULT, "tool event latency p99 (s)", round(p99, 3), f"< {timeout_s:g} s (shims' timeout)",
                 p99 < timeout_s, f"p50 {_percentile(accepted, 0.5):.3f} s, max {max(accepted, default=0):.3f} s; "
                 f"{len(latencies) - len(accepted)} first deliveries not accepted (kept and sent again a second "
                 f"later, as the shims' spool does); failed attempts by reason {dict(event_failures)}"),
        zero_goal(FAULT, "tool events lost (never accepted)", events_lost,
                  f"of {len(latencies)} tool events, after up to {RETRIES} resends each"),
        FaultRow(FAULT, "interrupts by the planner", interrupts, "> 0", interrupts > 0,
                 f"{counters['admissions'] - counters_start['admissions']} admissions"),
        zero_goal(FAULT, "sessions left in /v1/state", sessions_left),
        zero_goal(FAULT, "reserved tokens left", tokens_left),
        zero_goal(FAULT, "requests left running on the replicas", running_left),
        FaultRow(FAULT, "RSS growth of the coordinator (MiB)", round(growth, 1), f"≤ {settings.scale_rss_goal_mib:g} MiB",
                 growth <= settings.scale_rss_goal_mib,
                 f"{rss[0] / MIB:.0f} MiB before, {rss[1] / MIB:.0f} MiB at the peak, {rss[2] / MIB:.0f} MiB after"),
    ]
