"""Adversarial input an independent probe found: unusable session ids and deep JSON at the proxy (no auth
needed), and malformed messages on the coordinator channel. Every answer must be 4xx JSON, nothing may
stay admitted, and the channel must drop the bad messages and stay open."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tao_harness.fleet.faults.cluster import FaultCluster
from tao_harness.fleet.faults.common import FaultRow, FaultSettings, wait_until, zero_goal
from tao_harness.fleet.faults.runs import reserved_tokens

FAULT = "adversarial input"
_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
_DEEP = "[" * 100_000 + "]" * 100_000


def _proxy_cases() -> list[tuple[str, str, bytes]]:
    """(label, path, body) of requests the proxy must refuse before admitting anything."""
    found = [(f"user {value!r}", "/v1/chat/completions", json.dumps(_CHAT | {"user": value}).encode())
             for value in ("edge\x00nul", "edge\nline", "edge\x7fdel", "\ud800", "e" * 201)]
    found.append(("metadata.session_id \\x01", "/v1/messages",
                  json.dumps(_CHAT | {"metadata": {"session_id": "edge\x01"}}).encode()))
    found.append(("path /s/%00/", "/s/%00/v1/chat/completions", json.dumps(_CHAT).encode()))
    found.append(("JSON nested 100,000 deep", "/v1/chat/completions", ('{"user": "edge-deep", "x": ' + _DEEP + "}").encode()))
    return found


def _channel_messages() -> list[str]:
    done = {"session": "edge-ch", "request_id": "r", "status": "ok"}
    return ['{"seq": 1e999, "type": "done", "body": {}}',
            json.dumps({"seq": 2, "type": "done", "body": done | {"started_at": 10**400}}),
            _DEEP, '{"seq": "x"}', "[]"]


async def _answer(http: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int | None, bool]:
    try:
        async with http.post(url, data=body, headers={"Content-Type": "application/json"},
                             timeout=aiohttp.ClientTimeout(total=30)) as response:
            raw = await response.read()
            try:
                payload: Any = json.loads(raw)
            except ValueError:
                return response.status, False
            return response.status, isinstance(payload, dict) and "error" in payload
    except (aiohttp.ClientError, TimeoutError):
        return None, False


async def _channel_survives(http: aiohttp.ClientSession, coordinator_url: str) -> tuple[int, str]:
    """(bad messages sent, how the channel ended: "open" if it still answers after them)."""
    messages = _channel_messages()
    async with http.ws_connect(coordinator_url + "/v1/channel?proxy=edge-probe") as ws:
        await ws.receive_json(timeout=10)
        for text in messages:
            await ws.send_str(text)
        await ws.send_str(json.dumps({"seq": 99, "type": "done", "body": {"session": "edge-ch", "request_id": "r",
                                                                          "status": "cancelled"}}))
        await asyncio.sleep(0.5)
        return len(messages), "open" if not ws.closed else f"closed ({ws.close_code})"


async def adversarial_input(cluster: FaultCluster, settings: FaultSettings) -> list[FaultRow]:
    async with aiohttp.ClientSession() as http:
        before = reserved_tokens(await cluster.state(http))
        answers = [(label, *await _answer(http, cluster.proxy_url + path, body)) for label, path, body in _proxy_cases()]

        async def settled() -> bool:
            return reserved_tokens(await cluster.state(http)) <= before

        await wait_until(settled, timeout_s=3.0)
        state = await cluster.state(http)
        admitted = [s["id"] for s in state["sessions"] if s["id"].startswith("edge")]
        sent, ending = await _channel_survives(http, cluster.coordinator_url)
    wrong = [f"{label}: HTTP {status}{'' if is_json else ', not JSON'}" for label, status, is_json in answers
             if status is None or not 400 <= status < 500 or not is_json]
    return [
        zero_goal(FAULT, "proxy answers that are not 4xx JSON (bad ids, deep JSON)", len(wrong),
                  f"{len(answers)} requests" + "".join(f"; {w}" for w in wrong[:3])),
        zero_goal(FAULT, "proxy admissions left by refused requests",
                  len(admitted) + max(0, reserved_tokens(state) - before), ", ".join(admitted[:3])),
        zero_goal(FAULT, "coordinator channels closed by malformed messages", 0 if ending == "open" else 1,
                  f"{sent} messages (seq 1e999, started_at 10**400, 100k-deep JSON, ...): channel {ending}"),
    ]
