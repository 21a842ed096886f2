"""`tao spool show|flush`: tool events that `tao-run` could not deliver, and delivering them now."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from tao_harness.cli.common import UsageError, print_json
from tao_harness.config import ConfigError, TaoConfig, load_config
from tao_harness.tables import format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("show", "flush"),
                        help="show: list spool files; flush: deliver them to the coordinator")
    parser.add_argument("--coordinator", metavar="URL",
                        help="coordinator root URL for flush (env TAO_COORDINATOR_URL or the config file)")
    parser.add_argument("--spool-dir", type=Path, metavar="DIR",
                        help="spool directory (default: the config's run.spool_dir or the user data directory)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML or YAML config file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _config(args: argparse.Namespace) -> TaoConfig:
    try:
        return load_config(args.config, {"proxy.coordinator_url": args.coordinator,
                                         "run.spool_dir": str(args.spool_dir) if args.spool_dir else None})
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _when(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _show(directory: Path, as_json: bool) -> int:
    from tao_harness.shims.spool import describe

    files = describe(directory)
    if as_json:
        print_json({"directory": str(directory), "files": [
            {"path": str(f.path), "records": f.records, "in_use": f.in_use, "oldest_at": f.oldest_at}
            for f in files]})
        return 0
    print(f"spool directory: {directory}")
    print(format_table([(f.path.name, f.records, "yes" if f.in_use else "no", _when(f.oldest_at))
                        for f in files], ["file", "records", "in use", "oldest (UTC)"]))
    return 0


async def _flush(directory: Path, config: TaoConfig) -> tuple[dict[str, int], str]:
    import aiohttp

    from tao_harness.shims.delivery import CoordinatorPoster, flush_spool
    from tao_harness.store.redact import redactor_from

    assert config.proxy.coordinator_url is not None
    async with aiohttp.ClientSession() as http:
        poster = CoordinatorPoster(config.proxy.coordinator_url, http, config.run.delivery_timeout_s,
                                   os.environ.get("TAO_TOKEN") or None)
        redactor = redactor_from(config.store.redact_patterns, config.store.redact)
        result = await flush_spool(directory, poster, config.run.batch_max, redactor=redactor)
    counts = {"files": result.files, "delivered": result.delivered, "rejected": result.rejected,
              "remaining": result.remaining, "in_use": result.in_use}
    return counts, result.problem


def run(args: argparse.Namespace) -> int:
    from tao_harness.shims.spool import default_spool_dir

    config = _config(args)
    directory = default_spool_dir(config.run.spool_dir)
    if args.action == "show":
        return _show(directory, args.json)
    if not config.proxy.coordinator_url:
        raise UsageError("flush needs a coordinator: give --coordinator URL or set TAO_COORDINATOR_URL")
    counts, problem = asyncio.run(_flush(directory, config))
    if args.json:
        print_json(counts | {"problem": problem} if problem else counts)
    else:
        print(format_table([tuple(counts.values())], list(counts)))
    if counts["rejected"]:
        print(f"tao spool: the coordinator refused {counts['rejected']} invalid record(s); they were dropped",
              file=sys.stderr)
    if counts["remaining"]:
        print(f"tao spool: {counts['remaining']} record(s) kept for later: coordinator {problem}", file=sys.stderr)
        return 1
    return 0
