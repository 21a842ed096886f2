"""Exact token counts behind a streamed chat completion whose client asked for the closing usage only.

When a replica dies mid-answer, the continuation must know how many tokens the dead replica generated
(for the rest of `max_tokens`, and for the usage the client is told). Re-tokenizing the text already
sent is only an estimate: a text need not tokenize back into the tokens that produced it (on the tier's
tiny model 300 generated tokens re-tokenized to 267). vLLM counts exactly, on every chunk, with
`stream_options.continuous_usage_stats`, and only together with `include_usage`.

So a streamed chat completion whose client asked for `include_usage` alone is sent upstream with
`continuous_usage_stats` as well, and the per-chunk usage is taken out again on the way to the client,
which receives what vLLM would have sent it. The proxy keeps the counts (the relay's record of the
stream). A client that asks for no usage at all gets its stream untouched (vLLM would then put its
`system_fingerprint` on a different chunk), and its continuation's count stays the re-tokenized
estimate; so does an Anthropic stream's (vLLM's /v1/messages reports usage only at its end).
"""

from __future__ import annotations

import json
import re
from typing import Any

_USAGE = re.compile(rb',\s*"usage"\s*:\s*\{')
_NO_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')


def with_running_usage(body: dict[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """`body` asking vLLM for usage on every chunk too, and its JSON; None when the client did not ask
    for the closing usage alone, or when the body cannot be written back exactly as the client sent it
    (NaN or infinite numbers, which the replica should judge as they came)."""
    options = body.get("stream_options")
    if not (isinstance(options, dict) and options.get("include_usage") is True
            and not options.get("continuous_usage_stats")):
        return None
    asked = body | {"stream_options": options | {"continuous_usage_stats": True}}
    try:
        # The standard library: it refuses what it cannot write back as it came (msgspec writes NaN as
        # null) and escapes lone surrogates.
        return asked, json.dumps(asked, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        return None


def strip_running_usage(events: bytes) -> bytes:
    """`events` (complete SSE events of chat-completion chunks) without the usage of each chunk that has
    choices; the closing usage chunk (no choices) keeps its usage."""
    if _USAGE.search(events) is None:
        return events
    return b"\n\n".join(event if _NO_CHOICES.search(event) else _without_usage(event)
                         for event in events.split(b"\n\n"))


def _without_usage(event: bytes) -> bytes:
    found = _USAGE.search(event)
    if found is None:
        return event
    # The usage object holds numbers and at most one level of nested objects: match its braces.
    start, depth, at = found.start(), 1, found.end()
    while depth:
        opening, closing = event.find(b"{", at), event.find(b"}", at)
        if closing < 0:
            return event  # not a whole object: leave the event as it came
        if 0 <= opening < closing:
            depth, at = depth + 1, opening + 1
        else:
            depth, at = depth - 1, closing + 1
    return event[:start] + event[at:]
