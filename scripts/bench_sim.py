"""Simulator speed: wall time to simulate a synthetic workload per policy (target: 300 × 64 × 4 < 60 s).

    .venv/bin/python scripts/bench_sim.py [--workload swe-lite] [--sessions 300] [--workers 64]
        [--replicas 4] [--policies tao,thunderagent,vllm-ca] [--seed 0]
    .venv/bin/python scripts/bench_sim.py --scale [--policies tao]

Prints one row per policy: wall and CPU seconds (CPU is the fair number on a shared machine), events, events
per wall and per CPU second, simulated makespan and the simulated/real time ratio, plus the headline
metrics so a speed change that alters results shows up. The verdict judges the slowest run's CPU seconds
and prints the load.

`--scale` runs the cluster-scale targets of issue 46 instead, one row per target and policy: swe-lite
2,000 sessions × 512 workers × 32 replicas in < 120 s and 300 × 64 × 4 in < 20 s. Its `plans` and
`solve_p95_ms` columns are the plans of those runs (up to 512 sessions over 32 replicas); the planner alone
on synthetic 512-waiting × 32-replica snapshots is `scripts/bench_planner.py --sizes 512x32`. Measured on this
2-core machine, quiet (tao, seed 0): 2,000 × 512 × 32 took 523 s CPU, 674 s wall (2,098,681 events, 43,743
plans), 300 × 64 × 4 took 31-33 s CPU (129,687 events): both targets are missed; the closing note of the
sim-scale branch says where the time goes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tao_harness.sim.config import SimConfig  # noqa: E402
from tao_harness.sim.simulator import simulate  # noqa: E402
from tao_harness.sim.workloads import generate  # noqa: E402
from tao_harness.tables import format_table  # noqa: E402

HEADERS = ["run", "policy", "wall_s", "cpu_s", "events", "events/s", "events/cpu_s", "sim_makespan_s", "speedup",
           "plans", "solve_p95_ms", "latency_s", "ttft_s", "decode_tok_s", "hit_rate", "target_s", "verdict"]


@dataclass(frozen=True, slots=True)
class Target:
    """One simulated cluster: a synthetic trace's shape, the replicas and workers it runs on, a CPU-time goal."""

    workload: str
    sessions: int
    workers: int
    replicas: int
    target_s: float

    @property
    def label(self) -> str:
        return f"{self.workload} {self.sessions}x{self.workers}x{self.replicas}"


SCALE_TARGETS = (Target("swe-lite", 2000, 512, 32, 120.0), Target("swe-lite", 300, 64, 4, 20.0))


def run_row(target: Target, policy: str, seed: int) -> tuple[list[object], float]:
    """One simulation of `target` under `policy`: its table row and the CPU seconds it took."""
    trace = generate(target.workload, target.sessions, seed)
    config = SimConfig(policy=policy, replicas=target.replicas, workers=target.workers, seed=seed)
    cpu_start = time.process_time()
    result = simulate(trace, config)
    cpu_s = time.process_time() - cpu_start
    m = result.metrics
    verdict = "meets" if cpu_s < target.target_s else "MISSES"
    return [target.label, policy, result.wall_s, cpu_s, result.events, result.events / max(result.wall_s, 1e-9),
            result.events / max(cpu_s, 1e-9), m.makespan_s, m.makespan_s / max(result.wall_s, 1e-9), m.plans,
            m.solve_ms_p95, m.mean_latency_s, m.mean_ttft_s, m.decode_tok_s, m.prefix_hit_rate, target.target_s,
            verdict], cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="swe-lite")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--policies", default=None, help="default: tao,thunderagent,vllm-ca,continuum (tao with --scale)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-s", type=float, default=60.0, help="CPU-time target per run")
    parser.add_argument("--scale", action="store_true", help="run issue 46's cluster-scale targets instead")
    args = parser.parse_args()

    if args.scale:
        targets: tuple[Target, ...] = SCALE_TARGETS
        policies = (args.policies or "tao").split(",")
    else:
        targets = (Target(args.workload, args.sessions, args.workers, args.replicas, args.target_s),)
        policies = (args.policies or "tao,thunderagent,vllm-ca,continuum").split(",")
    rows, missed = [], 0
    for target in targets:
        turns = sum(len(s.turns) for s in generate(target.workload, target.sessions, args.seed))
        print(f"{target.label}: {turns} LLM turns, CPU target {target.target_s:.0f} s", flush=True)
        for policy in policies:
            row, cpu_s = run_row(target, policy, args.seed)
            missed += cpu_s >= target.target_s
            rows.append(row)
    print(format_table(rows, HEADERS))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"{len(rows) - missed} of {len(rows)} runs meet their CPU-time target (load average {load})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
