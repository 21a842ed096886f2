"""Faults on the way in: shim events while the coordinator is down (through the real relay and spool), and
malformed input to every endpoint of the coordinator, the proxy and the replica."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import aiohttp
from aiohttp import web

from tao_harness.fleet.faults.cluster import FaultCluster
from tao_harness.fleet.faults.common import FaultRow, FaultSettings, wait_until, zero_goal
from tao_harness.fleet.faults.fuzz import FuzzOutcome, cases, endpoints, send
from tao_harness.shims.claude_code.hooks import ClaudeHookTranslator
from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app, session_end_request
from tao_harness.shims.spool import SpoolWriter, describe

SPOOL_SESSION = "spooled"


class _Relay:
    """The shims' local relay and forwarder, as `tao-run` runs them, on a loopback port."""

    def __init__(self, cluster: FaultCluster, spool_dir: Path, http: aiohttp.ClientSession) -> None:
        poster = CoordinatorPoster(cluster.coordinator_url, http, timeout_s=2.0)
        self.spool = SpoolWriter(spool_dir)
        self.forwarder = Forwarder(poster, self.spool, batch_max=500, retry_s=0.3)
        info = SessionInfo(SPOOL_SESSION, "fleet", {}, cluster.clock.now())
        self.state = RelayState(self.forwarder, info, ClaudeHookTranslator(SPOOL_SESSION), clock=cluster.clock.now)
        self.app = build_relay_app(self.state)
        self.url = ""
        self._runner = web.AppRunner(self.app, access_log=None)

    async def __aenter__(self) -> _Relay:
        self.forwarder.start()
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}{self.state.prefix}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runner.cleanup()
        await self.forwarder.close(timeout_s=1.0)

    async def post(self, http: aiohttp.ClientSession, events: Iterator[dict[str, Any]]) -> None:
        for event in events:
            async with http.post(self.url + "/v1/events", json=event) as response:
                response.raise_for_status()


def _calls(phase: str, count: int, at: float) -> Iterator[dict[str, Any]]:
    for index in range(count):
        call = f"{phase}-{index}"
        session = f"{SPOOL_SESSION}-{index % 4}"
        yield {"type": "tool_start", "session": session, "call_id": call, "tool_name": "bash",
               "command": f"sleep {index % 3}", "at": at}
        yield {"type": "tool_end", "session": session, "call_id": call, "at": at + 0.5, "duration_s": 0.5}


