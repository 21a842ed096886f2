"""`tao proxy`: serve the agents' OpenAI/Anthropic endpoint in front of the replicas."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tao_harness.cli.common import UsageError, check_http_url, cluster_config_from_args, port_number
from tao_harness.config import TaoConfig

if TYPE_CHECKING:
    from aiohttp import web


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML or YAML config file ([proxy], [cluster] sections)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, help="port to bind; 0 picks a free one (default 8400)")
    parser.add_argument("--coordinator", help="coordinator URL (env TAO_COORDINATOR_URL); without one the "
                        "proxy routes by cache affinity only")
    parser.add_argument("--replica", action="append", default=[], metavar="ID=URL[@RANK]",
                        help="a replica for fail-open routing (repeatable); adds to the config file's list")
    parser.add_argument("--no-leases", action="store_true",
                        help="ask the coordinator for every request instead of following its admission leases "
                             "(slower; for comparison)")
    parser.add_argument("--no-tool-telemetry", action="store_true",
                        help="do not read tool calls and conversations from the traffic (for comparison)")
    parser.add_argument("--require-token", action="store_true", default=None,
                        help="refuse requests without TAO_TOKEN as their API key (Authorization: Bearer or "
                             "x-api-key); every path but /healthz")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def config_from_args(args: argparse.Namespace) -> TaoConfig:
    config = cluster_config_from_args(
        args, {"proxy.host": args.host, "proxy.port": args.port, "proxy.coordinator_url": args.coordinator,
               "proxy.admission_leases": False if args.no_leases else None,
               "proxy.tool_telemetry": False if args.no_tool_telemetry else None,
               "proxy.require_token": args.require_token})
    check_http_url("--coordinator (or TAO_COORDINATOR_URL)", config.proxy.coordinator_url)
    return config


def _app(config: TaoConfig) -> web.Application:
    from tao_harness.proxy.app import build_app

    try:
        return build_app(config.proxy, config.cluster.replicas, os.environ.get("TAO_TOKEN") or None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = config_from_args(args)
    if not config.cluster.replicas and not config.proxy.coordinator_url:
        raise UsageError("no replicas: give --replica ID=URL or --coordinator URL (or a config file)")
    from tao_harness.serving import serve_forever

    app = _app(config)
    try:
        from tao_harness.serving import run_server

        run_server(serve_forever(app, config.proxy.host, config.proxy.port, "tao proxy"))
    except OSError as exc:
        raise UsageError(f"cannot bind {config.proxy.host}:{config.proxy.port}: {exc.strerror}") from None
    return 0
