"""The host KV tier (vLLM's native offloading connector): stores, LRU eviction, loads and their cost."""

from __future__ import annotations

import pytest

from engine_driver import distinct, small_engine, turn
from tao_harness.engine.host_tier import HostTier

GIB = 2**30
BLOCK_BYTES = 128 * 1024 * 16  # llama3-8b-1xh100: 128 KiB per token, 16-token blocks


def test_tier_keeps_the_most_recent_blocks_and_a_finished_prompt_head_longest() -> None:
    tier = HostTier(num_blocks=4, block_bytes=1, bandwidth_bytes_per_s=1.0)
    tier.store([1, 2, 3])
    tier.store([2, 4])  # 2 is resident: skipped, not refreshed
    tier.finished([1, 2])  # the finished request's head (1) becomes the most recent
    tier.store([5])  # full: evicts the least recent, 3
    assert tier.lookup([1, 2, 3], 0, 3) == 2
    assert tier.lookup([1, 2, 4, 5], 0, 4) == 4
    tier.store([6])  # next least recent: 4 (stored before the finish refreshed 2 and 1)
    assert tier.lookup([4], 0, 1) == 0
    assert tier.stats().resident_blocks == 4


def test_lookup_counts_only_consecutive_blocks_after_the_start() -> None:
    tier = HostTier(num_blocks=8, block_bytes=1, bandwidth_bytes_per_s=1.0)
    tier.store([10, 11, 13])
    assert tier.lookup([10, 11, 12, 13], 0, 4) == 2
    assert tier.lookup([10, 11, 12, 13], 1, 4) == 1
    assert tier.lookup([10, 11, 12, 13], 2, 4) == 0
    assert tier.lookup([10, 11, 12, 13], 0, 1) == 1  # stops at `stop`


def _evict_from_gpu(engine, now: float) -> float:  # type: ignore[no-untyped-def]
    """Run another prompt that takes every GPU block, so earlier contexts survive only in host memory."""
    end, _, _ = turn(engine, "flood", distinct(900_000, 63 * 16), 16, now)  # all 64 blocks
    return end


@pytest.mark.parametrize("host_gib", [None, 1.0])
def test_a_context_evicted_from_the_gpu_comes_back_from_host_memory(host_gib: float | None) -> None:
    engine = small_engine(64, kv_offloading_size_gib=host_gib)
    prompt = distinct(0, 40 * 16)
    end, first, _ = turn(engine, "a1", prompt, 1)
    assert first.cached_tokens == 0
    end = _evict_from_gpu(engine, end)
    start = end
    end, second, _ = turn(engine, "a2", prompt + distinct(50_000, 32), 1, start)
    metrics = engine.metrics()
    if host_gib is None:
        assert second.cached_tokens == 0
        assert metrics.host is None
        return
    assert second.cached_tokens == 40 * 16  # the first prompt's 40 blocks, loaded from host memory
    assert metrics.host is not None and metrics.host.hit_tokens == 40 * 16
    assert metrics.host.loaded_bytes == 40 * BLOCK_BYTES
    # The copy takes 40 blocks x 2 MiB at 50 GB/s before the request computes anything.
    assert end - start >= 40 * BLOCK_BYTES / 50e9
    assert metrics.prefix_cache_hits == 0  # vllm:prefix_cache_hits counts the GPU's own hits only


def test_a_load_is_faster_than_recomputing_the_context() -> None:
    prompt = distinct(0, 56 * 16)
    durations = {}
    for host_gib in (None, 1.0):
        engine = small_engine(64, kv_offloading_size_gib=host_gib)
        end, _, _ = turn(engine, "a1", prompt, 1)
        end = _evict_from_gpu(engine, end)
        finished, _, _ = turn(engine, "a2", prompt + distinct(50_000, 16), 1, end)
        durations[host_gib] = finished - end
    assert durations[1.0] < durations[None]


def test_only_prompt_blocks_are_stored_and_the_tier_evicts_when_full() -> None:
    # 0.05 GiB holds 25 blocks of 2 MiB.
    engine = small_engine(64, kv_offloading_size_gib=0.05)
    end, _, _ = turn(engine, "a", distinct(0, 10 * 16), 8 * 16)  # 128 generated tokens are never stored
    host = engine.metrics().host
    assert host is not None and host.num_blocks == 25
    assert host.resident_blocks == 10 and host.stored_bytes == 10 * BLOCK_BYTES
    turn(engine, "b", distinct(10_000, 30 * 16), 1, end)
    host = engine.metrics().host
    assert host is not None and host.resident_blocks == 25  # 40 offered, the 15 least recent evicted


def test_a_loading_request_waits_and_counts_as_waiting() -> None:
    engine = small_engine(64, kv_offloading_size_gib=1.0)
    prompt = distinct(0, 40 * 16)
    end, _, _ = turn(engine, "a1", prompt, 1)
    end = _evict_from_gpu(engine, end)
    from tao_harness.engine import EngineRequest

    engine.add_request(EngineRequest("a2", prompt + distinct(50_000, 16), 1), end)
    out = engine.step(end)
    assert out.num_steps == 0 and not out.outputs  # admitted to the copy, nothing to compute yet
    assert engine.metrics().num_waiting == 1 and engine.has_unfinished_requests()
    wakeup = engine.next_wakeup()
    assert wakeup is not None and wakeup == pytest.approx(end + 40 * BLOCK_BYTES / 50e9)
    out = engine.step(wakeup)
    assert out.num_steps == 1 and out.outputs[0].cached_tokens == 40 * 16
