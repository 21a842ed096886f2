"""The scripted agent: scenario progress from the conversation, tool choice and arguments by schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tao_harness.replica.agent import SUBMIT_COMMAND, script_reply
from tao_harness.replica.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from tao_harness.replica.scenario import ScenarioError, builtin_names, load_scenario, parse_scenario
from tao_harness.replica.template import reply_tokens

CLAUDE_TOOLS = (
    ToolSpec(
        "Bash",
        frozenset({"command", "timeout", "description", "run_in_background"}),
        frozenset({"command"}),
        "",
    ),
    ToolSpec(
        "Monitor",
        frozenset({"command", "timeout_ms", "persistent", "description"}),
        frozenset({"command"}),
        "",
    ),
    ToolSpec("Read", frozenset({"file_path"}), frozenset({"file_path"}), ""),
)
MINI_TOOLS = (ToolSpec("bash", frozenset({"command"}), frozenset({"command"}), ""),)


def _conversation(tool_results: int, tools: tuple[ToolSpec, ...], system: str = "sys") -> ChatRequest:
    messages = [ChatMessage("system", system), ChatMessage("user", "task")]
    for i in range(tool_results):
        messages += [
            ChatMessage("assistant", "", (ToolCall(f"c{i}", "bash", "{}"),)),
            ChatMessage("tool", "ok", tool_call_id=f"c{i}"),
        ]
    return ChatRequest(api="openai", model="m", messages=tuple(messages), tools=tools)


def _arguments(request: ChatRequest, scenario: str) -> tuple[str, dict[str, object]]:
    reply = script_reply(request, load_scenario(scenario), "id-")
    assert len(reply.tool_calls) == 1
    return reply.tool_calls[0].name, json.loads(reply.tool_calls[0].arguments)


def test_progress_follows_the_tool_results_in_the_conversation() -> None:
    commands = [_arguments(_conversation(n, MINI_TOOLS), "swe-short")[1]["command"] for n in range(4)]
    assert commands == ["ls", "sleep 2", "timeout 30 pytest -q", "cat README.md"]
    final = script_reply(_conversation(4, MINI_TOOLS), load_scenario("swe-short"), "id-")
    assert final.tool_calls == () and final.text.endswith("The task is complete.")


def test_claude_code_bash_gets_timeout_in_ms_and_description() -> None:
    name, args = _arguments(_conversation(2, CLAUDE_TOOLS), "swe-short")
    assert name == "Bash"
    assert args == {"command": "timeout 30 pytest -q", "timeout": 60000, "description": "Run the test suite"}
    name, args = _arguments(_conversation(0, CLAUDE_TOOLS), "background")
    assert args["run_in_background"] is True


def test_monitor_is_used_when_offered_and_falls_back_to_bash() -> None:
    name, args = _arguments(_conversation(0, CLAUDE_TOOLS), "monitor")
    assert name == "Monitor" and args["timeout_ms"] == 10000 and "tick" in str(args["command"])
    name, args = _arguments(_conversation(0, MINI_TOOLS), "monitor")
    assert name == "bash" and set(args) == {"command"}


def test_mini_swe_agent_submits_instead_of_answering() -> None:
    request = _conversation(1, MINI_TOOLS, system="... echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT ...")
    assert _arguments(request, "sleep-then-answer") == ("bash", {"command": SUBMIT_COMMAND})


def test_side_requests_without_tools_get_the_short_answer() -> None:
    reply = script_reply(_conversation(0, ()), load_scenario("swe-short"), "id-")
    assert reply.text == "Emulated session" and reply.tool_calls == ()


def test_output_tokens_pad_the_reply_to_the_scripted_size() -> None:
    reply = script_reply(_conversation(2, MINI_TOOLS), load_scenario("swe-short"), "id-")
    assert abs(len(reply_tokens(reply)) - 200) <= 3
    assert reply.reasoning.strip() and not reply.text  # the padding is reasoning before the call


def test_builtins_load_and_bad_files_are_reported(tmp_path: Path) -> None:
    assert {"sleep-then-answer", "swe-short", "monitor"} <= set(builtin_names())
    for name in builtin_names():
        assert load_scenario(name).turns
    with pytest.raises(ScenarioError, match="no scenario file or built-in"):
        load_scenario(str(tmp_path / "missing.yaml"))
    with pytest.raises(ScenarioError, match="exactly one of bash, monitor, answer"):
        parse_scenario("turns: [{bash: ls, answer: done}]", "inline")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        parse_scenario("turns: [", "inline")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"turns": [{"bash": "make", "output_tokens": 10}]}))
    scenario = load_scenario(str(path))
    assert scenario.name == "mine" and scenario.turn(1).answer == "Done."


def test_ignore_eos_pads_the_reply_to_max_tokens() -> None:
    from tao_harness.replica.chat import ChatMessage, ChatRequest
    from tao_harness.replica.agent import script_reply
    from tao_harness.replica.scenario import load_scenario
    from tao_harness.replica.template import reply_tokens

    messages = (ChatMessage("user", "hello", (), None),)
    plain = ChatRequest(api="openai", model="m", messages=messages, max_tokens=300)
    padded = ChatRequest(api="openai", model="m", messages=messages, max_tokens=300, ignore_eos=True)
    scenario = load_scenario("swe-short")
    assert len(reply_tokens(script_reply(plain, scenario, "call_"))) < 50
    assert len(reply_tokens(script_reply(padded, scenario, "call_"))) >= 299


def test_deferred_monitor_is_loaded_with_tool_search_first() -> None:
    # Claude Code's default settings: Monitor is deferred; ToolSearch `select:Monitor` makes it offered.
    search = ToolSpec("ToolSearch", frozenset({"query", "max_results"}), frozenset({"query", "max_results"}), "")
    scenario = parse_scenario("name: m\nturns:\n  - monitor: tail -f log\n  - bash: ls\n", "inline")
    deferred = (CLAUDE_TOOLS[0], search)
    first = script_reply(_conversation(0, deferred), scenario, "toolu_")
    [call] = first.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("ToolSearch", {"query": "select:Monitor", "max_results": 1})
    loaded = (*deferred, CLAUDE_TOOLS[1])
    messages = (*_conversation(0, loaded).messages, ChatMessage("assistant", "", (call,)),
                ChatMessage("tool", "", tool_call_id=call.id))
    [monitor] = script_reply(ChatRequest(api="anthropic", model="m", messages=messages, tools=loaded),
                             scenario, "toolu_").tool_calls
    assert (monitor.name, json.loads(monitor.arguments)["command"]) == ("Monitor", "tail -f log")
    # A search that did not load it is not repeated: the shell runs the command.
    [fallback] = script_reply(ChatRequest(api="anthropic", model="m", messages=messages, tools=deferred),
                              scenario, "toolu_").tool_calls
    assert fallback.name == "Bash"
