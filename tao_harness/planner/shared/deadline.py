"""When the exact search must stop: an instant on a clock, wall time by default, but never before the
planning thread has had a minimum of CPU time.

The live coordinator wants wall time (a plan late is a plan late). A benchmark or a simulation on a
shared, busy machine can count the planning thread's CPU time instead (`planner.deadline_clock = "cpu"`),
so how far the search gets does not depend on what else runs.

The CPU floor (`planner.min_cpu_ms`) is why a plan does not depend on the machine's load: a planner
descheduled for a few milliseconds would otherwise find its wall deadline gone before it did any work,
and return a fallback plan for a snapshot it solves exactly in half a millisecond (seen in CI: a
6-session snapshot planned short of its optimum on a loaded 2-core machine). Small snapshots finish
within the floor, so their plans are exact and the same on any machine; on a quiet machine the floor
never binds, as CPU time keeps pace with wall time.
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
    cpu_floor_at: float = 0.0  # an instant of this thread's CPU clock (time.thread_time) before which it never passes

    @classmethod
    def after(cls, seconds: float, clock: DeadlineClock = "wall", min_cpu_s: float = 0.0) -> Deadline:
        """`seconds` from now on `clock`, and not before this thread has used `min_cpu_s` more CPU time."""
        now = _CLOCKS[clock]
        # One read of the CPU clock serves both instants when the deadline counts CPU time: in this VM a
        # read is a system call that cost 7-30 µs of wall time (perf_counter 0.1 µs), once per plan.
        cpu = time.thread_time()
        return cls((cpu if clock == "cpu" else now()) + seconds, now, cpu + min_cpu_s)

    def passed(self) -> bool:
        return self.clock() > self.at and time.thread_time() >= self.cpu_floor_at

    def left(self) -> float:
        """Seconds until it passes: left on its clock, or of CPU time before the floor, whichever is more
        (0 once passed)."""
        return max(0.0, self.at - self.clock(), self.cpu_floor_at - time.thread_time())

    def share(self, fraction: float, at_most_s: float | None = None) -> Deadline:
        """The instant `fraction` of the time left from now, and at most `at_most_s` seconds from now.
        The CPU floor is the whole plan's: a share keeps it."""
        now = self.clock()
        span = fraction * max(0.0, self.at - now)
        return Deadline(now + (span if at_most_s is None else min(span, at_most_s)), self.clock, self.cpu_floor_at)
