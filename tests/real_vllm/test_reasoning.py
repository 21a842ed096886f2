"""A reasoning model's stream (vLLM's `delta.reasoning`) goes through `tao proxy` as it is generated, and
its time to first token is recorded. The proxy used to hold such a stream back until its end."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import openai
import pytest

from .cluster import cluster, rows
from .conftest import VllmServer
from .metrics import samples

pytestmark = pytest.mark.real_vllm
MAX_TOKENS = 400


def _running(server: VllmServer) -> float:
    return sum(float(s["value"]) for s in samples(server.metrics(), "vllm:num_requests_running").values())


def _reasoning_stream(client: openai.OpenAI, server: VllmServer, prompt: str) -> tuple[float, float, list[Any]]:
    """Seconds to the first reasoning delta, requests the server was running at that moment, and the chunks."""
    started = time.monotonic()
    stream = client.chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": True}})
    chunks: list[Any] = []
    first, running = 0.0, -1.0
    for chunk in stream:
        chunks.append(chunk)
        delta = chunk.choices[0].delta if chunk.choices else None
        if running < 0 and delta is not None and getattr(delta, "reasoning", None):
            first = time.monotonic() - started
            running = _running(server)
    return first, running, chunks


def test_a_reasoning_stream_reaches_the_client_while_it_is_generated(tmp_path: Path, vllm_dp2: VllmServer,
                                                                     unique_prompt: str) -> None:
    assert vllm_dp2.reasoning_parser
    direct = openai.OpenAI(base_url=f"{vllm_dp2.base_url}/v1", api_key="k", max_retries=0)
    before, _, reference = _reasoning_stream(direct, vllm_dp2, "direct " + unique_prompt)
    with cluster(tmp_path, [f"d0={vllm_dp2.base_url}@0", f"d1={vllm_dp2.base_url}@1"]) as tao:
        tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
        proxy_ttft, running, chunks = _reasoning_stream(tao.openai("thinking"), vllm_dp2, unique_prompt)
    after, _, _ = _reasoning_stream(direct, vllm_dp2, "again " + unique_prompt)
    print(f"\nreasoning stream TTFT: direct {before * 1000:.0f} ms before and {after * 1000:.0f} ms after, "
          f"through tao proxy (a new session: admission included) {proxy_ttft * 1000:.0f} ms; "
          f"{MAX_TOKENS} tokens each")
    # The first reasoning delta reached the client while the server was still generating the answer.
    assert running >= 1
    for answer in (reference, chunks):
        # Thinking first (the random model may close the block later and go on with content), in pieces:
        # how many depends on how many deltas vLLM merged into a chunk (5 of 400 tokens seen under load).
        texts = [(getattr(d, "reasoning", None), d.content) for c in answer if c.choices
                 for d in [c.choices[0].delta] if getattr(d, "reasoning", None) or d.content]
        assert texts[0][0] and sum(1 for reasoning, _ in texts if reasoning) >= 2
        assert answer[-1].usage is not None and answer[-1].usage.completion_tokens == MAX_TOKENS
    [row] = rows(tao.db, "SELECT * FROM llm_requests WHERE session_id = 'thinking'")
    assert row["ttft_s"] is not None and 0 < row["ttft_s"] < row["latency_s"]
    assert row["completion_tokens"] == MAX_TOKENS
