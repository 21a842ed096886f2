"""The `tao history` subcommands: each takes the parsed arguments and returns an exit code.

Reading commands never create a database: a missing or unreadable one becomes a UsageError (one line,
exit code 2). Options are declared in history.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from tao_harness.cli.common import UsageError, history_config, open_history, print_json
from tao_harness.cli.timespec import format_time, parse_duration, parse_since
from tao_harness.config import TaoConfig
from tao_harness.readiness.call import Forecaster
from tao_harness.readiness.estimator import DurationHistory
from tao_harness.store import queries, transfer
from tao_harness.store.engine import (
    Store,
    StoreError,
    new_sqlite_file,
    remove_sqlite_file,
    resolve_url,
    sqlite_file,
)
from tao_harness.store.writer import StoreWriter
from tao_harness.tables import format_table

STAT_FIELDS = ("family", "n", "mean", "p50", "p90", "p99", "max", "bound")
# The table's headers name the unit, as the other tables' do (the JSON keys stay the fields' names).
TABLE_HEADERS = ("family", "n", *(f"{name}_s" for name in STAT_FIELDS[2:]))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _history(store: Store, config: TaoConfig) -> DurationHistory:
    return DurationHistory.from_samples(queries.family_durations(store), config.readiness)


def cmd_tools(args: argparse.Namespace) -> int:
    store, config = open_history(args)
    with store:
        history = _history(store, config)
    stats = [history.stats(family) for family in history.families()]
    overall = history.global_stats()
    rows = [
        {name: getattr(s, name) for name in STAT_FIELDS} for s in [*stats, *([overall] if overall else [])]
    ]
    if args.json:
        print_json(rows, sys.stdout)
    else:
        print(format_table([[row[name] for name in STAT_FIELDS] for row in rows], TABLE_HEADERS))
    return 0


def cmd_calls(args: argparse.Namespace) -> int:
    since = parse_since(args.since, time.time()) if args.since else None
    store, _ = open_history(args)
    with store:
        calls = queries.recent_calls(
            store, session=args.session, family=args.family, since=since, limit=args.limit
        )
    if args.json:
        print_json([dataclasses.asdict(call) for call in calls], sys.stdout)
        return 0
    headers = ("started", "session", "family", "duration_s", "status", "exit", "command")
    rows = [
        (
            format_time(c.started_at),
            c.session_id,
            c.family,
            c.duration_s,
            c.status,
            c.exit_code,
            _short(c.command or c.tool_name),
        )
        for c in calls
    ]
    print(format_table(rows, headers))
    return 0


def _short(text: str | None, width: int = 60) -> str | None:
    """`text` on one line of at most `width` characters: a multi-line command (a heredoc, a script) broke
    the table's rows; its line breaks show as ⏎ and other control characters as spaces."""
    if text is None:
        return None
    flat = _CONTROL.sub(" ", " ⏎ ".join(line.strip() for line in text.strip().splitlines()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _tool_args(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc.msg} (at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise UsageError('--args must be a JSON object, e.g. \'{"command": "npm test", "timeout": 120000}\'')
    if "command" in value and not isinstance(value["command"], str):
        raise UsageError(f'--args: "command" must be a string, got {json.dumps(value["command"])}')
    return value


def cmd_predict(args: argparse.Namespace) -> int:
    tool_args = _tool_args(args.args)
    if args.elapsed < 0:
        raise UsageError(f"--elapsed must be at least 0, got {args.elapsed:g}")
    config = history_config(args)
    forecaster = Forecaster(config.readiness)
    if not _no_database_yet(config.store.url):  # without one, hints and the defaults still answer
        store, config = open_history(args)
        with store:
            forecaster = Forecaster(config.readiness).learn(queries.call_samples(store))
    key, hints = forecaster.describe(args.tool, args.command, tool_args, env_timeout_s=args.env_timeout,
                                     session=args.session, harness=args.harness)
    estimate = forecaster.estimate(key, hints)
    result = estimate.to_json(config.readiness.horizon_s, args.elapsed)
    if args.json:
        print_json(result, sys.stdout)
        return 0
    background = "yes" if hints.background else "no"
    bounds = f"min {_seconds(hints.min_s)}, max {_seconds(hints.max_s)}, background {background}"
    print(f"family     {estimate.family}\nhints      {bounds}")
    if args.elapsed:  # conditioned on the time it has run: never a prediction below it
        print(f"predicted  {result['predicted_s']:.3f} s in all, given it has run {args.elapsed:g} s "
              f"(source: {result['source']}; at its start {result['predicted_at_start_s']:.3f} s)")
    else:
        print(f"predicted  {result['predicted_s']:.3f} s (source: {result['source']})")
    print(f"bound      {estimate.bound_s:.3f} s")
    print(f"ready      P(return within {result['horizon_s']:g} s | ran {args.elapsed:g} s) = "
          f"{result['p_return_within_horizon']:.2f}; expected left {result['remaining_s']:.3f} s")
    return 0


def _no_database_yet(url: str | None) -> bool:
    try:
        path = sqlite_file(resolve_url(url))
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    return path is not None and not path.exists()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def cmd_export(args: argparse.Namespace) -> int:
    store, _ = open_history(args)
    with store:
        if args.output is None:
            transfer.WRITERS[args.format](queries.all_calls(store), sys.stdout)
            return 0
        with _open_output(args.output) as out:
            count = transfer.WRITERS[args.format](queries.all_calls(store), out)
    print(f"exported {count} calls to {args.output}", file=sys.stderr)
    return 0


def _open_output(path: Path) -> Any:
    try:
        return path.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def cmd_import(args: argparse.Namespace) -> int:
    try:
        source = sys.stdin if str(args.file) == "-" else args.file.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    created = new_sqlite_file(history_config(args).store.url)
    store, config = open_history(args, create=True)
    count = 0
    try:
        with store, source:
            stored_before = queries.count_calls(store)
            with StoreWriter.from_config(store, config.store) as writer:
                for count, record in enumerate(transfer.read_calls(source), 1):
                    writer.submit(record)
            # A call already stored (same id) is updated in place, not added: say how many were new.
            new = queries.count_calls(store) - stored_before
    except (transfer.ImportFormatError, StoreError, UnicodeDecodeError) as exc:
        if created is not None:  # the database this import created holds nothing: not left behind
            remove_sqlite_file(created)
        raise UsageError(f"{args.file}: {exc}") from None
    print(f"read {count} calls: {new} new, {count - new} already in {store.name}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from tao_harness.cli.history_plot import plot_durations

    store, _ = open_history(args)
    with store:
        samples = list(queries.family_durations(store, args.family))
    if not samples:
        raise UsageError(f"no completed calls{' in family ' + args.family if args.family else ''} to plot")
    families = plot_durations(samples, args.output, max_families=args.max_families)
    print(f"wrote {args.output} ({len(families)} families: {', '.join(families)})")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    age = parse_duration(args.older_than)
    store, _ = open_history(args)
    with store:
        result = queries.prune(store, time.time() - age)
    if args.json:
        print_json(dataclasses.asdict(result), sys.stdout)
    else:
        print(
            ", ".join(f"{count} {table}" for table, count in dataclasses.asdict(result).items()) + " deleted"
        )
    return 0
