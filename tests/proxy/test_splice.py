"""The continuation planners on hand-written streams: what can be continued, and the request that does it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tao_harness.proxy.splice import Continuation, Done, Unresumable, encode_event
from tao_harness.proxy.splice_anthropic import messages_continuation
from tao_harness.proxy.splice_openai import chat_continuation, shift_usage

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "stream": True}
MESSAGES = {"model": "m", "max_tokens": 50, "stream": True, "system": "Be brief.",
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                                            "input": {"command": "ls"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": "a.py"}]}]}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return encode_event({"id": "c1", "created": 7, "model": "m",
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _events(*pairs: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(encode_event({"type": name} | data, name) for name, data in pairs)


TEXT_START = [("message_start", {"message": {"id": "msg_1"}}),
              ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
              ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Let me"}})]


def test_an_openai_text_stream_is_continued_with_the_partial_answer_and_fewer_tokens() -> None:
    role = _chunk({"role": "assistant", "content": ""})
    plan = chat_continuation(CHAT, role + _chunk({"content": "Hello"}))
    assert isinstance(plan, Continuation) and plan.text == "Hello"
    body = plan.request(plan.done(3))
    assert body["messages"][-1] == {"role": "assistant", "content": "Hello"} and body["max_tokens"] == 47
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    with pytest.raises(Unresumable):
        plan.request(plan.done(50))
    # The continuation's role chunk disappears; its other chunks wear the client's stream id.
    spliced = plan.splice(plan.done(3)).rewrite(encode_event({"id": "other", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}}]}) + _chunk({"content": " world"}))
    assert [json.loads(line[6:]) for line in spliced.decode().split("\n\n") if line] == [
        json.loads(_chunk({"content": " world"})[6:])]


@pytest.mark.parametrize("seen, reason", [
    (_chunk({"tool_calls": [{"index": 0, "id": "x", "function": {"name": "bash"}}]}), "tool call"),
    (_chunk({"reasoning_content": "hmm"}), "reasoning"),
    (_chunk({"content": "done"}, "stop") + _chunk({"content": "more"}), "ended"),
])
def test_an_openai_stream_is_not_continued_inside_a_tool_call_or_reasoning_or_after_its_end(
        seen: bytes, reason: str) -> None:
    plan = chat_continuation(CHAT, _chunk({"content": "So"}) + seen)
    assert isinstance(plan, str) and reason in plan


def test_usage_counts_the_prefill_as_completion() -> None:
    usage = {"prompt_tokens": 110, "completion_tokens": 40, "total_tokens": 150,
             "prompt_tokens_details": {"cached_tokens": 108}}
    assert shift_usage(usage, Done(10, 10)) == {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
                                      "prompt_tokens_details": {"cached_tokens": 100}}


def test_an_anthropic_stream_continues_through_chat_completions_in_its_open_block() -> None:
    plan = messages_continuation(MESSAGES, _events(*TEXT_START))
    assert isinstance(plan, Continuation) and plan.text == "Let me"
    body = plan.request(plan.done(2))
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call = body["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "Bash", "arguments": '{"command": "ls"}'}
    assert body["max_tokens"] == 48 and body["continue_final_message"] is True
    out = plan.splice(plan.done(2)).rewrite(
        _chunk({"role": "assistant", "content": ""}) + _chunk({"content": " look"}, "stop")
        + encode_event({"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}})
        + b"data: [DONE]\n\n")
    names = [line.split("\n")[0] for line in out.decode().split("\n\n") if line]
    assert names == ["event: content_block_delta", "event: content_block_stop", "event: message_delta",
                     "event: message_stop"]
    assert '"index": 0' in out.decode() and '"output_tokens": 7' in out.decode()


def test_an_anthropic_stream_is_not_continued_inside_a_tool_use_block() -> None:
    block = {"type": "tool_use", "id": "t", "name": "Bash"}
    tool = ("content_block_start", {"index": 1, "content_block": block})
    plan = messages_continuation(MESSAGES, _events(*TEXT_START, ("content_block_stop", {"index": 0}), tool))
    assert isinstance(plan, str) and "tool_use" in plan


def test_an_openai_stream_cut_after_its_finish_chunk_gets_the_closing_usage_and_done() -> None:
    seen = _chunk({"role": "assistant", "content": ""}) + _chunk({"content": "All"}) + _chunk({"content": " done"}, "stop")
    plan = chat_continuation(CHAT | {"stream_options": {"include_usage": True}}, seen)
    assert isinstance(plan, Continuation) and plan.text == "All done"
    body = plan.request(plan.done(50))  # the whole max_tokens was used: still closable
    assert body["max_tokens"] == 1 and body["messages"][-1] == {"role": "assistant", "content": "All done"}
    usage = {"prompt_tokens": 62, "completion_tokens": 1, "total_tokens": 63}
    continuation = (_chunk({"role": "assistant", "content": ""}) + _chunk({"content": "!"}, "length")
                    + encode_event({"id": "other", "choices": [], "usage": usage}) + encode_event("[DONE]"))
    tail = [line[6:] for line in plan.splice(plan.done(50)).rewrite(continuation).decode().split("\n\n") if line]
    assert tail[1] == "[DONE]" and len(tail) == 2
    assert json.loads(tail[0]) == {"id": "c1", "created": 7, "model": "m", "choices": [],
                                   "usage": {"prompt_tokens": 12, "completion_tokens": 50, "total_tokens": 62}}
    # Cut between the usage chunk and [DONE]: only [DONE] is added.
    with_usage = seen + encode_event({"id": "c1", "choices": [], "usage": usage})
    plan = chat_continuation(CHAT, with_usage)
    assert isinstance(plan, Continuation)
    assert plan.splice(plan.done(50)).rewrite(continuation) == encode_event("[DONE]")


def test_a_stream_with_per_chunk_usage_is_continued_on_its_own_token_count() -> None:
    # Re-tokenizing the text the client has (here 9 tokens) need not give back the 7 tokens generated;
    # vLLM's per-chunk usage (`continuous_usage_stats`) says 7, and the budget and usage follow it.
    seen = _chunk({"role": "assistant", "content": ""}) + encode_event({
        "id": "c1", "created": 1, "model": "m", "usage": {"prompt_tokens": 30, "completion_tokens": 7},
        "choices": [{"index": 0, "delta": {"content": "Hello there"}, "finish_reason": None}]})
    plan = chat_continuation(CHAT, seen)
    assert isinstance(plan, Continuation) and plan.done(9) == Done(sent=9, generated=7)
    assert plan.request(plan.done(9))["max_tokens"] == 50 - 7
    closing = encode_event({"id": "x", "choices": [], "usage": {"prompt_tokens": 39, "completion_tokens": 43}})
    spliced = json.loads(plan.splice(plan.done(9)).rewrite(closing).decode()[6:])
    assert spliced["usage"] == {"prompt_tokens": 30, "completion_tokens": 50, "total_tokens": 80}
