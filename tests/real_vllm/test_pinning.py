"""Pinning by `X-data-parallel-rank`: a session's requests run on its rank, whose prefix cache then holds
its prompt; the other rank's cache does not (per-rank prefix caches prove where requests ran)."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from .cluster import cluster, rows
from .conftest import VllmServer
from .metrics import value

pytestmark = pytest.mark.real_vllm
HITS = "vllm:prefix_cache_hits_total"


def test_a_session_runs_on_its_rank_and_only_that_ranks_cache_holds_it(
        tmp_path: Path, vllm_dp2: VllmServer, unique_prompt: str) -> None:
    messages = [{"role": "system", "content": "You are a careful engineer. " * 60},
                {"role": "user", "content": unique_prompt}]
    with cluster(tmp_path, [f"d0={vllm_dp2.base_url}@0", f"d1={vllm_dp2.base_url}@1"]) as tao:
        tao.wait_for("capacities", lambda r: all(x["capacity_tokens"] for x in r.values()))
        client = tao.openai("pinned")
        for _ in range(2):
            list(client.chat.completions.create(model=vllm_dp2.model, messages=messages, max_tokens=2,
                                                stream=True, stream_options={"include_usage": True}))
        before = vllm_dp2.metrics()
        list(client.chat.completions.create(model=vllm_dp2.model, messages=messages, max_tokens=2, stream=True,
                                            stream_options={"include_usage": True}))
        after = vllm_dp2.metrics()
    replicas = {r["replica"] for r in rows(tao.db, "SELECT replica FROM llm_requests WHERE session_id = 'pinned'")}
    assert len(replicas) == 1
    rank = int(replicas.pop()[1])
    other = 1 - rank
    assert value(after, HITS, rank) - value(before, HITS, rank) >= 256  # the shared system prompt, in blocks
    assert value(after, HITS, other) == value(before, HITS, other)
    # The same prompt pinned straight to the other rank finds nothing there: that rank never saw it.
    direct = openai.OpenAI(base_url=f"{vllm_dp2.base_url}/v1", api_key="k", max_retries=0)
    list(direct.chat.completions.create(model=vllm_dp2.model, messages=messages, max_tokens=2, stream=True,
                                        extra_headers={"X-data-parallel-rank": str(other)}))
    assert value(vllm_dp2.metrics(), HITS, other) == value(after, HITS, other)
