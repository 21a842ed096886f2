"""Sessions told apart by their conversation, for requests that name their session nowhere.

An agent sends its whole conversation with every request: request n+1's message list is request n's,
then the reply it got, then the tool results or the user's next message. So a chain of digests over the
message list — d_k = H(d_{k-1}, message k) — names every prefix of a conversation, and the proxy keeps,
for each request it forwarded, the digest of its whole list (the request key) and that list extended by
the reply (the answer key). A new request belongs to the session of its longest prefix the proxy has
seen: normally the previous answer key, or the previous request key when the client sent the reply back
in another form. Threads of one process and pooled connections do not matter; nothing but the messages
is read.

A message's digest is taken over what a client sends back unchanged: its role, its text (stripped), and
the ids of the tool calls it makes or answers. Cache markers, reasoning and thinking blocks, a tool
result's content and any other field are left out, since clients add or drop them between requests
(Claude Code moves its `cache_control` marker every turn).

Identical starts: sessions whose messages are the same (the same task sent twice) cannot be told apart
until their replies differ. A request whose longest known prefix belongs only to sessions with a
request in flight starts a new session (two sessions sent the same first request at once); one that
matches an idle session continues it, so a retried request stays in its session, and so do two sessions
whose conversations are still identical (their next requests pair up with them one each, while in
flight). A session whose conversation was rewound (a shorter prefix extended differently) stays itself.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tao_harness.proxy.turns import Turn
from tao_harness.proxy.usage import ApiKind

# Digests remembered, least recently used forgotten first (two per request: ~100 bytes each).
MAX_KEYS = 65536
_ROOT = b"tao-conversation"
# Content parts that are text: Anthropic's and chat's `text`, the Responses API's input and output text.
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call"})


def _digest(previous: bytes, part: str) -> bytes:
    return hashlib.blake2b(part.encode("utf-8", "surrogatepass"), digest_size=16, key=previous).digest()


def _block_part(block: Any) -> str:
    if isinstance(block, str):
        return block.strip()
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind in _TEXT_PARTS:
        text = block.get("text")
        return text.strip() if isinstance(text, str) else ""
    if kind == "tool_use":
        return f"\x00call:{block.get('id')}"
    if kind == "tool_result":
        return f"\x00result:{block.get('tool_use_id')}"
    if kind in ("thinking", "redacted_thinking"):
        return ""
    return f"\x00{kind}"


def message_part(message: Any) -> str:
    """What of a message its digest covers (see the module's doc)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(_block_part(block) for block in content)
    else:
        text = content.strip() if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        text += "".join(f"\x00call:{call.get('id')}" for call in calls if isinstance(call, dict))
    if isinstance(message.get("tool_call_id"), str):
        text += f"\x00result:{message['tool_call_id']}"
    return f"{message.get('role')}\x00{text}"


def conversation_messages(body: Any, api: ApiKind) -> list[Any] | None:
    """The request's conversation as a message list, None without one: its `messages`, or a Responses
    `input`, whose items of one reply (its message and calls; reasoning left out) become one assistant
    message, as `turn_part` sees the reply."""
    if not isinstance(body, dict):
        return None
    if api != "responses":
        messages = body.get("messages")
        return messages if isinstance(messages, list) and messages else None
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        return None
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") == "reasoning":
            continue
        reply = out[-1] if out and out[-1]["role"] == "assistant" else None
        if item.get("type") in _CALL_ITEMS or item.get("role") == "assistant":
            if reply is None:
                reply = {"role": "assistant", "content": [], "tool_calls": []}
                out.append(reply)
            if item.get("type") in _CALL_ITEMS:
                reply["tool_calls"].append({"id": item.get("call_id")})
            else:
                content = item.get("content")
                reply["content"] += content if isinstance(content, list) else [content]
        elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "tool_call_id": item.get("call_id")})
        else:
            out.append({"role": item.get("role"), "content": item.get("content")})
    return out


def turn_part(turn: Turn) -> str:
    """The digest part of the assistant message a client sends back for `turn`."""
    return "assistant\x00" + turn.text.strip() + "".join(f"\x00call:{call.call_id}" for call in turn.calls)


def chain(messages: list[Any]) -> list[bytes]:
    """d_1 ... d_n of the message list."""
    digests, previous = [], _ROOT
    for message in messages:
        previous = _digest(previous, message_part(message))
        digests.append(previous)
    return digests


@dataclass(slots=True)
class Asked:
    """One request of a conversation."""

    session: str
    key: bytes  # the digest of its whole message list
    open: bool = True  # in flight: neither answered nor ended yet


class Conversations:
    """Which session each known conversation prefix belongs to, and which sessions have a request in flight."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._keys: OrderedDict[bytes, list[str]] = OrderedDict()
        self._in_flight: dict[str, int] = {}
        self._max_keys = max_keys

    def begin(self, messages: list[Any]) -> tuple[Asked, bool]:
        """The request with `messages` (its session and key), and whether its session is new; the session
        counts as in flight until the request is `answered` or `end`s."""
        digests = chain(messages)
        session = None
        for digest in reversed(digests):
            owners = self._keys.get(digest)
            if owners:
                session = next((s for s in owners if not self._in_flight.get(s)), None)
                break
        new = session is None
        if session is None:
            session = f"conv-{secrets.token_hex(8)}"
        asked = Asked(session, digests[-1] if digests else _ROOT)
        self._remember(asked.key, session)
        self._in_flight[session] = self._in_flight.get(session, 0) + 1
        return asked, new

    def answered(self, asked: Asked, turn: Turn) -> None:
        """The request got `turn`, whole: the next request of the conversation extends both, and may come
        as soon as the client has the reply's last bytes (the session is no longer in flight)."""
        self._remember(_digest(asked.key, turn_part(turn)), asked.session)
        self.end(asked)

    def end(self, asked: Asked) -> None:
        """The request is over, answered or not (once per request; again does nothing)."""
        if not asked.open:
            return
        asked.open = False
        left = self._in_flight.get(asked.session, 0) - 1
        if left > 0:
            self._in_flight[asked.session] = left
        else:
            self._in_flight.pop(asked.session, None)

    def _remember(self, key: bytes, session: str) -> None:
        owners = self._keys.get(key)
        if owners is None:
            self._keys[key] = [session]
        else:
            self._keys.move_to_end(key)
            if session not in owners:
                owners.append(session)
        if len(self._keys) > self._max_keys:
            self._keys.popitem(last=False)
