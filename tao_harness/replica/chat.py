"""API-neutral chat request and reply types: what the OpenAI and Anthropic front ends parse into.

Both wire formats are normalised here so the template, the scripted agent and the generation loop
are written once. Tool-call arguments are kept as canonical JSON text (sorted keys) so the same call
renders to the same tokens whichever API re-sends it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Role = Literal["system", "user", "assistant", "tool"]
ApiKind = Literal["openai", "anthropic", "completions", "responses"]


def canonical_json(value: Any) -> str:
    """The one JSON spelling used for tool arguments and tool schemas."""
    return json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)


def canonical_arguments(arguments: str) -> str:
    """Canonical form of an OpenAI `function.arguments` string; text that is not JSON stays as is."""
    try:
        return canonical_json(json.loads(arguments))
    except ValueError:
        return arguments


@dataclass(frozen=True)
class ToolCall:
    """One call the assistant makes."""

    id: str
    name: str
    arguments: str  # canonical JSON object text


@dataclass(frozen=True)
class ChatMessage:
    """One message of the conversation, in either API's shape."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # set on tool results


class WireModel(BaseModel):
    """Base of the request-body models: unknown fields are ignored, as vLLM and Anthropic's API do."""

    model_config = ConfigDict(extra="ignore")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the client offers."""

    name: str
    properties: frozenset[str]  # argument names its input schema declares
    required: frozenset[str]
    rendered: str  # canonical JSON of the whole definition, as the template shows it to the "model"

    @classmethod
    def from_schema(cls, name: str, schema: dict[str, Any] | None, definition: WireModel) -> ToolSpec:
        """From a JSON-schema `schema` of the arguments; `definition` is the whole tool as sent."""
        schema = schema or {}
        properties = schema.get("properties")
        required = schema.get("required")
        properties = properties if isinstance(properties, dict) else {}
        required = required if isinstance(required, list) else []
        return cls(
            name,
            frozenset(properties),
            frozenset(str(r) for r in required),
            canonical_json(definition.model_dump(exclude_none=True)),
        )


@dataclass(frozen=True)
class ChatRequest:
    """A generation request after parsing and validation."""

    api: ApiKind
    model: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice_none: bool = False  # the client forbade tool calls for this request
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    # stream_options.continuous_usage_stats (with include_usage, as in vLLM): usage on every chunk too.
    continuous_usage: bool = False
    max_tokens: int | None = None
    ignore_eos: bool = False  # vLLM's sampling flag: the reply runs to max_tokens whatever the script says
    raw_prompt: str | None = None  # /v1/completions: the prompt text, rendered without a template
    # vLLM's chat-template flags: the prompt ends with the assistant header (a new reply), or the final
    # assistant message is left open and the reply continues it (a prefill, `continue_final_message`).
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    request_id: str = ""

    @property
    def tool_results(self) -> int:
        """How many tool results the conversation holds: the scripted agent's progress."""
        return sum(1 for m in self.messages if m.role == "tool")

    def results_of(self, tool_name: str) -> list[str]:
        """Texts of the tool results that answer calls of `tool_name`, in order."""
        ids = {call.id for m in self.messages for call in m.tool_calls if call.name == tool_name}
        return [m.text for m in self.messages if m.role == "tool" and m.tool_call_id in ids]

    def find_tool(self, *names: str) -> ToolSpec | None:
        """The first offered tool whose name is one of `names` (exact match first, then case-insensitive)."""
        for name in names:
            for tool in self.tools:
                if tool.name == name:
                    return tool
        lowered = {n.lower() for n in names}
        return next((t for t in self.tools if t.name.lower() in lowered), None)

    def mentions(self, needle: str) -> bool:
        """Whether any message text contains `needle` (used to recognise a harness by its prompt)."""
        return any(needle in m.text for m in self.messages)


@dataclass(frozen=True)
class Reply:
    """What the scripted agent answers: text, then at most a few tool calls."""

    text: str
    tool_calls: tuple[ToolCall, ...] = field(default=())
    reasoning: str = ""  # thinking before the text (the padding a reply is given to cost its tokens)


PieceKind = Literal["reasoning", "text", "call_start", "call_args", "marker"]


@dataclass(frozen=True)
class ReplyToken:
    """One generated token and what it shows when streamed."""

    token_id: int
    # reasoning: thinking (only with a reasoning parser; else it is text); text: part of the answer text;
    # call_start/call_args: of tool call `call_index`
    kind: PieceKind
    text: str = ""
    call_index: int = -1


def coalesce_counted(tokens: tuple[ReplyToken, ...]) -> list[tuple[ReplyToken, int]]:
    """Merges runs of text (or of one call's argument) tokens, so one delivery streams as one delta each;
    with each merged token, how many tokens it stands for.

    vLLM sends one chunk per engine step and request; a delivery here covers a macro-step.
    """
    out: list[tuple[ReplyToken, int]] = []
    for token in tokens:
        last, merged = out[-1] if out else (None, 0)
        mergeable = token.kind in ("reasoning", "text", "call_args")
        if last is not None and mergeable and (last.kind, last.call_index) == (token.kind, token.call_index):
            out[-1] = ReplyToken(last.token_id, last.kind, last.text + token.text, last.call_index), merged + 1
        else:
            out.append((token, 1))
    return out


def coalesce(tokens: tuple[ReplyToken, ...]) -> list[ReplyToken]:
    """`coalesce_counted` without the counts."""
    return [token for token, _ in coalesce_counted(tokens)]


@dataclass(frozen=True)
class Usage:
    """Token counts of one request, as vLLM reports them."""

    prompt_tokens: int
    cached_tokens: int  # prompt tokens served from the prefix cache
    completion_tokens: int
    created_cache_tokens: int = 0  # prompt tokens computed and written to the prefix cache (full blocks)
    reasoning_tokens: int = 0  # completion tokens that were reasoning


@dataclass(frozen=True)
class Progress:
    """One delivery to a request: the tokens generated since the last one."""

    tokens: tuple[ReplyToken, ...]
    usage: Usage
    finished: bool
    cut_short: bool = False  # finished before the whole reply (the engine hit the context limit)


Outcome = Literal["length", "tool_calls", "stop"]


class ReplyFormatter:
    """What the API formatters share: the request, its scripted calls and the tokens generated so far."""

    def __init__(
        self, request: ChatRequest, calls: tuple[ToolCall, ...], truncated: bool, usage_details: bool = True
    ) -> None:
        self.request = request
        self.calls = calls
        self.truncated = truncated  # max_tokens cut the scripted reply short
        self.usage_details = usage_details  # vLLM's --enable-prompt-tokens-details
        self.generated: list[ReplyToken] = []
        self.deliveries = 0

    def absorb(self, progress: Progress) -> None:
        """Takes in one delivery's tokens."""
        self.deliveries += 1
        self.generated.extend(progress.tokens)
        self.truncated = self.truncated or progress.cut_short

    def outcome(self) -> Outcome:
        if self.truncated:
            return "length"
        return "tool_calls" if any(t.kind == "call_start" for t in self.generated) else "stop"

    def text(self) -> str:
        return "".join(t.text for t in self.generated if t.kind == "text")

    def reasoning(self) -> str:
        return "".join(t.text for t in self.generated if t.kind == "reasoning")

    def started_calls(self) -> list[int]:
        return sorted({t.call_index for t in self.generated if t.kind == "call_start"})

    def arguments(self, index: int) -> str:
        return "".join(t.text for t in self.generated if t.kind == "call_args" and t.call_index == index)
