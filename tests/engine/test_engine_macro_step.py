"""Macro-steps: merging unchanged decode steps gives the same tokens, events and time as single steps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from engine_driver import small_engine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao_harness.engine import EngineCore, EngineRequest, StepOutput


def _simulate(
    engine: EngineCore, arrivals: Sequence[tuple[float, EngineRequest]], mode: str
) -> tuple[float, list[StepOutput]]:
    """A tiny event loop like the simulator's.

    "single": one step per call. "until": arrivals are known ahead and bound each macro-step.
    "truncate": the engine is never told the horizon; an arrival during a run cuts it with truncate().
    """
    pending = sorted(arrivals, key=lambda item: item[0])
    now, steps = 0.0, []
    while pending or engine.has_unfinished_requests():
        while pending and pending[0][0] <= now:
            engine.add_request(pending.pop(0)[1], now)
        next_arrival = pending[0][0] if pending else float("inf")
        until = {"single": None, "until": next_arrival, "truncate": float("inf")}[mode]
        step = engine.step(now, until=until)
        if not step.num_steps:
            wake = min(next_arrival, engine.next_wakeup() or float("inf"))
            assert wake != float("inf"), "engine stuck with nothing to wait for"
            now = max(now, wake)
            continue
        while mode == "truncate" and pending and pending[0][0] < step.started_at + step.duration_s:
            arrival, request = pending.pop(0)
            step = engine.truncate(arrival) or step
            engine.add_request(request, arrival)
        steps.append(step)
        now = step.started_at + step.duration_s
    return now, steps


def _events(steps: Sequence[StepOutput]) -> dict[str, tuple[list[int], int, str | None]]:
    events: dict[str, tuple[list[int], int, str | None]] = {}
    for step in steps:
        for out in step.outputs:
            tokens, firsts, _ = events.get(out.request_id, ([], 0, None))
            events[out.request_id] = (
                tokens + list(out.new_token_ids), firsts + out.first_token, out.finish_reason
            )
    return events


def _first_token_times(steps: Sequence[StepOutput]) -> dict[str, float]:
    return {
        out.request_id: step.started_at + step.duration_s
        for step in steps
        for out in step.outputs
        if out.first_token
    }


def _workload(specs: Sequence[tuple[float, int, int, bool]]) -> list[tuple[float, EngineRequest]]:
    shared = list(range(1, 65))
    return [
        (arrival, EngineRequest(f"r{i}", [*shared, *range(1000 * (i + 1), 1000 * (i + 1) + prompt)], out,
                                pin_ttl_s=0.05 if pin else None, session_id=f"s{i}"))
        for i, (arrival, prompt, out, pin) in enumerate(specs)
    ]


def _compare(specs: Sequence[tuple[float, int, int, bool]], num_gpu_blocks: int) -> dict[str, int]:
    single_end, single = _simulate(small_engine(num_gpu_blocks), _workload(specs), "single")
    calls = {"single": len(single)}
    for mode in ("until", "truncate"):
        merged_end, merged = _simulate(small_engine(num_gpu_blocks), _workload(specs), mode)
        assert _events(merged) == _events(single), mode
        assert merged_end == pytest.approx(single_end, rel=1e-9, abs=1e-12)
        assert [rid for s in merged for rid in s.preempted] == [rid for s in single for rid in s.preempted]
        single_ttft, merged_ttft = _first_token_times(single), _first_token_times(merged)
        assert merged_ttft.keys() == single_ttft.keys()
        for rid, when in single_ttft.items():
            assert merged_ttft[rid] == pytest.approx(when, rel=1e-9, abs=1e-12)
        assert sum(s.num_steps for s in merged) == sum(s.num_steps for s in single)
        calls[mode] = len(merged)
    return calls


def test_merged_steps_match_single_steps_and_save_calls() -> None:
    specs = [(0.0, 100, 300, False), (0.0, 40, 200, False), (0.4, 500, 50, True), (1.0, 30, 400, False)]
    calls = _compare(specs, num_gpu_blocks=256)
    assert calls["until"] * 10 < calls["single"]
    assert calls["truncate"] * 10 < calls["single"]


def test_merged_steps_match_single_steps_under_preemption() -> None:
    specs = [(0.0, 60, 250, False), (0.0, 60, 250, False), (0.01, 60, 250, True)]
    _compare(specs, num_gpu_blocks=40)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(
        st.tuples(
            st.floats(0, 2, allow_nan=False).map(lambda t: round(t, 3)),
            st.integers(1, 200),
            st.integers(1, 120),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
    num_gpu_blocks=st.integers(30, 120),
)
def test_merged_steps_match_single_steps_on_random_workloads(
    specs: list[tuple[float, int, int, bool]], num_gpu_blocks: int
) -> None:
    _compare(specs, num_gpu_blocks)


def test_a_macro_step_never_starts_a_step_at_or_after_until() -> None:
    engine = small_engine()
    engine.add_request(EngineRequest("a", list(range(1, 50)), 500), 0.0)
    first = engine.step(0.0, until=1.0)  # prefill
    step = engine.step(first.duration_s, until=0.1)
    per_step = engine.profile.step_time_s([], [50])
    assert step.num_steps > 1
    last_start = step.started_at + step.duration_s - per_step
    assert last_start < 0.1 <= step.started_at + step.duration_s + 1e-12


def test_truncate_cuts_an_in_flight_run_and_then_leaves_it_alone() -> None:
    engine = small_engine()
    engine.add_request(EngineRequest("a", list(range(1, 50)), 500), 0.0)
    start = engine.step(0.0).duration_s  # prefill
    run = engine.step(start, until=float("inf"))
    per_step = engine.profile.step_time_s([], [50])
    assert run.num_steps == 499 and run.outputs[0].finished
    cut = engine.truncate(start + 10.5 * per_step)
    assert cut is not None and cut.num_steps == 11 and not cut.outputs[0].finished
    assert cut.outputs[0].new_token_ids == run.outputs[0].new_token_ids[:11]
    assert engine.truncate(start + 20 * per_step) is None  # cannot grow back
    assert engine.has_unfinished_requests()
    after = engine.step(start + cut.duration_s)
    assert after.outputs[0].completion_tokens == 1 + 11 + 1
    assert engine.truncate(0.0) is None  # a single step is not a run


def test_observing_the_engine_applies_the_run_so_it_can_no_longer_be_cut() -> None:
    engine = small_engine()
    engine.add_request(EngineRequest("a", list(range(1, 50)), 100), 0.0)
    start = engine.step(0.0).duration_s
    run = engine.step(start, until=float("inf"))
    assert run.outputs[0].finished
    assert engine.metrics().num_running == 0  # what the reported run left behind, as with eager steps
    assert engine.truncate(start + 1e-6) is None
