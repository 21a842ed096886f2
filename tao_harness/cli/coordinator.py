"""`tao coordinator`: run the cluster's coordinator (session pool, planner, replica registry)."""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from tao_harness.cli.common import UsageError, cluster_config_from_args, port_number
from tao_harness.clock import ScaledClock


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML or YAML config file ([cluster], [planner], ...)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8300,
                        help="port to bind; 0 picks a free one (default 8300)")
    parser.add_argument("--replica", action="append", default=[], metavar="ID=URL[@RANK]",
                        help="a replica to schedule onto (repeatable); adds to the config file's list")
    parser.add_argument("--policy", default="tao", help="scheduling policy (see `tao plan --help`; default tao)")
    parser.add_argument("--db", help="history database URL (env TAO_DB_URL; default a SQLite file)")
    parser.add_argument("--no-store", action="store_true", help="keep no history (nothing written to a database)")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="emulated fleets only: the coordinator's clock runs F times faster than real time, "
                             "matching replicas started with the same --time-scale (default 1)")
    parser.add_argument("--clock-epoch", type=float, default=None,
                        help="with --time-scale: the Unix time at which emulated and real time coincide, shared "
                             "with the fleet driver so event times agree (default: now)")
    parser.add_argument("--dump-snapshots", metavar="DIR",
                        help="write every planned snapshot to DIR as JSON (config planner.dump_snapshots)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


async def _serve(args: argparse.Namespace) -> None:
    from tao_harness.coordinator.api import build_app
    from tao_harness.coordinator.embedded import build_coordinator
    from tao_harness.serving import serve_forever
    from tao_harness.store.engine import StoreError

    config = cluster_config_from_args(args, {"store.url": args.db, "planner.dump_snapshots": args.dump_snapshots})
    if not config.cluster.replicas:
        raise UsageError("no replicas: give --replica ID=URL (repeatable) or a config file with [cluster]")
    if args.time_scale <= 0:
        raise UsageError("--time-scale must be positive")
    clock = ScaledClock(args.time_scale, args.clock_epoch if args.clock_epoch is not None else time.time())
    try:
        coordinator = build_coordinator(config, args.policy, use_store=not args.no_store, clock=clock.now,
                                        time_scale=args.time_scale, kernels_in_background=True)
    except (ValueError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    app = build_app(coordinator, os.environ.get("TAO_TOKEN") or None)
    banner = f"tao coordinator (policy {args.policy}, {len(config.cluster.replicas)} replicas)"
    try:
        await serve_forever(app, args.host, args.port, banner)
    except OSError as exc:
        raise UsageError(f"cannot bind {args.host}:{args.port}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from tao_harness.serving import run_server

    run_server(_serve(args))
    return 0
