"""Continuing an Anthropic Messages stream on another replica.

In Anthropic's API a final assistant message is a prefill the model continues, but vLLM's /v1/messages
converts the request to a chat completion with the generation prompt on, so the prefill is read as a
finished turn. The continuation therefore goes to the replica's /v1/chat/completions with vLLM's
`continue_final_message` (the request converted the way vLLM converts it: system text first, tool_use
blocks as tool calls, tool_result blocks as tool messages), and its chunks are turned back into the
Anthropic events the client expects: the text goes on in the open content block (same index), later
blocks get the next indices, no second `message_start`, and `message_delta` counts every output token.
"""

from __future__ import annotations

import json
from typing import Any

from tao_harness.proxy.splice import Continuation, Done, Unresumable, count, dicts, encode_event, events
from tao_harness.proxy.splice_openai import shift_usage

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def messages_continuation(body: dict[str, Any], seen: bytes) -> Continuation | str:
    """How to continue the answer in `seen` (the client's SSE bytes), or why it cannot be continued."""
    if count(body.get("max_tokens")) is None:
        return "the request has no max_tokens"
    text: list[str] = []
    open_index: int | None = None
    next_index = 0
    for _, event in events(seen):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "content_block_start":
            block = event.get("content_block") if isinstance(event.get("content_block"), dict) else {}
            if block.get("type") != "text" or count(event.get("index")) is None:
                return f"a {block.get('type')} block was being streamed"
            open_index = event["index"]
            next_index = open_index + 1
        elif kind == "content_block_delta":
            delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
            if delta.get("type") != "text_delta":
                return f"a {delta.get('type')} was being streamed"
            text.append(delta.get("text") if isinstance(delta.get("text"), str) else "")
        elif kind == "content_block_stop":
            open_index = None
        elif kind in ("message_delta", "message_stop", "error"):
            return "the answer had already ended"
    answer = "".join(text)
    return Continuation(answer, str(body.get("model", "")),
                        lambda done: continue_request(body, answer, done),
                        lambda done: MessagesSplice(open_index, next_index, done))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in dicts(content) if b.get("type") == "text")


def _chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if body.get("system"):
        out.append({"role": "system", "content": _text(body["system"])})
    for message in dicts(body.get("messages")):
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str) or role == "system":
            out.append({"role": role, "content": _text(content)})
            continue
        blocks = dicts(content)
        results = [{"role": "tool", "tool_call_id": str(b.get("tool_use_id", "")),
                    "content": _text(b.get("content"))} for b in blocks if b.get("type") == "tool_result"]
        calls = [{"id": str(b.get("id", "")), "type": "function",
                  "function": {"name": str(b.get("name", "")), "arguments": json.dumps(b.get("input") or {})}}
                 for b in blocks if b.get("type") == "tool_use"]
        out += results
        text = _text(blocks)
        if text or calls or not results:
            out.append({"role": role, "content": text} | ({"tool_calls": calls} if calls else {}))
    return out


def _tool_choice(choice: Any) -> Any:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"any": "required", "none": "none"}.get(str(kind), "auto")


def continue_request(body: dict[str, Any], text: str, done: Done) -> dict[str, Any]:
    """The chat-completions body continuing `text` (`done.generated` tokens were generated already)."""
    if body["max_tokens"] - done.generated < 1:
        raise Unresumable("the cut answer had already used its max_tokens")
    out: dict[str, Any] = {
        "model": body.get("model"),
        "messages": [*_chat_messages(body), {"role": "assistant", "content": text}],
        "max_tokens": body["max_tokens"] - done.generated, "stream": True, "stream_options": {"include_usage": True},
        "add_generation_prompt": False, "continue_final_message": True,
    }
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description"),
                                                "parameters": t.get("input_schema")}}
             for t in dicts(body.get("tools")) if isinstance(t.get("name"), str)]
    if tools:
        out |= {"tools": tools, "tool_choice": _tool_choice(body.get("tool_choice"))}
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    return out | {key: body[key] for key in ("temperature", "top_p", "top_k") if key in body}


class MessagesSplice:
    """Turns a continuation's chat-completion chunks into the rest of the client's Anthropic stream."""

    def __init__(self, open_index: int | None, next_index: int, done: Done) -> None:
        self._open: str | None = "text" if open_index is not None else None  # kind of the open block
        self._index = open_index if open_index is not None else next_index - 1
        self._done = done
        self._stop = "end_turn"
        self._ended = False  # message_delta sent

    def rewrite(self, data: bytes) -> bytes:
        out: list[tuple[str, dict[str, Any]]] = []
        for _, chunk in events(data):
            if chunk == "[DONE]":
                out += self._end(None) + [("message_stop", {"type": "message_stop"})]
            elif isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
                error = {"type": "api_error", "message": str(chunk["error"].get("message"))}
                out.append(("error", {"type": "error", "error": error}))
            elif isinstance(chunk, dict):
                out += self._chunk(chunk)
        return b"".join(encode_event(payload, name) for name, payload in out)

    def _chunk(self, chunk: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        for choice in dicts(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str) and delta["content"]:
                if self._open != "text":
                    out += self._start("text", {"type": "text", "text": ""})
                out.append(self._delta({"type": "text_delta", "text": delta["content"]}))
            for call in dicts(delta.get("tool_calls")):
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                if call.get("id"):
                    block = {"type": "tool_use", "id": call["id"], "name": function.get("name"), "input": {}}
                    out += self._start("tool_use", block)
                if function.get("arguments"):
                    delta_json = {"type": "input_json_delta", "partial_json": function["arguments"]}
                    out.append(self._delta(delta_json))
            if choice.get("finish_reason"):
                self._stop = _STOP_REASONS.get(choice["finish_reason"], "end_turn")
        if not chunk.get("choices") and isinstance(chunk.get("usage"), dict):
            out += self._end(chunk["usage"])
        return out

    def _start(self, kind: str, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        out = self._close()
        self._open, self._index = kind, self._index + 1
        return [*out, ("content_block_start", {"type": "content_block_start", "index": self._index,
                                                "content_block": block})]

    def _delta(self, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta}

    def _close(self) -> list[tuple[str, dict[str, Any]]]:
        if self._open is None:
            return []
        self._open = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self._index})]

    def _end(self, usage: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
        if self._ended:
            return []
        self._ended = True
        output = count(shift_usage(usage, self._done).get("completion_tokens")) if usage else None
        delta = {"stop_reason": self._stop, "stop_sequence": None}
        # Output only: the client's prompt figures stay those of `message_start` (the original prompt).
        usage_out = {"output_tokens": output if output is not None else self._done.generated}
        return [*self._close(), ("message_delta", {"type": "message_delta", "delta": delta, "usage": usage_out})]
