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
    # Programs the router still tracked after every session had ended and released its program (ThunderAgent's
    # /programs): a leak; None for routers that track no programs.
    programs_left: int | None = None

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
                    stall_after_s: float | None = None) -> tuple[FleetMetrics, list[SessionResult]]:
    """Replay `trace` with `workers` concurrent sessions; returns the summary and per-session results.

    With `stall_after_s` (emulated seconds), a run in which no turn ends for that long is stopped there and
    its unfinished sessions count as failed, with the reason."""
    slots = asyncio.Semaphore(workers)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    started = time.time()
    results = [SessionResult(s.session) for s in trace]
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def one(session: TraceSession, result: SessionResult) -> None:
            async with slots:
                await replay_session(http, endpoints, session, clock, result)
            if on_session_done is not None:
                on_session_done(result)

        tasks = [asyncio.create_task(one(s, r)) for s, r in zip(trace, results)]
        if stall_after_s is None:
            await asyncio.gather(*tasks)
        else:
            await _until_done_or_stalled(tasks, results, stall_after_s, clock.time_scale)
    return summarize(results, clock.time_scale, started, time.time()), results


async def _until_done_or_stalled(tasks: Sequence[asyncio.Task[None]], results: Sequence[SessionResult],
                                 stall_after_s: float, time_scale: float) -> None:
    """Waits for every session; if no turn ends for `stall_after_s` emulated seconds, the router has stalled
    (a deadlock, or requests it holds forever): the sessions left are stopped and marked as stalled, so the
    run reports the stall instead of hanging the benchmark."""
    limit = stall_after_s / time_scale
    progress, last_progress = -1, time.monotonic()
    pending: set[asyncio.Task[None]] = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=min(1.0, limit))
        now = time.monotonic()
        turns = sum(len(r.turns) for r in results)
        if turns != progress:
            progress, last_progress = turns, now
        elif now - last_progress > limit:
            break
    if not pending:
        return
    stopped = time.time()
    for task, result in zip(tasks, results):
        if task in pending:
            if not result.started_at:  # it never got a worker
                result.started_at = result.ended_at = stopped
            result.error = f"stalled: no turn of any session ended for {stall_after_s:g} emulated s"
            task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def with_pool_waits(metrics: FleetMetrics, coordinator_url: str) -> tuple[FleetMetrics, tuple[float, ...]]:
    """The coordinator's own account of pool waits (what the clients see includes the engine's time too)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(coordinator_url + "/v1/state", params={"waits": "1"}) as response:
            waits = (await response.json())["pool_wait"]
    samples = tuple(sorted(float(w) for w in waits["recent"]))
    p99 = samples[int(0.99 * (len(samples) - 1))] if samples else 0.0
    return replace(metrics, p99_pool_wait_s=p99, max_pool_wait_s=float(waits["max_s"]),
                   waits_over_bound=int(waits["over_bound"])), samples


async def with_programs_left(metrics: FleetMetrics, programs_url: str) -> tuple[FleetMetrics, dict[str, Any]]:
    """ThunderAgent's programs left after the run (`GET /programs`: id -> backend, status, state, tokens)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(programs_url + "/programs", timeout=aiohttp.ClientTimeout(total=10)) as response:
            programs = await response.json()
    return replace(metrics, programs_left=len(programs)), programs
