from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import threading
import time
from dataclasses import replace
from collections.abc import Callable

import pytest
from sqlalchemy import func, select, text

from tao_harness.config import StoreConfig
from tao_harness.store import writer as writer_module
from tao_harness.store.engine import Store, StoreError, open_store
from tao_harness.store.models import Plan, Session, ToolCall
from tao_harness.store.records import LLMRequestRecord, PlanRecord, SessionRecord, ToolCallRecord
from tao_harness.store.redact import MASK
from tao_harness.store.upsert import write_batch
from tao_harness.store.writer import StoreWriter


def _start(call: str, session: str, started: float = 100.0) -> ToolCallRecord:
    return ToolCallRecord(
        id=call,
        session_id=session,
        harness="claude_code",
        tool_name="Bash",
        family="bash:pytest",
        command="pytest -x",
        hints={"min_s": None, "max_s": 120.0, "background": False},
        timeout_s=120.0,
        background=False,
        started_at=started,
    )


def _end(call: str, session: str, duration: float = 2.5) -> ToolCallRecord:
    return ToolCallRecord(
        id=call, session_id=session, ended_at=100.0 + duration, duration_s=duration, status="ok", exit_code=0
    )


def _count(store: Store, where: str = "duration_s IS NOT NULL") -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM tool_calls WHERE {where}")).scalar_one())


def test_start_then_end_merge_into_one_row(db_url: str) -> None:
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            writer.submit(_start("c1", "s1"))
            writer.flush()  # the end arrives in a later batch: a real upsert
            writer.submit(_end("c1", "s1"))
            writer.submit(_start("c2", "s1"))
            writer.submit(_end("c2", "s1", 4.0))  # same batch: merged before the statement
            writer.submit(SessionRecord(id="s1", harness="claude_code", labels={"task": "django-1"}))
            writer.submit(SessionRecord(id="s1", ended_at=200.0))
        with store.engine.connect() as conn:
            rows = {r.id: r for r in conn.execute(select(ToolCall))}
            session = conn.execute(select(Session)).one()
    assert set(rows) == {"c1", "c2"}
    assert (rows["c1"].tool_name, rows["c1"].duration_s, rows["c1"].timeout_s, rows["c1"].status) == (
        "Bash",
        2.5,
        120.0,
        "ok",
    )
    assert rows["c1"].hints == {"min_s": None, "max_s": 120.0, "background": False}
    assert rows["c2"].duration_s == 4.0 and rows["c2"].command == "pytest -x"
    assert (session.harness, session.started_at, session.ended_at, session.labels) == (
        "claude_code",
        100.0,
        200.0,
        {"task": "django-1"},
    )


def test_secrets_are_redacted_before_storing(db_url: str) -> None:
    config = StoreConfig(redact_patterns=(r"corp-\d+",))
    with open_store(db_url) as store:
        with StoreWriter.from_config(store, config) as writer:
            writer.submit(
                ToolCallRecord(
                    id="c1",
                    session_id="s1",
                    tool_name="Bash",
                    command="API_KEY=abc123 run corp-42",
                    args={"command": "API_KEY=abc123 run corp-42", "timeout": 1000},
                )
            )
        with store.engine.connect() as conn:
            row = conn.execute(select(ToolCall.command, ToolCall.args)).one()
    assert row.command == f"API_KEY={MASK} run {MASK}"
    assert row.args == {"command": f"API_KEY={MASK} run {MASK}", "timeout": 1000}
    assert "abc123" not in str(row)


