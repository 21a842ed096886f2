"""The proxy SIGKILLed with requests in flight: their reservations must not outlive it.

Sessions stream long answers through the proxy; the proxy is killed mid-stream (no report ever leaves
it) and started again on its port. The coordinator must end the dead proxy's requests within its proxy
grace (coordinator.owners), so the sessions' next requests, sent through the new proxy, move their
lifecycle again instead of riding along as side requests of requests nobody will report.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from tao_harness.config import SessionsConfig
from tao_harness.fleet.faults.cluster import FaultCluster
from tao_harness.fleet.faults.common import FaultRow, FaultSettings, wait_until, zero_goal
from tao_harness.fleet.faults.runs import reserved_tokens
from tao_harness.fleet.session import filler_text

PREFIX = "pkill-"


def _chat(session: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "max_tokens": max_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"{session} " + filler_text(400, len(session))}]}


async def _stream_until_cut(http: aiohttp.ClientSession, url: str, session: str, started: asyncio.Event) -> None:
    """A long streaming answer read until the proxy dies under it."""
    try:
        async with http.post(url + "/v1/chat/completions", json=_chat(session, 20_000, True),
                             headers={"x-session-id": session}) as response:
            await response.content.readany()
            started.set()
            async for _ in response.content.iter_any():
                pass
    except (aiohttp.ClientError, TimeoutError):
        pass
    finally:
        started.set()


async def _next_turn(http: aiohttp.ClientSession, url: str, session: str) -> bool:
    async with http.post(url + "/v1/chat/completions", json=_chat(session, 8, False),
                         headers={"x-session-id": session}, timeout=aiohttp.ClientTimeout(total=60)) as response:
        await response.read()
        return response.status == 200


def _ours(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in state["sessions"] if s["id"].startswith(PREFIX)]


async def proxy_kill(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    sessions = [f"{PREFIX}{index}" for index in range(settings.workers)]
    grace_s = SessionsConfig().proxy_grace_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as http:
        started = [asyncio.Event() for _ in sessions]
        streams = [asyncio.create_task(_stream_until_cut(http, cluster.proxy_url, session, event))
                   for session, event in zip(sessions, started)]
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in started)), 60)
        before = await cluster.state(http)
        reasoning = sum(1 for s in _ours(before) if s["state"] == "reasoning")
        await cluster.kill_proxy()
        killed = time.monotonic()
        await asyncio.gather(*streams)
        await cluster.restart_proxy()

        async def freed() -> bool:
            return not any(s["state"] == "reasoning" for s in _ours(await cluster.state(http)))

        waited = await wait_until(freed, timeout_s=grace_s + 30, interval_s=0.2)
        freed_s = time.monotonic() - killed if waited is not None else float("inf")
        ok = await asyncio.gather(*(_next_turn(http, cluster.proxy_url, session) for session in sessions))
        await wait_until(freed, timeout_s=5.0, interval_s=0.2)  # their reports follow the answers
        after = {s["id"]: s for s in _ours(await cluster.state(http))}
        # A next request taken for a side request leaves its session reasoning on the dead proxy's request.
        stuck = [s for s in sessions if after.get(s, {}).get("state") == "reasoning"]
        for session in sessions:
            async with http.post(f"{cluster.coordinator_url}/v1/sessions/{session}/end") as response:
                await response.read()
        final = await cluster.state(http)
    detail = (f"{len(sessions)} sessions streaming, {reasoning} reasoning and "
              f"{reserved_tokens(before)} tokens reserved at the SIGKILL; proxy grace {grace_s:g} s")
    return [
        FaultRow("proxy killed", "dead proxy's reservations freed (s after the SIGKILL)", round(freed_s, 1),
                 f"≤ {grace_s + 5:g} s", freed_s <= grace_s + 5, detail),
        zero_goal("proxy killed", "next requests failed (through the restarted proxy)", ok.count(False)),
        zero_goal("proxy killed", "sessions stuck (next request taken for a side request)", len(stuck),
                  ", ".join(stuck[:3])),
        zero_goal("proxy killed", "reserved tokens left after the sessions ended", reserved_tokens(final)),
    ]
