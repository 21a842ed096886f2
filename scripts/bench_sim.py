"""Simulator speed: wall time to simulate a synthetic workload per policy (target: 300 × 64 × 4 < 60 s).

    .venv/bin/python scripts/bench_sim.py [--workload swe-lite] [--sessions 300] [--workers 64]
        [--replicas 4] [--policies tao,thunderagent,vllm-ca] [--seed 0]

Prints one row per policy: wall and CPU seconds (CPU is the fair number on a shared machine), events, events
per wall second, simulated makespan and the simulated/real time ratio, plus the headline metrics so a speed
change that alters results shows up. The verdict judges the slowest run's CPU seconds and prints the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tao_harness.sim.config import SimConfig  # noqa: E402
from tao_harness.sim.simulator import simulate  # noqa: E402
from tao_harness.sim.workloads import generate  # noqa: E402
from tao_harness.tables import format_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="swe-lite")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--policies", default="tao,thunderagent,vllm-ca,continuum")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-s", type=float, default=60.0, help="CPU-time target per run")
    args = parser.parse_args()

    trace = generate(args.workload, args.sessions, args.seed)
    turns = sum(len(s.turns) for s in trace)
    print(f"{args.workload}: {len(trace)} sessions, {turns} LLM turns, {args.workers} workers, "
          f"{args.replicas} replicas")
    rows = []
    worst_wall = worst_cpu = 0.0
    for policy in args.policies.split(","):
        config = SimConfig(policy=policy, replicas=args.replicas, workers=args.workers, seed=args.seed)
        cpu_start = time.process_time()
        result = simulate(trace, config)
        cpu_s = time.process_time() - cpu_start
        m = result.metrics
        worst_wall, worst_cpu = max(worst_wall, result.wall_s), max(worst_cpu, cpu_s)
        rows.append([policy, result.wall_s, cpu_s, result.events, result.events / max(result.wall_s, 1e-9),
                     m.makespan_s, m.makespan_s / max(result.wall_s, 1e-9), m.plans, m.solve_ms_p95,
                     m.mean_latency_s, m.mean_ttft_s, m.decode_tok_s, m.prefix_hit_rate])
    print(format_table(rows, ["policy", "wall_s", "cpu_s", "events", "events/s", "sim_makespan_s", "speedup",
                              "plans", "solve_p95_ms", "latency_s", "ttft_s", "decode_tok_s", "hit_rate"]))
    verdict = "meets" if worst_cpu < args.target_s else "MISSES"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"slowest run {worst_cpu:.1f} s CPU ({worst_wall:.1f} s wall, load average {load}): {verdict} the "
          f"{args.target_s:.0f} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