def test_llm_requests_and_plans(db_url: str) -> None:
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            writer.submit(
                LLMRequestRecord(id="r1", session_id="s9", replica="r0", prompt_tokens=900, started_at=5.0)
            )
            writer.submit(LLMRequestRecord(id="r1", session_id="s9", cached_tokens=800, ttft_s=0.2))
            writer.submit(
                PlanRecord(
                    created_at=6.0,
                    policy="tao",
                    solver="dp",
                    solve_ms=1.5,
                    n_waiting=4,
                    n_assigned=3,
                    objective=(1200.0, 2.0, 5000.0),
                )
            )
        with store.engine.connect() as conn:
            request = conn.execute(
                text("SELECT prompt_tokens, cached_tokens, ttft_s FROM llm_requests")
            ).one()
            plan = conn.execute(select(Plan.__table__)).one()
            session_started = conn.execute(select(Session.started_at)).scalar_one()
    assert tuple(request) == (900, 800, 0.2)
    assert (plan.policy, plan.n_assigned, plan.objective, plan.fallback) == (
        "tao",
        3,
        [1200.0, 2.0, 5000.0],
        False,
    )
    assert session_started == 5.0  # the placeholder session row took the request's start time


def test_flushes_by_size_and_by_interval(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        with StoreWriter(store, batch_size=10, flush_interval_s=60.0) as writer:
            writer.submit_many(_start(f"a{i}", "s") for i in range(10))
            assert _wait_for(lambda: _count(store, "1=1") == 10)
        with StoreWriter(store, batch_size=10_000, flush_interval_s=0.05) as writer:
            writer.submit(_start("b1", "s"))
            assert _wait_for(lambda: _count(store, "1=1") == 11)


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_failed_batch_is_reported_not_hidden(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        writer = StoreWriter(store)
        writer.submit(_start("first", "s"))
        writer.submit(ToolCallRecord(id="bad", session_id="s", args={"x": object()}))  # not JSON
        writer.submit(_start("same-batch", "s"))
        with pytest.raises(StoreError, match="1 records could not be written"):
            writer.flush()
        writer.flush()  # reported once
        writer.submit(_start("later", "s"))
        writer.close()
        with store.engine.connect() as conn:
            assert set(conn.execute(text("SELECT id FROM tool_calls")).scalars()) == {
                "first",
                "same-batch",
                "later",
            }
        with pytest.raises(StoreError, match="closed"):
            writer.submit(_start("late", "s"))


@pytest.mark.parametrize("writers", [64])
def test_many_writer_threads_lose_nothing(db_url: str, writers: int) -> None:
    calls_each = 10
    with open_store(db_url, pool_size=4) as store:

        def work(worker: int) -> None:
            with StoreWriter(store, batch_size=8, flush_interval_s=0.01) as writer:
                for i in range(calls_each):
                    writer.submit(_start(f"w{worker}-c{i}", f"w{worker}-s{i % 3}"))
                    writer.submit(_end(f"w{worker}-c{i}", f"w{worker}-s{i % 3}"))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _count(store) == writers * calls_each
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(Session)).scalar_one() == writers * 3


async def test_asyncio_tasks_share_one_writer(db_url: str) -> None:
    with open_store(db_url) as store:
        writer = StoreWriter(store, batch_size=64, flush_interval_s=0.01)

        async def session(n: int) -> None:
            for i in range(10):
                writer.submit(_start(f"t{n}-{i}", f"t{n}"))
                await asyncio.sleep(0)
                writer.submit(_end(f"t{n}-{i}", f"t{n}"))

        await asyncio.gather(*(session(n) for n in range(64)))
        await writer.aflush()
        assert _count(store) == 64 * 10
        writer.close()


def _writer_process(url: str, proc: int, threads: int, calls: int) -> None:
    store = open_store(url, pool_size=2)

    def work(thread: int) -> None:
        with StoreWriter(store, batch_size=16, flush_interval_s=0.02) as writer:
            for i in range(calls):
                call, session = f"p{proc}-t{thread}-c{i}", f"p{proc}-t{thread}"
                writer.submit(
                    ToolCallRecord(id=call, session_id=session, tool_name="Bash", started_at=float(i))
                )
                writer.submit(ToolCallRecord(id=call, session_id=session, duration_s=0.5, ended_at=i + 0.5))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


def test_many_writer_processes_lose_nothing(db_url: str) -> None:
    processes, threads, calls = 4, 16, 10  # 64 concurrent writers in 4 processes, each with its own engine
    open_store(db_url).close()  # the schema exists, and no connection is open, before the fork
    # spawn, not fork: this test process has threads (xdist's, HiGHS's, earlier tests'), and a fork can
    # copy a lock one of them holds into a child that then waits on it forever (and, on PostgreSQL, keeps
    # its connections and their locks, so dropping the test's schema would wait too)
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(target=_writer_process, args=(db_url, p, threads, calls), daemon=True)
        for p in range(processes)
    ]
    try:
        for child in children:
            child.start()
        deadline = time.monotonic() + 120
        for child in children:
            child.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(10)
    assert [child.exitcode for child in children] == [0] * processes
    with open_store(db_url) as store:
        assert _count(store) == processes * threads * calls


