"""Tool-event latency of a `tao coordinator` against the number of live sessions.

For each size: a fresh coordinator (child process, SQLite history store unless --no-store) in front of
one emulated replica large enough for everyone; `--sessions` live sessions (started with
`POST /v1/sessions`), `--holders` of them holding the replica (admitted, request reported: acting),
then `--events` tool events posted with `--concurrency` in flight. Prints per size the event
latency (p50 / p99 / max, ms) and the events per second; the shims give up on a delivery after 5 s.
`--baseline PYTHON` also runs the coordinator under another interpreter (e.g. a virtualenv holding
another checkout), alternating with this one size by size, so the two are compared in one run.

    .venv/bin/python scripts/bench_events.py [--sessions 1000,10000] [--holders 1000] [--events 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from tao_harness.fleet.processes import ProcessGroup
from tao_harness.tables import format_table

TAO = (sys.executable, "-m", "tao_harness.cli.main")
CLI = ("-m", "tao_harness.cli.main")


async def _bounded(concurrency: int, jobs: list[Any]) -> list[Any]:
    slots = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> Any:
        async with slots:
            return await job

    return list(await asyncio.gather(*(one(job) for job in jobs)))


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    async with http.post(url, json=body) as response:
        await response.read()
        response.raise_for_status()
    return time.perf_counter() - started


async def _populate(http: aiohttp.ClientSession, url: str, sessions: int, holders: int) -> None:
    await _bounded(64, [_post(http, url + "/v1/sessions", {"session": f"s{i}", "harness": "bench"})
                        for i in range(sessions)])

    async def hold(index: int) -> None:
        admit = {"session": f"s{index}", "request_id": f"s{index}-r1", "prompt_tokens_estimate": 100,
                 "wait_s": 30, "proxy": "bench"}
        await _post(http, url + "/v1/admit", admit)
        await _post(http, url + "/v1/requests/done", {"session": f"s{index}", "request_id": f"s{index}-r1",
                                                      "status": "ok", "prompt_tokens": 100, "completion_tokens": 10})

    await _bounded(32, [hold(i) for i in range(holders)])


async def measure(python: str, sessions: int, holders: int, events: int, concurrency: int,
                  store: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tao-bench-events-") as scratch:
        async with ProcessGroup() as processes, aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=300)) as http:
            _, replica = await processes.start_url_server(
                [*TAO, "replica", "--port", "0", "--num-gpu-blocks", "2000000", "--log-level", "WARNING"])
            store_flags = ["--db", f"sqlite:///{Path(scratch) / 'h.db'}"] if store else ["--no-store"]
            _, url = await processes.start_url_server(
                [python, *CLI, "coordinator", "--port", "0", "--replica", f"r0={replica}", *store_flags,
                 "--log-level", "ERROR"])
            populate_started = time.perf_counter()
            await _populate(http, url, sessions, min(holders, sessions))
            populate_s = time.perf_counter() - populate_started
            now = time.time()
            bodies = [{"type": "tool_start" if k % 2 == 0 else "tool_end", "session": f"s{(k // 2) % sessions}",
                       "call_id": f"c{k // 2}", "tool_name": "bash", "command": "pytest -q", "at": now,
                       **({"duration_s": 0.5} if k % 2 else {})} for k in range(events)]
            started = time.perf_counter()
            latencies = sorted(await _bounded(concurrency, [_post(http, url + "/v1/events", b) for b in bodies]))
            wall = time.perf_counter() - started
    return {"sessions": sessions, "holders": min(holders, sessions), "populate_s": populate_s,
            "p50_ms": 1e3 * statistics.median(latencies), "p99_ms": 1e3 * latencies[int(0.99 * (len(latencies) - 1))],
            "max_ms": 1e3 * latencies[-1], "events_per_s": events / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1000,10000", help="comma-separated live-session counts")
    parser.add_argument("--holders", type=int, default=1000, help="sessions holding the replica (default 1000)")
    parser.add_argument("--events", type=int, default=200, help="tool events posted per size (default 200)")
    parser.add_argument("--concurrency", type=int, default=32, help="event POSTs in flight (default 32)")
    parser.add_argument("--no-store", action="store_true", help="run the coordinator without a history store")
    parser.add_argument("--baseline", metavar="PYTHON", help="also measure the coordinator of this interpreter")
    args = parser.parse_args()
    pythons = [("this", sys.executable)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows = []
    for sessions in (int(n) for n in args.sessions.split(",")):
        for label, python in pythons:
            result = asyncio.run(measure(python, sessions, args.holders, args.events, args.concurrency,
                                         not args.no_store))
            rows.append((label, f"{sessions}", f"{result['holders']:.0f}", f"{result['populate_s']:.1f}",
                         f"{result['p50_ms']:.1f}", f"{result['p99_ms']:.1f}", f"{result['max_ms']:.1f}",
                         f"{result['events_per_s']:.0f}"))
    print(format_table(rows, ("coordinator", "live sessions", "holding", "setup s", "event p50 ms", "p99 ms",
                              "max ms", "events/s")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
