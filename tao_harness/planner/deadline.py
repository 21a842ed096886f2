"""When the exact search must stop: an instant on a clock, wall time by default.

The live coordinator wants wall time (a plan late is a plan late). A benchmark or a simulation on a
shared, busy machine can count the planning thread's CPU time instead (`planner.deadline_clock = "cpu"`),
so how far the search gets does not depend on what else runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Literal

DeadlineClock = Literal["wall", "cpu"]
_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float  # an instant of `clock`
    clock: Callable[[], float] = time.perf_counter

    @classmethod
    def after(cls, seconds: float, clock: DeadlineClock = "wall") -> Deadline:
        now = _CLOCKS[clock]
        return cls(now() + seconds, now)

    def passed(self) -> bool:
        return self.clock() > self.at

    def share(self, fraction: float, at_most_s: float | None = None) -> Deadline:
        """The instant `fraction` of the time left from now, and at most `at_most_s` seconds from now."""
        now = self.clock()
        span = fraction * max(0.0, self.at - now)
        return Deadline(now + (span if at_most_s is None else min(span, at_most_s)), self.clock)
