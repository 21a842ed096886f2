"""Benchmark the TAO planner on realistic random snapshots; print a table per (sessions × nodes).

Snapshots: context 2k–40k tokens (log-uniform), a 1.5k–3k shared system prompt, cache credit on 0–1
nodes (observed 0–30 s ago, 50–100% of the context), about half the sessions ready, and node
capacities such that demand is 0.5×–2× the free capacity. Columns: p50 / p95 / max wall time and p95 CPU
time (ms, the whole `tao` policy call; CPU time is robust to a shared, busy machine), fallback rate,
certificate rate (answered without the DP), and the
optimality gap against an independent exact solver (scipy/HiGHS lexicographic MILP: maximize K, fix
it, then R, T, N) on the first `--gap-samples` snapshots of each configuration (and, with
`--gap-fallbacks`, on every snapshot whose plan fell back: the gap of the unproven plans).

    .venv/bin/python scripts/bench_planner.py [--trials 200] [--gap-samples 5] [--sizes 16,32] [--nodes 2,4]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from time import perf_counter, process_time

from tao_harness.cli.common import format_table
from tao_harness.config import PlannerConfig
from tao_harness.planner.problem import build_problem
from tao_harness.planner.reference import milp_lexicographic
from tao_harness.policies.registry import get_policy
from tao_harness.types import CacheEntry, NodeState, PlannerParams, SessionView, Snapshot


def random_snapshot(rng: random.Random, sessions: int, nodes: int, now: float = 1000.0) -> Snapshot:
    node_ids = [f"r{b}" for b in range(nodes)]
    views = []
    for i in range(sessions):
        tokens = int(math.exp(rng.uniform(math.log(2000), math.log(40000))))
        cache = {}
        if rng.random() < 0.6:
            cached = int(tokens * rng.uniform(0.5, 1.0))
            cache[rng.choice(node_ids)] = CacheEntry(cached, now - rng.uniform(0, 30))
        views.append(SessionView(
            id=f"s{i}", tokens=tokens, shared_tokens=min(tokens, rng.randint(1500, 3000)),
            ready=int(rng.random() < 0.5), cache=cache, turn=rng.randint(1, 40),
            arrived_at=now - rng.uniform(0, 60),
        ))
    params = PlannerParams()
    demand = sum(v.cost(params) for v in views)
    free_total = demand / rng.uniform(0.5, 2.0)
    weights = [rng.uniform(0.7, 1.3) for _ in node_ids]
    node_states = []
    for node_id, weight in zip(node_ids, weights):
        free = int(free_total * weight / sum(weights))
        used = rng.randint(0, free // 2)
        node_states.append(NodeState(id=node_id, capacity_tokens=free + used, used_tokens=used))
    return Snapshot(now=now, params=params, nodes=tuple(node_states), sessions=tuple(views))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def bench_one(
    sessions: int, nodes: int, trials: int, gap_samples: int, seed: int, gap_fallbacks: bool = False
) -> list[object]:
    rng = random.Random(seed * 1_000_003 + sessions * 97 + nodes)
    policy = get_policy("tao", PlannerConfig())
    times, cpu, fallbacks, certified, gaps, unsolved = [], [], 0, 0, [], 0
    for trial in range(trials):
        snapshot = random_snapshot(rng, sessions, nodes)
        started, started_cpu = perf_counter(), process_time()
        plan = policy.plan(snapshot)
        times.append((perf_counter() - started) * 1000)
        cpu.append((process_time() - started_cpu) * 1000)
        fallbacks += plan.fallback
        certified += plan.solver == "dp" and plan.states == 0
        if trial < gap_samples or (gap_fallbacks and plan.fallback):
            try:
                exact = milp_lexicographic(build_problem(snapshot, snapshot.waiting))
            except RuntimeError:  # HiGHS hit its time limit without a solution: no reference here
                unsolved += 1
                continue
            gaps.append(_gap(plan.objective, exact))
    return [
        sessions, nodes, round(statistics.median(times), 2), round(percentile(times, 0.95), 2),
        round(max(times), 2), round(percentile(cpu, 0.95), 2), f"{100 * fallbacks / trials:.1f}%",
        f"{100 * certified / trials:.0f}%",
        _gap_text(gaps) + (f"; {unsolved} MILP timed out" if unsolved else ""),
    ]


def _gap(found: tuple[int, int, int, int], exact: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Per-component shortfall of the plan vs the exact optimum (all zeros = optimal)."""
    return tuple(e - f for f, e in zip(found, exact))  # type: ignore[return-value]


def _gap_text(gaps: list[tuple[int, int, int, int]]) -> str:
    if not gaps:
        return "-"
    worse = [g for g in gaps if g > (0, 0, 0, 0)]
    better = [g for g in gaps if g < (0, 0, 0, 0)]  # would mean the MILP (time-limited) missed the optimum
    text = f"{len(gaps) - len(worse) - len(better)}/{len(gaps)} optimal"
    if worse:
        text += f"; worst shortfall {max(worse)}"
    if better:
        text += f"; {len(better)} MILP below plan"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="snapshots per configuration")
    parser.add_argument("--gap-samples", type=int, default=5,
                        help="snapshots per configuration checked by MILP")
    parser.add_argument("--sizes", default="16,32,64,96,128,160", help="waiting sessions, comma separated")
    parser.add_argument("--nodes", default="2,4,8", help="node counts, comma separated")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--gap-fallbacks", action="store_true",
                        help="also check every fallback plan against the MILP (slow at 128+ sessions)")
    args = parser.parse_args(argv)
    headers = ["sessions", "nodes", "p50 ms", "p95 ms", "max ms", "cpu p95 ms", "fallback", "certified",
               "gap vs MILP"]
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for m in (int(x) for x in args.nodes.split(",")):
            rows.append(bench_one(n, m, args.trials, args.gap_samples, args.seed, args.gap_fallbacks))
            print(" ".join(str(cell) for cell in rows[-1]), file=sys.stderr, flush=True)  # progress
    print(format_table(rows, headers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
