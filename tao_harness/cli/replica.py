"""`tao replica`: run the emulated vLLM server (engine model in real time + scripted agent replies).

The first stdout line is the bound URL (`http://HOST:PORT`), so scripts started with `--port 0` can read
it; `--list-scenarios` prints the built-in reply scripts instead of serving.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from aiohttp import web

from tao_harness.cli.common import UsageError, gib_size, port_number, print_json
from tao_harness.config import ConfigError, ReplicaConfig, load_config
from tao_harness.serving import LISTEN_BACKLOG, freeze_startup_objects
from tao_harness.tables import format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML or YAML config file (its [replica] section)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, help="port to bind; 0 picks a free one (default 8000)")
    parser.add_argument(
        "--data-parallel-size",
        type=int,
        metavar="N",
        help="data-parallel ranks, each with its own engine and KV cache, selected with the "
        "X-data-parallel-rank header, round-robin without it (default 1)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        metavar="F",
        help="run the emulated GPU F times faster than real time (default 1)",
    )
    from tao_harness.engine.profiles import PROFILES

    parser.add_argument(
        "--profile",
        help=f"engine step-time profile, one of {', '.join(sorted(PROFILES))} (default qwen3-32b-2xh100)",
    )
    parser.add_argument(
        "--num-gpu-blocks",
        type=int,
        metavar="N",
        help="KV capacity per rank in 16-token blocks (default: the profile's)",
    )
    parser.add_argument(
        "--kv-offloading-size",
        type=gib_size,
        metavar="GIB",
        help="as vLLM's flag: a host-memory KV tier of GIB GiB per rank; prompt blocks are copied there, "
        "evicted least recently used first, and loaded back at the host link's bandwidth (default: none)",
    )
    parser.add_argument(
        "--scenario", help="reply script: a built-in name or a YAML/JSON file (default swe-short)"
    )
    parser.add_argument("--served-model-name", help="model id listed by /v1/models (default tao-replica)")
    parser.add_argument(
        "--strict-model-name",
        action="store_const",
        const=True,
        help="answer 404 to requests naming another model, as vLLM does (default: any name is served)",
    )
    parser.add_argument(
        "--enable-prompt-tokens-details",
        action=argparse.BooleanOptionalAction,
        help="vLLM's flag: report cached tokens in usage.prompt_tokens_details (default on; "
        "--no-enable-prompt-tokens-details emulates a server started without it)",
    )
    parser.add_argument(
        "--reasoning-parser",
        metavar="NAME",
        help="as vLLM's flag: stream each reply's thinking as delta.reasoning (any NAME turns it on)",
    )
    parser.add_argument("--require-token", action="store_true", default=None,
                        help="refuse requests without TAO_TOKEN as their API key (Authorization: Bearer or "
                             "x-api-key); /health and /metrics stay open")
    parser.add_argument("--list-scenarios", action="store_true", help="list the built-in scenarios and exit")
    parser.add_argument("--json", action="store_true", help="with --list-scenarios: print JSON")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default WARNING)",
    )


def _settings(args: argparse.Namespace) -> ReplicaConfig:
    flags = (
        "host",
        "port",
        "data_parallel_size",
        "time_scale",
        "profile",
        "num_gpu_blocks",
        "kv_offloading_size",
        "scenario",
        "served_model_name",
        "strict_model_name",
        "enable_prompt_tokens_details",
        "reasoning_parser",
        "require_token",
    )
    try:
        return load_config(args.config, {f"replica.{name}": getattr(args, name) for name in flags}).replica
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _list_scenarios(as_json: bool) -> int:
    from tao_harness.replica.scenario import builtin_names, load_scenario

    scenarios = [load_scenario(name) for name in builtin_names()]
    rows = [(s.name, len(s.turns), s.description) for s in scenarios]
    if as_json:
        # sys.stdout passed explicitly: print_json's default was bound at import time.
        print_json([{"name": n, "turns": t, "description": d} for n, t, d in rows], sys.stdout)
    else:
        print(format_table(rows, ["name", "turns", "description"]))
    return 0


async def _serve(app: web.Application, settings: ReplicaConfig) -> None:
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, backlog=LISTEN_BACKLOG)
        await site.start()
        freeze_startup_objects()
        host, port = runner.addresses[0][:2]
        print(f"http://{host}:{port}", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    if args.list_scenarios:
        return _list_scenarios(args.json)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings(args)
    from tao_harness.replica.app import build_app
    from tao_harness.replica.scenario import ScenarioError, load_scenario

    try:
        app = build_app(settings, load_scenario(settings.scenario), os.environ.get("TAO_TOKEN") or None)
    except (ScenarioError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    try:
        asyncio.run(_serve(app, settings))
    except OSError as exc:
        raise UsageError(f"cannot bind {settings.host}:{settings.port}: {exc.strerror}") from None
    return 0
