"""The planner's deadline: time left counts the CPU floor, as whether it passed does."""

from __future__ import annotations

import time

from tao_harness.planner.shared.deadline import Deadline


def test_time_left_counts_the_cpu_floor() -> None:
    # its wall instant is gone, but the thread has 10 s of CPU time to use first: neither passed nor out of time
    deadline = Deadline(time.perf_counter() - 1.0, time.perf_counter, time.thread_time() + 10.0)
    assert not deadline.passed() and 9.0 < deadline.left() <= 10.0
    gone = Deadline(time.perf_counter() - 1.0, time.perf_counter, 0.0)
    assert gone.passed() and gone.left() == 0.0
