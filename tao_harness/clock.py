"""Emulated time for fleets on emulated replicas: a clock that runs faster than the wall clock."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ScaledClock:
    """Runs `time_scale` times faster than the wall clock; equals it at `epoch` (Unix seconds).

    Processes that share `time_scale` and `epoch` (fleet driver, coordinator) agree on event times.
    """

    time_scale: float = 1.0
    epoch: float = field(default_factory=time.time)

    def now(self) -> float:
        return self.at(time.time())

    def at(self, wall: float) -> float:
        """This clock's reading at the wall-clock instant `wall` (Unix seconds)."""
        return self.epoch + (wall - self.epoch) * self.time_scale
