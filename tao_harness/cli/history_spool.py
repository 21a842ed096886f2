"""`tao history import-spool`: tool events a shim spooled, written straight into the history store.

For when no coordinator will come back to take them (`tao spool flush` delivers them to a coordinator
instead). Each spool file is claimed (locked) so a concurrent `tao-run` or flush never double-reads it;
a file is removed once its records are stored. Records that can never be imported (a malformed event)
are counted and dropped; records for other coordinator routes map to session rows.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

from tao_harness.cli.common import UsageError, open_history, print_json
from tao_harness.coordinator.recording import tool_call_record
from tao_harness.events import EventError, events_from_body
from tao_harness.store.limits import MAX_HARNESS_CHARS, finite, fit_json, identifier
from tao_harness.store.records import SessionRecord, StoreRecord
from tao_harness.tables import format_table

_SESSION_END = re.compile(r"^/v1/sessions/([^/]+)/end$")


def store_records(path: str, body: dict[str, Any], spooled_at: float) -> Iterator[StoreRecord]:
    """The store rows one spooled coordinator request stands for, fitted to what the store can hold
    (tao_harness.store.limits); EventError when it holds none, LimitError when a name cannot be stored."""
    if path == "/v1/events":
        for event in events_from_body(body):
            yield tool_call_record(event)
    elif path == "/v1/sessions" and isinstance(body.get("session"), str):
        labels = body.get("labels") if isinstance(body.get("labels"), dict) else None
        harness = body.get("harness") if isinstance(body.get("harness"), str) else None
        started = body.get("started_at")
        yield SessionRecord(
            id=identifier("session", body["session"]),
            harness=None if harness is None else identifier("harness", harness, MAX_HARNESS_CHARS),
            labels=None if labels is None else fit_json(labels),
            started_at=finite("started_at", started) if isinstance(started, (int, float)) else spooled_at)
    elif (match := _SESSION_END.match(path)) is not None:
        ended = body.get("ended_at")  # absent from spools of older runs
        yield SessionRecord(id=identifier("session", unquote(match.group(1))),
                            ended_at=finite("ended_at", ended) if isinstance(ended, (int, float)) else spooled_at)
    else:
        raise EventError(f"path: no store rows for {path!r}")


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--spool-dir", type=Path, metavar="DIR",
                         help="spool directory (default: the config's run.spool_dir or the user data directory)")


def cmd_import_spool(args: argparse.Namespace) -> int:
    from tao_harness.shims.spool import claim, default_spool_dir, spool_files
    from tao_harness.store.engine import StoreError
    from tao_harness.store.writer import StoreWriter

    store, config = open_history(args, create=True)
    directory = args.spool_dir or default_spool_dir(config.run.spool_dir)
    counts = {"files": 0, "records": 0, "rows": 0, "dropped": 0, "in_use": 0}
    with store:
        try:
            with StoreWriter.from_config(store, config.store) as writer:
                for path in spool_files(directory):
                    claimed = claim(path)
                    if claimed is None:
                        counts["in_use"] += 1
                        continue
                    counts["files"] += 1
                    for record in claimed.records:
                        counts["records"] += 1
                        try:
                            rows = list(store_records(record.path, record.body, record.spooled_at))
                        except (EventError, TypeError, ValueError):
                            counts["dropped"] += 1
                            continue
                        writer.submit_many(rows)
                        counts["rows"] += len(rows)
                    writer.flush()
                    claimed.finish([])
        except StoreError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        print_json(counts | {"directory": str(directory)})
    else:
        print(f"spool directory: {directory}")
        print(format_table([tuple(counts.values())], list(counts)))
    return 0
