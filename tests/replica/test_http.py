"""HTTP surface without SDKs: /metrics, data-parallel ranks, error shapes, time scale, client disconnects."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tao_harness.engine.api import StepOutput
from tao_harness.engine.core import EngineCore
from tao_harness.replica.conformance import METRIC_SERIES
from tao_harness.replica.keys import DRIVERS

from .conftest import RunningReplica, StartReplica

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hello " * 200}]}
VLLM_NAMES = set(METRIC_SERIES)  # the series the conformance probe compares with real vLLM


async def _metrics(replica: RunningReplica) -> dict[tuple[str, str], float]:
    """(sample name, engine label) -> value, summed over other labels (e.g. finished_reason)."""
    async with aiohttp.ClientSession() as http, http.get(f"{replica.url}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    values: dict[tuple[str, str], float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, sample.labels.get("engine", ""))] += sample.value
    return values


async def _post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as response:
        return response.status, await response.json()


async def test_metrics_use_vllm_names_and_the_rank_header_pins_requests(start_replica: StartReplica) -> None:
    replica = await start_replica(data_parallel_size=2, num_gpu_blocks=500)
    before = await _metrics(replica)
    assert {name for name, _ in before} >= VLLM_NAMES
    info = [
        s
        for f in text_string_to_metric_families(await _raw(replica, "/metrics"))
        for s in f.samples
        if s.name == "vllm:cache_config_info"
    ]
    # vLLM's data-parallel semantics: num_gpu_blocks is the sum over engines, kv_cache_size_tokens per engine.
    labels = {(s.labels["engine"], s.labels["num_gpu_blocks"], s.labels["kv_cache_size_tokens"]) for s in info}
    assert labels == {("0", "1000", "8000"), ("1", "1000", "8000")}
    for _ in range(2):
        status, _body = await _post(f"{replica.url}/v1/chat/completions", CHAT, {"X-data-parallel-rank": "1"})
        assert status == 200
    after = await _metrics(replica)
    queries = "vllm:prefix_cache_queries_total"
    assert after[(queries, "0")] == before[(queries, "0")] == 0
    assert after[(queries, "1")] > 0 and after[("vllm:prefix_cache_hits_total", "1")] > 0  # second one hit
    assert after[("vllm:request_success_total", "1")] == 2


async def test_a_host_tier_shows_in_cache_config_and_offload_metrics(start_replica: StartReplica) -> None:
    replica = await start_replica(num_gpu_blocks=500, kv_offloading_size=2.0)
    info = [s for f in text_string_to_metric_families(await _raw(replica, "/metrics")) for s in f.samples
            if s.name == "vllm:cache_config_info"]
    assert [(s.labels["kv_offloading_size"], s.labels["kv_offloading_backend"]) for s in info] == [("2.0", "native")]
    assert (await _post(f"{replica.url}/v1/chat/completions", CHAT))[0] == 200
    after = await _metrics(replica)
    assert after[("vllm:kv_offload_store_bytes_total", "0")] > 0  # the prompt's full blocks were copied out
    assert after[("vllm:external_prefix_cache_queries_total", "0")] > 0
    assert after[("vllm:external_prefix_cache_hits_total", "0")] == 0  # the GPU still holds them
    assert 0 < after[("vllm:kv_offload_cpu_cache_usage_perc", "0")] < 1


async def test_without_a_host_tier_no_offload_series_are_shown(start_replica: StartReplica) -> None:
    replica = await start_replica()
    text = await _raw(replica, "/metrics")
    assert "vllm:kv_offload_" not in text and 'kv_offloading_size="None"' in text


async def _raw(replica: RunningReplica, path: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{replica.url}{path}") as response:
        return await response.text()


async def test_without_the_header_requests_go_round_robin(start_replica: StartReplica) -> None:
    replica = await start_replica(data_parallel_size=3)
    for _ in range(3):
        assert (await _post(f"{replica.url}/v1/chat/completions", CHAT))[0] == 200
    after = await _metrics(replica)
    assert [after[("vllm:request_success_total", str(rank))] for rank in range(3)] == [1, 1, 1]


@pytest.mark.parametrize(
    ("path", "body", "headers", "needle"),
    [
        ("/v1/chat/completions", "{not json", {}, "not valid JSON"),
        ("/v1/chat/completions", {"model": "m", "messages": "hi"}, {}, "messages"),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "robot", "content": "x"}]}, {}, "role"),
        ("/v1/chat/completions", CHAT, {"X-data-parallel-rank": "7"}, "out of range"),
        ("/v1/chat/completions", CHAT, {"X-data-parallel-rank": "one"}, "must be an integer"),
        ("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 0}, {}, "max_tokens"),
        ("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, {}, "max_tokens"),
        ("/v1/messages?beta=true", [1, 2], {}, "JSON object"),
        ("/v1/messages/count_tokens", {"model": "m"}, {}, "messages"),
        ("/v1/chat/completions", "[" * 100_000 + "]" * 100_000, {}, "nested too deeply"),
        # vLLM refuses a max_tokens past the context instead of generating it (REAL-VLLM fact 12), in its words
        ("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 10**9}, {},
         "max_tokens=1000000000 cannot be greater than max_model_len=270000"),
        ("/v1/chat/completions", CHAT | {"max_tokens": 10**9, "ignore_eos": True}, {}, "max_tokens=1000000000"),
        ("/v1/messages", {"model": "m", "max_tokens": 10**9, "messages": [{"role": "user", "content": "x"}]}, {},
         "max_completion_tokens=1000000000 cannot be greater than max_model_len=270000"),
    ],
)
async def test_bad_requests_get_the_apis_error_shape(
    start_replica: StartReplica, path: str, body: Any, headers: dict[str, str], needle: str
) -> None:
    replica = await start_replica()
    data = body if isinstance(body, str) else None
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{replica.url}{path}", data=data, json=None if data else body, headers=headers
        ) as response,
    ):
        assert response.status == 400
        payload = await response.json()
    if path.startswith("/v1/messages"):
        assert payload["type"] == "error" and payload["error"]["type"] == "BadRequestError"
    else:
        assert payload["error"]["type"] == "BadRequestError" and payload["error"]["code"] == 400
    assert needle in payload["error"]["message"]


async def test_prompt_larger_than_the_kv_cache_is_a_400_and_unknown_paths_404(
    start_replica: StartReplica,
) -> None:
    replica = await start_replica(num_gpu_blocks=4)
    status, payload = await _post(f"{replica.url}/v1/chat/completions", CHAT | {"stream": True})
    assert status == 400 and "can never fit" in payload["error"]["message"]
    async with aiohttp.ClientSession() as http, http.get(f"{replica.url}/v1/nothing") as response:
        assert response.status == 404 and (await response.json())["error"]["code"] == 404
    async with aiohttp.ClientSession() as http, http.get(f"{replica.url}/health") as response:
        assert response.status == 200


async def _timed_request(replica: RunningReplica) -> float:
    body = {"model": "m", "prompt": "x", "max_tokens": 100}
    started = time.perf_counter()
    status, _ = await _post(f"{replica.url}/v1/completions", body)
    assert status == 200
    return time.perf_counter() - started


async def test_time_scale_maps_engine_time_to_wall_time(start_replica: StartReplica) -> None:
    # llama3-8b-1xh100 costs ≥ 5.75 ms per decode step, so 100 tokens take ≥ 0.575 engine seconds.
    slow = await _timed_request(await start_replica(profile="llama3-8b-1xh100", time_scale=1.0))
    fast = await _timed_request(await start_replica(profile="llama3-8b-1xh100", time_scale=100.0))
    assert slow >= 0.575 and fast >= 0.575 / 100
    assert fast < slow / 2


async def test_a_client_that_disconnects_aborts_its_request(start_replica: StartReplica) -> None:
    replica = await start_replica(time_scale=1.0)
    body = {"model": "m", "prompt": "x", "max_tokens": 2000, "stream": True}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{replica.url}/v1/completions", json=body) as response,
    ):
        assert response.status == 200
        await response.content.readline()
        assert replica.engine_metrics().num_running == 1
    for _ in range(100):
        if replica.engine_metrics().num_running == 0:
            break
        await asyncio.sleep(0.02)
    assert replica.engine_metrics().num_running == 0


async def test_first_token_waits_for_the_prefill(start_replica: StartReplica) -> None:
    # llama3-8b-1xh100 prefill: 5.75 ms + 17.25 µs per uncached token → ≥ 0.14 s for an 8000-token prompt.
    replica = await start_replica(profile="llama3-8b-1xh100", time_scale=1.0)
    body = {"model": "m", "prompt": "word " * 8000, "max_tokens": 2, "stream": True}
    started = time.perf_counter()
    url = f"{replica.url}/v1/completions"
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        async for line in response.content:
            if line.startswith(b"data: {"):
                break
    assert time.perf_counter() - started >= 0.14


async def test_a_reply_longer_than_the_context_is_cut_with_length(start_replica: StartReplica) -> None:
    replica = await start_replica(num_gpu_blocks=12)  # 192 tokens of context in all
    bash = {"name": "bash", "parameters": {"properties": {"command": {}}}}
    tools = [{"type": "function", "function": bash}]
    body = {"model": "m", "messages": [{"role": "user", "content": "go " * 100}], "tools": tools}
    status, payload = await _post(f"{replica.url}/v1/chat/completions", body)
    assert status == 200
    assert payload["choices"][0]["finish_reason"] == "length"
    assert payload["usage"]["prompt_tokens"] + payload["usage"]["completion_tokens"] == 192


class _BrokenEngine(EngineCore):
    """An engine whose step raises, as a bug in the engine model would."""

    def step(self, now: float, until: float | None = None) -> StepOutput:
        raise RuntimeError("block table corrupted")


async def test_an_engine_failure_is_a_500_not_a_hang(start_replica: StartReplica) -> None:
    replica = await start_replica()
    driver = replica.app[DRIVERS][0]
    driver.engine = _BrokenEngine(driver.engine.config)
    status, payload = await _post(f"{replica.url}/v1/chat/completions", CHAT)
    assert status == 500 and "block table corrupted" in payload["error"]["message"]
    body = {"model": "m", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{replica.url}/v1/messages", json=body) as response,
    ):
        text = await response.text()
    assert response.status == 200 and "event: error" in text and "InternalServerError" in text


async def test_a_context_long_reply_does_not_stall_the_server(start_replica: StartReplica) -> None:
    # The longest legal ignore_eos reply (the whole context) takes seconds to script: meanwhile the
    # server keeps answering. Checked by order, not by time: /health answers before that stream starts.
    replica = await start_replica(time_scale=1000.0)
    body = CHAT | {"max_tokens": 269_000, "ignore_eos": True, "stream": True}
    order: list[str] = []
    async with aiohttp.ClientSession() as http:

        async def long_stream() -> None:
            async with http.post(f"{replica.url}/v1/chat/completions", json=body) as response:
                order.append(f"stream {response.status}")

        task = asyncio.create_task(long_stream())
        await asyncio.sleep(0.3)  # the request is in and being scripted
        async with http.get(f"{replica.url}/health") as health:
            order.append(f"health {health.status}")
        await task
    assert order == ["health 200", "stream 200"]
