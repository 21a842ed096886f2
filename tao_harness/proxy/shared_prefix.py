"""The prompt prefix a request shares with other sessions: its system prompt and tools.

Agents of one harness and task send the same system prompt and tool list at the start of every request,
and vLLM's prefix cache keeps one copy of those tokens however many sessions use them. The coordinator
reserves that copy once per replica (the `prefix_group` and `shared_tokens` of docs/snapshot.md) when it
knows which sessions share it; this names the group from what the body itself says, so generic clients
get it too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tao_harness import fastjson

# The roles of the instructions an OpenAI conversation opens with.
_INSTRUCTION_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    group: str  # a digest of the model, system prompt and tools: equal for sessions that share them
    size: int  # bytes of that prefix as the body has it (the caller converts to tokens)


def shared_prefix(body: Any, api: str) -> SharedPrefix | None:
    """The request's shared prefix, or None when it has no system prompt and no tools (or is no
    generation request body)."""
    if not isinstance(body, dict):
        return None
    if api == "anthropic":
        instructions: Any = body.get("system")
    elif api == "responses":
        instructions = body.get("instructions")
    else:
        messages = body.get("messages")
        instructions = []
        if isinstance(messages, list):
            for message in messages:
                if not (isinstance(message, dict) and message.get("role") in _INSTRUCTION_ROLES):
                    break
                if message.get("content"):
                    instructions.append(message["content"])
    tools = body.get("tools")
    if not instructions and not tools:
        return None
    try:
        text = fastjson.dumps([body.get("model"), instructions, tools]).encode()
    except (TypeError, ValueError):  # not plain JSON data: no group rather than a failed request
        return None
    return SharedPrefix(hashlib.blake2b(text, digest_size=12).hexdigest(), len(text))
