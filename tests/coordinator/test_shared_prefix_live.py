"""Sessions that send the same system prompt and tools share one copy of it on a replica: the proxy names
the group from the request body, and the coordinator reserves the prefix once (docs/snapshot.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai

SYSTEM = "You are a careful software engineer. Follow the repository's conventions. " * 60  # ~4.4 KB


async def _ask(cluster: Any, session: str, system: str) -> None:
    client = openai.AsyncOpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": session})
    await asyncio.wait_for(client.chat.completions.create(
        model="m", max_tokens=8,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": f"task of {session}"}]),
        timeout=60)
    await client.close()


async def _state(cluster: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(cluster.coordinator_url + "/v1/state") as response:
        return dict(await response.json())


async def test_sessions_with_one_system_prompt_reserve_it_once_per_replica(start_cluster: Any) -> None:
    cluster = await start_cluster(replicas=1)
    await _ask(cluster, "a", SYSTEM)
    await _ask(cluster, "b", SYSTEM)
    await _ask(cluster, "c", "You review pull requests. " * 150)  # another prompt of about the same size
    state = await _state(cluster)
    sessions = {s["id"]: s for s in state["sessions"]}
    assert set(sessions) == {"a", "b", "c"} and all(s.get("node") == "r0" for s in sessions.values()), sessions
    a, b, c = sessions["a"], sessions["b"], sessions["c"]
    assert a["prefix_group"] == b["prefix_group"] != c["prefix_group"]
    assert 1000 <= a["shared_tokens"] == b["shared_tokens"] < a["tokens"]
    # One of a and b carries the shared prompt; the other's reservation leaves it out. c shares with none.
    assert [a.get("shared_resident", False), b.get("shared_resident", False)].count(True) == 1
    assert not c.get("shared_resident", False)
    # Each holder reserves its context and an answer's headroom; the shared prompt is counted once.
    [replica] = state["replicas"]
    headroom = cluster.coordinator.config.planner.reserve_tokens
    whole = sum(s["tokens"] + headroom for s in sessions.values())
    assert replica["reserved_tokens"] == whole - a["shared_tokens"]
