"""`tao sim`: replay a trace against one policy on simulated replicas and print the metrics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tao_harness.cli.common import UsageError, gib_size, print_json, progress_bar
from tao_harness.policies.registry import needs_kernels
from tao_harness.tables import format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, required=True, metavar="FILE",
                        help="JSON Lines trace, one agent session per line (see README, Traces)")
    parser.add_argument("--policy", required=True, metavar="NAME",
                        help="scheduling policy, e.g. tao, thunderagent, vllm-ca (`tao plan --help` lists them)")
    parser.add_argument("--replicas", type=int, required=True, metavar="N", help="simulated vLLM replicas")
    parser.add_argument("--workers", type=int, required=True, metavar="W",
                        help="closed loop: sessions in progress at once (like `mini-extra swebench -w W`)")
    parser.add_argument("--profile", default="qwen3-32b-2xh100", metavar="NAME",
                        help="engine step-time profile (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic token ids (default: 0)")
    parser.add_argument("--num-gpu-blocks", type=int, default=None, metavar="N",
                        help="KV blocks of 16 tokens per replica (default: the profile's)")
    parser.add_argument("--kv-offloading-size", type=gib_size, default=None, metavar="GIB",
                        help="host KV tier per replica in GiB, as vLLM's --kv-offloading-size (default: none)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="config file whose planner, readiness and sessions sections the run uses "
                             "(e.g. planner.max_wait_s); the planner's deadline counts CPU time")
    parser.add_argument("--oracle-readiness", action="store_true",
                        help="ablation: the readiness estimator knows every tool's true duration")
    parser.add_argument("--no-tool-events", action="store_true",
                        help="ablation: no tool calls reported (no duration history, no readiness); the "
                             "coordinator sees only the LLM traffic")
    parser.add_argument("--dump-snapshots", metavar="DIR",
                        help="write every planned snapshot to DIR as JSON (replay: scripts/bench_planner.py --replay)")
    parser.add_argument("--json", action="store_true", help="print config, metrics and run info as JSON")


def config_sections(path: Path | None, planner: dict[str, Any] | None = None) -> dict[str, BaseModel]:
    """`sim_sections` of a `--config` file; a bad file or field is a UsageError naming the flag."""
    from tao_harness.config import ConfigError
    from tao_harness.sim.config import sim_sections

    try:
        return sim_sections(path, planner)
    except ConfigError as exc:
        raise UsageError(f"--config: {exc}") from None


def run(args: argparse.Namespace) -> int:
    # Imported here so `tao --help` stays fast.
    from tao_harness.sim.config import SimConfig
    from tao_harness.sim.simulator import SimError, simulate
    from tao_harness.cli.trace import load_trace

    if args.oracle_readiness and args.no_tool_events:
        raise UsageError("--oracle-readiness predicts tool calls, which --no-tool-events leaves unreported")
    sections = config_sections(args.config, {"dump_snapshots": args.dump_snapshots} if args.dump_snapshots else {})
    try:
        config = SimConfig(policy=args.policy, replicas=args.replicas, workers=args.workers,
                           profile=args.profile, seed=args.seed, num_gpu_blocks=args.num_gpu_blocks,
                           kv_offloading_size_gib=args.kv_offloading_size,
                           oracle_readiness=args.oracle_readiness, tool_events=not args.no_tool_events,
                           **sections)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    trace = load_trace(args.trace)
    if needs_kernels(config.policy) and not args.json:
        from tao_harness.planner import kernels_cached

        if not kernels_cached():  # what the bar waits on, said: it does not move meanwhile
            print("tao sim: compiling the planner's kernels (a first run: about a minute on 2 cores)",
                  file=sys.stderr)
    with progress_bar(len(trace), f"simulating {config.policy}", "session", off=args.json) as progress:
        try:
            result = simulate(trace, config, on_session_end=lambda _: progress.update())
        except (SimError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    metrics = result.metrics.to_json()
    if args.json:
        print_json({"config": config.model_dump(mode="json", exclude={"planner", "readiness", "sessions"}),
                    "metrics": metrics, "wall_s": round(result.wall_s, 3), "events": result.events},
                   out=sys.stdout)  # looked up now, so redirected stdout (tests, callers) is honoured
        return 0
    print(f"{config.policy}: {len(trace)} sessions, {config.workers} workers, {config.replicas} replicas "
          f"({config.profile}), simulated in {result.wall_s:.1f} s")
    print(format_table(list(metrics.items()), ["metric", "value"]))
    return 0
