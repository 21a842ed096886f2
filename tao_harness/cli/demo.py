"""`tao demo`: the whole live system on this machine, no GPU needed.

Starts emulated replicas (own processes), the coordinator and the client proxy, drives a batch of
scripted agent sessions through them over real HTTP (tool calls are real, time-scaled waits reported as
shim events), then prints what happened: sessions, TTFT, prefix-cache hit rate, admissions, interrupts,
planner solve times, and the tool-duration history that was recorded on the way.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import shlex
import shutil
import sys
import time
from itertools import zip_longest
from pathlib import Path
from typing import Any, Sequence

from tqdm.contrib.logging import logging_redirect_tqdm

from tao_harness.cli.common import UsageError, print_json, progress_bar
from tao_harness.config import load_config
from tao_harness.fleet.driver import failure_reasons, run_fleet, with_pool_waits
from tao_harness.sim.trace import TraceSession
from tao_harness.tables import format_table

BLOCK_TOKENS = 16  # the replica engine's KV block size
# Room over the trace's token counts: chat template and tokenizer overhead are ~1%; the rest is headroom.
CONTEXT_MARGIN = 1.25
DEMO_DB_NAME = "demo-history.db"  # beside the default history.db, never it: a demo's emulated times stay apart
_SPARE = f"{CONTEXT_MARGIN - 1:.0%}"
_NUMBER = re.compile(r"\d+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions", type=int, default=12, help="scripted agent sessions (default 12)")
    parser.add_argument("--workers", type=int, default=6, help="sessions in progress at once (default 6)")
    parser.add_argument("--replicas", type=int, default=2, help="emulated vLLM replicas (default 2)")
    parser.add_argument("--workload", default="swe-lite", help="synthetic workload (see `tao trace generate`)")
    parser.add_argument("--policy", default="tao", help="scheduling policy (default tao)")
    parser.add_argument("--time-scale", type=float, default=25.0,
                        help="emulated time runs this many times faster than real time (default 25)")
    parser.add_argument("--num-gpu-blocks", type=int,
                        help="KV blocks (16 tokens) per replica (default: the workload's largest session with "
                             f"{_SPARE} to spare, so sessions compete for memory and every one fits)"
                             .replace("%", "%%"))  # argparse reads help text as a %-format
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument("--db", help=f"history database URL (default: {DEMO_DB_NAME} in the user data directory, "
                                      "kept after the run and replaced by the next)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def blocks_to_hold(trace: Sequence[TraceSession]) -> int:
    """KV blocks that hold the trace's largest session (context after its last reply), with a margin."""
    largest = max(session.total_tokens for session in trace)
    return math.ceil(largest * CONTEXT_MARGIN / BLOCK_TOKENS)


def _check_store(db_url: str) -> None:
    """Fail on a bad --db before any replica starts."""
    from tao_harness.store.engine import StoreError, open_store

    try:
        open_store(db_url).close()
    except StoreError as exc:
        raise UsageError(str(exc)) from None


async def _demo(args: argparse.Namespace, trace: Sequence[TraceSession], db_url: str) -> dict[str, Any]:
    started = time.monotonic()
    # Before the coordinator's imports (seconds on a busy machine), so start-up is not silent; log lines go
    # above the bar, not through it
    progress = progress_bar(len(trace), f"starting {args.replicas} replicas, coordinator and proxy", "session",
                            off=args.json)
    from tao_harness.clock import ScaledClock
    from tao_harness.coordinator.embedded import EmbeddedCluster
    from tao_harness.fleet.processes import ProcessGroup
    from tao_harness.fleet.session import Endpoints

    clock = ScaledClock(args.time_scale)
    with progress, logging_redirect_tqdm():
        async with ProcessGroup() as processes:
            urls = await asyncio.gather(*(processes.start_replica(time_scale=args.time_scale,
                                                                  num_gpu_blocks=args.num_gpu_blocks)
                                          for _ in range(args.replicas)))
            replicas = [{"id": f"r{i}", "base_url": url} for i, url in enumerate(urls)]
            config = load_config(overrides={"store.url": db_url, "cluster.replicas": replicas})
            async with EmbeddedCluster(config, args.policy, clock=clock.now,
                                       time_scale=args.time_scale) as cluster:
                startup_s = time.monotonic() - started
                progress.set_description(f"{args.policy}: sessions")
                progress.reset()  # the rate counts the sessions' time, not the start-up's
                metrics, results = await run_fleet(trace, Endpoints((cluster.proxy_url,), cluster.coordinator_url),
                                                   args.workers, clock, on_session_done=lambda _: progress.update())
                metrics, _ = await with_pool_waits(metrics, cluster.coordinator_url)
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
        "num_gpu_blocks": args.num_gpu_blocks,
        "time_scale": args.time_scale,
        "startup_s": startup_s,
        "wall_s": time.monotonic() - started,
        "failures": dict(failure_reasons(results)),
        "db": db_url,
    }


