"""Generate a realistic tool-call history into a fresh SQLite file and query it.

A tour of the tool-duration store alone (no replicas, no coordinator): family keys, hint parsing, the
empirical-Bernstein predictions and the replayed accuracy report, all through the same `tao history`
commands a user would type. `make demo` runs the whole live system instead (`tao demo`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from tao_harness.cli.main import main as tao
from tao_harness.store.engine import open_store, remove_sqlite_file
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.synthetic import generate_history
from tao_harness.store.writer import StoreWriter

ROOT = Path(__file__).resolve().parents[1]


def _section(title: str, command: list[str]) -> None:
    print(f"\n== {title}\n$ tao {shlex.join(command)}", flush=True)
    code = tao(command)
    sys.stdout.flush()
    if code != 0:
        raise SystemExit(code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", type=Path, default=ROOT / "out" / "demo" / "history.db", help="SQLite file to (re)create"
    )
    parser.add_argument("--sessions", type=int, default=80, help="agent sessions to generate")
    parser.add_argument("--seed", type=int, default=42, help="generator seed")
    args = parser.parse_args()

    remove_sqlite_file(args.db)
    args.db.parent.mkdir(parents=True, exist_ok=True)  # out/demo by default: the store makes no folders
    started = time.perf_counter()
    records = generate_history(
        args.sessions, seed=args.seed, start=time.time() - 3 * 86_400, span_s=2 * 86_400
    )
    with open_store(str(args.db)) as store, StoreWriter(store) as writer:
        writer.submit_many(records)
    calls = sum(isinstance(r, ToolCallRecord) for r in records)
    print(
        f"generated {args.sessions} sessions, {calls} tool calls, {len(records)} rows into {args.db} "
        f"in {time.perf_counter() - started:.2f} s"
    )

    db = ["--db", str(args.db)]
    _section("per-family durations and the current bound D", ["history", "tools", *db])
    _section("recent pytest calls", ["history", "calls", "--family", "bash:pytest", "--limit", "5", *db])
    _section(
        "a prediction from history",
        [
            "history",
            "predict",
            "--tool",
            "Bash",
            "--command",
            "cd /repo && python -m pytest tests/test_api.py -x",
            *db,
        ],
    )
    _section(
        "a prediction capped by the Bash tool's timeout",
        [
            "history",
            "predict",
            "--tool",
            "Bash",
            "--args",
            '{"command": "make -j8", "timeout": 5000}',
            "--json",
            *db,
        ],
    )
    _section(
        "replay accuracy (each call predicted from the calls completed before it)",
        ["history", "accuracy", *db],
    )
    print(f"\nTry more: .venv/bin/tao history --help   (the database stays at {args.db})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
