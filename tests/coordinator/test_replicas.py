from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.config import ReplicaSpec
from tao_harness.coordinator.replicas import ReplicaRegistry, parse_vllm_metrics

Serve = Callable[[Any], Awaitable[TestServer]]  # the `serve` fixture (tests/conftest.py)

# The shape vLLM exposes (two data-parallel engines), trimmed to the families we read.
VLLM_METRICS = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="2000"} 1.0
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="3000"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
"""


def test_rank_filter_reads_only_that_engine() -> None:
    rank1 = parse_vllm_metrics(VLLM_METRICS, dp_rank=1)
    assert (rank1.capacity_tokens, rank1.running_requests, rank1.waiting_requests, rank1.kv_usage) == (
        48000, 5, 0, 0.75)
    whole = parse_vllm_metrics(VLLM_METRICS, dp_rank=None)
    assert (whole.running_requests, whole.waiting_requests, whole.kv_usage) == (8, 1, 0.5)


def test_older_usage_metric_name_is_a_fallback() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.4\n"
    sample = parse_vllm_metrics(text, None)
    assert sample.kv_usage == pytest.approx(0.4) and sample.capacity_tokens is None


def test_a_host_tier_is_read_and_logged_once_when_the_planner_is_not_told(caplog: pytest.LogCaptureFixture) -> None:
    text = ('vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100",kv_offloading_size="64.0",'
            'kv_offloading_backend="native"} 1.0\n')
    sample = parse_vllm_metrics(text, None)
    assert sample.host_tier_gib == 64.0
    assert parse_vllm_metrics(VLLM_METRICS, None).host_tier_gib is None
    assert parse_vllm_metrics(text.replace('"64.0"', '"None"'), None).host_tier_gib is None
    specs = (ReplicaSpec(id="r0", base_url="http://x"), ReplicaSpec(id="r1", base_url="http://y"))
    registry = ReplicaRegistry(specs)
    for replica in ("r0", "r1", "r0"):
        registry.record_sample(replica, sample)
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "host_tokens_per_s" in caplog.records[0].message and len(caplog.records) == 1
    caplog.clear()
    ReplicaRegistry(specs, host_tier_configured=True).record_sample("r0", sample)
    assert not caplog.records


def test_not_prometheus_text_raises() -> None:
    with pytest.raises(ValueError):
        parse_vllm_metrics("<html>not metrics {</html>\n", None)


def test_down_after_consecutive_failures_and_back_up() -> None:
    registry = ReplicaRegistry((ReplicaSpec(id="r0", base_url="http://x", capacity_tokens=1000),), down_after=2)
    assert registry.up()[0].id == "r0"
    assert registry.record_failure("r0", "refused") is False
    assert registry.record_failure("r0", "refused") is True
    assert registry.up() == ()
    sample = parse_vllm_metrics(VLLM_METRICS, 0)
    assert registry.record_sample("r0", sample) is True
    # Configured capacity wins over the discovered one.
    assert registry.loads["r0"].capacity_tokens == 1000 and registry.loads["r0"].running_requests == 3


# vLLM 0.32 with --data-parallel-size 2 (labels trimmed): num_gpu_blocks is the sum over both engines,
# repeated on each; kv_cache_size_tokens is one engine's cache.
VLLM_DP2_CACHE_CONFIG = """\
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",enable_prefix_caching="True",engine="0",kv_cache_size_tokens="524288",num_gpu_blocks="8192"} 1.0
vllm:cache_config_info{block_size="128",enable_prefix_caching="True",engine="1",kv_cache_size_tokens="524288",num_gpu_blocks="8192"} 1.0
"""


def test_a_data_parallel_rank_has_one_engines_capacity_not_the_sum() -> None:
    assert parse_vllm_metrics(VLLM_DP2_CACHE_CONFIG, dp_rank=1).capacity_tokens == 524288
    assert parse_vllm_metrics(VLLM_DP2_CACHE_CONFIG, dp_rank=None).capacity_tokens == 2 * 524288


def test_the_registry_notes_a_replica_whose_usage_never_has_cached_tokens(caplog: pytest.LogCaptureFixture) -> None:
    registry = ReplicaRegistry((ReplicaSpec(id="r0", base_url="http://x"), ReplicaSpec(id="r1", base_url="http://y")))
    registry.record_cache_report("r0", False)
    registry.record_cache_report("r0", False)
    registry.record_cache_report("r1", False)
    registry.record_cache_report("r1", True)  # an older vLLM omits the count on a miss: one hit settles it
    registry.record_cache_report("r1", False)
    assert registry.reports_cached_tokens == {"r0": False, "r1": True}
    warnings = [r.getMessage() for r in caplog.records if "reports no cached prompt tokens" in r.getMessage()]
    assert len(warnings) == 2 and "--enable-prompt-tokens-details" in warnings[0]


async def test_a_replica_slow_to_answer_its_polls_is_not_marked_down(serve: Serve) -> None:
    # Under load a replica may answer /metrics late: that is a busy replica, and marking it down would send
    # every session holding it back to the pool. Timeouts count only once it has been silent for long.
    answered: list[int] = []

    async def metrics(_: web.Request) -> web.Response:
        if answered:
            await asyncio.sleep(3600)
        answered.append(1)
        return web.Response(text=VLLM_METRICS)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    url = str((await serve(app)).make_url("")).rstrip("/")
    registry = ReplicaRegistry((ReplicaSpec(id="r0", base_url=url),), down_after=2)
    assert registry.load_age_s("r0") is None
    async with aiohttp.ClientSession() as http:
        assert await registry.poll_once(http) == []
        for _ in range(3):
            assert await registry.poll_once(http, timeout_s=0.1) == []
        assert not registry.loads["r0"].down
        assert registry.load_age_s("r0") >= 0.3  # the kept sample is as old as the three timeouts
        registry.unresponsive_s = 0.0  # silent for longer than it may be: now the timeouts count
        assert await registry.poll_once(http, timeout_s=0.1) == []
        assert await registry.poll_once(http, timeout_s=0.1) == ["r0"]
    assert registry.loads["r0"].down
