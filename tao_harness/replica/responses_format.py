"""OpenAI Responses wire format (`POST /v1/responses`, as vLLM serves it and the Codex CLI speaks it):
request bodies → `ChatRequest`, generated tokens → Responses events or a whole response.

Input: `instructions` (a system message), and `input` as a string or a list of items: `message`
(roles user, developer — read as system — and assistant; content a string or `input_text` /
`output_text` parts), `function_call` (`call_id`, `name`, `arguments`), `function_call_output`
(`call_id`, `output`). Reasoning items and tools that are not functions (web search, namespaces) are
accepted and left out.

Streams send the event sequence a Responses client reads: `response.created`, `response.in_progress`,
per output item `response.output_item.added`, its deltas (`response.output_text.delta` inside a
`content_part`, or `response.function_call_arguments.delta`), its `.done` events and
`response.output_item.done`, then `response.completed` with the whole response and its usage
(`input_tokens_details.cached_tokens`). Every event carries its `type` and a `sequence_number`. A
reply's reasoning padding costs its tokens but is not shown (no reasoning item).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tao_harness.replica.chat import (ChatMessage, ChatRequest, Progress, ReplyFormatter, ReplyToken, ToolCall,
                                     ToolSpec, Usage, WireModel, canonical_arguments, coalesce)

TOOL_CALL_ID_PREFIX = "call_"
_ROLES = {"user": "user", "developer": "system", "system": "system", "assistant": "assistant"}


class _Tool(WireModel):
    type: str
    name: str | None = None
    parameters: dict[str, Any] | None = None


class ResponsesBody(WireModel):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    max_output_tokens: int | None = None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _messages(items: list[dict[str, Any]]) -> list[ChatMessage]:
    """Input items → chat messages; function calls join the assistant message before them."""
    out: list[ChatMessage] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in _ROLES:
            out.append(ChatMessage(_ROLES[item["role"]], _text(item.get("content"))))  # type: ignore[arg-type]
        elif kind == "function_call":
            call = ToolCall(str(item.get("call_id", "")), str(item.get("name", "")),
                            canonical_arguments(str(item.get("arguments", ""))))
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = ChatMessage("assistant", last.text, (*last.tool_calls, call))
            else:
                out.append(ChatMessage("assistant", "", (call,)))
        elif kind == "function_call_output":
            out.append(ChatMessage("tool", _text(item.get("output")), tool_call_id=str(item.get("call_id", ""))))
    return out


def parse_responses(body: ResponsesBody, request_id: str) -> ChatRequest:
    messages = [ChatMessage("system", body.instructions)] if body.instructions else []
    messages += [ChatMessage("user", body.input)] if isinstance(body.input, str) else _messages(body.input)
    return ChatRequest(
        api="responses",
        model=body.model,
        messages=tuple(messages),
        tools=tuple(ToolSpec.from_schema(t.name, t.parameters, t) for t in body.tools or ()
                    if t.type == "function" and t.name),
        tool_choice_none=body.tool_choice == "none",
        stream=body.stream,
        max_tokens=body.max_output_tokens,
        request_id=request_id,
    )


def usage_json(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


class ResponsesFormatter(ReplyFormatter):
    """Builds one response, streamed as (event name, data) pairs or whole."""

    def __init__(self, request: ChatRequest, calls: tuple[ToolCall, ...], truncated: bool) -> None:
        super().__init__(request, calls, truncated)
        self.id = f"resp_{request.request_id}"
        self._created = int(time.time())
        self._sequence = 0
        self._items: list[dict[str, Any]] = []  # output items, the open one last
        self._open = False

    def _event(self, kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        self._sequence += 1
        return kind, {"type": kind, "sequence_number": self._sequence, **fields}

    def _response(self, status: str, usage: Usage | None) -> dict[str, Any]:
        return {"id": self.id, "object": "response", "created_at": self._created, "status": status,
                "model": self.request.model, "output": list(self._items),
                "usage": usage_json(usage) if usage is not None else None}

    def _close(self) -> list[tuple[str, dict[str, Any]]]:
        if not self._open:
            return []
        self._open = False
        index, item = len(self._items) - 1, self._items[-1]
        item["status"] = "completed"
        events = []
        if item["type"] == "message":
            part = item["content"][0]
            events.append(self._event("response.output_text.done", item_id=item["id"], output_index=index,
                                      content_index=0, text=part["text"]))
            events.append(self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                      content_index=0, part=part))
        else:
            events.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                      output_index=index, arguments=item["arguments"]))
        return events + [self._event("response.output_item.done", output_index=index, item=item)]

    def _open_item(self, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        events = self._close()
        self._items.append(item)
        self._open = True
        events.append(self._event("response.output_item.added", output_index=len(self._items) - 1,
                                  item=dict(item, **({"content": []} if item["type"] == "message" else {}))))
        if item["type"] == "message":
            events.append(self._event("response.content_part.added", item_id=item["id"],
                                      output_index=len(self._items) - 1, content_index=0,
                                      part={"type": "output_text", "text": "", "annotations": []}))
        return events

    def _events(self, token: ReplyToken) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        if token.kind == "text":
            if not (self._open and self._items[-1]["type"] == "message"):
                events += self._open_item({"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant",
                                           "status": "in_progress",
                                           "content": [{"type": "output_text", "text": "", "annotations": []}]})
            item = self._items[-1]
            item["content"][0]["text"] += token.text
            events.append(self._event("response.output_text.delta", item_id=item["id"],
                                      output_index=len(self._items) - 1, content_index=0, delta=token.text))
        elif token.kind == "call_start":
            call = self.calls[token.call_index]
            events += self._open_item({"id": f"fc_{uuid.uuid4().hex}", "type": "function_call",
                                       "status": "in_progress", "call_id": call.id, "name": call.name,
                                       "arguments": ""})
        elif token.kind == "call_args" and self._open and self._items[-1]["type"] == "function_call":
            item = self._items[-1]
            item["arguments"] += token.text
            events.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                      output_index=len(self._items) - 1, delta=token.text))
        return events

    def stream_events(self, progress: Progress) -> list[tuple[str, dict[str, Any]]]:
        """The SSE events for one engine delivery, in order."""
        events: list[tuple[str, dict[str, Any]]] = []
        if self.deliveries == 0:
            events.append(self._event("response.created", response=self._response("in_progress", None)))
            events.append(self._event("response.in_progress", response=self._response("in_progress", None)))
        self.absorb(progress)
        for token in coalesce(progress.tokens):
            events += self._events(token)
        if progress.finished:
            events += self._close()
            status = "incomplete" if self.outcome() == "length" else "completed"
            events.append(self._event(f"response.{status}", response=self._response(status, progress.usage)))
        return events

    def response(self, usage: Usage) -> dict[str, Any]:
        """The whole non-streamed response (after `absorb` took every delivery)."""
        for token in coalesce(tuple(self.generated)):
            self._events(token)
        self._close()
        return self._response("incomplete" if self.outcome() == "length" else "completed", usage)
