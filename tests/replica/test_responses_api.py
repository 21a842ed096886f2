"""The OpenAI Responses surface (the Codex CLI's API) through the real `openai` SDK: function calls driven
by the script, streamed and whole, results sent back as input items, usage with cached tokens."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

from .conftest import StartReplica

# Codex's shell tool takes `cmd`; a web search tool is offered too and must be ignored.
CODEX_TOOLS: Any = [
    {"type": "function", "name": "exec_command", "description": "Run a command", "strict": False,
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}},
                    "required": ["cmd"]}},
    {"type": "web_search"},
]


async def test_a_scripted_session_over_the_responses_api(start_replica: StartReplica) -> None:
    replica = await start_replica("telemetry-cases")
    client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="dummy", max_retries=0)
    items: list[Any] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run them."}]}]
    commands, cached = [], []
    for turn in range(12):
        if turn % 2:  # streamed: the deltas add up to the arguments the closing events carry
            deltas: list[str] = []
            stream = await client.responses.create(model="m", input=items, tools=CODEX_TOOLS,
                                                   instructions="You are Codex.", stream=True)
            async for event in stream:
                if event.type == "response.function_call_arguments.delta":
                    deltas.append(event.delta)
                elif event.type == "response.completed":
                    response = event.response
            calls = [o for o in response.output if o.type == "function_call"]
            assert "".join(deltas) == "".join(c.arguments for c in calls)
        else:
            response = await client.responses.create(model="m", input=items, tools=CODEX_TOOLS,
                                                     instructions="You are Codex.")
            calls = [o for o in response.output if o.type == "function_call"]
        assert response.status == "completed" and response.usage is not None
        cached.append(response.usage.input_tokens_details.cached_tokens)
        if not calls:
            assert response.output_text == "Done."
            break
        [call] = calls
        assert call.name == "exec_command" and call.call_id.startswith("call_")
        commands.append(json.loads(call.arguments)["cmd"])
        items += [call.model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": call.call_id, "output": "Process exited with code 0"}]
    assert commands[:3] == ["sleep 1", "exit 3", "timeout 1 sleep 5"] and len(commands) == 8
    assert max(cached[1:]) > 0  # later turns reuse the conversation's prefix


async def test_a_bad_responses_body_is_a_400_naming_the_field(start_replica: StartReplica) -> None:
    replica = await start_replica("telemetry-cases")
    async with aiohttp.ClientSession() as http:
        for body, field in (({"model": "m"}, "input"), ({"model": "m", "input": 7}, "input"),
                            ({"model": "m", "input": "go", "tools": [{"name": "x"}]}, "tools")):
            async with http.post(replica.url + "/v1/responses", json=body) as response:
                assert response.status == 400
                assert field in (await response.json())["error"]["message"]
