"""Faults injected into a running fleet: coordinator killed and restarted, replica killed, clients that hang
up mid-stream, and the soak (many sessions for minutes of emulated time: memory and leaked sessions)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import aiohttp

from tao_harness.fleet.driver import run_fleet
from tao_harness.fleet.faults.cluster import FaultCluster
from tao_harness.fleet.faults.common import (FaultRow, FaultSettings, agent_trace, failed_requests,
                                             wait_until, zero_goal)
from tao_harness.fleet.session import filler_text

MIB = 1024 * 1024


async def _admissions(cluster: FaultCluster, http: aiohttp.ClientSession) -> int:
    try:
        return int((await cluster.state(http))["counters"]["admissions"])
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def coordinator_restart(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    """SIGKILL the coordinator mid-run, restart it on its port; failed agent requests, time to recover."""
    trace = agent_trace("crash", settings.workers, settings.turns, settings.tool_s, settings.seed)
    traces = list(trace)
    fleets = [asyncio.create_task(run_fleet(trace, cluster.endpoints, settings.workers, cluster.clock))]
    await asyncio.sleep(settings.kill_after_s)
    await cluster.kill_coordinator()
    killed = time.monotonic()
    await cluster.restart_coordinator()
    listening = time.monotonic()
    async with aiohttp.ClientSession() as http:

        async def admitted() -> bool:
            if fleets[-1].done():  # keep agents coming until the new coordinator has admitted one
                extra = agent_trace(f"crash-tail{len(fleets)}", 2, 3, settings.tool_s, settings.seed)
                traces.extend(extra)
                fleets.append(asyncio.create_task(run_fleet(extra, cluster.endpoints, 2, cluster.clock)))
            return await _admissions(cluster, http) > 0

        recovered = await wait_until(admitted, timeout_s=60.0)
        results = [r for metrics, batch in await asyncio.gather(*fleets) for r in batch]
        state = await cluster.state(http)
    left = [s["id"] for s in state["sessions"] if s["id"].startswith("crash")]
    failed = failed_requests(results, traces)
    recover_s = recovered if recovered is not None else float("inf")
    detail = (f"{len(results)} sessions, {sum(len(r.turns) for r in results)} requests; restart took "
              f"{listening - killed:.1f} s wall (process start), then first admission {recover_s:.2f} s later")
    return [zero_goal("coordinator killed", "agent requests failed", failed, detail),
            FaultRow("coordinator killed", "time to recover (s, restart → first admission)", round(recover_s, 2),
                     f"≤ {settings.recover_goal_s:g} s", recover_s <= settings.recover_goal_s,
                     "the proxy fails open meanwhile and retries the coordinator after its back-off"),
            zero_goal("coordinator killed", "sessions or reserved tokens left after the run",
                      len(left) + reserved_tokens(state), f"{len(left)} sessions, {reserved_tokens(state)} tokens")]


def _requests_on(db_path: str, replica: str, before: float, prefix: str) -> set[str]:
    """Sessions named `prefix*` with a finished request on `replica` started before `before` (on the
    cluster's clock, which the store's times are on)."""
    pattern = prefix.replace("_", "") + "%"
    with sqlite3.connect(db_path) as db:
        rows = db.execute("select distinct session_id from llm_requests where status = 'ok' and replica = ? "
                          "and started_at < ? and session_id like ?", (replica, before, pattern)).fetchall()
    return {str(session) for (session,) in rows}


async def replica_kill(cluster: FaultCluster, settings: FaultSettings, db_path: str) -> list[FaultRow]:
    """SIGKILL replica r0 mid-run; client-visible failures, and sessions that moved to another replica."""
    trace = agent_trace("rkill", settings.workers, settings.turns, settings.tool_s, settings.seed)
    fleet = asyncio.create_task(run_fleet(trace, cluster.endpoints, settings.workers, cluster.clock))
    await asyncio.sleep(settings.kill_after_s)
    async with aiohttp.ClientSession() as http:

        async def serving() -> bool:  # killed while it streams, the case that can lose requests
            return await cluster.replica_running(http, 0) > 0

        await wait_until(serving, timeout_s=10.0, interval_s=0.01)
        held = {s["id"] for s in (await cluster.state(http))["sessions"] if s.get("node") == "r0"}
    killed_at = time.time()
    await cluster.kill_replica(0)
    _, results = await fleet
    failed = failed_requests(results, trace)
    # The store keeps one row per request id (the attempt that finished it), so the proxy's failovers are
    # counted from the agents' side: turns of sessions r0 held that were running when it died.
    scale = cluster.clock.time_scale
    cut = sum(1 for r in results if r.session in held for t in r.turns
              if t.started_at <= killed_at <= t.started_at + t.latency_s / scale)
    await asyncio.sleep(1.0)  # reports are in the store (its writer flushes every 0.2 s)
    on_r0 = await asyncio.to_thread(_requests_on, db_path, "r0", cluster.clock.at(killed_at), "rkill-")
    # r0 is dead after the kill, so a later request that succeeded was served by another replica.
    went_on = {r.session for r in results if any(t.ok and t.started_at > killed_at for t in r.turns)}
    replaced = len(on_r0 & went_on)
    expected = len({r.session for r in results if r.session in on_r0 and r.turns[-1].started_at > killed_at})
    return [
        zero_goal("replica killed", "requests lost (client-visible failures)", failed,
                  f"{cut} requests were running on r0 when it died: the proxy finished them on another "
                  "replica (sent afresh before any content reached the agent, continued after)"),
        FaultRow("replica killed", "sessions re-placed on another replica", replaced, f"= {expected}",
                 replaced == expected, f"{len(on_r0)} sessions had run on r0 before the kill, {expected} of them "
                 f"had turns left; {len(results)} sessions in the run"),
    ]


async def hang_up(http: aiohttp.ClientSession, proxy_url: str, session: str) -> bool:
    """A streaming request abandoned after its first chunk; True if a chunk came. It waits for its admission
    as an agent does, however long the pool is (the fault script's deadline bounds the run)."""
    body = {"model": "m", "stream": True, "max_tokens": 400, "ignore_eos": True,
            "messages": [{"role": "user", "content": filler_text(800, hash(session) % 97)}]}
    async with http.post(proxy_url + "/v1/chat/completions", json=body, headers={"x-session-id": session},
                         timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as response:
        chunk = await response.content.readany()
        response.close()  # drops the connection mid-stream
        return bool(chunk)


def reserved_tokens(state: dict[str, Any]) -> int:
    return sum(int(r.get("reserved_tokens") or 0) for r in state["replicas"])


async def disconnects(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    """Agents that hang up mid-stream during a fleet run; reservations left after the run."""
    trace = agent_trace("dc", settings.workers, max(3, settings.turns // 2), settings.tool_s, settings.seed)
    async with aiohttp.ClientSession() as http:
        fleet = asyncio.create_task(run_fleet(trace, cluster.endpoints, settings.workers, cluster.clock))
        await asyncio.sleep(settings.kill_after_s / 2)
        got = await asyncio.gather(*(hang_up(http, cluster.proxy_url, f"hangup-{i}")
                                     for i in range(settings.disconnects)))
        await fleet

        async def settled() -> bool:
            return reserved_tokens(await cluster.state(http)) == 0

        await wait_until(settled, timeout_s=3.0)
        state = await cluster.state(http)
    holding = [s["id"] for s in state["sessions"] if s["id"].startswith("hangup-") and s.get("node")]
    return [zero_goal("clients hang up mid-stream", "reserved tokens leaked after the run", reserved_tokens(state),
                      f"{sum(got)} of {settings.disconnects} streams cut after the first chunk (sessions not "
                      f"ended); {len(holding)} still placed")]


async def soak(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    """Waves of short sessions until the emulated duration has passed: RSS growth after the first wave,
    sessions left behind, failed requests."""
    samples: list[dict[str, int]] = []
    failed = requests = waves = 0
    started, emulated_start = time.monotonic(), cluster.clock.now()
    while waves < 2 or cluster.clock.now() - emulated_start < settings.soak_emulated_s:
        trace = agent_trace(f"soak-w{waves}", settings.soak_sessions, settings.soak_turns, settings.soak_tool_s,
                            settings.seed + waves)
        metrics, results = await run_fleet(trace, cluster.endpoints, settings.soak_sessions, cluster.clock)
        failed += failed_requests(results, trace)
        requests += metrics.requests
        waves += 1
        samples.append(cluster.rss_bytes())  # after the first wave, pools and caches are warm
    growth = {name: (samples[-1][name] - samples[0][name]) / MIB for name in samples[0]}
    async with aiohttp.ClientSession() as http:
        state = await cluster.state(http)
    leaked = [s["id"] for s in state["sessions"] if s["id"].startswith("soak-")]
    detail = (f"{waves} waves × {settings.soak_sessions} sessions × {settings.soak_turns} turns, {requests} requests, "
              f"{cluster.clock.now() - emulated_start:.0f} s emulated in {time.monotonic() - started:.0f} s wall")
    return [
        *(FaultRow("soak", f"RSS growth of the {name} (MiB)", round(mib, 1), f"≤ {settings.rss_goal_mib:g} MiB",
                   mib <= settings.rss_goal_mib,
                   f"{samples[0][name] / MIB:.0f} MiB after wave 1 → {samples[-1][name] / MIB:.0f} MiB at the end")
          for name, mib in growth.items()),
        zero_goal("soak", "sessions left in /v1/state after all ended", len(leaked), detail),
        zero_goal("soak", "reserved tokens left after all ended", reserved_tokens(state)),
        zero_goal("soak", "agent requests failed", failed),
    ]