def test_sessions_numbering_calls_alike_keep_their_own_rows(db_url: str) -> None:
    # Harnesses number calls per session (call_1, call_2, ...): the same id in two sessions is two calls.
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            for session, duration in (("s1", 1.0), ("s2", 2.0)):
                for call in ("call_1", "call_2", "call_3"):
                    writer.submit(_start(call, session))
                    writer.submit(_end(call, session, duration))
        with store.engine.connect() as conn:
            rows = {(r.session_id, r.id): r.duration_s for r in conn.execute(select(ToolCall))}
    assert len(rows) == 6
    assert {rows[("s1", f"call_{n}")] for n in (1, 2, 3)} == {1.0}
    assert {rows[("s2", f"call_{n}")] for n in (1, 2, 3)} == {2.0}


async def test_acknowledging_waiters_hold_no_threads(sqlite_url: str) -> None:
    # The coordinator acknowledges each event POST with `acommit`: were every waiter a thread of the loop's
    # small default executor, hundreds of POSTs would queue there behind one another (and the planner,
    # which runs there too, behind them). With that executor busy, acknowledgments still come.
    loop = asyncio.get_running_loop()
    busy, release = threading.Event(), threading.Event()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    blocker = loop.run_in_executor(None, lambda: (busy.set(), release.wait(60)))
    try:
        assert busy.wait(10)
        with open_store(sqlite_url) as store:
            writer = StoreWriter(store, flush_interval_s=60.0)
            acks = []
            for n in range(8):
                first = writer.submit(_start(f"c{n}", "s"))
                acks.append(writer.acommit(first, first + 1))
            results = await asyncio.wait_for(asyncio.gather(*acks), 20)
            assert [r.unavailable for r in results] == [None] * 8
            assert _count(store, "1=1") == 8
            writer.close()
    finally:
        release.set()
        await blocker


def _hold_writes(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event, list[int]]:
    """Every batch the writer writes sets `writing`, then waits for `go_on`; returns those two events and
    the batches' sizes, in order."""
    writing, go_on, batches = threading.Event(), threading.Event(), []

    def held(conn: object, records: list[object], redactor: object) -> None:
        batches.append(len(records))
        writing.set()
        assert go_on.wait(30)
        write_batch(conn, records, redactor)

    monkeypatch.setattr(writer_module, "write_batch", held)
    return writing, go_on, batches


