"""The coordinator shows each plan's proven gap (/v1/state, /metrics) and records the snapshots it plans."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai

from tao_harness.types import Snapshot


async def test_plans_show_their_gap_and_snapshots_are_recorded(start_cluster: Any, tmp_path: Path) -> None:
    folder = tmp_path / "snapshots"
    cluster = await start_cluster(replicas=2, dump_snapshots=str(folder))
    client = openai.AsyncOpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": "gap"})
    reply = await asyncio.wait_for(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}]), timeout=10)
    await client.close()
    assert reply.choices[0].message.content
    async with aiohttp.ClientSession() as http:
        async with http.get(cluster.coordinator_url + "/v1/state") as response:
            plans = (await response.json())["recent_plans"]
        async with http.get(cluster.coordinator_url + "/metrics") as response:
            metrics = await response.text()
    admitting = [p for p in plans if p["assigned"]]
    assert admitting and all(p["gap"] == "0 (optimal)" and p["bound"] is not None for p in admitting)
    proven = [line for line in metrics.splitlines() if line.startswith("tao_plans_proven_optimal_total ")]
    assert proven and float(proven[0].split()[1]) >= len(admitting)
    assert "tao_plan_worst_k_gap 0.0" in metrics
    recorded = sorted(folder.glob("*.json"))
    assert len(recorded) >= len(admitting)
    replayed = Snapshot.from_json(json.loads(recorded[0].read_text()))
    assert any(s.id == "gap" for s in replayed.sessions)
