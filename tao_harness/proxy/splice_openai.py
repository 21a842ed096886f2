"""Continuing an OpenAI chat-completions stream on another replica.

The partial answer goes back as a final assistant message with vLLM's `continue_final_message: true` and
`add_generation_prompt: false` (the template leaves that message open, the model continues its text;
vLLM refuses both flags at once). The continuation's chunks get the client's stream id, `created` and
model; its own role chunk is dropped (the client had one), and usage moves the partial answer from the
prompt (where the continuation counted it, re-tokenized) to the completion (as many tokens as were
generated: exact when the stream carried vLLM's per-chunk usage, `continuous_usage_stats`), so the
client's usage reads as if one replica had answered.

An answer cut after its last chunk (`finish_reason` sent, the usage chunk and `[DONE]` not yet) is
closed the same way with a one-token continuation whose text is dropped: only its usage, in the new
replica's own token counts, and its `[DONE]` reach the client.
"""

from __future__ import annotations

from typing import Any

from tao_harness.proxy.splice import Continuation, Done, Unresumable, count, dicts, encode_event, events

# Fields of the first chunk every continuation chunk repeats, so the client sees one stream.
_ENVELOPE = ("id", "created", "model", "system_fingerprint")


def chat_continuation(body: dict[str, Any], seen: bytes) -> Continuation | str:
    """How to continue the answer in `seen` (the client's SSE bytes), or why it cannot be continued."""
    if body.get("n") not in (None, 1) or body.get("echo"):
        return "the request asked for several choices or an echo"
    final = dicts(body.get("messages"))[-1:]
    if body.get("continue_final_message") and not (final and isinstance(final[0].get("content"), str)):
        return "the request already continues a message that is not plain text"
    envelope: dict[str, Any] = {}
    text: list[str] = []
    ended = usage_sent = False
    generated: int | None = None
    for _, chunk in events(seen):
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            return "the replica had already reported an error"
        envelope = envelope or {key: chunk[key] for key in _ENVELOPE if key in chunk}
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            usage_sent = usage_sent or not chunk.get("choices")  # the closing usage chunk
            generated = count(usage.get("completion_tokens"))
        for choice in dicts(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if delta.get("tool_calls"):
                return "a tool call was being streamed"
            if delta.get("reasoning_content") or delta.get("reasoning"):
                return "reasoning was being streamed"
            if ended:
                return "the answer had already ended"
            text.append(delta.get("content") if isinstance(delta.get("content"), str) else "")
            ended = bool(choice.get("finish_reason"))
    answer = "".join(text)
    if ended:
        return Continuation(answer, str(body.get("model", "")),
                            lambda done: continue_request(body, answer, done, closing=True),
                            lambda done: ChatTail(envelope, done, usage_sent), generated)
    return Continuation(answer, str(body.get("model", "")),
                        lambda done: continue_request(body, answer, done),
                        lambda done: ChatSplice(envelope, done), generated)


def continue_request(body: dict[str, Any], text: str, done: Done, closing: bool = False) -> dict[str, Any]:
    """`body` asking the replica to continue `text` (`done.generated` tokens were generated already);
    `closing`: the answer is complete, one token is asked for only to get the closing usage."""
    messages = list(body.get("messages") or ())
    if body.get("continue_final_message"):  # the client's own prefill: the text extends it
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + text}
    else:
        messages.append({"role": "assistant", "content": text})
    out = {**body, "messages": messages, "add_generation_prompt": False, "continue_final_message": True}
    if closing:
        out.pop("max_completion_tokens", None)
        return out | {"max_tokens": 1, "min_tokens": 0}
    for key in ("max_tokens", "max_completion_tokens"):
        limit = count(out.get(key))
        if limit is not None:
            if limit - done.generated < 1:
                raise Unresumable("the cut answer had already used its max_tokens")
            out[key] = limit - done.generated
    if count(out.get("min_tokens")) is not None:
        out["min_tokens"] = max(0, out["min_tokens"] - done.generated)
    return out


def shift_usage(usage: dict[str, Any], done: Done) -> dict[str, Any]:
    """A continuation's OpenAI usage with the prefilled answer moved from prompt to completion."""
    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return usage
    prompt = max(0, prompt - done.sent)
    completion += done.generated
    shifted = {**usage, "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and count(details.get("cached_tokens")) is not None:
        shifted["prompt_tokens_details"] = {**details, "cached_tokens": min(prompt, details["cached_tokens"])}
    return shifted


class ChatSplice:
    """Rewrites a continuation's chat-completion chunks into the rest of the client's stream."""

    def __init__(self, envelope: dict[str, Any], done: Done) -> None:
        self._envelope = envelope
        self._done = done

    def rewrite(self, data: bytes) -> bytes:
        out = bytearray()
        for _, chunk in events(data):
            if isinstance(chunk, dict) and "error" not in chunk:
                if not self._keep(chunk):
                    continue
            out += encode_event(chunk)
        return bytes(out)

    def _keep(self, chunk: dict[str, Any]) -> bool:
        """Fixes `chunk` in place; False for the continuation's own role chunk."""
        chunk.update(self._envelope)
        if isinstance(chunk.get("usage"), dict):
            chunk["usage"] = shift_usage(chunk["usage"], self._done)
        carries = chunk.get("usage") is not None
        for choice in dicts(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            delta.pop("role", None)
            carries = carries or choice.get("finish_reason") is not None or any(delta.values())
        return carries


class ChatTail(ChatSplice):
    """The end of an answer that was complete when its replica failed: the closing continuation's usage
    (its one new token not counted; unless the client had its usage already) and `[DONE]`; its text and
    finish chunk are dropped."""

    def __init__(self, envelope: dict[str, Any], done: Done, usage_sent: bool) -> None:
        super().__init__(envelope, done)
        self._usage_sent = usage_sent

    def _keep(self, chunk: dict[str, Any]) -> bool:
        usage = chunk.get("usage")
        if not isinstance(usage, dict) or self._usage_sent:
            return False
        chunk.update(self._envelope)
        chunk["choices"] = []
        shifted = shift_usage(usage, self._done)
        if count(shifted.get("prompt_tokens")) is not None:
            generated = self._done.generated
            shifted |= {"completion_tokens": generated, "total_tokens": shifted["prompt_tokens"] + generated}
        chunk["usage"] = shifted
        return True