def _print_summary(summary: dict[str, Any]) -> None:
    failures: dict[str, int] = summary["failures"]
    rows = [(key, value) for key, value in summary.items() if key not in ("db", "failures")]
    print(format_table(rows, ["metric", "value"]))
    scale = summary["time_scale"]
    print(f"\nTimes ending in _s, startup_s and wall_s aside, are emulated seconds (decode_tok_s is a rate, tokens "
          f"per emulated second): the replicas and agents ran "
          f"{scale:g}x faster than real time, so the makespan of {summary['makespan_s']:.0f} emulated s took "
          f"{summary['makespan_s'] / scale:.0f} s on the wall clock; wall_s, {summary['wall_s']:.0f} s, also "
          f"counts starting the replicas, coordinator and proxy (startup_s) and stopping them. mean_latency_s "
          f"is a whole session's (start to end, as the paper's task latency); TTFTs are per request.\n"
          f"Runs with the same --seed replay the same sessions, but admissions, interrupts and times vary from "
          f"run to run: agents and replicas talk real HTTP on wall-clock timers, so on a busy machine requests "
          f"and tool returns reach the coordinator in another order (`tao sim` replays a trace "
          f"deterministically).")
    for count, reason in alike_failures(failures):
        print(f"failed {count}x: {reason}")


def alike_failures(failures: dict[str, int]) -> list[tuple[int, str]]:
    """Failures whose reasons differ only in their numbers (a prompt's size) counted together, most first;
    each number that differs is shown as its range (54 lines, one per prompt size, were one cause)."""
    groups: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for reason, count in failures.items():
        groups.setdefault(tuple(_NUMBER.split(reason)), []).append((reason, count))
    counted = []
    for words, members in groups.items():
        columns = zip(*([int(n) for n in _NUMBER.findall(reason)] for reason, _ in members))
        numbers = [str(low) if low == high else f"{low}-{high}" for low, high in ((min(c), max(c)) for c in columns)]
        counted.append((sum(count for _, count in members),
                        "".join(word + number for word, number in zip_longest(words, numbers, fillvalue=""))))
    return sorted(counted, key=lambda item: -item[0])


def run(args: argparse.Namespace) -> int:
    from tao_harness.policies.registry import check_policy_name
    from tao_harness.sim.workloads import WorkloadError, generate

    try:
        check_policy_name(args.policy)  # before any replica starts
    except ValueError as exc:
        raise UsageError(f"--policy: {exc}") from None
    if args.sessions < 1 or args.workers < 1 or args.replicas < 1 or args.time_scale <= 0:
        raise UsageError("--sessions, --workers, --replicas and --time-scale must be positive")
    try:
        trace = generate(args.workload, args.sessions, args.seed)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    needed = blocks_to_hold(trace)
    if args.num_gpu_blocks is None:
        args.num_gpu_blocks = needed
    elif args.num_gpu_blocks < 1:
        raise UsageError("--num-gpu-blocks must be positive")
    elif args.num_gpu_blocks < needed:
        print(f"tao demo: warning: --num-gpu-blocks {args.num_gpu_blocks} is less than the {needed} that hold "
              f"the largest session with {_SPARE} to spare: its last requests may not fit",
              file=sys.stderr)
    if not args.json:  # the first line of progress: the store's imports below take seconds on a busy machine
        print(f"tao demo: {len(trace)} {args.workload} sessions, {args.workers} at a time, on {args.replicas} "
              f"emulated replicas at {args.time_scale:g}x real time", file=sys.stderr, flush=True)
    db_url = args.db or str(_fresh_demo_database())
    _check_store(db_url)
    summary = asyncio.run(_demo(args, trace, db_url))
    if args.json:
        print_json(summary)
        return 0
    _print_summary(summary)
    from tao_harness.cli.main import main as tao_main

    print(f"\nTool-duration history recorded during the run, kept in {db_url}:\n"
          f"$ {_tao_command()} history tools --db {shlex.quote(db_url)}")
    tao_main(["history", "tools", "--db", db_url])
    return 0


def _fresh_demo_database() -> Path:
    """The default database: in the user data directory, the previous run's removed."""
    from tao_harness.store.engine import default_path, remove_sqlite_file

    path = default_path().with_name(DEMO_DB_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_sqlite_file(path)
    return path


def _tao_command() -> str:
    """How the user runs `tao`: `tao` when it is on PATH, else this environment's (`.venv/bin/tao`)."""
    here = Path(sys.executable).with_name("tao")
    on_path = shutil.which("tao")
    if on_path is not None and Path(on_path).resolve() == here.resolve():
        return "tao"
    try:
        return shlex.quote(str(here.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(here))
