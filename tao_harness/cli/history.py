"""`tao history`: query and maintain the tool-duration history.

Subcommands: tools, calls, predict, export, import, plot, accuracy, prune (handlers in
history_commands.py). Every listing has --json; every subcommand takes --db and --config.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.exc import SQLAlchemyError

from tao_harness.cli import history_commands as commands
from tao_harness.cli import history_accuracy, history_spool
from tao_harness.cli.common import UsageError, add_store_options, new_file
from tao_harness.store.transfer import FORMATS


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _common(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    add_store_options(parser)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="history_command", metavar="SUBCOMMAND", required=True)

    def sub(name: str, help_text: str, handler: Callable[[argparse.Namespace], int], **kw: bool) -> Any:
        command = subs.add_parser(name, help=help_text, description=help_text)
        _common(command, **kw)
        command.set_defaults(_history_run=handler)
        return command

    sub(
        "tools",
        "one row per tool family: n, mean, p50, p90, p99, max and the current bound D",
        commands.cmd_tools,
    )
    calls = sub("calls", "recent tool calls, newest first", commands.cmd_calls)
    calls.add_argument("--session", help="only this session id")
    calls.add_argument("--family", help="only this family key, e.g. bash:pytest")
    calls.add_argument("--since", help="only calls started since: a duration ago (2h, 7d) or an ISO time")
    calls.add_argument("--limit", type=_positive_int, default=50, help="most calls to show (default 50)")
    pred = sub("predict", "family, hints and predicted duration of a tool call", commands.cmd_predict)
    pred.add_argument(
        "--tool", required=True, help="tool name as the harness reports it (Bash, bash, Read, ...)"
    )
    pred.add_argument("--command", help="shell command text (default: the command in --args)")
    pred.add_argument(
        "--args",
        metavar="JSON",
        help="the tool's own argument object, e.g. "
        '\'{"command": "npm test", "timeout": 120000}\' or \'{"timeout_ms": 60000}\'',
    )
    pred.add_argument("--session", default="", help="session id: its earlier runs of the command weigh most")
    pred.add_argument("--elapsed", type=float, default=0.0, metavar="S",
                      help="seconds the call has already run (conditions the return probability)")
    pred.add_argument(
        "--env-timeout",
        type=float,
        metavar="S",
        help="harness-wide timeout in seconds (mini-SWE-agent environment.timeout)",
    )
    pred.add_argument(
        "--harness",
        choices=("claude-code", "opencode", "mini-swe-agent"),
        help="harness that sent the call: durations are learned per harness, and its --args timeouts are "
        "read in its unit (mini-swe-agent: seconds; claude-code, opencode and the default: milliseconds)",
    )
    export = sub("export", "write every tool call as CSV or JSON Lines", commands.cmd_export, json_flag=False)
    export.add_argument("--format", choices=FORMATS, default="jsonl", help="file format (default jsonl)")
    export.add_argument("-o", "--output", type=new_file, help="output file (default: standard output)")
    imp = sub(
        "import",
        "read calls written by `tao history export` (CSV or JSON Lines)",
        commands.cmd_import,
        json_flag=False,
    )
    imp.add_argument("file", type=Path, help="export file, or - for standard input")
    spool_import = sub("import-spool", "write spooled shim events straight into the history (no coordinator)",
                       history_spool.cmd_import_spool)
    history_spool.add_arguments(spool_import)
    plot = sub("plot", "duration histogram and CDF per family (PNG)", commands.cmd_plot, json_flag=False)
    plot.add_argument("--family", help="plot only this family")
    plot.add_argument(
        "--max-families", type=_positive_int, default=8, help="plot at most this many, most frequent first"
    )
    plot.add_argument("-o", "--output", type=new_file, required=True, help="image file to write (e.g. out.png)")
    accuracy = sub(
        "accuracy",
        "replay stored calls in time order: the forecast beside the baselines (MAE, share within 0.5 s, "
        "bound coverage, readiness calibration), overall, per harness and per family",
        history_accuracy.cmd_accuracy,
    )
    history_accuracy.add_arguments(accuracy)
    prune = sub("prune", "delete calls, requests and plans older than an age", commands.cmd_prune)
    prune.add_argument("--older-than", required=True, metavar="AGE", help="age such as 30d, 12h, 90m")


def run(args: argparse.Namespace) -> int:
    try:
        return int(args._history_run(args))
    except SQLAlchemyError as exc:  # e.g. the server went away mid-command: one line, not a traceback
        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"database error: {reason}") from None
