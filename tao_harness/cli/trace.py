"""`tao trace`: make synthetic traces, summarize a trace, export recorded sessions from the history store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from tao_harness.cli.common import (
    UsageError,
    add_store_options,
    new_file,
    open_history,
    print_json,
)
from tao_harness.sim.trace import TraceError, dump_trace, read_trace
from tao_harness.sim.trace_stats import NOMINAL_DECODE_TOK_S, Distribution, TraceStats, trace_stats
from tao_harness.tables import format_table


def _write_sessions(sessions: list[Any], output: Path | None) -> None:
    if output is None:
        dump_trace(sessions, sys.stdout)
        return
    try:
        with output.open("w", encoding="utf-8") as out:
            dump_trace(sessions, out)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    print(f"wrote {len(sessions)} sessions to {output}", file=sys.stderr)


def cmd_generate(args: argparse.Namespace) -> int:
    from tao_harness.sim.workloads import WorkloadError, generate

    try:
        sessions = generate(args.workload, args.sessions, args.seed, args.tool_calls)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    _write_sessions(sessions, args.output)
    return 0


def load_trace(path: Path) -> list[Any]:
    """Read a trace for a command: any problem becomes a one-line UsageError."""
    try:
        sessions = read_trace(path)
    except TraceError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not sessions:
        raise UsageError(f"{path}: the trace holds no sessions")
    return sessions


def _distribution_rows(stats: TraceStats) -> list[list[Any]]:
    named: list[tuple[str, Distribution]] = [
        ("turns per session", stats.turns_per_session),
        ("input tokens per turn", stats.input_tokens_per_turn),
        ("output tokens per turn", stats.output_tokens_per_turn),
        ("output tokens per session", stats.output_tokens_per_session),
        ("context tokens per session", stats.context_tokens_per_session),
        ("tool duration per call (s)", stats.tool_duration_s),
        ("tool time per session (s)", stats.tool_time_per_session_s),
    ]
    return [[name, d.count, d.mean, d.p50, d.p90, d.p99, d.max] for name, d in named]


def print_stats(stats: TraceStats, out: TextIO | None = None, top: int = 10) -> None:
    out = out or sys.stdout  # looked up per call: tests and pipes may replace sys.stdout
    groups = ", ".join(f"{group} ({count})" for group, count in stats.prefix_groups)
    out.write(f"sessions {stats.sessions}   turns {stats.turns}   tool calls {stats.tool_calls}\n")
    out.write(f"prefix groups: {groups}\n")
    out.write(
        f"time in tools: {stats.tool_share:.1%} (LLM time at a nominal "
        f"{stats.nominal_decode_tok_s:g} tok/s per session)\n\n"
    )
    out.write(format_table(_distribution_rows(stats), ["quantity", "n", "mean", "p50", "p90", "p99", "max"]))
    out.write("\n\n")
    rows = [[f.family, f.calls, f.mean_s, f.p90_s, f.calls * f.mean_s] for f in stats.families[:top]]
    out.write(format_table(rows, ["tool family", "calls", "mean s", "p90 s", "total s"]))
    out.write("\n")


def cmd_stats(args: argparse.Namespace) -> int:
    if args.decode_tok_s <= 0 or args.top < 0:
        raise UsageError("--decode-tok-s must be > 0 and --top at least 0")
    stats = trace_stats(load_trace(args.trace), decode_tok_s=args.decode_tok_s)
    if args.json:
        print_json(stats.to_json(), sys.stdout)
    else:
        print_stats(stats, top=args.top)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tao_harness.sim.trace_export import export_trace

    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    store, _ = open_history(args)
    with store:
        sessions = export_trace(store, session=args.session, harness=args.harness, limit=args.limit)
    if not sessions:
        raise UsageError("no finished sessions with LLM requests match")
    _write_sessions(sessions, args.output)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tao_harness.sim.workloads import REAL_TOOLS, WORKLOADS

    subs = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)

    def sub(
        name: str, help_text: str, handler: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        command = subs.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_trace_run=handler)
        return command

    gen = sub(
        "generate",
        "write a synthetic trace (JSON Lines) for a published workload, or one replaying recorded tool calls",
        cmd_generate,
    )
    gen.add_argument(
        "--workload",
        required=True,
        choices=(*WORKLOADS, REAL_TOOLS),
        help=f"workload whose statistics to follow; {REAL_TOOLS} replays the calls of --tool-calls",
    )
    gen.add_argument(
        "--tool-calls",
        type=Path,
        metavar="FILE",
        help=f"recorded tool calls as `tao history export` writes them (only with --workload {REAL_TOOLS})",
    )
    gen.add_argument("--sessions", type=int, required=True, metavar="N", help="number of sessions")
    gen.add_argument(
        "--seed", type=int, default=0, metavar="S", help="random seed; same seed, same trace (default 0)"
    )
    gen.add_argument("-o", "--output", type=new_file, metavar="FILE", help="write here instead of stdout")

    stats = sub(
        "stats", "sessions, turns, token and tool-duration distributions, share of time in tools", cmd_stats
    )
    stats.add_argument("trace", type=Path, metavar="FILE", help="trace file (JSON Lines)")
    stats.add_argument(
        "--decode-tok-s",
        type=float,
        default=NOMINAL_DECODE_TOK_S,
        metavar="R",
        help="per-session decode speed used to estimate LLM time for the tool share "
        f"(default {NOMINAL_DECODE_TOK_S:g})",
    )
    stats.add_argument("--top", type=int, default=10, metavar="N", help="tool families to list (default 10)")
    stats.add_argument("--json", action="store_true", help="print JSON instead of tables")

    export = sub(
        "export",
        "turn finished sessions in the history store (LLM requests + tool calls) into a trace",
        cmd_export,
    )
    add_store_options(export)
    export.add_argument("--session", help="only this session id")
    export.add_argument(
        "--harness", help="only sessions of this harness (claude_code, opencode, mini_swe_agent)"
    )
    export.add_argument("--limit", type=int, metavar="N", help="at most N sessions, oldest first")
    export.add_argument("-o", "--output", type=new_file, metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    return int(args._trace_run(args))
