"""Step-time formulas of each named profile against values computed by hand from the published fits."""

from __future__ import annotations

import pytest

from tao_harness.engine import PROFILES, get_profile


def test_vllm_router_reference_cold_prefill_matches_its_formula() -> None:
    profile = get_profile("vllm-router-ref")
    # 0.066 s + 0.0570 s per 1k tokens + 0.00441 s per (1k tokens)^2, for a cold 4k-token prompt
    assert profile.step_time_s([(4000, 0)], []) == pytest.approx(0.066 + 0.0570 * 4 + 0.00441 * 16)


def test_vllm_router_reference_decode_step_matches_its_formula() -> None:
    profile = get_profile("vllm-router-ref")
    # 10.6 ms + 0.419 ms per running request + 1.42e-7 s per context token, summed over the batch
    expected = 0.0106 + 3 * 0.000419 + 1.42e-7 * (1000 + 2000 + 30000)
    assert profile.step_time_s([], [1000, 2000, 30000]) == pytest.approx(expected)


def test_mixed_step_adds_prefill_and_decode_shares() -> None:
    profile = get_profile("vllm-router-ref")
    mixed = profile.step_time_s([(512, 1024)], [5000])
    assert mixed == pytest.approx(profile.step_time_s([(512, 1024)], []) + profile.step_time_s([], [5000]))


def test_llama3_8b_is_the_blis_fit() -> None:
    profile = get_profile("llama3-8b-1xh100")
    # step_us = 5753 + 17.25 * uncached prefill tokens + 6.0 * decode tokens
    assert profile.step_time_s([(1024, 0), (100, 5000)], [10] * 7) == pytest.approx(
        (5753 + 17.25 * 1124 + 6.0 * 7) * 1e-6
    )
    assert profile.step_time_s([], [123]) == pytest.approx((5753 + 6.0) * 1e-6)
    assert profile.num_gpu_blocks == 29_205


def test_qwen3_32b_constants_and_kv_capacity() -> None:
    profile = get_profile("qwen3-32b-2xh100")
    assert profile.num_gpu_blocks * 16 == pytest.approx(270_000, rel=0.01)
    # 8k cold prefill: 12.9 ms + 8192/19000 s + (8192^2/2) * (1/19000/30000) s
    expected = 0.0129 + 8192 / 19000 + 8192**2 / 2 / 19000 / 30000
    assert profile.step_time_s([(8192, 0)], []) == pytest.approx(expected)
    # attention at 30k context doubles the per-token cost of one more prefill token (within 1/60000)
    one_token_at_30k = profile.prefill_time_s([(1, 30_000)])
    assert one_token_at_30k == pytest.approx(2 / 19000, rel=1e-3)
    # decode: 12.9 ms + 0.15 ms per request + 4.9e-8 s per context token
    assert profile.step_time_s([], [20_000, 10_000]) == pytest.approx(0.0129 + 2 * 0.00015 + 4.9e-8 * 30_000)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_chunking_a_prefill_does_not_change_its_attention_cost(name: str) -> None:
    profile = get_profile(name)
    whole = profile.prefill_time_s([(6000, 0)]) - profile.prefill_base_s
    chunks = [(2000, 0), (2000, 2000), (2000, 4000)]
    chunked = sum(profile.prefill_time_s([chunk]) - profile.prefill_base_s for chunk in chunks)
    assert chunked == pytest.approx(whole)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_is_positive_and_grows_with_work(name: str) -> None:
    profile = get_profile(name)
    assert profile.step_time_s([], []) == 0.0
    assert 0 < profile.step_time_s([], [100]) < profile.step_time_s([], [100] * 8)
    assert profile.step_time_s([(100, 0)], []) < profile.step_time_s([(4000, 0)], [])
    assert profile.description and profile.num_gpu_blocks > 0


def test_unknown_profile_lists_the_known_names() -> None:
    with pytest.raises(ValueError, match="llama3-8b-1xh100") as info:
        get_profile("gpt-9")
    assert "gpt-9" in str(info.value)
