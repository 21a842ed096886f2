"""The chat "template": messages → prompt token ids, and a reply → the token ids the engine generates.

Like a real template (ChatML, Llama-3), every message is rendered on its own and concatenated, and the
generation prompt is exactly the assistant header. So when a client re-sends the history unchanged, the
prompt of turn n+1 starts with the prompt of turn n followed by the reply generated in turn n — the
reply's ids are passed to the engine as its output ids, and vLLM hashes generated tokens too (DESIGN §9),
so the prefix cache hits across turns. Tool-call ids are not rendered (clients may rewrite them), and
arguments use canonical JSON (clients may reorder keys).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable
from enum import IntEnum
from functools import partial

from tao_harness.replica import tokenizer
from tao_harness.replica.chat import ChatMessage, ChatRequest, PieceKind, Reply, ReplyToken, ToolCall, ToolSpec


class Special(IntEnum):
    """Reserved ids below tokenizer.FIRST_TEXT_ID."""

    BEGIN = 1
    END_OF_MESSAGE = 2
    SYSTEM = 3
    USER = 4
    ASSISTANT = 5
    TOOL_RESULT = 6
    TOOLS = 7
    TOOL_CALL = 8
    TOOL_CALL_END = 9
    ARGUMENTS = 10


_HEADER = {
    "system": Special.SYSTEM,
    "user": Special.USER,
    "assistant": Special.ASSISTANT,
    "tool": Special.TOOL_RESULT,
}


def _tool_call_tokens(index: int, call: ToolCall) -> list[ReplyToken]:
    tokens = [ReplyToken(Special.TOOL_CALL, "call_start", call_index=index)]
    tokens += [ReplyToken(tokenizer.piece_id(p), "marker", p, index) for p in tokenizer.pieces(call.name)]
    tokens.append(ReplyToken(Special.ARGUMENTS, "marker", call_index=index))
    tokens += [
        ReplyToken(tokenizer.piece_id(p), "call_args", p, index) for p in tokenizer.pieces(call.arguments)
    ]
    tokens.append(ReplyToken(Special.TOOL_CALL_END, "marker", call_index=index))
    return tokens


def _text_tokens(text: str, kind: PieceKind) -> list[ReplyToken]:
    return [ReplyToken(tokenizer.piece_id(p), kind, p) for p in tokenizer.pieces(text)]


def reply_tokens(reply: Reply, reasoning_parser: bool = False) -> list[ReplyToken]:
    """The tokens the engine generates for `reply`, ending with the end-of-message token.

    With a reasoning parser the reasoning tokens are told apart from the text; without one they are
    text, as a reasoning model's thinking is to a vLLM server started without `--reasoning-parser`.
    """
    if reasoning_parser:
        tokens = _text_tokens(reply.reasoning, "reasoning") + _text_tokens(reply.text, "text")
    else:
        tokens = _text_tokens(reply.reasoning + reply.text, "text")
    for index, call in enumerate(reply.tool_calls):
        tokens += _tool_call_tokens(index, call)
    tokens.append(ReplyToken(Special.END_OF_MESSAGE, "marker"))
    return tokens


def _message_ids(message: ChatMessage) -> list[int]:
    if message.role == "assistant":
        body = reply_tokens(Reply(message.text, message.tool_calls))
        return [Special.ASSISTANT, *(t.token_id for t in body)]
    return [_HEADER[message.role], *tokenizer.encode(message.text), Special.END_OF_MESSAGE]


def _tools_ids(tools: tuple[ToolSpec, ...]) -> list[int]:
    if not tools:
        return []
    ids: list[int] = [Special.TOOLS]
    for tool in tools:
        ids += tokenizer.encode(tool.rendered)
    ids.append(Special.END_OF_MESSAGE)
    return ids


class RenderCache:
    """Bounded LRU memo of rendered messages and tool lists, keyed by value.

    Agents re-send the whole conversation every turn, so without it each request re-tokenizes tens of
    thousands of tokens; with it only the new messages are tokenized. Ids are stored as 4-byte arrays.
    """

    def __init__(self, max_tokens: int = 4_000_000) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[Hashable, array[int]] = OrderedDict()
        self._tokens = 0

    @property
    def tokens(self) -> int:
        """Token ids held."""
        return self._tokens

    def get(self, key: Hashable, render: Callable[[], list[int]]) -> array[int]:
        ids = self._entries.get(key)
        if ids is not None:
            self._entries.move_to_end(key)
            return ids
        ids = array("I", render())
        self._entries[key] = ids
        self._tokens += len(ids)
        while self._tokens > self.max_tokens and len(self._entries) > 1:
            self._tokens -= len(self._entries.popitem(last=False)[1])
        return ids


def prompt_ids(request: ChatRequest, cache: RenderCache | None = None) -> list[int]:
    """Prompt token ids: tools, the messages, then the generation prompt (the assistant header).

    With `continue_final_message` the final (assistant) message is left open — its header and text, no
    end-of-message token — so prompt plus continuation equal the prompt plus the whole reply.
    """
    if request.raw_prompt is not None:
        return [Special.BEGIN, *tokenizer.encode(request.raw_prompt)]
    memo = cache or RenderCache()
    messages = request.messages
    ending: list[int] = [Special.ASSISTANT] if request.add_generation_prompt else []
    if request.continue_final_message:
        ending = [Special.ASSISTANT, *tokenizer.encode(messages[-1].text)]
        messages = messages[:-1]
    ids: list[int] = [Special.BEGIN]
    # A leading system message goes before the tool list, as in common templates.
    if messages and messages[0].role == "system":
        ids += memo.get(messages[0], partial(_message_ids, messages[0]))
        messages = messages[1:]
    ids += memo.get(request.tools, partial(_tools_ids, request.tools))
    for message in messages:
        ids += memo.get(message, partial(_message_ids, message))
    return ids + ending


def continuation_start(tokens: list[ReplyToken], prefill: str) -> int:
    """How many leading `tokens` spell `prefill`: a continuation generates the ones after them.

    0 when `prefill` is not the start of the reply's text: the scripted model then plays its reply whole.
    """
    text = ""
    for index, token in enumerate(tokens):
        if text == prefill:
            return index
        if token.kind != "text" or not prefill.startswith(text + token.text):
            return 0
        text += token.text
    return len(tokens) if text == prefill else 0
