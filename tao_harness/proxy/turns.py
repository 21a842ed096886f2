"""What an LLM response asked for: its text and its tool calls, read as the response streams past.

A `TurnReader` is fed the same parsed events the `UsageTracker` reads (it parses each SSE event once for
both), or the whole JSON body at the end:
- OpenAI chat completions: `delta.content` text and `delta.tool_calls[]` pieces by `index` (the id and
  name come in the first piece, the JSON arguments in string chunks after it); a body's
  `message.tool_calls[]`;
- Anthropic messages: `content_block_start` of a `tool_use` block (id, name), its `input_json_delta`
  chunks, `text_delta` text; a body's `content[]` blocks;
- OpenAI Responses: each `response.output_item.done` item (a `function_call` with `call_id`, `name`
  and its whole `arguments`, a `custom_tool_call` with its `input`, an assistant `message`); a body's
  `output[]` items.
Only the first choice counts (agents ask for one). Anything it cannot read is skipped, never raised: the
reader is on the proxied response's path. Arguments that are not a JSON object read as `{}`.

A response without tool calls may still run a command: mini-SWE-agent's text-based configs put exactly
one ```mswea_bash_command (or ```bash) block in the message text, and run it (`text_command`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from tao_harness import fastjson
from tao_harness.proxy.usage import ApiKind

log = logging.getLogger(__name__)

# mini-SWE-agent's text-based action regex (models/litellm_textbased_model.py), with the ```bash
# fence of its backticks config; it runs an action only when the message has exactly one.
_TEXT_ACTION = re.compile(r"```(?:mswea_bash_command|bash|sh)\s*\n(.*?)\n```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolCall:
    # The model's id for the call; the request carrying its result names it (tool_call_id / tool_use_id).
    call_id: str
    name: str
    # The call's arguments as the model wrote them; {} when they are not a JSON object.
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Turn:
    """One response's assistant message."""

    text: str
    calls: tuple[ToolCall, ...]

    def text_command(self) -> str | None:
        """The one shell block of a message without tool calls (mini-SWE-agent's text actions), else None."""
        if self.calls or "```" not in self.text:
            return None
        found = _TEXT_ACTION.findall(self.text)
        return found[0].strip() if len(found) == 1 else None


@dataclass(slots=True)
class _Partial:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    # Anthropic: the block's `input` as it started (a non-streamed tool_use block carries it whole).
    start_input: Any = None


def _first_choice(message: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The first choice's `delta` (a stream's chunk) or `message` (a whole body), if it is an object."""
    choices = message.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
        return None
    found = choices[0].get(key)
    return found if isinstance(found, dict) else None


def _arguments(text: str, fallback: Any) -> dict[str, Any]:
    if not text:
        return fallback if isinstance(fallback, dict) else {}
    try:
        parsed = fastjson.loads(text)
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


class TurnReader:
    """Feed parsed events in order (`on_event`) or the whole body (`on_body`); `turn()` at the end.
    Never raises: it is on the response's path. Should reading fail anyway (a bug), it stops and the
    response has no turn."""

    def __init__(self, api: ApiKind) -> None:
        self._api = api
        self._text: list[str] = []
        self._calls: dict[int, _Partial] = {}
        self._failed = False

    def on_event(self, message: dict[str, Any]) -> None:
        if self._failed:
            return
        try:
            self._event(message)
        except Exception:  # noqa: BLE001 - fail open
            log.debug("turn reading stopped", exc_info=True)
            self._failed = True

    def on_body(self, message: dict[str, Any]) -> None:
        try:
            self._body(message)
        except Exception:  # noqa: BLE001 - fail open
            log.debug("turn reading stopped", exc_info=True)
            self._failed = True

    def turn(self) -> Turn | None:
        """The response's message; None when reading it failed."""
        if self._failed:
            return None
        calls = tuple(ToolCall(p.call_id, p.name, _arguments("".join(p.arguments), p.start_input))
                      for _, p in sorted(self._calls.items()) if p.call_id and p.name)
        return Turn("".join(self._text), calls)

    def _event(self, message: dict[str, Any]) -> None:
        if self._api == "openai":
            delta = _first_choice(message, "delta")
            if delta is not None:
                self._openai_message(delta, streamed=True)
            return
        kind = message.get("type")
        if self._api == "responses":
            if kind == "response.output_item.done":
                self._responses_item(message.get("item"))
            return
        if kind == "content_block_delta":
            delta = message.get("delta")
            if not isinstance(delta, dict):
                return
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                self._text.append(delta["text"])
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                index = message.get("index")
                partial = self._calls.get(index) if isinstance(index, int) else None
                if partial is not None:
                    partial.arguments.append(delta["partial_json"])
        elif kind == "content_block_start":
            self._anthropic_block(message.get("content_block"), message.get("index"))

    def _body(self, message: dict[str, Any]) -> None:
        if self._api == "openai":
            body = _first_choice(message, "message")
            if body is not None:
                self._openai_message(body, streamed=False)
            return
        if self._api == "responses":
            output = message.get("output")
            for item in output if isinstance(output, list) else ():
                self._responses_item(item)
            return
        content = message.get("content")
        if isinstance(content, list):
            for index, block in enumerate(content):
                self._anthropic_block(block, index)

    def _openai_message(self, message: dict[str, Any], streamed: bool) -> None:
        content = message.get("content")
        if isinstance(content, str):
            self._text.append(content)
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            return
        for position, piece in enumerate(calls):
            if not isinstance(piece, dict):
                continue
            index = piece.get("index", position) if streamed else position
            partial = self._calls.setdefault(index if isinstance(index, int) else position, _Partial())
            if isinstance(piece.get("id"), str) and piece["id"]:
                partial.call_id = piece["id"]
            function = piece.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str) and function["name"]:
                    partial.name = function["name"]
                if isinstance(function.get("arguments"), str):
                    partial.arguments.append(function["arguments"])

    def _responses_item(self, item: Any) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        if kind == "message":
            content = item.get("content")
            for part in content if isinstance(content, list) else ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    self._text.append(part["text"])
        elif kind in ("function_call", "custom_tool_call"):
            partial = _Partial(str(item.get("call_id") or ""), str(item.get("name") or ""))
            if kind == "function_call" and isinstance(item.get("arguments"), str):
                partial.arguments.append(item["arguments"])
            elif kind == "custom_tool_call":  # a freeform tool (Codex's apply_patch): its input is text
                partial.start_input = {"input": item.get("input")}
            self._calls[len(self._calls)] = partial

    def _anthropic_block(self, block: Any, index: Any) -> None:
        if not isinstance(block, dict) or not isinstance(index, int):
            return
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            self._text.append(block["text"])
        elif block.get("type") == "tool_use":
            self._calls[index] = _Partial(str(block.get("id") or ""), str(block.get("name") or ""),
                                          start_input=block.get("input"))
