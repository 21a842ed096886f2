"""Streamed and whole answers through `tao proxy` (openai and anthropic SDKs) are what the server itself
answers, and the store records their usage, cached tokens included."""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai
import pytest

from .cluster import cluster, rows
from .conftest import VllmServer

pytestmark = pytest.mark.real_vllm

# Greedy decoding: the same prompt gets the same answer from the server directly and through the proxy.
GREEDY = {"temperature": 0.0}


def _messages(prompt: str) -> list[dict[str, str]]:
    # Long enough for whole 128-token cache blocks: the second request of a session hits the cache.
    return [{"role": "system", "content": "You are a careful engineer. " * 40}, {"role": "user", "content": prompt}]


def test_openai_answers_are_intact_and_their_usage_is_recorded(tmp_path: Path, vllm_single: VllmServer,
                                                             unique_prompt: str) -> None:
    direct = openai.OpenAI(base_url=f"{vllm_single.base_url}/v1", api_key="k", max_retries=0)
    reference = direct.chat.completions.create(model=vllm_single.model, messages=_messages(unique_prompt),
                                               max_tokens=40, **GREEDY)
    with cluster(tmp_path, [f"s={vllm_single.base_url}"]) as tao:
        client = tao.openai("chat")
        whole = client.chat.completions.create(model=vllm_single.model, messages=_messages(unique_prompt),
                                               max_tokens=40, **GREEDY)
        chunks = list(client.chat.completions.create(
            model=vllm_single.model, messages=_messages(unique_prompt), max_tokens=40, stream=True,
            stream_options={"include_usage": True}, **GREEDY))
    answer = reference.choices[0].message.content
    assert answer and whole.choices[0].message.content == answer
    assert whole.usage is not None and reference.usage is not None
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (reference.usage.prompt_tokens, 40)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens_details is not None
    cached = usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 128 and cached % 128 == 0  # the whole body's prefix, in blocks
    recorded = rows(tao.db, "SELECT * FROM llm_requests WHERE session_id = 'chat' ORDER BY started_at")
    assert [(r["replica"], r["status"], r["attempts"]) for r in recorded] == [("s", "ok", 1)] * 2
    assert [(r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"]) for r in recorded] == [
        (whole.usage.prompt_tokens, 40, whole.usage.prompt_tokens_details.cached_tokens),  # type: ignore[union-attr]
        (usage.prompt_tokens, 40, cached)]
    assert recorded[1]["ttft_s"] is not None and 0 < recorded[1]["ttft_s"] <= recorded[1]["latency_s"]
    attempts = rows(tao.db, "SELECT * FROM llm_attempts WHERE session_id = 'chat' ORDER BY started_at")
    assert [(a["attempt"], a["replica"], a["cached_tokens"]) for a in attempts] == [
        (1, "s", recorded[0]["cached_tokens"]), (1, "s", cached)]


def test_anthropic_answers_are_intact_and_their_usage_is_recorded(tmp_path: Path, vllm_single: VllmServer,
                                                                unique_prompt: str) -> None:
    system = "You are a careful engineer. " * 40
    ask = {"model": vllm_single.model, "max_tokens": 40, "system": system,
           "messages": [{"role": "user", "content": unique_prompt}], "extra_body": GREEDY}
    reference = anthropic.Anthropic(base_url=vllm_single.base_url, api_key="k", max_retries=0).messages.create(**ask)
    with cluster(tmp_path, [f"s={vllm_single.base_url}"]) as tao:
        client = tao.anthropic("messages")
        whole = client.messages.create(**ask)
        with client.messages.stream(**ask) as stream:
            events = list(stream)
            streamed = stream.get_final_message()
    assert [b.type for b in reference.content] == [b.type for b in whole.content] == ["text"]
    answer = reference.content[0].text  # type: ignore[union-attr]
    assert whole.content[0].text == answer  # type: ignore[union-attr]
    assert [b.type for b in streamed.content] == ["text"] and streamed.content[0].text == answer  # type: ignore[union-attr]
    assert [e.type for e in events].count("message_start") == 1 and streamed.stop_reason == "max_tokens"
    assert (streamed.usage.output_tokens, whole.usage.output_tokens) == (40, 40)
    hit = streamed.usage.cache_read_input_tokens
    assert hit is not None and hit >= 128
    prompt = streamed.usage.input_tokens + hit + (streamed.usage.cache_creation_input_tokens or 0)
    recorded = rows(tao.db, "SELECT * FROM llm_requests WHERE session_id = 'messages' ORDER BY started_at")
    assert [(r["status"], r["attempts"], r["completion_tokens"]) for r in recorded] == [("ok", 1, 40)] * 2
    assert (recorded[1]["prompt_tokens"], recorded[1]["cached_tokens"]) == (prompt, hit)
