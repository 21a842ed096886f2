"""What the API-specific continuation modules share: SSE events in and out, and the `Continuation` type.

A continuation module reads the events the client already received, says whether the answer can be
continued on another replica (and if not, why), builds the request that continues it, and rewrites the
continuation's events into the rest of the client's stream (a `Splice`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

_EVENT_END = re.compile(rb"\r?\n\r?\n")
# Where continuations are sent: vLLM's chat endpoint is the one that honours `continue_final_message`.
CONTINUE_PATH = "/v1/chat/completions"


class Unresumable(Exception):
    """The answer cannot be continued on another replica; the message says why."""


class Splice(Protocol):
    def rewrite(self, events: bytes) -> bytes:
        """The client's bytes for some complete SSE events of the continuation."""


@dataclass(frozen=True, slots=True)
class Done:
    """The part of the answer the client already has, in tokens, counted two ways."""

    # As the continuation's prompt holds it: the text re-tokenized (the new replica's `/tokenize`).
    sent: int
    # As the failed replica generated it. Re-tokenizing a text need not give back the tokens that
    # produced it, so this is the count the stream itself reported where it did (per-chunk usage);
    # else `sent` stands in for it.
    generated: int


@dataclass(frozen=True)
class Continuation:
    """How to continue an answer the client already has part of."""

    # The answer text the client already received.
    text: str
    # Model name to count the text's tokens with.
    model: str
    # What the client has → the chat-completions body that continues it (Unresumable if none can).
    request: Callable[[Done], dict[str, Any]]
    # What the client has → the rewriting of the continuation's stream.
    splice: Callable[[Done], Splice]
    # Tokens generated so far, when the stream reported them (per-chunk usage); None: not reported.
    generated: int | None = None

    def done(self, sent: int) -> Done:
        return Done(sent, self.generated if self.generated is not None else sent)


def complete_length(data: bytes | bytearray) -> int:
    """Bytes of `data` up to the end of its last complete SSE event (0 if none is complete)."""
    lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def events(data: bytes) -> Iterator[tuple[str | None, Any]]:
    """(event name, payload) of each SSE event in `data`; a payload that is not JSON comes as text."""
    for block in _EVENT_END.split(data):
        name: str | None = None
        lines = []
        for line in block.splitlines():
            if line.startswith(b"event:"):
                name = line[6:].strip().decode("utf-8", "replace")
            elif line.startswith(b"data:"):
                lines.append(line[5:].strip())
        if not lines:
            continue
        payload = b"\n".join(lines)
        try:
            yield name, json.loads(payload)
        except ValueError:
            yield name, payload.decode("utf-8", "replace")


def encode_event(payload: Any, name: str | None = None) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()


def dicts(value: Any) -> list[dict[str, Any]]:
    """The dict items of `value` if it is a list (replica output is checked, never trusted blindly)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
