"""Tokenizer and chat template: stable ids; turn n+1's prompt extends turn n's prompt + reply."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tao_harness.replica import tokenizer
from tao_harness.replica.anthropic_format import MessagesBody, parse_messages
from tao_harness.replica.chat import ChatMessage, ChatRequest, Reply, ToolCall
from tao_harness.replica.openai_format import ChatBody, parse_chat
from tao_harness.replica.template import RenderCache, Special, prompt_ids, reply_tokens


@given(st.text(max_size=300))
def test_pieces_concatenate_back_to_the_text(text: str) -> None:
    assert "".join(tokenizer.pieces(text)) == text
    assert all(
        tokenizer.FIRST_TEXT_ID <= i < tokenizer.FIRST_TEXT_ID + tokenizer.VOCAB_SIZE
        for i in tokenizer.encode(text)
    )


def test_ids_are_stable_and_density_is_bpe_like() -> None:
    prose = "The quick brown fox jumps over the lazy dog while the tests run in the background. " * 20
    assert tokenizer.encode(prose) == tokenizer.encode(prose)
    assert tokenizer.encode("hello") != tokenizer.encode("hullo")
    chars_per_token = len(prose) / tokenizer.count(prose)
    assert 3.5 <= chars_per_token <= 5.5
    assert tokenizer.pieces("internationalization") == ["inte", "rnat", "iona", "liza", "tion"]


def test_reply_tokens_carry_the_text_and_end_with_end_of_message() -> None:
    reply = Reply("Let me look.", (ToolCall("x", "bash", '{"command": "ls"}'),))
    tokens = reply_tokens(reply)
    assert tokens[-1].token_id == Special.END_OF_MESSAGE
    assert "".join(t.text for t in tokens if t.kind == "text") == "Let me look."
    assert "".join(t.text for t in tokens if t.kind == "call_args") == '{"command": "ls"}'
    assert [t.kind for t in tokens].count("call_start") == 1


TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def test_openai_history_resend_extends_previous_prompt_and_reply() -> None:
    first = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    turn1 = parse_chat(ChatBody.model_validate({"model": "m", "messages": first, "tools": TOOLS_OPENAI}), "a")
    call = ToolCall("call-1", "bash", '{"command": "sleep 1"}')
    reply = Reply("I will wait first.\n\n", (call,))
    generated = [t.token_id for t in reply_tokens(reply)]
    # The client re-sends the call with other key spacing and its own id: the render must not change.
    resent = {
        "role": "assistant",
        "content": reply.text,
        "tool_calls": [
            {
                "id": "other-id",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command":"sleep 1"}'},
            }
        ],
    }
    second = [*first, resent, {"role": "tool", "tool_call_id": "other-id", "content": "(no output)"}]
    turn2 = parse_chat(
        ChatBody.model_validate({"model": "m", "messages": second, "tools": TOOLS_OPENAI}), "b"
    )
    before, after = prompt_ids(turn1), prompt_ids(turn2)
    assert after[: len(before) + len(generated)] == before + generated
    assert len(after) > len(before) + len(generated)


def test_anthropic_history_resend_extends_previous_prompt_and_reply() -> None:
    tools = [
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {}, "timeout": {}}}}
    ]
    first = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Run the tests", "cache_control": {"type": "x"}}],
        }
    ]
    body1 = {
        "model": "m",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "sys"}],
        "messages": first,
        "tools": tools,
    }
    turn1 = parse_messages(MessagesBody.model_validate(body1), "a")
    arguments = {"command": "pytest -q", "timeout": 60000}
    reply = Reply(
        "Running them.",
        (ToolCall("toolu_1", "Bash", json.dumps(arguments, sort_keys=True, separators=(", ", ": "))),),
    )
    generated = [t.token_id for t in reply_tokens(reply)]
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running them."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Bash",
                "input": {"timeout": 60000, "command": "pytest -q"},
            },
        ],
    }
    result = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "3 passed"}],
            }
        ],
    }
    turn2 = parse_messages(
        MessagesBody.model_validate(body1 | {"messages": [*first, assistant, result]}), "b"
    )
    before, after = prompt_ids(turn1), prompt_ids(turn2)
    assert after[: len(before) + len(generated)] == before + generated
    assert turn2.tool_results == 1 and turn1.tool_results == 0


def test_render_cache_gives_the_same_ids_and_stays_bounded() -> None:
    messages = tuple(ChatMessage("user", f"message number {i} " * 20) for i in range(30))
    request = ChatRequest(api="openai", model="m", messages=messages)
    cache = RenderCache(max_tokens=500)
    assert prompt_ids(request, cache) == prompt_ids(request) == prompt_ids(request, cache)
    assert 0 < cache.tokens <= 500
