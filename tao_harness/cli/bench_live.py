"""`tao bench live`: the routers on the same trace over real HTTP against emulated replicas."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tqdm import tqdm

from tao_harness.cli.common import UsageError, gib_size, new_dir, print_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--trace", type=Path, help="trace file (JSON Lines, see README)")
    source.add_argument("--workload", default="swe-lite", help="synthetic workload when no --trace (default swe-lite)")
    parser.add_argument("--sessions", type=int, default=32, help="sessions generated for --workload (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument("--workers", default="16", help="comma-separated concurrency levels (default 16)")
    parser.add_argument("--replicas", type=int, default=2, help="emulated replicas per run (default 2)")
    parser.add_argument("--router", default="tao,thunderagent,vllm-router-program,vllm-router-ca,direct-rr",
                        help="comma-separated routers (default: all five)")
    parser.add_argument("--policy", default="tao", help="policy of the tao router (default tao)")
    parser.add_argument("--time-scale", type=float, default=10.0, help="emulated/real time ratio (default 10)")
    parser.add_argument("--num-gpu-blocks", type=int, default=8000, help="KV blocks per replica (default 8000)")
    parser.add_argument("--kv-offloading-size", type=gib_size, default=None, metavar="GIB",
                        help="host KV tier per replica in GiB, as vLLM's --kv-offloading-size (default: none); "
                             "TAO's planner is told its reload rate (the profile's KV bytes over 50 GB/s)")
    parser.add_argument("--profile", help="engine profile of the replicas (default: the replica's)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per router and concurrency (default 3)")
    parser.add_argument("--peers-venv", type=Path, help="virtualenv holding vllm-router and ThunderAgent "
                        "(scripts/install_peers.sh makes one)")
    parser.add_argument("-o", "--output", type=new_dir, default=Path("out/bench-live"), metavar="DIR",
                        help="output directory (default out/bench-live)")
    parser.add_argument("--json", action="store_true", help="print every run's metrics as JSON")
    parser.add_argument("--faults", nargs="?", const="full", choices=("full", "ci"),
                        help="run the fault campaign instead (tao router only): 'full' (default; 160-session soak "
                             "over 10 emulated minutes) or 'ci' (small); writes OUT/faults.md and faults.json")


def run(args: argparse.Namespace) -> int:
    from tao_harness.fleet.bench import LiveBenchConfig, RunRecord, run_one, write_results
    from tao_harness.fleet.plots import write_plots
    from tao_harness.fleet.processes import ProcessError
    from tao_harness.fleet.routers import ROUTERS, RouterUnavailable, find_peer, peer_script
    from tao_harness.sim.trace import TraceError, read_trace
    from tao_harness.sim.workloads import WorkloadError, generate

    if args.faults:
        from tao_harness.fleet.faults import run_and_report

        return run_and_report(args.faults, args.output, args.json, args.seed)
    routers = tuple(r.strip() for r in args.router.split(",") if r.strip())
    unknown = [r for r in routers if r not in ROUTERS]
    if unknown or not routers:
        raise UsageError(f"--router: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(ROUTERS)}")
    try:
        workers = tuple(int(w) for w in args.workers.split(","))
    except ValueError:
        raise UsageError(f"--workers: expected comma-separated numbers, got {args.workers!r}") from None
    if min(workers) < 1 or args.repeats < 1 or args.replicas < 1 or args.time_scale <= 0:
        raise UsageError("--workers, --repeats, --replicas and --time-scale must be positive")
    peers_bin = args.peers_venv / "bin" if args.peers_venv else None
    for script in sorted({s for r in routers if (s := peer_script(r)) is not None}):
        try:
            find_peer(script, peers_bin)
        except RouterUnavailable as exc:
            raise UsageError(str(exc)) from None
    try:
        trace = read_trace(args.trace) if args.trace else generate(args.workload, args.sessions, args.seed)
    except (TraceError, WorkloadError, OSError) as exc:
        raise UsageError(str(exc)) from None
    config = LiveBenchConfig(routers, workers, args.replicas, args.time_scale, args.num_gpu_blocks, args.repeats,
                             args.policy, args.profile, peers_bin, log_dir=args.output / "logs",
                             kv_offloading_size_gib=args.kv_offloading_size)
    records: list[RunRecord] = []
    infos = {}
    progress = tqdm(total=len(workers) * args.repeats * len(routers) * len(trace), unit="session",
                    disable=args.json)
    for level in workers:
        for repeat in range(args.repeats):
            for router in routers:
                progress.set_description(f"{router} w={level} run {repeat + 1}/{args.repeats}")
                try:
                    record, info = asyncio.run(
                        run_one(trace, config, router, level, lambda _: progress.update(), repeat))
                except (RouterUnavailable, ProcessError) as exc:  # it did not start: nothing to measure
                    raise UsageError(f"{router}, {level} workers, run {repeat + 1}: {exc}") from None
                infos[router] = info
                records.append(record)
    progress.close()
    title = f"{args.trace or args.workload}, {len(trace)} sessions, {args.replicas} replicas, x{args.time_scale:g}"
    if args.kv_offloading_size is not None:
        title += f", {args.kv_offloading_size:g} GiB host KV tier each"
    path = write_results(records, infos, args.output, title)
    write_plots([r for r in records if r.workers == workers[-1] and r.repeat == 0], args.time_scale, args.output,
                title)
    if args.json:
        print_json([{"router": r.router, "workers": r.workers, "repeat": r.repeat, **r.metrics.to_json()}
                    for r in records])
    else:
        print(path.read_text())
    return 0
