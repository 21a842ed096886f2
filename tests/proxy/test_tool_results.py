"""The results a request carries back and the outcome their text tells (proxy.tool_results)."""

from __future__ import annotations

import pytest

from tao_harness.proxy.tool_results import ToolResult, outcome, read_results


@pytest.mark.parametrize(("text", "is_error", "expected"), [
    ("Exit code 3", True, ("error", 3)),  # Claude Code's failed Bash
    ("Exit code 143\nCommand timed out after 3s", True, ("timeout", 143)),  # Claude Code's tool timeout
    ("Exit code 124", True, ("timeout", 124)),  # GNU timeout
    ("<returncode>3</returncode>\n<output>\n</output>", None, ("error", 3)),  # mini-SWE-agent
    ("<returncode>-1</returncode>\nThe last command timed out and has been killed.", None, ("timeout", None)),
    ('{\n  "returncode": 3,\n  "output": ""\n}', None, ("error", 3)),  # mini-SWE-agent 2's tool observation
    ('{"returncode": -1, "output": "", "exception_info": "An error occurred while executing the command: '
     "Command 'sleep 10' timed out after 5 seconds\"}", None, ("timeout", None)),
    ("Exit code: 0\nWall time: 0.1 seconds", None, ("ok", 0)),  # Codex
    ("bash tool terminated command after exceeding timeout 2000 ms", None, ("timeout", None)),  # OpenCode
    ("Exit code 0", True, ("error", 0)),  # the harness called it a failure
    ("permission denied", True, ("error", None)),
    ("total 8\n-rw-r--r-- a.py", None, ("ok", None)),
    ("total 8\nlater line: exit code 5 in the middle of output", False, ("ok", None)),
])
def test_outcome_from_the_result_text(text: str, is_error: bool | None, expected: tuple[str, int | None]) -> None:
    assert outcome(text, is_error) == expected


def test_only_the_results_after_the_last_assistant_message_are_read() -> None:
    body = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "old", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "old", "content": "Exit code 1"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "Exit code 2"}]},
        {"role": "tool", "tool_call_id": "b", "content": "fine"},
    ]}
    results = read_results(body, "openai")
    assert results is not None
    assert results.by_id == {"a": ToolResult(None, "Exit code 2"), "b": ToolResult(None, "fine")}
    assert results.named == {"a", "b"}


def test_anthropic_tool_results_keep_is_error_and_the_user_text() -> None:
    body = {"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
             "content": [{"type": "text", "text": "Exit code 3"}], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
    ]}
    results = read_results(body, "anthropic")
    assert results is not None and results.by_id == {"toolu_1": ToolResult(True, "Exit code 3")}
    assert results.text == "<system-reminder>x</system-reminder>" and results.named == {"toolu_1"}
    assert read_results({"messages": "no"}, "anthropic") is None and read_results([], "openai") is None


def test_responses_results_follow_the_call_items_they_answer() -> None:
    body = {"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "old", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "old", "output": "Process exited with code 1"},
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "Chunk ID: 1\nWall time: 0.1 seconds\n"
                                                                     "Process exited with code 3\nOutput:\n"},
        {"type": "function_call_output", "call_id": "b", "output": [{"type": "input_text", "text": "ok"}]},
    ]}
    results = read_results(body, "responses")
    assert results is not None and results.named == {"a", "b"}
    assert set(results.by_id) == {"a", "b"} and outcome(results.by_id["a"].text, None) == ("error", 3)
    assert results.by_id["b"] == ToolResult(None, "ok")
