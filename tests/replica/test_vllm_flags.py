"""The vLLM serve flags the replica emulates: --enable-prompt-tokens-details off, and the tokenizer routes."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tao_harness.replica.conformance import sse_payloads

from .conftest import StartReplica

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
ANTHROPIC = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}


async def _post(url: str, body: Any) -> str:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        assert response.status == 200, await response.text()
        return await response.text()


async def test_without_prompt_tokens_details_no_cache_figures_are_reported(start_replica: StartReplica) -> None:
    replica = await start_replica(enable_prompt_tokens_details=False)
    whole = json.loads(await _post(f"{replica.url}/v1/chat/completions", CHAT))
    assert whole["usage"]["prompt_tokens_details"] is None  # vLLM: null in a whole response
    streamed = await _post(f"{replica.url}/v1/chat/completions",
                           CHAT | {"stream": True, "stream_options": {"include_usage": True}})
    usage = [json.loads(d)["usage"] for _, d in sse_payloads(streamed) if d != "[DONE]" and '"usage"' in d]
    assert len(usage) == 1 and "prompt_tokens_details" not in usage[0]  # ...and absent when streamed
    events = sse_payloads(await _post(f"{replica.url}/v1/messages", ANTHROPIC | {"stream": True}))
    delta = next(json.loads(d) for name, d in events if name == "message_delta")
    assert set(delta["usage"]) == {"input_tokens", "output_tokens"}


async def test_detokenize_spells_back_what_tokenize_handed_out(start_replica: StartReplica) -> None:
    replica = await start_replica()
    text = "def add(a, b):\n    return a + b"
    tokens = json.loads(await _post(f"{replica.url}/tokenize", {"prompt": text, "add_special_tokens": False}))
    back = json.loads(await _post(f"{replica.url}/detokenize", {"tokens": tokens["tokens"]}))
    assert back["prompt"] == text
    rendered = json.loads(await _post(f"{replica.url}/tokenize", {"messages": CHAT["messages"]}))
    plain = json.loads(await _post(f"{replica.url}/tokenize", {"prompt": "hi"}))
    assert rendered["count"] > plain["count"]  # the chat template's role markers are counted too
