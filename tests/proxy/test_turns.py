"""Reading a response's tool calls and text from its parsed events or body (proxy.turns)."""

from __future__ import annotations

import json

from tao_harness.proxy.turns import ToolCall, TurnReader
from tao_harness.proxy.usage import UsageTracker


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)


def _chunk(**delta: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta}]}


def test_openai_stream_assembles_parallel_calls_from_argument_chunks() -> None:
    reader = TurnReader("openai")
    tracker = UsageTracker("openai", streaming=True, turn=reader)
    stream = _sse(
        _chunk(role="assistant", content="Running both."),
        _chunk(tool_calls=[{"index": 0, "id": "call_a", "type": "function",
                            "function": {"name": "bash", "arguments": ""}}]),
        _chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"command": "sle'}}]),
        _chunk(tool_calls=[{"index": 1, "id": "call_b", "type": "function",
                            "function": {"name": "bash", "arguments": '{"command": "ls", "timeout": 5000}'}}]),
        _chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ep 1"}'}}]),
    ) + b"data: [DONE]\n\n"
    for cut in range(0, len(stream), 7):  # bytes arrive in arbitrary pieces
        tracker.feed(stream[cut:cut + 7])
    tracker.finish()
    turn = reader.turn()
    assert turn is not None and turn.text == "Running both."
    assert turn.calls == (ToolCall("call_a", "bash", {"command": "sleep 1"}),
                          ToolCall("call_b", "bash", {"command": "ls", "timeout": 5000}))


def test_anthropic_stream_reads_tool_use_and_input_json_deltas() -> None:
    reader = TurnReader("anthropic")
    tracker = UsageTracker("anthropic", streaming=True, turn=reader)
    tracker.feed(_sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me run it."}},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"comm'}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": 'and": "pytest", "timeout": 120000}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ))
    tracker.finish()
    turn = reader.turn()
    assert turn is not None and turn.text == "Let me run it."
    assert turn.calls == (ToolCall("toolu_1", "Bash", {"command": "pytest", "timeout": 120000}),)


def test_whole_bodies_of_both_apis() -> None:
    openai, anthropic = TurnReader("openai"), TurnReader("anthropic")
    for reader, api, body in (
        (openai, "openai", {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell",
                                                              "arguments": '{"command": ["bash", "-lc", "ls"]}'}}]}}]}),
        (anthropic, "anthropic", {"content": [{"type": "tool_use", "id": "toolu_9", "name": "Read",
                                               "input": {"file_path": "a.py"}}]}),
    ):
        tracker = UsageTracker(api, streaming=False, turn=reader)  # type: ignore[arg-type]
        tracker.feed(json.dumps(body).encode())
        tracker.finish()
    assert openai.turn().calls == (ToolCall("call_1", "shell", {"command": ["bash", "-lc", "ls"]}),)  # type: ignore[union-attr]
    assert anthropic.turn().calls == (ToolCall("toolu_9", "Read", {"file_path": "a.py"}),)  # type: ignore[union-attr]


def test_odd_events_are_skipped_and_unreadable_arguments_read_as_empty() -> None:
    reader = TurnReader("openai")
    for event in ({"choices": "x"}, {"choices": [None]}, {"choices": [{"delta": {"tool_calls": [7, {"index": [1]}]}}]},
                  {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "bash",
                                                                                              "arguments": "{not json"}}]}}]}):
        reader.on_event(event)  # type: ignore[arg-type]
    anthropic = TurnReader("anthropic")
    anthropic.on_event({"type": "content_block_delta", "index": [0], "delta": {"type": "input_json_delta"}})
    turn = reader.turn()
    assert turn is not None and turn.calls == (ToolCall("c", "bash", {}),)
    assert anthropic.turn() is not None


def test_a_text_action_is_the_one_shell_block_of_a_message_without_tool_calls() -> None:
    reader = TurnReader("openai")
    reader.on_body({"choices": [{"message": {"content": "THOUGHT: list.\n\n```mswea_bash_command\nls -la\n```"}}]})
    two = TurnReader("openai")
    two.on_body({"choices": [{"message": {"content": "```bash\nls\n```\n```bash\npwd\n```"}}]})
    assert reader.turn().text_command() == "ls -la"  # type: ignore[union-attr]
    assert two.turn().text_command() is None  # type: ignore[union-attr]  # mini-SWE-agent runs none of two


def test_responses_stream_and_body_read_their_output_items() -> None:
    reader = TurnReader("responses")
    tracker = UsageTracker("responses", streaming=True, turn=reader)
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
            "arguments": '{"cmd": "sleep 1"}', "status": "completed"}
    tracker.feed(_sse(
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": 0, "item": dict(call, arguments="")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"cmd": "sleep 1"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": {"usage": {
            "input_tokens": 90, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 7}}},
    ))
    usage = tracker.finish()
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (90, 64, 7)
    assert tracker.first_token_seen and tracker.complete
    assert reader.turn().calls == (ToolCall("call_1", "exec_command", {"cmd": "sleep 1"}),)  # type: ignore[union-attr]
    whole = TurnReader("responses")
    whole.on_body({"output": [{"type": "reasoning", "summary": []},
                              {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]},
                              {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin"}]})
    turn = whole.turn()
    assert turn is not None and turn.text == "Hi"
    assert turn.calls == (ToolCall("call_2", "apply_patch", {"input": "*** Begin"}),)
