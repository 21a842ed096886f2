"""Synthetic agent-session traces for the paper's workloads, from published statistics.

`generate(workload, sessions, seed)` for `swe-lite`, `swe-verified`, `terminal-bench`, `automation` and
`mixed` (the paper's 300 SWE-Lite + 89 Terminal-Bench coding mix). The numbers and their sources are in
`catalog.py`; `model.py` holds the spec types, `commands.py` the command vocabulary, `generator.py` the
sampling. Deterministic for a seed (numpy Generator per session).

`real-tools` replays real recorded tool calls from a `tao history export` file (`real_tools.py`); it is
not in WORKLOADS because it needs that file (`tool_calls`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tao_harness.sim.trace import TraceSession
from tao_harness.sim.workloads.catalog import MIXED_COMPONENTS, SPECS
from tao_harness.sim.workloads.generator import generate_session, session_rng
from tao_harness.sim.workloads.real_tools import (
    REAL_TOOLS,
    ToolCallsError,
    generate_real_tools,
    read_recorded_sessions,
)

MIXED = "mixed"
WORKLOADS: tuple[str, ...] = (*SPECS, MIXED)


class WorkloadError(ValueError):
    """An unknown workload name or an impossible request (no sessions, negative seed)."""


def generate(workload: str, sessions: int, seed: int, tool_calls: Path | None = None) -> list[TraceSession]:
    """`sessions` sessions of `workload`, identical for the same seed (and `tool_calls` file for
    `real-tools`, the only workload that reads one)."""
    if workload not in (*WORKLOADS, REAL_TOOLS):
        raise WorkloadError(
            f"unknown workload {workload!r}; choose one of {', '.join((*WORKLOADS, REAL_TOOLS))}"
        )
    if sessions < 1:
        raise WorkloadError(f"sessions must be at least 1, got {sessions}")
    if seed < 0:
        raise WorkloadError(f"seed must be >= 0, got {seed}")
    if (workload == REAL_TOOLS) != (tool_calls is not None):
        raise WorkloadError(f"a tool-call file goes with the {REAL_TOOLS} workload, and only with it")
    if tool_calls is not None:
        try:
            return generate_real_tools(read_recorded_sessions(tool_calls), sessions, seed)
        except ToolCallsError as exc:
            raise WorkloadError(str(exc)) from None
    out: list[TraceSession] = []
    shares = np.array([share for _, share in MIXED_COMPONENTS])
    for index in range(sessions):
        rng = session_rng(seed, workload, index)
        if workload == MIXED:
            spec = MIXED_COMPONENTS[int(rng.choice(len(shares), p=shares / shares.sum()))][0]
        else:
            spec = SPECS[workload]
        out.append(generate_session(spec, f"{workload}-{index:05d}", rng))
    return out


__all__ = ["REAL_TOOLS", "WORKLOADS", "WorkloadError", "generate"]