def test_waiters_share_one_transaction(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Group commit: records and flush requests queued while a batch is being written go into the next
    # batch together, not one transaction per waiter (a loaded coordinator acknowledged ~one event per write).
    writing, go_on, batches = _hold_writes(monkeypatch)
    with open_store(sqlite_url) as store:
        writer = StoreWriter(store, flush_interval_s=60.0)
        writer.submit(_start("first", "s"))
        flushing = [threading.Thread(target=writer.flush)]
        flushing[0].start()
        assert writing.wait(10)  # the first batch is being written; the writer takes nothing meanwhile
        for n in range(10):
            writer.submit(_start(f"c{n}", "s"))
            waiter = threading.Thread(target=writer.flush)
            waiter.start()
            flushing.append(waiter)
            assert _wait_for(lambda: writer._queue.qsize() == 2 * (n + 1))  # its flush request is queued
        go_on.set()
        for waiter in flushing:
            waiter.join(30)
        writer.close()
        assert _count(store, "1=1") == 11
    assert batches == [1, 10]


async def test_waiters_queued_behind_the_stop_are_answered(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A flush (or an event's acknowledgment) asked for while the writer is closing lands behind the stop
    # in the queue: the thread answers it as it ends, so it neither waits forever nor times out.
    writing, go_on, _ = _hold_writes(monkeypatch)
    with open_store(sqlite_url) as store:
        writer = StoreWriter(store, flush_interval_s=0.0)
        first = writer.submit(_start("first", "s"))
        assert writing.wait(10)  # the thread is inside its first write
        closing = threading.Thread(target=writer.close)
        closing.start()
        assert _wait_for(lambda: writer._queue.qsize() == 1)  # the stop is queued
        flushed = threading.Thread(target=writer.flush, args=(30,))
        flushed.start()
        acknowledged = asyncio.ensure_future(writer.acommit(first, first + 1))
        await asyncio.sleep(0)  # the acknowledgment is asked for
        assert _wait_for(lambda: writer._queue.qsize() == 3)  # both behind the stop
        go_on.set()
        result = await asyncio.wait_for(acknowledged, 10)
        flushed.join(10)
        closing.join(10)
        assert not flushed.is_alive() and not closing.is_alive()
        assert result.unavailable is None and _count(store, "1=1") == 1
        writer.flush(0.1)  # after the end: at once


def test_closing_gives_up_on_a_database_that_stopped_answering(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing, go_on, _ = _hold_writes(monkeypatch)
    with open_store(sqlite_url) as store:
        writer = StoreWriter(store, flush_interval_s=0.0)
        writer.submit(_start("first", "s"))
        assert writing.wait(10)  # the database "hangs" inside this write
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"still writing after 0.2 s; up to 1 records"):
            writer.close(timeout=0.2)
        assert time.monotonic() - started < 5
        go_on.set()  # the write ends at last: the thread, stopping, lets go
        writer._thread.join(10)
        assert not writer._thread.is_alive()


@pytest.mark.parametrize("separate_batches", [True, False])
@pytest.mark.parametrize("proxy_first", [True, False])
def test_a_shims_record_of_a_call_wins_over_the_proxys(db_url: str, separate_batches: bool,
                                                       proxy_first: bool) -> None:
    """The proxy's span (read from the traffic) only fills in what the shim's record left unknown, in
    either order of arrival, within one batch or across batches."""
    proxy = [ToolCallRecord(id="c1", session_id="s1", tool_name="Bash", command="pytest -x", started_at=99.0,
                            harness=None, source="proxy", args={"command": "pytest -x", "description": "d"}),
             ToolCallRecord(id="c1", session_id="s1", ended_at=103.5, duration_s=4.5, status="error",
                            source="proxy")]
    shim = [replace(_start("c1", "s1"), args=None, source="shim"),
            ToolCallRecord(id="c1", session_id="s1", ended_at=102.5, duration_s=2.5, status="ok", exit_code=0,
                           source="shim")]
    with open_store(db_url) as store:
        with StoreWriter(store) as writer:
            for record in (*proxy, *shim) if proxy_first else (*shim, *proxy):
                writer.submit(record)
                if separate_batches:
                    writer.flush()
        with store.engine.connect() as conn:
            [row] = conn.execute(select(ToolCall)).all()
    assert (row.started_at, row.ended_at, row.duration_s, row.status, row.exit_code, row.harness) == (
        100.0, 102.5, 2.5, "ok", 0, "claude_code")
    assert row.source == "shim"
    assert row.args == {"command": "pytest -x", "description": "d"}  # only the proxy knew it: filled in
