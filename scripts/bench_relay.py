"""How long a shim waits on the relay: Claude Code hook round trips and event posts, coordinator up or down.

    python scripts/bench_relay.py [--requests 2000]

Claude Code hooks are synchronous (the tool waits for the hook's answer), so the relay's answer time is
added to every tool call; this measures it on loopback with a live coordinator endpoint and with none
(everything spooled). Prints one table row per case: p50 / p99 / max in milliseconds and requests/s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from tao_harness.shims.claude_code.hooks import CLAUDE_HOOK_PATH, ClaudeHookTranslator
from tao_harness.shims.delivery import CoordinatorPoster
from tao_harness.serving import start_site
from tao_harness.shims.forwarder import Forwarder
from tao_harness.shims.relay import RelayState, SessionInfo, build_relay_app
from tao_harness.shims.spool import SpoolWriter
from tao_harness.tables import format_table


async def _sink() -> tuple[web.AppRunner, str]:
    async def accept(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"accepted": len(body.get("events", [body]))})

    app = web.Application()
    app.router.add_post("/v1/events", accept)
    return await start_site(app)


async def _case(coordinator: str | None, path: str, requests: int, spool: Path) -> list[float]:
    async with aiohttp.ClientSession() as http:
        poster = CoordinatorPoster(coordinator, http, 5.0) if coordinator else None
        forwarder = Forwarder(poster, SpoolWriter(spool), 500, 1.0)
        forwarder.start()
        relay = RelayState(forwarder, SessionInfo("bench", "claude-code", {}, time.time()),
                           ClaudeHookTranslator("bench"))
        runner, url = await start_site(build_relay_app(relay))
        latencies = []
        for i in range(requests):
            if path == CLAUDE_HOOK_PATH:
                body = {"hook_event_name": "PreToolUse" if i % 2 == 0 else "PostToolUse", "session_id": "cc",
                        "tool_use_id": f"t{i // 2}", "tool_name": "Bash", "tool_input": {"command": "ls"},
                        "duration_ms": 5}
            else:
                body = {"type": "tool_start", "session": "bench", "call_id": f"c{i}", "tool_name": "bash",
                        "at": time.time()}
            started = time.perf_counter()
            async with http.post(url + relay.prefix + path, json=body) as response:
                await response.read()
            latencies.append((time.perf_counter() - started) * 1000)
        await runner.cleanup()
        await forwarder.close(5.0)
    return latencies


async def main(requests: int) -> None:
    sink, sink_url = await _sink()
    rows = []
    with tempfile.TemporaryDirectory() as spool:
        for label, coordinator in (("coordinator up", sink_url), ("no coordinator (spooled)", None)):
            for kind, path in (("claude hook", CLAUDE_HOOK_PATH), ("event post", "/v1/events")):
                started = time.perf_counter()
                ms = sorted(await _case(coordinator, path, requests, Path(spool)))
                elapsed = time.perf_counter() - started
                rows.append((kind, label, statistics.median(ms), ms[int(len(ms) * 0.99) - 1], ms[-1],
                             round(requests / elapsed)))
    await sink.cleanup()
    print(format_table(rows, ["request", "case", "p50 ms", "p99 ms", "max ms", "req/s"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per case (default 2000)")
    asyncio.run(main(parser.parse_args().requests))
