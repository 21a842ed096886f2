"""OpenAI / vLLM wire format: request bodies → `ChatRequest`, generated tokens → vLLM's response shapes.

Shapes follow vLLM 0.32's OpenAI server (checked against a real one, tests/real_vllm/test_conformance.py):
`chatcmpl-…` ids, `chatcmpl-tool-…` tool-call ids, a first stream chunk with `delta.role` and empty
content, tool calls streamed as a header delta (id, type, name, empty arguments) and then argument deltas,
`finish_reason` on the last content chunk, and with `stream_options.include_usage` a last chunk with empty
`choices` and the usage. With a reasoning parser the thinking streams as `delta.reasoning`. With
`--enable-prompt-tokens-details` (on by default here) usage always carries `prompt_tokens_details`
(`cached_tokens`, also when 0, and `created_cache_tokens`); without it the field is `null` in whole
responses and absent from streamed usage. vLLM's template extras are honoured:
`continue_final_message` (with `add_generation_prompt: false`; both true is vLLM's 400) continues a final
assistant message, as the proxy asks when it fails a stream over. Unknown fields are ignored.
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
    coalesce_counted,
)

TOOL_CALL_ID_PREFIX = "chatcmpl-tool-"


class _Function(WireModel):
    name: str
    arguments: str = ""


class _ToolCall(WireModel):
    id: str = ""
    function: _Function


class ChatMessageBody(WireModel):
    """One message of a chat request (also `/tokenize`'s `messages`)."""

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
    continuous_usage_stats: bool = False  # vLLM: usage on every chunk, only together with include_usage


class ChatBody(WireModel):
    model: str
    messages: list[ChatMessageBody] = Field(min_length=1)
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


def _message(message: ChatMessageBody) -> ChatMessage:
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
        continuous_usage=bool(body.stream_options and body.stream_options.include_usage
                              and body.stream_options.continuous_usage_stats),
        max_tokens=body.max_completion_tokens or body.max_tokens,
        ignore_eos=body.ignore_eos,
        add_generation_prompt=body.add_generation_prompt,
        continue_final_message=body.continue_final_message,
        request_id=request_id,
    )


def parse_tokenize(
    messages: list[ChatMessageBody], add_generation_prompt: bool, continue_final_message: bool
) -> ChatRequest:
    """`/tokenize`'s messages form, rendered like a chat request with the same template flags."""
    return ChatRequest(
        api="openai",
        model="",
        messages=tuple(_message(m) for m in messages),
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
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


def usage_json(usage: Usage, details: bool, *, streamed: bool, chat: bool = True, reasoning: bool = False
               ) -> dict[str, Any]:
    """vLLM's usage object; which optional fields appear depends on the route, on streaming and on the
    server's flags (`details`: --enable-prompt-tokens-details, `reasoning`: a reasoning parser), as there."""
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    if details:
        prompt_details: dict[str, Any] = {"cached_tokens": usage.cached_tokens}
        if chat or not streamed:
            prompt_details["created_cache_tokens"] = usage.created_cache_tokens if chat else None
        if not streamed:
            prompt_details["multimodal_tokens"] = None
        out["prompt_tokens_details"] = prompt_details
    elif not streamed:
        out["prompt_tokens_details"] = None
    if chat and reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    elif not streamed:
        out["completion_tokens_details"] = None
    return out


class ChatFormatter(ReplyFormatter):
    """Builds one chat completion, streamed or whole, from the reply tokens as they are generated."""

    def __init__(
        self, request: ChatRequest, calls: tuple[ToolCall, ...], truncated: bool, usage_details: bool = True,
        reasoning_parser: bool = False,
    ) -> None:
        super().__init__(request, calls, truncated, usage_details)
        self.reasoning_parser = reasoning_parser
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
        if token.kind == "reasoning":
            return {"reasoning": token.text}
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

    def _running_usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        """vLLM's `continuous_usage_stats` usage of a content chunk: the counts so far, no details."""
        details = None
        if self.reasoning_parser:
            details = {"reasoning_tokens": sum(1 for t in self.generated[:completion_tokens] if t.kind == "reasoning")}
        return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens, "completion_tokens_details": details}

    def stream_chunks(self, progress: Progress) -> list[dict[str, Any]]:
        """The chunks for one engine delivery, in order."""
        chunks = []
        prompt_tokens = progress.usage.prompt_tokens
        if self.deliveries == 0:
            chunks.append(self._envelope([self._choice({"role": "assistant", "content": ""})]))
            if self.request.continuous_usage:
                chunks[-1]["usage"] = self._running_usage(prompt_tokens, 0)
        generated = len(self.generated)
        self.absorb(progress)
        deltas: list[tuple[dict[str, Any], int]] = []  # each delta, with the tokens generated through it
        for token, merged in coalesce_counted(progress.tokens):
            generated += merged
            if (delta := self._delta(token)) is not None:
                deltas.append((delta, generated))
        if progress.finished and not deltas:
            deltas.append(({"content": ""}, generated))
        elif deltas:  # tokens that show nothing (the end of a tool call) count with the chunk before them
            deltas[-1] = deltas[-1][0], generated
        for index, (delta, through) in enumerate(deltas):
            last = progress.finished and index == len(deltas) - 1
            # vLLM puts finish_reason (and stop_reason) on the last content chunk, not on a chunk of its own.
            choice = self._choice(delta, self.outcome()) | {"stop_reason": None} if last else self._choice(delta)
            chunks.append(self._envelope([choice]))
            if self.request.continuous_usage:
                chunks[-1]["usage"] = self._running_usage(prompt_tokens, through)
        if progress.finished and self.request.include_usage:
            usage = usage_json(progress.usage, self.usage_details, streamed=True, reasoning=self.reasoning_parser)
            chunks.append(self._envelope([]) | {"usage": usage})
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
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.text() or None,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "reasoning": self.reasoning() or None,
        }
        if calls:  # vLLM leaves the key out when there are none
            message["tool_calls"] = calls
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
            "usage": usage_json(usage, self.usage_details, streamed=False, reasoning=self.reasoning_parser),
            "prompt_logprobs": None,
        }


class CompletionFormatter(ReplyFormatter):
    """Builds a legacy `/v1/completions` response (text only)."""

    def __init__(self, request: ChatRequest, truncated: bool, usage_details: bool = True) -> None:
        super().__init__(request, (), truncated, usage_details)
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
            usage = usage_json(progress.usage, self.usage_details, streamed=True, chat=False)
            chunks.append(self._body("", None) | {"choices": [], "usage": usage})
        return chunks

    def completion(self, usage: Usage) -> dict[str, Any]:
        usage_body = usage_json(usage, self.usage_details, streamed=False, chat=False)
        return self._body(self.text(), self.outcome()) | {"usage": usage_body}
