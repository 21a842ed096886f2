"""The scripted "model": picks a scenario turn from the conversation and shapes it for the harness.

Progress is read statelessly from the request (the number of tool results already in the conversation),
so the server keeps no per-session state and any number of sessions can replay the same scenario. The
tool is chosen from what the request offers: `Bash` (Claude Code) or `bash` (OpenCode, mini-SWE-agent),
`Monitor` where offered (Claude Code's deferred Monitor is first loaded with a ToolSearch call, which
does not count as a step of the script). Arguments follow the offered schema: `description`, `timeout`/`timeout_ms`
(milliseconds, the unit Claude Code and OpenCode use), `run_in_background` and `persistent` are sent only
when the tool declares them. A conversation that mentions mini-SWE-agent's submit marker ends with the
submit command instead of a text answer. Requests without tools (titles, probes) get a short answer.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from tao_harness.replica import tokenizer
from tao_harness.replica.chat import ChatRequest, Reply, ToolCall, ToolSpec, canonical_json
from tao_harness.replica.scenario import Scenario, ScenarioTurn
from tao_harness.replica.template import continuation_start, reply_tokens

MONITOR = "Monitor"
# Claude Code (2.1.328, default settings) defers Monitor behind ToolSearch: after a `select:Monitor`
# call (its result is a tool_reference), the next request offers Monitor with its schema.
TOOL_SEARCH = "ToolSearch"
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"
DEFAULT_TIMEOUT_S = 120.0  # sent only when a tool requires a timeout the turn does not give (Monitor)
_REASONING = (
    "Let me think about what the next step should be. ",
    "The output so far looks consistent with the task. ",
    "I will check the relevant files and the test results before changing anything. ",
    "This keeps the change small and easy to verify. ",
)


def reasoning_text(tokens: int, seed: int) -> str:
    """About `tokens` tokens of filler reasoning, deterministic in `seed`, ending with a blank line."""
    if tokens <= 1:
        return ""
    sentences = [_REASONING[(seed + i) % len(_REASONING)] for i in range(tokens // 8 + 2)]
    # Cut the pieces of the whole text (not of each sentence): joins across sentences merge pieces.
    return "".join(tokenizer.pieces("".join(sentences))[: tokens - 1]).rstrip() + "\n\n"


def _arguments(tool: ToolSpec, command: str, turn: ScenarioTurn) -> str:
    key = "cmd" if "cmd" in tool.properties and "command" not in tool.properties else "command"
    args: dict[str, object] = {key: command}
    if "description" in tool.properties:
        args["description"] = (
            turn.description or f"Run {command.split()[0] if command.split() else 'command'}"
        )
    for key in ("timeout", "timeout_ms"):
        if key in tool.properties and (turn.timeout_s is not None or key in tool.required):
            args[key] = int((turn.timeout_s or DEFAULT_TIMEOUT_S) * 1000)
            break
    if turn.run_in_background and "run_in_background" in tool.properties:
        args["run_in_background"] = True
    if "persistent" in tool.properties and (turn.persistent or "persistent" in tool.required):
        args["persistent"] = turn.persistent
    return canonical_json(args)


def _padded(reply: Reply, target_tokens: int | None, seed: int) -> Reply:
    if target_tokens is None:
        return reply
    missing = target_tokens - len(reply_tokens(reply))
    if missing <= 0:
        return reply
    return Reply(reply.text, reply.tool_calls, reasoning_text(missing, seed))


def script_reply(request: ChatRequest, scenario: Scenario, call_id_prefix: str) -> Reply:
    """The scripted reply to `request`; `call_id_prefix` is the API's tool-call id style.

    With vLLM's `ignore_eos` the reply is padded to `max_tokens`, as a real engine would keep decoding.
    """
    reply = _script_reply(request, scenario, call_id_prefix)
    if request.ignore_eos and request.max_tokens:
        return _padded(reply, request.max_tokens, request.tool_results)
    return reply


def continue_reply(
    request: ChatRequest, scenario: Scenario, call_id_prefix: str, reasoning_parser: bool = False
) -> tuple[Reply, int]:
    """The scripted reply and how many of its tokens the prompt already holds (0 unless continuing).

    With vLLM's `continue_final_message` the final assistant message is the start of the reply (a proxy
    failing a stream over sends what the client already has): the reply is scripted for the conversation
    before it, at its whole length (`max_tokens` counts only the new tokens), and resumes after it.
    """
    if not request.continue_final_message:
        return script_reply(request, scenario, call_id_prefix), 0
    prefill = request.messages[-1].text
    whole = request.max_tokens + tokenizer.count(prefill) if request.max_tokens is not None else None
    before = replace(request, messages=request.messages[:-1], continue_final_message=False,
                     add_generation_prompt=True, max_tokens=whole)
    reply = script_reply(before, scenario, call_id_prefix)
    return reply, continuation_start(reply_tokens(reply, reasoning_parser), prefill)


def _monitor_tool(request: ChatRequest, call_id_prefix: str) -> ToolSpec | ToolCall | None:
    """Monitor if it is offered; else a ToolSearch call to load it (once); else None."""
    monitor = request.find_tool(MONITOR)
    if monitor is not None or request.find_tool(TOOL_SEARCH) is None or request.results_of(TOOL_SEARCH):
        return monitor
    return ToolCall(f"{call_id_prefix}{uuid.uuid4().hex[:24]}", TOOL_SEARCH,
                    canonical_json({"query": f"select:{MONITOR}", "max_results": 1}))


def _script_reply(request: ChatRequest, scenario: Scenario, call_id_prefix: str) -> Reply:
    if not request.tools or request.tool_choice_none:
        return Reply(scenario.side_answer)
    # Loading a deferred tool is not a step of the script.
    progress = request.tool_results - len(request.results_of(TOOL_SEARCH))
    turn = scenario.turn(progress)
    # A shell tool: by name, else any tool taking a `command` (or, as Codex's `exec_command`, a `cmd`).
    bash = request.find_tool("Bash", "bash") or next(
        (t for t in request.tools if "command" in t.properties or "cmd" in t.properties), None
    )
    tool, command = bash, turn.bash
    if turn.is_final:
        if not (request.mentions(SUBMIT_MARKER) and bash is not None):
            return _padded(Reply(turn.answer or ""), turn.output_tokens, progress)
        command = SUBMIT_COMMAND
    elif turn.monitor is not None:
        monitor = _monitor_tool(request, call_id_prefix)
        if isinstance(monitor, ToolCall):
            return Reply("", (monitor,))
        tool, command = monitor or bash, turn.monitor
    if tool is None or command is None:
        return Reply(f"No shell tool is offered, so I cannot run: {turn.bash or turn.monitor}")
    call = ToolCall(f"{call_id_prefix}{uuid.uuid4().hex[:24]}", tool.name, _arguments(tool, command, turn))
    return _padded(Reply("", (call,)), turn.output_tokens, progress)
