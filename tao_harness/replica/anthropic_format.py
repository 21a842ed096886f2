"""Anthropic Messages wire format: request bodies → `ChatRequest`, generated tokens → Messages responses.

Streams use Anthropic's event sequence as vLLM 0.32 sends it: `message_start` (usage: the whole prompt
as `input_tokens`, `output_tokens` 0, no cache fields), then per content block `content_block_start`,
`content_block_delta` (`thinking_delta` + `signature_delta` / `text_delta` / `input_json_delta`),
`content_block_stop`, then `message_delta` (stop_reason and the full usage) and `message_stop`. Usage
follows Anthropic's meaning: `input_tokens` are the prompt tokens neither read from the cache
(`cache_read_input_tokens`) nor written to it (`cache_creation_input_tokens`), so the three add up to the
prompt; the cache fields appear only with `--enable-prompt-tokens-details`, as on vLLM. Ids are vLLM's
`chatcmpl-…`. `cache_control`, `thinking` and other unknown fields are accepted and ignored.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import Field

from tao_harness.replica.chat import (
    ChatMessage,
    ChatRequest,
    Progress,
    ReplyFormatter,
    ReplyToken,
    ToolCall,
    ToolSpec,
    Usage,
    WireModel,
    canonical_json,
    coalesce,
)

TOOL_CALL_ID_PREFIX = "toolu_"


class _Message(WireModel):
    role: Literal[
        "user", "assistant", "system"
    ]  # Claude Code 2.1 also sends mid-conversation system messages
    content: str | list[dict[str, Any]]


class _Tool(WireModel):
    name: str
    input_schema: dict[str, Any] | None = None


class MessagesBody(WireModel):
    model: str
    messages: list[_Message] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[_Tool] | None = None
    tool_choice: dict[str, Any] | None = None
    stream: bool = False


class CountTokensBody(WireModel):
    model: str
    messages: list[_Message] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[_Tool] | None = None


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _messages(message: _Message) -> list[ChatMessage]:
    """One Anthropic message → chat messages; tool_result blocks become their own tool messages."""
    if isinstance(message.content, str) or message.role == "system":
        return [ChatMessage(message.role, _block_text(message.content))]
    if message.role == "assistant":
        text = "".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text")
        calls = tuple(
            ToolCall(str(b.get("id", "")), str(b.get("name", "")), canonical_json(b.get("input", {})))
            for b in message.content
            if b.get("type") == "tool_use"
        )
        return [ChatMessage("assistant", text, calls)]
    out = [
        ChatMessage("tool", _block_text(b.get("content")), tool_call_id=str(b.get("tool_use_id", "")))
        for b in message.content
        if b.get("type") == "tool_result"
    ]
    text = _block_text(message.content)
    if text or not out:
        out.append(ChatMessage("user", text))
    return out


def parse_messages(body: MessagesBody | CountTokensBody, request_id: str) -> ChatRequest:
    system = _block_text(body.system) if body.system is not None else ""
    messages = [ChatMessage("system", system)] if system else []
    for message in body.messages:
        messages += _messages(message)
    is_full = isinstance(body, MessagesBody)
    return ChatRequest(
        api="anthropic",
        model=body.model,
        messages=tuple(messages),
        tools=tuple(ToolSpec.from_schema(t.name, t.input_schema, t) for t in body.tools or ()),
        tool_choice_none=is_full and (body.tool_choice or {}).get("type") == "none",  # type: ignore[union-attr]
        stream=is_full and body.stream,  # type: ignore[union-attr]
        max_tokens=body.max_tokens if is_full else None,  # type: ignore[union-attr]
        request_id=request_id,
    )


def usage_json(usage: Usage, details: bool) -> dict[str, Any]:
    if not details:
        return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_tokens - usage.created_cache_tokens,
        "output_tokens": usage.completion_tokens,
        "cache_creation_input_tokens": usage.created_cache_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
    }


_STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "stop": "end_turn"}


class MessagesFormatter(ReplyFormatter):
    """Builds one Messages response, streamed as (event, data) pairs or whole."""

    def __init__(
        self, request: ChatRequest, calls: tuple[ToolCall, ...], truncated: bool, usage_details: bool = True
    ) -> None:
        super().__init__(request, calls, truncated, usage_details)
        self.id = f"chatcmpl-{request.request_id}"
        self._open: tuple[str, int] | None = None  # (block kind, call index) of the open content block
        self._blocks = 0

    def _message(self, content: list[dict[str, Any]], stop: str | None, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": content,
            "stop_reason": stop,
            "usage": usage,
        }

    def _close(self) -> list[tuple[str, dict[str, Any]]]:
        if self._open is None:
            return []
        events: list[tuple[str, dict[str, Any]]] = []
        index = self._blocks
        if self._open[0] == "thinking":  # vLLM signs a thinking block just before closing it
            delta = {"type": "signature_delta", "signature": uuid.uuid4().hex}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        self._open = None
        self._blocks += 1
        return events + [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _text_block(self, kind: str, text: str) -> list[tuple[str, dict[str, Any]]]:
        """Events for `text` in a block of `kind` ("text" or "thinking"), opening the block if needed."""
        events: list[tuple[str, dict[str, Any]]] = []
        if self._open != (kind, -1):
            events += self._close()
            self._open = (kind, -1)
            start = {"type": "content_block_start", "index": self._blocks, "content_block": {"type": kind, kind: ""}}
            events.append(("content_block_start", start))
        delta = {"type": f"{kind}_delta", kind: text}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": self._blocks, "delta": delta}))
        return events

    def _events(self, token: ReplyToken) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        index = self._blocks
        if token.kind in ("text", "reasoning"):
            events += self._text_block("text" if token.kind == "text" else "thinking", token.text)
        elif token.kind == "call_start":
            events += self._close()
            call = self.calls[token.call_index]
            self._open = ("tool_use", token.call_index)
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": self._blocks, "content_block": block},
                )
            )
        elif token.kind == "call_args":
            delta = {"type": "input_json_delta", "partial_json": token.text}
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        return events

    def stream_events(self, progress: Progress) -> list[tuple[str, dict[str, Any]]]:
        """The SSE events for one engine delivery, in order."""
        events: list[tuple[str, dict[str, Any]]] = []
        if self.deliveries == 0:
            start_usage = {"input_tokens": progress.usage.prompt_tokens, "output_tokens": 0}
            message = self._message([], None, start_usage) | {"stop_sequence": None}
            events.append(("message_start", {"type": "message_start", "message": message}))
        self.absorb(progress)
        for token in coalesce(progress.tokens):
            events += self._events(token)
        if progress.finished:
            events += self._close()
            delta = {"stop_reason": _STOP_REASONS[self.outcome()], "stop_sequence": None}
            events.append(
                (
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": usage_json(progress.usage, self.usage_details)},
                )
            )
            events.append(("message_stop", {"type": "message_stop"}))
        return events

    def message(self, usage: Usage) -> dict[str, Any]:
        """The whole non-streamed response."""
        content: list[dict[str, Any]] = []
        if self.reasoning():
            content.append({"type": "thinking", "thinking": self.reasoning(), "signature": uuid.uuid4().hex})
        if self.text():
            content.append({"type": "text", "text": self.text()})
        for index in self.started_calls():
            try:
                arguments = json.loads(self.arguments(index))
            except ValueError:  # cut short by max_tokens
                arguments = {}
            call = self.calls[index]
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        return self._message(content, _STOP_REASONS[self.outcome()], usage_json(usage, self.usage_details))
