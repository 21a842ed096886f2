"""`tao demo`: the whole live system on this machine, no GPU needed.

Starts emulated replicas (own processes), the coordinator and the client proxy, drives a batch of
scripted agent sessions through them over real HTTP (tool calls are real, time-scaled waits reported as
shim events), then prints what happened: sessions, TTFT, prefix-cache hit rate, admissions, interrupts,
planner solve times, and the tool-duration history that was recorded on the way.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from tqdm import tqdm

from tao_harness.cli.common import UsageError, format_table, print_json
from tao_harness.config import load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions", type=int, default=12, help="scripted agent sessions (default 12)")
    parser.add_argument("--workers", type=int, default=6, help="sessions in progress at once (default 6)")
    parser.add_argument("--replicas", type=int, default=2, help="emulated vLLM replicas (default 2)")
    parser.add_argument("--workload", default="swe-lite", help="synthetic workload (see `tao trace generate`)")
    parser.add_argument("--policy", default="tao", help="scheduling policy (default tao)")
    parser.add_argument("--time-scale", type=float, default=25.0,
                        help="emulated time runs this many times faster than real time (default 25)")
    parser.add_argument("--num-gpu-blocks", type=int, default=3000,
                        help="KV blocks (16 tokens) per replica (default 3000, small enough to see scheduling)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument("--db", help="history database URL (default: a fresh SQLite file in a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


async def _demo(args: argparse.Namespace, db_url: str) -> dict[str, object]:
    from tao_harness.clock import ScaledClock
    from tao_harness.coordinator.embedded import EmbeddedCluster
    from tao_harness.fleet.driver import run_fleet
    from tao_harness.fleet.processes import ProcessGroup
    from tao_harness.fleet.session import Endpoints
    from tao_harness.sim.workloads import generate

    trace = generate(args.workload, args.sessions, args.seed)
    clock = ScaledClock(args.time_scale)
    async with ProcessGroup() as processes:
        urls = await asyncio.gather(*(processes.start_replica(time_scale=args.time_scale,
                                                              num_gpu_blocks=args.num_gpu_blocks)
                                      for _ in range(args.replicas)))
        replicas = [{"id": f"r{i}", "base_url": url} for i, url in enumerate(urls)]
        config = load_config(overrides={"store.url": db_url, "cluster.replicas": replicas})
        async with EmbeddedCluster(config, args.policy, clock=clock.now, time_scale=args.time_scale) as cluster:
            progress = tqdm(total=len(trace), desc=f"{args.policy}: sessions", unit="session",
                            disable=args.json)
            metrics, _ = await run_fleet(trace, Endpoints((cluster.proxy_url,), cluster.coordinator_url),
                                         args.workers, clock, on_session_done=lambda _: progress.update())
            progress.close()
            coordinator = cluster.coordinator
            assert coordinator is not None
            solve = sorted(coordinator.counters.solve_ms)
            return {
                **metrics.to_json(),
                "policy": args.policy,
                "replicas": args.replicas,
                "workers": args.workers,
                "admissions": coordinator.state.counters.admissions,
                "interrupts": coordinator.state.counters.interrupts,
                "plans": coordinator.counters.plans,
                "solve_ms_p50": solve[len(solve) // 2] if solve else 0.0,
                "solve_ms_max": solve[-1] if solve else 0.0,
                "db": db_url,
            }


def run(args: argparse.Namespace) -> int:
    if args.sessions < 1 or args.workers < 1 or args.replicas < 1 or args.time_scale <= 0:
        raise UsageError("--sessions, --workers, --replicas and --time-scale must be positive")
    with tempfile.TemporaryDirectory(prefix="tao-demo-") as tmp:
        db_url = args.db or f"sqlite:///{Path(tmp) / 'history.db'}"
        summary = asyncio.run(_demo(args, db_url))
        if args.json:
            print_json(summary)
            return 0
        rows = [(key, value) for key, value in summary.items() if key != "db"]
        print(format_table(rows, ["metric", "value"]))
        from tao_harness.cli.main import main as tao_main

        print("\nTool-duration history recorded during the run (`tao history tools`):")
        tao_main(["history", "tools", "--db", db_url])
    return 0
