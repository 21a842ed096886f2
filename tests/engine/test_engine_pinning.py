"""Continuum pinning: a finished request's KV stays referenced until its TTL runs out."""

from __future__ import annotations

from engine_driver import distinct, final_output, run_until_idle, small_engine, turn

from tao_harness.engine import EngineCore, EngineRequest


def _churn(engine: EngineCore, now: float, count: int = 8) -> float:
    for index in range(count):
        now, _, _ = turn(engine, f"churn{index}", distinct(100_000 + 1000 * index, 250), 4, now=now)
    return now


def test_a_pinned_context_survives_pressure_that_evicts_an_unpinned_one() -> None:
    results = {}
    for pin in (None, 60.0):
        engine = small_engine(num_gpu_blocks=64)
        context = distinct(1, 320)
        now, _, reply = turn(engine, "a1", context, 16, session_id="a", pin_ttl_s=pin)
        assert engine.metrics().num_pinned == (1 if pin else 0)
        now = _churn(engine, now)
        _, out, _ = turn(engine, "a2", [*context, *reply, 9], 2, session_id="a", now=now)
        results[pin] = out.cached_tokens
    assert results == {None: 0, 60.0: 320}


def test_a_pin_holds_blocks_until_the_first_step_after_expiry() -> None:
    engine = small_engine(num_gpu_blocks=64)
    end, _, _ = turn(engine, "a", distinct(1, 100), 3, pin_ttl_s=2.0)
    assert engine.next_wakeup() == end + 2.0
    held = engine.metrics()
    assert held.num_pinned == 1 and held.num_free_blocks == 64 - 7
    engine.step(end + 1.9)
    assert engine.metrics().num_pinned == 1
    engine.step(end + 2.0)
    released = engine.metrics()
    assert (released.num_pinned, released.num_free_blocks) == (0, 64)
    assert engine.cached_prefix_tokens(distinct(1, 100)) == 96  # released blocks stay cached


def test_the_sessions_next_request_takes_over_the_pinned_blocks() -> None:
    engine = small_engine(num_gpu_blocks=64)
    end, _, reply = turn(engine, "a1", distinct(1, 100), 3, session_id="a", pin_ttl_s=30.0)
    engine.add_request(EngineRequest("a2", [*distinct(1, 100), *reply, 5], 2, session_id="a"), end)
    engine.step(end + 0.1)
    assert engine.metrics().num_pinned == 0
    _, steps = run_until_idle(engine, end + 1)
    assert final_output(steps, "a2").cached_tokens == 96
    assert engine.metrics().num_free_blocks == 64


def test_a_request_blocked_by_pins_runs_once_they_expire() -> None:
    engine = small_engine(num_gpu_blocks=20)
    end, _, _ = turn(engine, "a", distinct(1, 200), 3, pin_ttl_s=5.0)
    engine.add_request(EngineRequest("b", distinct(1000, 200), 3), end)
    assert engine.step(end).num_steps == 0  # 13 of 20 blocks pinned: b cannot fit
    finish, steps = run_until_idle(engine, end)
    assert final_output(steps, "b").completion_tokens == 3
    assert finish > end + 5.0


def test_release_pin_unpins_at_once() -> None:
    engine = small_engine(num_gpu_blocks=64)
    turn(engine, "a", distinct(1, 100), 3, session_id="s", pin_ttl_s=30.0)
    assert engine.release_pin("nobody") is False
    assert engine.release_pin("s") is True
    metrics = engine.metrics()
    assert (metrics.num_pinned, metrics.num_free_blocks, engine.next_wakeup()) == (0, 64, None)


def test_end_session_drops_its_pin_and_hash_memo() -> None:
    engine = small_engine(num_gpu_blocks=64)
    turn(engine, "a", distinct(1, 100), 3, session_id="s", pin_ttl_s=30.0)
    assert engine.end_session("s") is True
    assert engine.metrics().num_pinned == 0
    assert engine.end_session("s") is False
    assert engine.cached_prefix_tokens(distinct(1, 100), session_id="s") == 96  # KV itself stays cached
