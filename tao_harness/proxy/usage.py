"""Token usage and first-token detection from a response as it streams past.

The proxy forwards bytes unchanged; a `UsageTracker` watches the same bytes. For Server-Sent Events it
parses each complete event as it arrives (OpenAI chat/completions chunks, Anthropic message events); for
a plain JSON body it parses once at the end. Missing usage fields mean "unknown", never an error
(vLLM omits `prompt_tokens_details` unless `--enable-prompt-tokens-details`, and when the hit is 0).

Anthropic's `input_tokens` excludes cache reads and writes, so its prompt size is
`input_tokens + cache_read_input_tokens + cache_creation_input_tokens`. The OpenAI Responses API (the
Codex CLI's) reports `input_tokens` (the whole prompt), `input_tokens_details.cached_tokens` and
`output_tokens` in the response that `response.completed` carries; its content comes as `*.delta` events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tao_harness import fastjson

ApiKind = Literal["openai", "anthropic", "responses"]
# Events that end a Responses stream (the response they carry has its usage).
_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


@dataclass(frozen=True, slots=True)
class Usage:
    # Prompt tokens as the engine counted them (None: not reported).
    prompt_tokens: int | None = None
    # Prompt tokens served from the prefix cache (None: not reported).
    cached_tokens: int | None = None
    # Generated tokens (None: not reported).
    completion_tokens: int | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _openai_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(_int(usage.get("prompt_tokens")), cached, _int(usage.get("completion_tokens")))


def _anthropic_usage(usage: Any, previous: Usage) -> Usage:
    if not isinstance(usage, dict):
        return previous
    uncached = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    created = _int(usage.get("cache_creation_input_tokens"))
    prompt = previous.prompt_tokens
    if uncached is not None:
        prompt = uncached + (read or 0) + (created or 0)
    completion = _int(usage.get("output_tokens"))
    return Usage(
        prompt,
        read if read is not None else previous.cached_tokens,
        completion if completion is not None else previous.completion_tokens,
    )


def _responses_usage(response: Any) -> Usage | None:
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(_int(usage.get("input_tokens")), cached, _int(usage.get("output_tokens")))


def _openai_has_content(chunk: dict[str, Any]) -> bool:
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        # vLLM ≥ 0.1x streams a reasoning model's thinking as `reasoning`; older servers and other
        # OpenAI-compatible ones as `reasoning_content`.
        if isinstance(delta, dict) and (
            delta.get("content") or delta.get("tool_calls") or delta.get("reasoning")
            or delta.get("reasoning_content")
        ):
            return True
        if choice.get("text"):  # /v1/completions chunks
            return True
    return False


class TurnObserver(Protocol):
    """Reads the assistant message from the same parsed events (proxy.turns.TurnReader); never raises."""

    def on_event(self, message: dict[str, Any]) -> None: ...
    def on_body(self, message: dict[str, Any]) -> None: ...


class UsageTracker:
    """Feed response bytes in order; read `usage` at the end and `first_token_seen` any time. `turn`,
    when given, sees every event (or the body) too: each is parsed once for both."""

    def __init__(self, api: ApiKind, streaming: bool, turn: TurnObserver | None = None) -> None:
        self._api = api
        self._streaming = streaming
        self._turn = turn
        self._buffer = bytearray()
        self.usage = Usage()
        self.first_token_seen = False
        # The stream's closing event went by ([DONE], or Anthropic's message_stop): the answer is whole.
        self.complete = False
        self.error: str | None = None

    def feed(self, data: bytes) -> bool:
        """Consume bytes; True when they carried the response's first content token."""
        self._buffer += data
        if not self._streaming:
            return False
        before = self.first_token_seen
        while True:
            end, sep_len = self._event_end()
            if end < 0:
                break
            event = bytes(self._buffer[:end])
            del self._buffer[: end + sep_len]
            self._on_event(event)
        return self.first_token_seen and not before

    def finish(self) -> Usage:
        """The usage, once the rest of the bytes are read; calling it again reads nothing more."""
        if self._streaming:
            if self._buffer.strip():
                self._on_event(bytes(self._buffer))
        else:
            self._on_body(bytes(self._buffer))
        self._buffer.clear()
        return self.usage

    def _event_end(self) -> tuple[int, int]:
        candidates = [(self._buffer.find(sep), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
        found = [c for c in candidates if c[0] >= 0]
        return min(found) if found else (-1, 0)

    def _on_event(self, event: bytes) -> None:
        data_lines = [
            line[5:].strip() for line in event.splitlines() if line.startswith(b"data:")
        ]
        payload = b"\n".join(data_lines)
        if payload == b"[DONE]":
            self.complete = True
        if not payload or payload == b"[DONE]":
            return
        try:
            message = fastjson.loads(payload)
        except ValueError:
            return
        if isinstance(message, dict):
            self._on_message(message)

    def _on_message(self, message: dict[str, Any]) -> None:
        if self._turn is not None:
            self._turn.on_event(message)
        if self._api == "openai":
            usage = _openai_usage(message.get("usage"))
            if usage is not None:
                self.usage = usage
            if _openai_has_content(message):
                self.first_token_seen = True
            return
        kind = message.get("type")
        if self._api == "responses":
            if isinstance(kind, str) and kind.endswith(".delta"):
                self.first_token_seen = True
            elif kind in _RESPONSE_ENDS:
                self.usage = _responses_usage(message.get("response")) or self.usage
                self.complete = True
            return
        if kind == "message_start" and isinstance(message.get("message"), dict):
            self.usage = _anthropic_usage(message["message"].get("usage"), self.usage)
        elif kind == "message_delta":
            self.usage = _anthropic_usage(message.get("usage"), self.usage)
        elif kind == "content_block_delta":
            self.first_token_seen = True
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            error = message.get("error")
            self.error = str(error.get("message")) if isinstance(error, dict) else "error event"

    def _on_body(self, body: bytes) -> None:
        try:
            message = fastjson.loads(body) if body else None
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if self._turn is not None:
            self._turn.on_body(message)
        if self._api == "openai":
            self.usage = _openai_usage(message.get("usage")) or self.usage
        elif self._api == "responses":
            self.usage = _responses_usage(message) or self.usage
        else:
            self.usage = _anthropic_usage(message.get("usage"), self.usage)
