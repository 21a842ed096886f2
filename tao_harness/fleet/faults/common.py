"""What every fault script shares: settings, result rows, small synthetic traces, waiting helpers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from tao_harness.fleet.session import SessionResult
from tao_harness.sim.trace import TraceSession, TraceTool, TraceTurn


@dataclass(frozen=True, slots=True)
class FaultSettings:
    """Sizes of one campaign; `ci()` fits the test suite, `full()` is the issue's campaign."""

    time_scale: float = 20.0
    replicas: int = 2
    # Fleet of the coordinator / replica / disconnect faults: sessions, turns each, tool seconds (emulated).
    workers: int = 8
    turns: int = 12
    tool_s: float = 2.0
    # Wall seconds into a fleet run before a process is killed.
    kill_after_s: float = 1.0
    disconnects: int = 8
    # Tool calls (start + end each) sent through the relay before, during and after the coordinator outage.
    spool_calls: int = 20
    fuzz_per_field: int = 2
    # Send an over-the-limit body to every POST route (True) or to one route per server (False).
    fuzz_huge_everywhere: bool = False
    soak_sessions: int = 32
    soak_emulated_s: float = 60.0
    soak_turns: int = 4
    soak_tool_s: float = 0.5
    # The scale soak (scale.py): sessions started at once, turns each, streams cut by their clients,
    # longest wall wait for a full pool before the proxy is killed, longest wall time for the whole run (past it: deadlock).
    scale_sessions: int = 96
    # First-turn prompt of each scale-soak session: large enough that they do not all fit at once.
    scale_first_tokens: int = 3000
    scale_turns: int = 3
    scale_cuts: int = 8
    scale_kill_after_s: float = 30.0
    scale_deadline_s: float = 180.0
    scale_rss_goal_mib: float = 128.0
    # Goals that are not zero.
    recover_goal_s: float = 3.0
    rss_goal_mib: float = 32.0
    seed: int = 0

    @staticmethod
    def ci() -> FaultSettings:
        return FaultSettings()

    @staticmethod
    def full() -> FaultSettings:
        return FaultSettings(workers=32, turns=20, disconnects=32, spool_calls=200, fuzz_per_field=6,
                             fuzz_huge_everywhere=True, soak_sessions=160, soak_emulated_s=600.0,
                             scale_sessions=2048, scale_cuts=128, scale_deadline_s=1200.0,
                             scale_rss_goal_mib=512.0)


@dataclass(frozen=True, slots=True)
class FaultRow:
    fault: str
    figure: str
    value: float
    # Human-readable goal, e.g. "0" or "≤ 3 s"; `met` says whether `value` reaches it.
    goal: str
    met: bool
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"fault": self.fault, "figure": self.figure, "value": self.value, "goal": self.goal,
                "met": self.met, "detail": self.detail}


def zero_goal(fault: str, figure: str, value: float, detail: str = "") -> FaultRow:
    return FaultRow(fault, figure, value, "0", value == 0, detail)


def agent_trace(prefix: str, sessions: int, turns: int, tool_s: float, seed: int = 0,
                first_input_tokens: int = 600) -> list[TraceSession]:
    """Small coding-agent sessions: a shared system prompt, short turns, one tool call between turns."""
    found = []
    for index in range(sessions):
        steps = tuple(
            TraceTurn(input_tokens=first_input_tokens if k == 0 else 120 + (index * 7 + k * 13 + seed) % 60,
                      output_tokens=24 + (index + k) % 16,
                      tool=TraceTool("bash", "pytest -q tests/", tool_s) if k < turns - 1 else None)
            for k in range(turns))
        found.append(TraceSession(f"{prefix}-{index}", 0.0, "fault-sys", 400, steps))
    return found


def failed_requests(results: Sequence[SessionResult], trace: Sequence[TraceSession]) -> int:
    """Turns the agent could not use: an error, or a reply shorter than asked (a stream that just stopped),
    plus sessions that ended on a transport error."""
    wanted = {s.session: [max(1, t.output_tokens) for t in s.turns] for s in trace}
    bad = sum(1 for r in results for t, tokens in zip(r.turns, wanted[r.session])
              if not t.ok or t.completion_tokens != tokens)
    return bad + sum(1 for r in results if r.error)


async def wait_until(check: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.05) -> float | None:
    """Wall seconds until `check()` holds, or None after `timeout_s`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(interval_s)
    return None
