"""A closed-loop fleet of scripted agent sessions against one router, and its summary metrics.

At most `workers` sessions are in progress; a finished session lets the next one (trace order) start,
like the paper's SWE-bench workers. The router is anything with an OpenAI-compatible URL; when it is
TAO, tool events also go to its coordinator.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

import aiohttp

from tao_harness.clock import ScaledClock
from tao_harness.fleet.session import Endpoints, SessionResult, replay_session
from tao_harness.sim.trace import TraceSession


@dataclass(frozen=True, slots=True)
class FleetMetrics:
    sessions: int
    failed_sessions: int
    requests: int
    failed_requests: int
    mean_latency_s: float  # session start to end, emulated seconds
    mean_ttft_s: float
    p95_ttft_s: float
    p99_ttft_s: float
    max_ttft_s: float
    decode_tok_s: float  # completion tokens per emulated second over the makespan
    prefix_hit_rate: float  # cached / prompt tokens, as the engines reported them
    makespan_s: float
    mean_tool_end_to_first_token_s: float
    # The router's own pool waits (emulated s), when it reports them (TAO's coordinator); None otherwise.
    p99_pool_wait_s: float | None = None
    max_pool_wait_s: float | None = None
    waits_over_bound: int | None = None  # requests admitted after waiting past its bound

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(results: Sequence[SessionResult], time_scale: float, started: float, ended: float) -> FleetMetrics:
    turns = [t for r in results for t in r.turns]
    ttfts = sorted(t.ttft_s for t in turns if t.ttft_s is not None)
    gaps = [t.tool_end_to_first_token_s for t in turns if t.tool_end_to_first_token_s is not None]
    prompt = sum(t.prompt_tokens or 0 for t in turns)
    makespan = (ended - started) * time_scale
    return FleetMetrics(
        sessions=len(results),
        failed_sessions=sum(1 for r in results if r.error or not all(t.ok for t in r.turns)),
        requests=len(turns),
        failed_requests=sum(1 for t in turns if not t.ok),
        mean_latency_s=statistics.fmean((r.ended_at - r.started_at) * time_scale for r in results) if results else 0.0,
        mean_ttft_s=statistics.fmean(ttfts) if ttfts else 0.0,
        p95_ttft_s=ttfts[int(0.95 * (len(ttfts) - 1))] if ttfts else 0.0,
        p99_ttft_s=ttfts[int(0.99 * (len(ttfts) - 1))] if ttfts else 0.0,
        max_ttft_s=ttfts[-1] if ttfts else 0.0,
        decode_tok_s=sum(t.completion_tokens or 0 for t in turns) / makespan if makespan > 0 else 0.0,
        prefix_hit_rate=sum(t.cached_tokens or 0 for t in turns) / prompt if prompt else 0.0,
        makespan_s=makespan,
        mean_tool_end_to_first_token_s=statistics.fmean(gaps) if gaps else 0.0,
    )


def failure_reasons(results: Sequence[SessionResult]) -> Counter[str]:
    """How many failed requests (and sessions cut short) each distinct reason accounts for."""
    reasons: Counter[str] = Counter(t.error or "failed" for r in results for t in r.turns if not t.ok)
    reasons.update(r.error for r in results if r.error)
    return reasons


async def run_fleet(trace: Sequence[TraceSession], endpoints: Endpoints, workers: int, clock: ScaledClock,
                    on_session_done: Callable[[SessionResult], None] | None = None,
                    ) -> tuple[FleetMetrics, list[SessionResult]]:
    """Replay `trace` with `workers` concurrent sessions; returns the summary and per-session results."""
    slots = asyncio.Semaphore(workers)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    started = time.time()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def one(session: TraceSession) -> SessionResult:
            async with slots:
                result = await replay_session(http, endpoints, session, clock)
            if on_session_done is not None:
                on_session_done(result)
            return result

        results = list(await asyncio.gather(*(one(s) for s in trace)))
    return summarize(results, clock.time_scale, started, time.time()), results


async def with_pool_waits(metrics: FleetMetrics, coordinator_url: str) -> tuple[FleetMetrics, tuple[float, ...]]:
    """The coordinator's own account of pool waits (what the clients see includes the engine's time too)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(coordinator_url + "/v1/state", params={"waits": "1"}) as response:
            waits = (await response.json())["pool_wait"]
    samples = tuple(sorted(float(w) for w in waits["recent"]))
    p99 = samples[int(0.99 * (len(samples) - 1))] if samples else 0.0
    return replace(metrics, p99_pool_wait_s=p99, max_pool_wait_s=float(waits["max_s"]),
                   waits_over_bound=int(waits["over_bound"])), samples
