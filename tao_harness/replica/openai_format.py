"""OpenAI / vLLM wire format: request bodies → `ChatRequest`, generated tokens → vLLM's response shapes.

Shapes follow vLLM's OpenAI server: `chatcmpl-…` ids, `chatcmpl-tool-…` tool-call ids, a first stream
chunk with `delta.role`, tool calls streamed as a header delta (id, type, name, empty arguments) and then
argument deltas, a final chunk carrying `finish_reason`, and with `stream_options.include_usage` a last
chunk with empty `choices` and the usage. `usage.prompt_tokens_details.cached_tokens` appears only when
the prefix cache hit (vLLM with `--enable-prompt-tokens-details`). vLLM's template extras are honoured:
`continue_final_message` (with `add_generation_prompt: false`; both true is vLLM's 400) continues a final
assistant message, as the proxy asks when it fails a stream over. Unknown fields are ignored and any
model name is accepted (the replica serves one emulated model under every name).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field, model_validator

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
    canonical_arguments,
    coalesce,
)

TOOL_CALL_ID_PREFIX = "chatcmpl-tool-"


class _Function(WireModel):
    name: str
    arguments: str = ""


class _ToolCall(WireModel):
    id: str = ""
    function: _Function


class _Message(WireModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None


class _FunctionDef(WireModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _ToolDef(WireModel):
    type: str = "function"
    function: _FunctionDef


class _StreamOptions(WireModel):
    include_usage: bool = False


class ChatBody(WireModel):
    model: str
    messages: list[_Message] = Field(min_length=1)
    tools: list[_ToolDef] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    ignore_eos: bool = False  # vLLM sampling extra: generate exactly max_tokens (benchmark replays)
    add_generation_prompt: bool = True  # vLLM chat-template extras, as in vLLM's ChatCompletionRequest
    continue_final_message: bool = False

    @model_validator(mode="after")
    def _one_template_ending(self) -> ChatBody:
        if self.continue_final_message and self.add_generation_prompt:
            raise ValueError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        final = self.messages[-1]
        if self.continue_final_message and (final.role != "assistant" or final.tool_calls):
            # vLLM would continue any final message; the scripted model only continues its own text.
            raise ValueError("continue_final_message needs a final assistant message without tool calls")
        return self


class CompletionBody(WireModel):
    model: str
    prompt: str | list[str]
    stream: bool = False
    stream_options: _StreamOptions | None = None
    max_tokens: int | None = Field(16, ge=1)


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _message(message: _Message) -> ChatMessage:
    role = {"developer": "system", "function": "tool"}.get(message.role, message.role)
    calls = tuple(
        ToolCall(c.id, c.function.name, canonical_arguments(c.function.arguments))
        for c in message.tool_calls or ()
    )
    return ChatMessage(role, _text(message.content), calls, message.tool_call_id)  # type: ignore[arg-type]


def parse_chat(body: ChatBody, request_id: str) -> ChatRequest:
    return ChatRequest(
        api="openai",
        model=body.model,
        messages=tuple(_message(m) for m in body.messages),
        tools=tuple(
            ToolSpec.from_schema(t.function.name, t.function.parameters, t) for t in body.tools or ()
        ),
        tool_choice_none=body.tool_choice == "none",
        stream=body.stream,
        include_usage=bool(body.stream_options and body.stream_options.include_usage),
        max_tokens=body.max_completion_tokens or body.max_tokens,
        ignore_eos=body.ignore_eos,
        add_generation_prompt=body.add_generation_prompt,
        continue_final_message=body.continue_final_message,
        request_id=request_id,
    )


def parse_completion(body: CompletionBody, request_id: str) -> ChatRequest:
    prompt = body.prompt if isinstance(body.prompt, str) else "".join(body.prompt)
    return ChatRequest(
        api="completions",
        model=body.model,
        messages=(),
        stream=body.stream,
        raw_prompt=prompt,
        include_usage=bool(body.stream_options and body.stream_options.include_usage),
        max_tokens=body.max_tokens,
        request_id=request_id,
    )


def usage_json(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    if usage.cached_tokens > 0:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return out


class ChatFormatter(ReplyFormatter):
    """Builds one chat completion, streamed or whole, from the reply tokens as they are generated."""

    def __init__(self, request: ChatRequest, calls: tuple[ToolCall, ...], truncated: bool) -> None:
        super().__init__(request, calls, truncated)
        self.id = f"chatcmpl-{request.request_id}"
        self.created = int(time.time())

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "choices": choices,
        }

    def _choice(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def _delta(self, token: ReplyToken) -> dict[str, Any] | None:
        if token.kind == "text":
            return {"content": token.text}
        if token.kind == "call_start":
            call = self.calls[token.call_index]
            header = {
                "index": token.call_index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            return {"tool_calls": [header]}
        if token.kind == "call_args":
            return {"tool_calls": [{"index": token.call_index, "function": {"arguments": token.text}}]}
        return None

    def stream_chunks(self, progress: Progress) -> list[dict[str, Any]]:
        """The chunks for one engine delivery, in order."""
        chunks = []
        if self.deliveries == 0:
            chunks.append(self._envelope([self._choice({"role": "assistant", "content": ""})]))
        self.absorb(progress)
        chunks += [
            self._envelope([self._choice(d)])
            for t in coalesce(progress.tokens)
            if (d := self._delta(t)) is not None
        ]
        if progress.finished:
            chunks.append(self._envelope([self._choice({}, self.outcome())]))
            if self.request.include_usage:
                chunks.append(self._envelope([]) | {"usage": usage_json(progress.usage)})
        return chunks

    def completion(self, usage: Usage) -> dict[str, Any]:
        """The whole non-streamed response, once every token is generated."""
        calls = [
            {
                "id": self.calls[i].id,
                "type": "function",
                "function": {"name": self.calls[i].name, "arguments": self.arguments(i)},
            }
            for i in self.started_calls()
        ]
        message = {
            "role": "assistant",
            "content": self.text() or None,
            "tool_calls": calls,
            "reasoning_content": None,
        }
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.outcome(),
                    "stop_reason": None,
                }
            ],
            "usage": usage_json(usage),
            "prompt_logprobs": None,
        }


class CompletionFormatter(ReplyFormatter):
    """Builds a legacy `/v1/completions` response (text only)."""

    def __init__(self, request: ChatRequest, truncated: bool) -> None:
        super().__init__(request, (), truncated)
        self.id = f"cmpl-{request.request_id}"
        self.created = int(time.time())

    def _body(self, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.request.model,
            "choices": [
                {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            ],
        }

    def stream_chunks(self, progress: Progress) -> list[dict[str, Any]]:
        self.absorb(progress)
        chunks = [
            self._body(
                "".join(t.text for t in progress.tokens), self.outcome() if progress.finished else None
            )
        ]
        if progress.finished and self.request.include_usage:
            chunks.append(self._body("", None) | {"choices": [], "usage": usage_json(progress.usage)})
        return chunks

    def completion(self, usage: Usage) -> dict[str, Any]:
        return self._body(self.text(), self.outcome()) | {"usage": usage_json(usage)}
