"""Workload generators: generation speed and the statistics that the published sources pin down.

    .venv/bin/python scripts/bench_workloads.py [--sessions 1000] [--seed 0]

One row per workload: sessions generated per second, per-call tool duration p50/p90/p99 (TraceLab:
0.3 s / 13.6 s / 216 s), tool seconds and output tokens per session (SWE-Lite from the paper's Table 1:
≈ 105 s and ≈ 6.6k; Terminal-Bench runs: 356–438 s per task), median context (mini-SWE-agent: usually
< 20k) and the tool share at the nominal decode speed of `trace_stats`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tao_harness.sim.trace_stats import trace_stats  # noqa: E402
from tao_harness.sim.workloads import WORKLOADS, generate  # noqa: E402
from tao_harness.tables import format_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for workload in WORKLOADS:
        started = time.perf_counter()
        sessions = generate(workload, args.sessions, args.seed)
        elapsed = time.perf_counter() - started
        stats = trace_stats(sessions)
        calls = stats.tool_duration_s
        rows.append(
            [
                workload,
                round(args.sessions / elapsed),
                round(stats.turns_per_session.mean, 1),
                round(calls.p50, 2),
                round(calls.p90, 1),
                round(calls.p99),
                round(stats.tool_time_per_session_s.mean),
                round(stats.output_tokens_per_session.mean),
                round(stats.context_tokens_per_session.p50),
                f"{stats.tool_share:.0%}",
            ]
        )
    print(
        format_table(
            rows,
            [
                "workload",
                "sessions/s",
                "turns",
                "call p50",
                "call p90",
                "call p99",
                "tool s/session",
                "out tok/session",
                "ctx p50",
                "tool share",
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
