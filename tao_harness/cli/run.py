"""`tao-run`: run an agent CLI with its LLM traffic through the proxy and its tool calls reported.

    tao-run [options] -- <agent command...>

The harness is detected from the command's name (claude, opencode, mini, mini-extra, mini-swe-agent;
`--harness` overrides); any other command still runs, with only `OPENAI_BASE_URL` /
`ANTHROPIC_BASE_URL` pointed at the proxy. The exit code is the agent's own.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tao_harness.cli.common import UsageError, check_http_url, cluster_config_from_args
from tao_harness.config import TaoConfig
from tao_harness.shims.launch import HARNESSES

if TYPE_CHECKING:
    from tao_harness.shims.runner import RunPlan

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tao-run", usage="tao-run [options] -- <agent command...>",
        description="Run an agent CLI (Claude Code, OpenCode, mini-SWE-agent, or any command) with its LLM "
        "requests sent through the TAO proxy and its tool calls reported to the coordinator.")
    parser.add_argument("--coordinator", metavar="URL", help="coordinator root URL (env TAO_COORDINATOR_URL); "
                        "without one, an embedded coordinator + proxy is started for this run")
    parser.add_argument("--proxy", metavar="URL", help="use this running `tao proxy` instead of a private one")
    parser.add_argument("--session", metavar="ID", help="session id (default: a new random id); letters, "
                        "digits and . _ : - only")
    parser.add_argument("--labels", nargs="+", action="extend", default=[], metavar="K=V",
                        help="labels stored with the session, e.g. --labels task=django-1 run=a")
    parser.add_argument("--db", metavar="URL", help="history database URL for the embedded coordinator "
                        "(SQLAlchemy URL, env TAO_DB_URL; default SQLite in the user data directory)")
    parser.add_argument("--harness", choices=HARNESSES,
                        help="which shim to install (default: detected from the command name)")
    parser.add_argument("--replica", action="append", default=[], metavar="ID=URL[@RANK]",
                        help="a replica for the embedded or private proxy (repeatable)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML or YAML config file")
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options before `--`, the agent command after it (or after the first non-option word)."""
    if "--" in argv:
        cut = list(argv).index("--")
        return list(argv[:cut]), list(argv[cut + 1:])
    return list(argv), []


def _labels(items: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--labels {item!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


def _config(args: argparse.Namespace) -> TaoConfig:
    config = cluster_config_from_args(args, {"store.url": args.db, "proxy.coordinator_url": args.coordinator})
    check_http_url("--coordinator (or TAO_COORDINATOR_URL)", config.proxy.coordinator_url)
    check_http_url("--proxy", args.proxy)
    return config


def _plan(argv: Sequence[str]) -> RunPlan:
    # Imports kept lazy so `tao-run --help` stays fast.
    from tao_harness.shims.launch import detect_harness
    from tao_harness.shims.runner import RunPlan

    options, command = split_command(argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(options)
    if rest and not command:
        command = rest if not rest[0].startswith("-") else []
        rest = [] if command else rest
    if rest:
        raise UsageError(f"unrecognized arguments: {' '.join(rest)}")
    if not command:
        raise UsageError("no agent command: give it after --, e.g. tao-run -- claude -p 'fix the bug'")
    if args.session is not None and not SESSION_ID.match(args.session):
        raise UsageError(f"--session {args.session!r}: use letters, digits and . _ : - (at most 128)")
    labels, config = _labels(args.labels), _config(args)
    harness = args.harness or detect_harness(command)
    if harness is None:
        print(f"tao-run: warning: unknown harness {os.path.basename(command[0])!r}: LLM traffic goes through "
              "the proxy via OPENAI_BASE_URL/ANTHROPIC_BASE_URL, no tool events (use --harness to choose)",
              file=sys.stderr)
        harness = "generic"
    logging.basicConfig(level=args.log_level.upper(), format="tao-run %(levelname)s %(name)s: %(message)s")
    return RunPlan(argv=tuple(command), harness=harness, session=args.session or f"run-{uuid.uuid4().hex[:16]}",
                   config=config, labels=labels, coordinator_url=config.proxy.coordinator_url,
                   proxy_url=args.proxy, token=os.environ.get("TAO_TOKEN") or None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from tao_harness.shims.launch import LaunchError
    from tao_harness.shims.runner import run_agent
    from tao_harness.store.engine import StoreError

    try:
        plan = _plan(argv)
        return asyncio.run(run_agent(plan))
    except (UsageError, LaunchError, StoreError) as exc:  # StoreError: the embedded coordinator's --db
        print(f"tao-run: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
