"""Batching and admission: chunked prefill, waiting, preemption by recompute, abort, limits, metrics."""

from __future__ import annotations

import pytest
from engine_driver import distinct, final_output, outputs_of, run_until_idle, small_engine, tokens_of, turn

from tao_harness.engine import EngineRequest


def test_chunked_prefill_spends_the_token_budget_and_prices_each_chunk() -> None:
    engine = small_engine(max_num_batched_tokens=128)
    engine.add_request(EngineRequest("a", distinct(1, 300), 3), 0.0)
    durations = []
    now = 0.0
    for _ in range(3):
        step = engine.step(now)
        durations.append(step.duration_s)
        now += step.duration_s
    assert step.outputs and step.outputs[0].first_token
    profile = engine.profile
    assert durations == pytest.approx(
        [profile.step_time_s([chunk], []) for chunk in [(128, 0), (128, 128), (44, 256)]]
    )


def test_decodes_go_first_and_a_new_prompt_gets_the_rest_of_the_budget() -> None:
    engine = small_engine(max_num_batched_tokens=100)
    engine.add_request(EngineRequest("old", distinct(1, 50), 10), 0.0)
    engine.step(0.0)  # prefill of "old" emits its first token
    engine.add_request(EngineRequest("new", distinct(1000, 300), 2), 0.0)
    step = engine.step(1.0)
    assert [out.request_id for out in step.outputs] == ["old"]
    assert step.duration_s == pytest.approx(engine.profile.step_time_s([(99, 0)], [51]))


def test_a_waiting_request_that_does_not_fit_waits_without_preempting() -> None:
    engine = small_engine(num_gpu_blocks=20)
    engine.add_request(EngineRequest("a", distinct(1, 200), 20), 0.0)
    engine.add_request(EngineRequest("b", distinct(1000, 200), 20), 0.0)
    engine.step(0.0)
    metrics = engine.metrics()
    assert (metrics.num_running, metrics.num_waiting) == (1, 1)
    _, steps = run_until_idle(engine, 1.0)
    assert final_output(steps, "b").completion_tokens == 20
    assert engine.metrics().num_preemptions == 0


def test_the_newest_request_is_preempted_and_recomputed_with_its_tokens_intact() -> None:
    engine = small_engine(num_gpu_blocks=12)
    engine.add_request(EngineRequest("old", distinct(1, 90), 60), 0.0)
    engine.add_request(EngineRequest("new", distinct(1000, 90), 60), 0.0)
    _, steps = run_until_idle(engine)
    preempted = [rid for step in steps for rid in step.preempted]
    assert preempted and set(preempted) == {"new"}
    assert engine.metrics().num_preemptions == len(preempted)
    for rid in ("old", "new"):
        assert final_output(steps, rid).completion_tokens == 60
        assert sum(out.first_token for out in outputs_of(steps, rid)) == 1
    # the preempted request's reply is what it would have generated undisturbed
    roomy = small_engine(num_gpu_blocks=64)
    _, _, undisturbed = turn(roomy, "new", distinct(1000, 90), 60)
    assert tokens_of(steps, "new") == undisturbed
    # recompute found its own surviving blocks: cached_tokens keeps the first lookup's value (0)
    assert final_output(steps, "new").cached_tokens == 0
    assert engine.metrics().prefix_cache_hits > 0


def test_max_num_seqs_limits_the_running_batch() -> None:
    engine = small_engine(max_num_seqs=2)
    for index in range(3):
        engine.add_request(EngineRequest(f"r{index}", distinct(100 * index + 1, 20), 5), 0.0)
    engine.step(0.0)
    assert (engine.metrics().num_running, engine.metrics().num_waiting) == (2, 1)


def test_abort_frees_blocks_of_running_and_waiting_requests() -> None:
    engine = small_engine(num_gpu_blocks=20)
    engine.add_request(EngineRequest("a", distinct(1, 200), 50), 0.0)
    engine.add_request(EngineRequest("b", distinct(1000, 200), 50), 0.0)
    engine.step(0.0)
    assert engine.metrics().num_free_blocks == 20 - 13
    assert engine.abort_request("a") is True
    assert engine.abort_request("b") is True
    assert engine.abort_request("a") is False
    metrics = engine.metrics()
    assert (metrics.num_free_blocks, metrics.num_running, metrics.num_waiting) == (20, 0, 0)
    assert metrics.kv_cache_usage == 0.0
    assert not engine.has_unfinished_requests()


def test_metrics_count_prefix_queries_hits_and_usage() -> None:
    engine = small_engine(num_gpu_blocks=50)
    prompt = distinct(1, 100)
    turn(engine, "a", prompt, 3)
    engine.add_request(EngineRequest("b", prompt, 3), 1.0)
    engine.step(1.0)
    metrics = engine.metrics()
    assert metrics.prefix_cache_queries == 200
    assert metrics.prefix_cache_hits == 96
    assert metrics.num_running == 1
    assert metrics.kv_cache_usage == pytest.approx(7 / 50)
    assert (metrics.num_gpu_blocks, metrics.block_size) == (50, 16)


def test_scripted_replies_finish_with_stop_and_max_tokens_with_length() -> None:
    engine = small_engine()
    _, out, tokens = turn(engine, "a", distinct(1, 30), 10, output_token_ids=[5, 6, 7])
    assert (tokens, out.finish_reason, out.completion_tokens) == ([5, 6, 7], "stop", 3)
    _, out, tokens = turn(engine, "b", distinct(1, 30), 2, output_token_ids=[5, 6, 7])
    assert (tokens, out.finish_reason) == ([5, 6], "length")
    _, out, tokens = turn(engine, "c", distinct(1, 30), 4)
    assert (len(tokens), out.finish_reason, out.prompt_tokens) == (4, "length", 30)


def test_a_request_stops_at_the_kv_capacity() -> None:
    engine = small_engine(num_gpu_blocks=8)  # 128 tokens
    _, out, tokens = turn(engine, "a", distinct(1, 120), 50)
    assert (len(tokens), out.finish_reason) == (8, "length")


@pytest.mark.parametrize(
    ("request_id", "prompt", "max_tokens", "script", "message"),
    [
        ("dup", [1, 2], 1, None, "already in the engine"),
        ("x", [], 1, None, "must not be empty"),
        ("x", [1], 0, None, "max_tokens"),
        ("x", list(range(128)), 1, None, "can never fit"),
        ("x", [1], 1, [], "at least one token"),
    ],
)
def test_bad_requests_raise_clear_errors(
    request_id: str, prompt: list[int], max_tokens: int, script: list[int] | None, message: str
) -> None:
    engine = small_engine(num_gpu_blocks=8)
    engine.add_request(EngineRequest("dup", [1, 2, 3], 5), 0.0)
    with pytest.raises(ValueError, match=message):
        engine.add_request(EngineRequest(request_id, prompt, max_tokens, output_token_ids=script), 0.0)


def test_an_idle_engine_returns_an_empty_step() -> None:
    engine = small_engine()
    step = engine.step(3.0, until=10.0)
    assert (step.started_at, step.duration_s, step.num_steps, step.outputs) == (3.0, 0.0, 0, ())
