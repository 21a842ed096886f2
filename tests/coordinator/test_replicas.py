from __future__ import annotations

import pytest

from tao_harness.config import ReplicaSpec
from tao_harness.coordinator.replicas import ReplicaRegistry, parse_vllm_metrics

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
