"""Tool spans from the traffic: a response's calls start at its end, the request with their results ends
them (proxy.tool_spans)."""

from __future__ import annotations

from tao_harness.proxy.tool_results import read_results
from tao_harness.proxy.tool_spans import TEXT_CALL_PREFIX, ToolSpans
from tao_harness.proxy.turns import ToolCall, Turn


def _assistant(*ids: str) -> dict[str, object]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": i, "function": {"name": "bash"}} for i in ids]}


def test_parallel_calls_share_the_turns_start_and_end_at_the_request_with_their_results() -> None:
    spans = ToolSpans()
    turn = Turn("", (ToolCall("a", "Bash", {"command": "sleep 2", "timeout": 5000, "run_in_background": False}),
                     ToolCall("b", "shell", {"command": ["bash", "-lc", "exit 3"], "timeout_ms": 1000})))
    starts = spans.started("s1", "req-1", turn, 10.0, "claude-code")
    assert [(s.call_id, s.at, s.command, s.source, s.harness) for s in starts] == [
        ("a", 10.0, "sleep 2", "proxy", "claude-code"), ("b", 10.0, "bash -lc 'exit 3'", "proxy", "claude-code")]
    assert starts[0].args["timeout"] == 5000  # the hints read the arguments (coordinator side)
    side = {"messages": [{"role": "user", "content": "Write a title for this conversation"}]}
    assert spans.ended("s1", read_results(side, "openai"), 11.0) == []  # a side request: still running
    back = {"messages": [_assistant("a", "b"), {"role": "tool", "tool_call_id": "a", "content": "ok"},
                         {"role": "tool", "tool_call_id": "b", "content": "Exit code: 3"}]}
    ends = spans.ended("s1", read_results(back, "openai"), 14.5)
    assert [(e.call_id, e.at, e.duration_s, e.status, e.exit_code, e.source) for e in ends] == [
        ("a", 14.5, 4.5, "ok", None, "proxy"), ("b", 14.5, 4.5, "error", 3, "proxy")]
    assert spans.ended("s1", read_results(back, "openai"), 20.0) == []  # ended once


def test_a_call_dropped_by_the_conversation_is_cancelled_and_other_sessions_are_untouched() -> None:
    spans = ToolSpans()
    spans.started("s1", "r1", Turn("", (ToolCall("a", "bash", {}),)), 1.0, None)
    spans.started("s2", "r2", Turn("", (ToolCall("a", "bash", {}),)), 1.0, None)  # ids are per session
    dropped = {"messages": [_assistant("a"), {"role": "user", "content": "stop, do something else"}]}
    [end] = spans.ended("s1", read_results(dropped, "openai"), 3.0)
    assert (end.session, end.status) == ("s1", "cancelled")
    [other] = spans.ended("s2", read_results({"messages": [_assistant("a"), {"role": "tool", "tool_call_id": "a",
                                                                               "content": "x"}]}, "openai"), 4.0)
    assert (other.session, other.status) == ("s2", "ok")


def test_a_text_action_gets_an_id_of_the_proxys_making_and_ends_at_the_next_request() -> None:
    spans = ToolSpans()
    [start] = spans.started("m", "req-7", Turn("```mswea_bash_command\nexit 3\n```", ()), 5.0, None)
    assert (start.call_id, start.tool_name, start.command) == (TEXT_CALL_PREFIX + "req-7", "bash", "exit 3")
    observation = {"messages": [{"role": "assistant", "content": "```mswea_bash_command\nexit 3\n```"},
                                {"role": "user", "content": "<returncode>3</returncode>\n<output>\n</output>"}]}
    [end] = spans.ended("m", read_results(observation, "openai"), 6.0)
    assert (end.call_id, end.status, end.exit_code) == (start.call_id, "error", 3)


def test_sessions_past_the_limit_are_forgotten_oldest_first() -> None:
    spans = ToolSpans(max_sessions=2)
    for session in ("s1", "s2", "s3"):
        spans.started(session, "r", Turn("", (ToolCall("a", "bash", {}),)), 1.0, None)
    back = read_results({"messages": [_assistant("a"), {"role": "tool", "tool_call_id": "a", "content": ""}]}, "openai")
    assert spans.ended("s1", back, 2.0) == [] and len(spans.ended("s3", back, 2.0)) == 1
