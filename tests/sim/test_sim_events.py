"""The event heap: explicit tie order and per-replica wake-up times."""

from __future__ import annotations

from tao_harness.sim.events import ANY, EventQueue, PlanNow, Priority, StepLaunch, Tick, ToolEnded


def test_ties_follow_priority_then_insertion() -> None:
    queue = EventQueue(replicas=2)
    queue.push(1.0, StepLaunch(0), Priority.ENGINE)
    queue.push(1.0, PlanNow("a"), Priority.PLAN)
    queue.push(1.0, ToolEnded("s", 0))
    queue.push(1.0, ToolEnded("t", 0))
    queue.push(0.5, Tick())
    order = [queue.pop()[1] for _ in range(5)]
    assert order == [Tick(), ToolEnded("s", 0), ToolEnded("t", 0), PlanNow("a"), StepLaunch(0)]
    assert len(queue) == 0


def test_wake_time_sees_only_events_that_can_reach_the_replica() -> None:
    queue = EventQueue(replicas=2)
    queue.push(2.0, ToolEnded("held-on-1", 0), reach=1)
    queue.push(5.0, Tick(), reach=ANY)
    assert queue.wake_time(0, now=0.0) == 5.0
    assert queue.wake_time(1, now=0.0) == 2.0
    queue.widen(2.0, 999, reach=ANY)  # the session lost its node: its tool end may now reach anyone
    assert queue.wake_time(0, now=0.0) == 2.0


def test_processed_events_no_longer_wake_anyone() -> None:
    queue = EventQueue(replicas=1)
    queue.push(1.0, ToolEnded("s", 0), reach=0)
    queue.push(3.0, Tick())
    assert queue.pop()[0] == 1.0
    assert queue.wake_time(0, now=1.0) == 3.0  # the event at 1.0 was handled; it cannot cut a step
    assert queue.pop()[0] == 3.0
    assert queue.wake_time(0, now=3.0) is None
