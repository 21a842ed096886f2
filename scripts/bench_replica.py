"""Benchmark of the emulated replica's own overhead (not of the emulated GPU).

Prints two tables:
1. Template/tokenizer cost: rendering a growing agent conversation to prompt ids (done on every request).
2. Server throughput: S concurrent scripted sessions (swe-short, OpenAI API over loopback HTTP) against one
   replica at a very high time scale, so the numbers show the Python/HTTP overhead per request, the mean
   time to first token and the prefix-cache hit ratio the sessions get.

Usage: .venv/bin/python scripts/bench_replica.py [--sessions 1 8 32] [--time-scale 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import aiohttp

from tao_harness.replica.chat import ChatMessage, ChatRequest, ToolCall
from tao_harness.replica.template import RenderCache, prompt_ids
from tao_harness.tables import format_table

BASH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
OBSERVATION = "collected 120 items\n\ntests/test_core.py ........................ [ 20%]\n" * 12


def template_table() -> str:
    rows = []
    messages = [ChatMessage("system", "You are a coding agent. " * 400), ChatMessage("user", "Fix the bug.")]
    for turns in (1, 10, 40, 80):
        while sum(m.role == "tool" for m in messages) < turns:
            call = ToolCall("c", "bash", '{"command": "pytest -q"}')
            step = len(messages)  # distinct texts, so a render cannot reuse an earlier message
            messages += [
                ChatMessage("assistant", f"Step {step}: let me run the tests. " * 8, (call,)),
                ChatMessage("tool", f"[{step}] {OBSERVATION}"),
            ]
        request = ChatRequest(api="openai", model="m", messages=tuple(messages))
        repeats = 10
        started = time.perf_counter()
        for _ in range(repeats):
            ids = prompt_ids(request)
        cold = (time.perf_counter() - started) / repeats
        cache = RenderCache()
        prompt_ids(request, cache)
        started = time.perf_counter()
        for _ in range(repeats):
            prompt_ids(request, cache)
        warm = (time.perf_counter() - started) / repeats
        rows.append((turns, len(ids), cold * 1e3, warm * 1e3))
    return format_table(rows, ["tool turns", "prompt tokens", "cold render ms", "cached render ms"])


async def _session(http: aiohttp.ClientSession, url: str, ttfts: list[float]) -> tuple[int, int, int]:
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent. " * 400},
        {"role": "user", "content": "Fix the bug."},
    ]
    requests = prompt = cached = 0
    while True:
        body = {
            "model": "m",
            "messages": messages,
            "tools": [BASH],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        started = time.perf_counter()
        first: float | None = None
        content, arguments, call_id = "", "", ""
        usage: dict[str, Any] = {}
        async with http.post(f"{url}/v1/chat/completions", json=body) as response:
            async for line in response.content:
                if not line.startswith(b"data: {"):
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    if first is None and (delta.get("content") or delta.get("tool_calls")):
                        first = time.perf_counter() - started
                    content += delta.get("content") or ""
                    for call in delta.get("tool_calls") or []:
                        call_id = call.get("id", call_id)
                        arguments += call["function"].get("arguments", "")
        ttfts.append(first or 0.0)
        requests += 1
        prompt += usage["prompt_tokens"]
        cached += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        if not call_id:
            return requests, prompt, cached
        tool_call = {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}
        messages.append({"role": "assistant", "content": content, "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": OBSERVATION})


async def server_rows(sessions: list[int], time_scale: float) -> list[tuple[Any, ...]]:
    rows = []
    for count in sessions:
        # The server runs in its own process (as `tao replica` does), so the client's cost is not counted.
        command = [
            sys.executable,
            "-m",
            "tao_harness.cli.main",
            "replica",
            "--port",
            "0",
            "--time-scale",
            str(time_scale),
        ]
        server = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
        assert server.stdout is not None
        url = (await server.stdout.readline()).decode().strip()
        ttfts: list[float] = []
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
                started = time.perf_counter()
                results = await asyncio.gather(*(_session(http, url, ttfts) for _ in range(count)))
                wall = time.perf_counter() - started
        finally:
            server.terminate()
            await server.wait()
        requests = sum(r[0] for r in results)
        hit = sum(r[2] for r in results) / max(1, sum(r[1] for r in results))
        rows.append((count, requests, wall, requests / wall, 1e3 * sum(ttfts) / len(ttfts), hit))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sessions", type=int, nargs="+", default=[1, 8, 32], help="concurrent sessions per run"
    )
    parser.add_argument("--time-scale", type=float, default=1000.0, help="replica time scale (default 1000)")
    args = parser.parse_args()
    print(template_table())
    print()
    rows = asyncio.run(server_rows(args.sessions, args.time_scale))
    headers = ["sessions", "requests", "wall s", "requests/s", "mean TTFT ms", "cache hit ratio"]
    print(format_table(rows, headers))


if __name__ == "__main__":
    main()