def _stored_calls(db_path: str) -> set[str]:
    """Calls whose start and end both reached the history database."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute("select id from tool_calls where started_at is not null and ended_at is not null")
        return {str(call) for (call,) in rows}


async def spooled_events(cluster: FaultCluster, settings: FaultSettings, db_path: str, scratch: Path) -> list[FaultRow]:
    """Two shim runs post tool events before, at, during and after a coordinator outage. Run A lives through
    it (its forwarder retries from the spool); run B ends during the outage, leaving its spool file, which the
    next run delivers (`flush_spool`). Counted: calls whose start or end never reached the store."""
    n = settings.spool_calls

    def calls(*names: str) -> set[str]:
        return {f"{name}-{i}" for name in names for i in range(n)}

    spooled_path, at_kill = calls("Abefore", "Bbefore", "Adown", "Bdown", "Aafter"), calls("Aatkill", "Batkill")
    async with aiohttp.ClientSession() as http, _Relay(cluster, scratch / "spool-a", http) as run_a:

        async def stored(wanted: set[str]) -> bool:
            return wanted <= await asyncio.to_thread(_stored_calls, db_path)

        async def both_post(phase: str) -> None:
            await asyncio.gather(run_a.post(http, _calls(f"A{phase}", n, cluster.clock.now())),
                                 run_b.post(http, _calls(f"B{phase}", n, cluster.clock.now())))

        async def spooled() -> bool:
            return run_a.forwarder.pending >= 2 * n and run_b.forwarder.pending >= 2 * n

        async def drained() -> bool:
            return run_a.forwarder.pending == 0

        async with _Relay(cluster, scratch / "spool-b", http) as run_b:
            await both_post("before")
            await wait_until(lambda: stored(calls("Abefore", "Bbefore")), timeout_s=10.0)
            await both_post("atkill")  # acknowledged or not when the coordinator dies right after
            await cluster.kill_coordinator()
            await both_post("down")
            await wait_until(spooled, 5.0)
            in_spool = run_a.spool.count + run_b.spool.count
        left_by_b = sum(f.records for f in describe(scratch / "spool-b"))
        await cluster.restart_coordinator()
        flushed = await flush_spool(scratch / "spool-b", CoordinatorPoster(cluster.coordinator_url, http, 5.0), 500)
        await run_a.post(http, _calls("Aafter", n, cluster.clock.now()))
        for index in range(4):
            run_a.forwarder.submit(*session_end_request(f"{SPOOL_SESSION}-{index}", cluster.clock.now()))
        await wait_until(drained, 15.0)
        await wait_until(lambda: stored(spooled_path), timeout_s=10.0)
    have = await asyncio.to_thread(_stored_calls, db_path)
    missing, lost_at_kill = sorted(spooled_path - have), sorted(at_kill - have)
    return [
        zero_goal("shim events, coordinator down", "tool calls missing from the coordinator's store", len(missing),
                  f"{len(spooled_path)} calls (start + end) through two relays, {2 * n} during the outage; "
                  f"{in_spool} records spooled at the peak; run B exited during the outage leaving {left_by_b}, "
                  f"delivered by the next run's flush: {flushed.delivered}"
                  + (f"; missing e.g. {', '.join(missing[:3])}" if missing else "")),
        zero_goal("shim events, coordinator down", "calls sent just before the SIGKILL, never stored",
                  len(lost_at_kill), f"of {len(at_kill)}: the coordinator answers /v1/events before its store "
                  "writer has flushed (every store.flush_interval_s), so a crash loses what it had acknowledged"),
    ]


async def malformed_input(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    """Seeded malformed requests to every route; answers that are not 4xx JSON, processes that died."""
    rng = random.Random(settings.seed)
    bases = {"coordinator": cluster.coordinator_url, "proxy": cluster.proxy_url, "replica": cluster.replica_urls[0]}
    outcomes: list[FuzzOutcome] = []
    huge_sent: set[str] = set()
    async with aiohttp.ClientSession() as http:
        for endpoint in endpoints():
            huge = settings.fuzz_huge_everywhere or endpoint.server not in huge_sent
            batch = cases(endpoint, rng, settings.fuzz_per_field, huge=huge)
            if endpoint.template is not None and huge:
                huge_sent.add(endpoint.server)
            for case in batch:
                outcomes.append(await send(http, bases[endpoint.server], case, f"fuzz-{endpoint.server}"))
        async with http.post(f"{cluster.coordinator_url}/v1/sessions/fuzz-proxy/end") as response:
            await response.read()
    processes = {"coordinator": cluster.coordinator_proc, "proxy": cluster.proxy_proc,
                 "replica": cluster.replica_procs[0]}
    died = [name for name, proc in processes.items() if proc.returncode is not None]
    server_errors = [o for o in outcomes if o.status is None or o.status >= 500]
    wrong = [o for o in outcomes if not o.ok]
    routes = len({(o.case.endpoint.server, o.case.endpoint.path) for o in outcomes})
    return [
        zero_goal("malformed input", "crashes, dropped connections or 5xx", len(server_errors) + len(died),
                  f"{len(outcomes)} requests to {routes} routes of 3 servers"
                  + (f"; died: {', '.join(died)}" if died else "")
                  + "".join(f"; {o.describe()}" for o in server_errors[:3])),
        zero_goal("malformed input", "answers that are not 4xx with a JSON body", len(wrong),
                  "; ".join(o.describe() for o in wrong[:3])),
    ]
