"""Sustained tool-event ingest into the history store, SQLite and (with --pg) PostgreSQL.

Each writer is one StoreWriter (its own background thread and batches) submitting tool_start and
tool_end events for its calls as fast as it can; a run ends when every writer has flushed. Writers
run as threads of one process, or spread over several processes (each with its own engine).
Rates count events (a start and an end per call) from a common start barrier to the last flush, so
process start-up and imports are not counted. Prints one table row per (database, mode, writers).

    .venv/bin/python scripts/bench_ingest.py --pg postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from tao_harness.store.engine import open_store
from tao_harness.store.queries import count_calls
from tao_harness.store.records import ToolCallRecord
from tao_harness.store.writer import StoreWriter
from tao_harness.tables import format_table


def _write_calls(store: Any, tag: str, calls: int) -> None:
    with StoreWriter(store) as writer:
        for i in range(calls):
            call, session, start = f"{tag}-c{i}", f"{tag}-s{i // 50}", 1_790_000_000.0 + i
            writer.submit(
                ToolCallRecord(
                    id=call,
                    session_id=session,
                    harness="bench",
                    tool_name="Bash",
                    family="bash:pytest",
                    command=f"python -m pytest tests/test_{i}.py -x",
                    args={"command": "pytest", "timeout": 120000},
                    started_at=start,
                )
            )
            writer.submit(
                ToolCallRecord(
                    id=call,
                    session_id=session,
                    ended_at=start + 2.5,
                    duration_s=2.5,
                    status="ok",
                    exit_code=0,
                )
            )


def _run_threads(url: str, tag: str, writers: int, calls: int, barrier: Any) -> float:
    store = open_store(url, pool_size=min(writers, 8))
    threads = [
        threading.Thread(target=_write_calls, args=(store, f"{tag}-t{n}", calls)) for n in range(writers)
    ]
    barrier.wait()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = time.time()
    store.close()
    return finished


def _process_main(url: str, tag: str, writers: int, calls: int, barrier: Any, ends: Any) -> None:
    ends.put(_run_threads(url, tag, writers, calls, barrier))


def run_case(url: str, mode: str, writers: int, calls: int, max_procs: int) -> tuple[int, float]:
    """(processes used, events per second) for one configuration on a fresh database at `url`."""
    tag = uuid.uuid4().hex[:8]
    if mode == "threads":
        barrier = threading.Barrier(2)
        result: list[float] = []
        worker = threading.Thread(
            target=lambda: result.append(_run_threads(url, tag, writers, calls, barrier))
        )
        worker.start()
        barrier.wait()
        started = time.time()
        worker.join()
        return 1, 2 * writers * calls / (result[0] - started)
    context = mp.get_context("spawn")
    procs = min(writers, max_procs)
    barrier, ends = context.Barrier(procs + 1), context.Queue()
    children = [
        context.Process(
            target=_process_main, args=(url, f"{tag}-p{p}", writers // procs, calls, barrier, ends)
        )
        for p in range(procs)
    ]
    for child in children:
        child.start()
    barrier.wait()
    started = time.time()
    finished = max(ends.get() for _ in children)
    for child in children:
        child.join()
    return procs, 2 * (writers // procs) * procs * calls / (finished - started)


def _pg_schema_url(base: str, schema: str) -> str:
    return make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pg", metavar="URL", help="also benchmark this PostgreSQL database (a scratch schema is used)"
    )
    parser.add_argument("--events", type=int, default=20_000, help="events per run, split over the writers")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 64], help="concurrent writer counts")
    parser.add_argument("--max-procs", type=int, default=8, help="processes used in process mode, at most")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        targets = [("sqlite", lambda case: f"sqlite:///{Path(scratch) / f'{case}.db'}")]
        admin = create_engine(args.pg, poolclass=NullPool) if args.pg else None
        schemas: list[str] = []
        if admin is not None:

            def pg_target(case: str) -> str:
                schemas.append(f"tao_bench_{uuid.uuid4().hex[:10]}")
                with admin.begin() as conn:
                    conn.execute(text(f'CREATE SCHEMA "{schemas[-1]}"'))
                return _pg_schema_url(args.pg, schemas[-1])

            targets.append(("postgresql", pg_target))
        try:
            for database, make_target in targets:
                for mode in ("threads", "processes"):
                    for writers in args.writers:
                        url = make_target(f"{mode}-{writers}")
                        open_store(url).close()
                        calls = max(1, args.events // (2 * writers))  # a start and an end per call
                        procs, rate = run_case(url, mode, writers, calls, args.max_procs)
                        with open_store(url, create=False) as store:
                            stored = count_calls(store)
                        expected = (writers // procs) * procs * calls
                        lost = "ok" if stored == expected else f"LOST {expected - stored}"
                        rows.append((database, mode, writers, procs, 2 * expected, round(rate), lost))
                        print(
                            f"  {database} {mode} writers={writers}: {rate:,.0f} events/s {lost}", flush=True
                        )
        finally:
            if admin is not None:
                with admin.begin() as conn:
                    for schema in schemas:
                        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                admin.dispose()
    print()
    print(format_table(rows, ("database", "mode", "writers", "procs", "events", "events/s", "rows")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
