"""Synthetic agent-session traces for the paper's workloads, from published statistics.

`generate(workload, sessions, seed)` for `swe-lite`, `swe-verified`, `terminal-bench`, `automation` and
`mixed` (the paper's 300 SWE-Lite + 89 Terminal-Bench coding mix). The numbers and their sources are in
`catalog.py`; `model.py` holds the spec types, `commands.py` the command vocabulary, `generator.py` the
sampling. Deterministic for a seed (numpy Generator per session).
"""

from __future__ import annotations

import numpy as np

from tao_harness.sim.trace import TraceSession
from tao_harness.sim.workloads.catalog import MIXED_COMPONENTS, SPECS
from tao_harness.sim.workloads.generator import generate_session, session_rng

MIXED = "mixed"
WORKLOADS: tuple[str, ...] = (*SPECS, MIXED)


class WorkloadError(ValueError):
    """An unknown workload name or an impossible request (no sessions, negative seed)."""


def generate(workload: str, sessions: int, seed: int) -> list[TraceSession]:
    """`sessions` synthetic sessions of `workload`, identical for the same seed."""
    if workload not in WORKLOADS:
        raise WorkloadError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
    if sessions < 1:
        raise WorkloadError(f"sessions must be at least 1, got {sessions}")
    if seed < 0:
        raise WorkloadError(f"seed must be >= 0, got {seed}")
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


__all__ = ["WORKLOADS", "WorkloadError", "generate"]
