"""The tool results a request carries back, and the outcome each one's text tells.

An agent sends the results of the previous response's tool calls in its next request, after the last
assistant message: OpenAI `{"role": "tool", "tool_call_id", "content"}` messages, Anthropic `tool_result`
blocks (`tool_use_id`, `is_error`, `content`) in the user message, Responses `function_call_output`
(and `custom_tool_call_output`) input items (`call_id`, `output`) after the call items. Only that tail
is read (the earlier history was read when it was the tail). mini-SWE-agent's text-based actions have no id: their output
comes back as the user message's text.

The outcome (`outcome`): what the harnesses write into a result, checked with the real CLIs —
Claude Code `"Exit code 3"` / `"Command timed out after 3s"` (with `is_error`), mini-SWE-agent's JSON
observation `{"returncode": 3, ...}` ("Command '...' timed out after 5 seconds" in its exception) or, in
its text-based configs, `<returncode>3</returncode>` and "timed out and has been killed", OpenCode
"terminated command after exceeding timeout", Codex `Exit code: 3`. Without any of these, `is_error` decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tao_harness.outcomes import ToolStatus, status_of_exit
from tao_harness.proxy.usage import ApiKind

# Only the head of a result is searched for its outcome: harnesses put it first (or it is short), and a
# long output must not cost a long search.
OUTCOME_HEAD_CHARS = 4096
_EXIT = re.compile(r'(?:^|\n)\s*Exit code:? (-?\d+)|<returncode>(-?\d+)</returncode>|^\s*\{\s*"returncode": (-?\d+)'
                   r"|(?:^|\n)Process exited with code (-?\d+)", re.IGNORECASE)
_TIMED_OUT = re.compile(r"timed out after \d|timed out and has been killed|exceeding timeout", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ToolResult:
    # Anthropic's `is_error`; None where the API has no such flag (OpenAI tool messages).
    is_error: bool | None
    # The head of the result's text (OUTCOME_HEAD_CHARS).
    text: str


@dataclass(frozen=True, slots=True)
class Results:
    # Results by the call id they answer.
    by_id: dict[str, ToolResult]
    # The text of the user messages after the last assistant message (mini-SWE-agent's text actions).
    text: str
    # Call ids the request's assistant messages name: the request continues the turns that made them.
    named: frozenset[str]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content[:OUTCOME_HEAD_CHARS]
    if isinstance(content, list):
        parts = (part.get("text") for part in content if isinstance(part, dict))
        return "".join(part for part in parts if isinstance(part, str))[:OUTCOME_HEAD_CHARS]
    return ""


def _named(message: dict[str, Any], api: ApiKind) -> list[str]:
    """Call ids an assistant message made."""
    if api == "openai":
        calls = message.get("tool_calls")
        return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)] \
            if isinstance(calls, list) else []
    content = message.get("content")
    return [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
            and isinstance(b.get("id"), str)] if isinstance(content, list) else []


# Responses input items the model produced (a reply's), and the results that answer its calls.
_REPLY_ITEMS = frozenset({"function_call", "custom_tool_call", "reasoning"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def _is_reply_item(item: Any) -> bool:
    return isinstance(item, dict) and (item.get("type") in _REPLY_ITEMS or item.get("role") == "assistant")


def _responses_results(items: list[Any]) -> Results:
    """The results after the last reply item, and the calls of the reply they follow."""
    tail = len(items)
    while tail and not _is_reply_item(items[tail - 1]):
        tail -= 1
    start = tail
    while start and _is_reply_item(items[start - 1]):
        start -= 1
    named = [item["call_id"] for item in items[start:tail]
             if item.get("type") in _REPLY_ITEMS and isinstance(item.get("call_id"), str)]
    by_id: dict[str, ToolResult] = {}
    texts: list[str] = []
    for item in items[tail:]:
        if not isinstance(item, dict):
            continue
        if item.get("type") in _OUTPUT_ITEMS and isinstance(item.get("call_id"), str):
            by_id[item["call_id"]] = ToolResult(None, _text(item.get("output")))
        elif item.get("role") == "user":
            texts.append(_text(item.get("content")))
    return Results(by_id, "\n".join(texts)[:OUTCOME_HEAD_CHARS], frozenset(named))


def read_results(body: Any, api: ApiKind) -> Results | None:
    """The results after the last assistant message; None when the body has no message list."""
    if api == "responses":
        items = body.get("input") if isinstance(body, dict) else None
        return _responses_results(items) if isinstance(items, list) else None
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    by_id: dict[str, ToolResult] = {}
    texts: list[str] = []
    named: list[str] = []
    tail = len(messages)
    while tail and not (isinstance(messages[tail - 1], dict) and messages[tail - 1].get("role") == "assistant"):
        tail -= 1
    if tail:
        named = _named(messages[tail - 1], api)
    for message in messages[tail:]:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if api == "openai" and role == "tool" and isinstance(message.get("tool_call_id"), str):
            by_id[message["tool_call_id"]] = ToolResult(None, _text(content))
        elif role == "user" and isinstance(content, list) and api == "anthropic":
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    error = block.get("is_error")
                    by_id[block["tool_use_id"]] = ToolResult(error if isinstance(error, bool) else None,
                                                             _text(block.get("content")))
                elif block.get("type") == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
        elif role == "user":
            texts.append(_text(content))
    return Results(by_id, "\n".join(texts)[:OUTCOME_HEAD_CHARS], frozenset(named))


def outcome(text: str, is_error: bool | None) -> tuple[ToolStatus, int | None]:
    """(status, exit code) a result's text and error flag tell (see the module's doc)."""
    found = _EXIT.search(text)
    code = int(next(group for group in found.groups() if group is not None)) if found is not None else None
    code = code if code is not None and code >= 0 else None  # mini-SWE-agent's -1: no exit code
    if _TIMED_OUT.search(text):
        return "timeout", code
    if code is not None:
        status = status_of_exit(code)
        return ("error" if status == "ok" and is_error else status), code
    return ("error" if is_error else "ok"), None
