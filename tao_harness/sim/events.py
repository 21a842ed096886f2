"""The simulator's event heap: `(time, priority, seq, event)`, popped in that order, plus wake-ups.

Vidur-style: handlers push the events they cause. Ties at one instant are ordered explicitly by
`Priority`, never by insertion luck: world events (arrivals, tool ends, engine outputs) first, then
planning (which sees everything that happened at that instant), then engine step launches (which see the
requests that planning dispatched). `seq` keeps equal-priority events FIFO, so a run is deterministic.

Wake-ups make macro-steps long without making them wrong. Every event names which replica it can
reach: one replica (a tool of a session holding that replica ends; a step of that replica finishes
without finishing a request) or any (anything that may plan or route). `wake_time(r, now)` is the
earliest pending event that can reach replica r: its macro-step must not run past it. A pending event
whose reach widens later (the session holding r is interrupted) is re-registered with `widen`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from tao_harness.engine.core import StepOutput


class Priority(IntEnum):
    """Order of events that share a timestamp (lower first)."""

    WORLD = 0
    PLAN = 1
    ENGINE = 2


@dataclass(frozen=True, slots=True)
class SessionStart:
    """A worker picks up trace session `index` (closed loop: only when a worker is free)."""

    index: int


@dataclass(frozen=True, slots=True)
class RequestIssued:
    """The agent of `session` sends the LLM request of turn `turn`."""

    session: str
    turn: int


@dataclass(frozen=True, slots=True)
class ToolEnded:
    """The tool that followed turn `turn`'s reply returns."""

    session: str
    turn: int


@dataclass(frozen=True, slots=True)
class StepLaunch:
    """Replica `replica` may start an engine step now (it is idle and has work)."""

    replica: int


@dataclass(frozen=True, slots=True)
class StepDone:
    """Replica `replica`'s step finished; its outputs become visible now."""

    replica: int
    output: StepOutput


@dataclass(frozen=True, slots=True)
class PlanNow:
    """Run the policy on a fresh snapshot (coalesced: at most one pending per instant)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Tick:
    """Periodic housekeeping: refresh predictions, plan for over-reserved nodes and decayed credits.

    With targeted wake-ups a tick does not cut macro-steps: what it can dispatch (a waiting request whose
    admission only the passing of time allows) joins a busy replica at its next step boundary."""


Event = Union[SessionStart, RequestIssued, ToolEnded, StepLaunch, StepDone, PlanNow, Tick]


ANY = -1
"""Reach of an event that may affect every replica."""
NONE = -2
"""Reach of an event that never cuts a macro-step (housekeeping; see `Tick`)."""


_Entry = tuple[float, int, int, Event]
"""(time, priority, seq, event): a plain tuple, compared in C (an order=True dataclass's `__lt__` runs Python code
for each of the heap's log n comparisons); `seq` is unique, so a comparison never reaches the event."""


class EventQueue:
    """A min-heap of timed events with explicit tie ordering and per-replica wake-up times."""

    def __init__(self, replicas: int) -> None:
        self._heap: list[_Entry] = []
        self._seq = 0
        self._wakes: list[list[tuple[float, int]]] = [[] for _ in range(replicas)]
        self._wake_any: list[tuple[float, int]] = []
        self._done: set[int] = set()

    def push(self, time: float, event: Event, priority: Priority = Priority.WORLD, reach: int = ANY) -> int:
        """Schedule `event`; `reach` is the replica it can affect (ANY: all). Returns its sequence number."""
        self._seq += 1
        heapq.heappush(self._heap, (time, int(priority), self._seq, event))
        self.widen(time, self._seq, reach)
        return self._seq

    def widen(self, time: float, seq: int, reach: int = ANY) -> None:
        """Register (again) that pending event `seq` at `time` can reach `reach`."""
        if reach != NONE:
            heapq.heappush(self._wake_any if reach == ANY else self._wakes[reach], (time, seq))

    def pop(self) -> tuple[float, Event]:
        time, _, seq, event = heapq.heappop(self._heap)
        self._done.add(seq)
        return time, event

    def wake_time(self, replica: int, now: float) -> float | None:
        """Earliest pending event at or after `now` that can reach `replica`."""
        return _first_pending(self._wakes[replica], now, self._done, _first_pending(self._wake_any, now,
                                                                                       self._done, None))

    def __len__(self) -> int:
        return len(self._heap)


def _first_pending(heap: list[tuple[float, int]], now: float, done: set[int], other: float | None) -> float | None:
    while heap and (heap[0][0] < now or heap[0][1] in done):
        time, seq = heapq.heappop(heap)
        if time < now:
            done.discard(seq)  # no copy of it can matter any more
    if not heap:
        return other
    return heap[0][0] if other is None else min(heap[0][0], other)
