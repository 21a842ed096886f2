"""The OpenAI surface through the real `openai` SDK: tool calls, streaming, usage and the prefix cache."""

from __future__ import annotations

import json
from typing import Any

import openai

from .conftest import StartReplica

BASH_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
SYSTEM = "You are a helpful assistant that can interact with a computer. " * 20


def _client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="dummy", max_retries=0)


async def test_a_scripted_session_runs_to_the_end_with_growing_cache_hits(
    start_replica: StartReplica,
) -> None:
    replica = await start_replica("swe-short")
    client = _client(replica.url)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the bug."}]
    commands: list[str] = []
    cached: list[int] = []
    for _ in range(10):
        response = await client.chat.completions.create(
            model="any-model", messages=messages, tools=[BASH_TOOL]
        )
        choice = response.choices[0]
        usage = response.usage
        assert usage is not None and usage.completion_tokens > 0
        details = usage.prompt_tokens_details
        cached.append((details.cached_tokens or 0) if details else 0)
        if choice.finish_reason == "stop":
            break
        assert choice.finish_reason == "tool_calls"
        assert choice.message.tool_calls
        call = choice.message.tool_calls[0]
        assert call.type == "function"
        commands.append(json.loads(call.function.arguments)["command"])
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ran {commands[-1]}"})
    assert commands == ["ls", "sleep 2", "timeout 30 pytest -q", "cat README.md"]
    assert choice.message.content and "task is complete" in choice.message.content
    assert cached[0] == 0 and response.usage is not None
    assert all(later > earlier for earlier, later in zip(cached, cached[1:], strict=False))
    # Everything but the newest tool result and a partial block is a hit: the reply tokens were cached too.
    assert cached[-1] >= response.usage.prompt_tokens - 40
    assert response.model == "any-model"


async def test_streaming_matches_the_whole_response(start_replica: StartReplica) -> None:
    replica = await start_replica("swe-short")
    client = _client(replica.url)
    messages: Any = [{"role": "user", "content": "go"}]
    whole = await client.chat.completions.create(model="m", messages=messages, tools=[BASH_TOOL])
    stream = await client.chat.completions.create(
        model="m", messages=messages, tools=[BASH_TOOL], stream=True, stream_options={"include_usage": True}
    )
    content, arguments, names, finish, usage, roles = "", "", [], None, None, []
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            roles += [choice.delta.role] if choice.delta.role else []
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                names += [call.function.name] if call.function and call.function.name else []
                arguments += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    assert roles == ["assistant"]
    assert content == whole.choices[0].message.content
    assert names == ["bash"] and json.loads(arguments) == {"command": "ls"}
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert usage.prompt_tokens == whole.usage.prompt_tokens  # type: ignore[union-attr]
    assert usage.prompt_tokens_details is not None and (usage.prompt_tokens_details.cached_tokens or 0) > 0


async def test_side_request_without_tools_and_max_tokens_cut(start_replica: StartReplica) -> None:
    replica = await start_replica()
    client = _client(replica.url)
    title = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Title?"}])
    assert title.choices[0].message.content == "Emulated session"
    assert title.choices[0].finish_reason == "stop" and not title.choices[0].message.tool_calls
    cut = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], tools=[BASH_TOOL], max_tokens=5
    )
    assert (
        cut.choices[0].finish_reason == "length"
        and cut.usage is not None
        and cut.usage.completion_tokens == 5
    )


async def test_completions_and_models(start_replica: StartReplica) -> None:
    replica = await start_replica(served_model_name="emu")
    client = _client(replica.url)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["emu"]
    completion = await client.completions.create(model="emu", prompt="def fib(n):", max_tokens=12)
    assert completion.choices[0].finish_reason == "length" and completion.usage is not None
    assert completion.usage.completion_tokens == 12 and completion.choices[0].text
    stream = await client.completions.create(model="emu", prompt="def fib(n):", max_tokens=12, stream=True)
    text = "".join([c.choices[0].text async for c in stream if c.choices])
    assert text == completion.choices[0].text
