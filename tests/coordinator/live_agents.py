"""Scripted agents that drive a live cluster through the proxy with the real SDKs (shared by the live tests)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

BASH_TOOL = {"type": "function", "function": {"name": "bash", "description": "run a command",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]}}}
ANTHROPIC_BASH = {"name": "Bash", "description": "run a command",
                  "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


async def openai_session(cluster: Any, session: str, *, stream: bool, max_turns: int = 8,
                         tool_delay_s: float = 0.0) -> int:
    """Drive a scripted agent through the proxy until it answers; returns the number of LLM turns."""
    client = openai.AsyncOpenAI(base_url=cluster.proxy_url + "/v1", api_key="dummy", max_retries=0,
                                default_headers={"X-TAO-Session": session})
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 40},
                                      {"role": "user", "content": f"Fix the bug ({session})."}]
    for turn in range(1, max_turns + 1):
        if stream:
            chunks = await client.chat.completions.create(model="m", messages=messages, tools=[BASH_TOOL],
                                                          stream=True, stream_options={"include_usage": True})
            calls: dict[int, dict[str, str]] = {}
            content = ""
            async for chunk in chunks:
                for choice in chunk.choices:
                    content += choice.delta.content or ""
                    for call in choice.delta.tool_calls or ():
                        entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        entry["id"] += call.id or ""
                        entry["name"] += call.function.name or "" if call.function else ""
                        entry["arguments"] += call.function.arguments or "" if call.function else ""
            tool_calls = [{"id": c["id"], "type": "function",
                           "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]
        else:
            reply = await client.chat.completions.create(model="m", messages=messages, tools=[BASH_TOOL])
            content = reply.choices[0].message.content or ""
            tool_calls = [c.model_dump() for c in reply.choices[0].message.tool_calls or ()]
        if not tool_calls:
            await client.close()
            return turn
        messages.append({"role": "assistant", "content": content or None, "tool_calls": tool_calls})
        await asyncio.sleep(tool_delay_s)
        for call in tool_calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok\n" * 20})
    await client.close()
    raise AssertionError(f"{session} did not finish in {max_turns} turns")
