"""The Anthropic surface through the real `anthropic` SDK: tool_use, streaming, cache usage, count_tokens."""

from __future__ import annotations

from typing import Any

import anthropic

from .conftest import StartReplica

CLAUDE_TOOLS: Any = [
    {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "number"},
                "description": {"type": "string"},
                "run_in_background": {"type": "boolean"},
            },
            "required": ["command"],
        },
    },
    {
        "name": "Monitor",
        "description": "Watch a command",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_ms": {"type": "number"},
                "description": {"type": "string"},
            },
            "required": ["description", "timeout_ms"],
        },
    },
]
SYSTEM: Any = [{"type": "text", "text": "You are Claude Code. " * 40, "cache_control": {"type": "ephemeral"}}]


def _client(url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=url, api_key="dummy", max_retries=0)


async def test_tool_use_session_with_cache_reads(start_replica: StartReplica) -> None:
    replica = await start_replica("swe-short")
    client = _client(replica.url)
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}]
    inputs, reads = [], []
    for _ in range(10):
        message = await client.messages.create(
            model="claude-x", max_tokens=4096, system=SYSTEM, messages=messages, tools=CLAUDE_TOOLS
        )
        reads.append(message.usage.cache_read_input_tokens or 0)
        count = await client.messages.count_tokens(
            model="claude-x", system=SYSTEM, messages=messages, tools=CLAUDE_TOOLS
        )
        # Anthropic's meaning, as vLLM reports it: uncached + cache reads + cache writes = the whole prompt.
        created = message.usage.cache_creation_input_tokens or 0
        assert message.usage.input_tokens + reads[-1] + created == count.input_tokens
        if message.stop_reason == "end_turn":
            break
        assert message.stop_reason == "tool_use"
        tool_use = next(block for block in message.content if block.type == "tool_use")
        assert tool_use.name == "Bash" and tool_use.id.startswith("toolu_")
        inputs.append(tool_use.input)
        messages.append({"role": "assistant", "content": [block.model_dump() for block in message.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use.id,
                        "content": "ok",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        )
    assert [i["command"] for i in inputs] == ["ls", "sleep 2", "timeout 30 pytest -q", "cat README.md"]
    assert inputs[2]["timeout"] == 60000 and inputs[2]["description"] == "Run the test suite"
    assert message.content[-1].type == "text" and "task is complete" in message.content[-1].text
    assert reads[0] == 0 and all(later > earlier for earlier, later in zip(reads, reads[1:], strict=False))


async def test_streamed_monitor_call_through_the_beta_endpoint(start_replica: StartReplica) -> None:
    replica = await start_replica("monitor")
    client = _client(replica.url)
    kinds = []
    async with client.beta.messages.stream(
        model="m",
        max_tokens=1000,
        system=SYSTEM,
        tools=CLAUDE_TOOLS,
        messages=[{"role": "user", "content": "watch it"}],
    ) as stream:
        async for event in stream:
            kinds.append(event.type)
        final = await stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert {"content_block_start", "content_block_delta", "content_block_stop", "message_delta"} <= set(kinds)
    assert final.stop_reason == "tool_use"
    tool_use = final.content[-1]
    assert tool_use.type == "tool_use" and tool_use.name == "Monitor"
    arguments: Any = tool_use.input
    assert arguments["timeout_ms"] == 10000 and "tick" in arguments["command"]
    assert arguments["description"] == "Watch a short ticker"
    whole = await client.messages.create(
        model="m",
        max_tokens=1000,
        system=SYSTEM,
        tools=CLAUDE_TOOLS,
        messages=[{"role": "user", "content": "watch it"}],
    )
    assert final.content[0].text == whole.content[0].text  # type: ignore[union-attr]
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert (whole.usage.cache_read_input_tokens or 0) > 0  # same prompt again: a prefix-cache hit


async def test_side_request_gets_a_short_answer(start_replica: StartReplica) -> None:
    replica = await start_replica()
    client = _client(replica.url)
    message = await client.messages.create(
        model="m", max_tokens=50, messages=[{"role": "user", "content": "quota"}]
    )
    assert message.stop_reason == "end_turn" and message.content[0].text == "Emulated session"  # type: ignore[union-attr]
