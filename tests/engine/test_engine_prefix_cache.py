"""Prefix caching as the engine's callers see it: cached_tokens per request and cached_prefix_tokens."""

from __future__ import annotations

from engine_driver import distinct, final_output, run_until_idle, small_engine, turn

from tao_harness.engine import EngineRequest


def test_a_fully_resident_prompt_reports_the_n_minus_1_cap() -> None:
    engine = small_engine()
    prompt = distinct(10_000, 64)
    _, first, _ = turn(engine, "a", prompt, max_tokens=1)
    assert first.cached_tokens == 0
    assert engine.cached_prefix_tokens(prompt) == 48  # floor((64 - 1) / 16) * 16
    _, again, _ = turn(engine, "b", prompt, max_tokens=1)
    assert again.cached_tokens == 48
    assert engine.cached_prefix_tokens([*prompt, 7]) == 64


def test_the_next_turn_reuses_generated_tokens() -> None:
    engine = small_engine()
    prompt = distinct(10_000, 40)
    _, _, generated = turn(engine, "t1", prompt, max_tokens=30, session_id="s")
    assert len(generated) == 30
    follow_up = [*prompt, *generated, *distinct(20_000, 20)]
    # 69 of the 70 tokens were computed (the last sampled one never is): 4 full blocks
    assert engine.cached_prefix_tokens(follow_up) == 64
    _, second, _ = turn(engine, "t2", follow_up, max_tokens=5, session_id="s")
    assert second.cached_tokens == 64


def test_prefix_hit_after_a_short_pause_and_eviction_under_pressure_after_a_long_one() -> None:
    engine = small_engine(num_gpu_blocks=64)
    context = distinct(10_000, 320)
    now, _, reply = turn(engine, "a1", context, max_tokens=16, session_id="a")
    next_prompt = [*context, *reply, 1, 2, 3]

    # short pause: one small request from someone else, plenty of never-used blocks remain
    now, _, _ = turn(engine, "b1", distinct(50_000, 100), max_tokens=4, now=now + 0.5)
    assert engine.cached_prefix_tokens(next_prompt) == 320  # 335 of 336 tokens computed: 20 full blocks

    # long pause: many other sessions churn through more blocks than the cache holds
    for index in range(12):
        other = distinct(100_000 + 1000 * index, 300)
        now, _, _ = turn(engine, f"c{index}", other, max_tokens=4, now=now + 1)
    assert engine.cached_prefix_tokens(next_prompt) == 0
    _, late, _ = turn(engine, "a2", next_prompt, max_tokens=4, session_id="a", now=now + 30)
    assert late.cached_tokens == 0


def test_a_shared_system_prompt_is_reused_across_sessions_with_shared_blocks() -> None:
    engine = small_engine(num_gpu_blocks=64)
    system = distinct(1, 256)
    engine.add_request(EngineRequest("s1", [*system, *distinct(5000, 40)], 8, session_id="s1"), 0.0)
    engine.add_request(EngineRequest("s2", [*system, *distinct(6000, 40)], 8, session_id="s2"), 0.0)
    first = engine.step(0.0)
    assert first.num_steps == 1
    # both admitted in one step; the second finds the system prompt the first is computing
    used_blocks = 64 - engine.metrics().num_free_blocks
    assert used_blocks == 16 + 2 * 3  # 16 shared system blocks + each session's own 3
    _, steps = run_until_idle(engine, first.duration_s)
    assert final_output(steps, "s1").cached_tokens == 0
    assert final_output(steps, "s2").cached_tokens == 256
    # a third session later still hits the shared prefix
    _, third, _ = turn(engine, "s3", [*system, *distinct(7000, 10)], 2, session_id="s3", now=5.0)
    assert third.cached_tokens == 256


def test_precomputed_block_hashes_and_the_session_memo_give_the_same_hits() -> None:
    from tao_harness.engine.hashing import extend_block_hashes

    engine = small_engine()
    prompt = distinct(10_000, 200)
    turn(engine, "a", prompt, max_tokens=1, session_id="s")
    longer = [*prompt, *distinct(1, 50)]
    hashes = extend_block_hashes(longer, 16, [])
    plain = engine.cached_prefix_tokens(longer)
    assert plain == 192
    assert engine.cached_prefix_tokens(longer, block_hashes=hashes) == plain
    assert engine.cached_prefix_tokens(longer, session_id="s") == plain
    _, out, _ = turn(engine, "b", longer, max_tokens=1, block_hashes=hashes)
    assert out.cached_tokens == plain


def test_prefix_caching_can_be_disabled() -> None:
    engine = small_engine(enable_prefix_caching=False)
    prompt = distinct(10_000, 100)
    turn(engine, "a", prompt, max_tokens=2)
    _, again, _ = turn(engine, "b", prompt, max_tokens=2)
    assert again.cached_tokens == 0
    assert engine.cached_prefix_tokens(prompt) == 0
    assert engine.metrics().prefix_cache_queries == 0
