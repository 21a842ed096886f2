"""Batched background writer: callers hand over records without waiting for the database.

`submit()` only appends to an unbounded in-memory queue, so it never blocks (safe to call from an
asyncio event loop or a hot request path). One background thread takes records off the queue and
writes a batch, in one transaction, when `batch_size` records are waiting, when the oldest has waited
`flush_interval_s`, or when `flush()` asks; redaction happens there too, off the caller's path.
Transient failures (SQLite busy, PostgreSQL deadlock or lost connection) are retried with backoff. A
batch that fails otherwise is written record by record, so one record the database refuses (an
"unwritable" one) cannot take the rest of its batch down. Failures are never dropped silently: each
is kept under the number `submit()` returned, `commit(first, end)` tells a caller about its own records
only (the coordinator acknowledges a request by it, so one client's bad record is not reported to the
next), and `flush()`/`close()` report every failure not yet reported as a `StoreError`. The queue is
unbounded on purpose: a slow database costs memory, not stalled agents.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from tao_harness.store.engine import Store, StoreError
from tao_harness.store.records import StoreRecord
from tao_harness.store.redact import Redactor
from tao_harness.store.upsert import write_batch

if TYPE_CHECKING:  # the config module pulls in pydantic; worker processes need not pay for it
    from tao_harness.config import StoreConfig

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
MAX_TRACKED_FAILURES = 10_000  # older ones are only counted until `flush()` reports them


@dataclass(frozen=True)
class _Flush:
    # Called on the writer thread once every record queued before this marker is written or failed.
    done: Callable[[], None]


class _Stop:
    pass


@dataclass(frozen=True)
class _Failure:
    reason: str
    # The database could not be reached or stayed busy (retrying later may work); False: it refused
    # the record itself (retrying will not help).
    transient: bool


@dataclass(frozen=True)
class CommitResult:
    """What became of a range of submitted records."""

    # The reason some were not written because the database was unavailable, else None.
    unavailable: str | None
    # How many the database refused for good (logged and counted in `StoreWriter.unwritable`).
    unwritable: int


def _reason(exc: BaseException) -> str:
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def _transient(exc: Exception) -> bool:
    return isinstance(exc, (OperationalError, PoolTimeout)) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def _backoff(attempt: int) -> float:
    return min(0.02 * 2.0**attempt, 1.0) * (0.5 + random.random())


class StoreWriter:
    """Owns one background thread; use as a context manager or call `close()`."""

    def __init__(
        self,
        store: Store,
        *,
        batch_size: int = 256,
        flush_interval_s: float = 0.2,
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.redactor = redactor or Redactor()
        self._queue: queue.SimpleQueue[tuple[int, StoreRecord] | _Flush | _Stop] = queue.SimpleQueue()
        self._closed = False
        self._stopped = False  # the thread has ended: nothing queued from now on would be served
        # Orders submit() against close() (no record is queued behind the stop), and flush requests
        # against the thread's end (none is queued once nothing would serve it).
        self._lock = threading.Lock()
        self._submitted = 0
        self._written = 0
        self.unwritable = 0
        """Records the database refused for good since the writer started."""
        self._failed_lock = threading.Lock()
        self._failed: dict[int, _Failure] = {}  # by submission number, not yet reported
        self._evicted = 0  # failures no longer tracked by number, not yet reported
        self._evicted_reason = ""
        self._thread = threading.Thread(target=self._run, name="tao-store-writer", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, store: Store, config: StoreConfig) -> StoreWriter:
        redactor = Redactor(tuple(config.redact_patterns), enabled=config.redact)
        return cls(
            store, batch_size=config.batch_size, flush_interval_s=config.flush_interval_s, redactor=redactor
        )

    @property
    def written(self) -> int:
        """Records written so far (records sharing an id within a batch count separately)."""
        return self._written

    @property
    def submitted(self) -> int:
        """The number the next submitted record will get (records are numbered 0, 1, 2 ...)."""
        return self._submitted

    def submit(self, record: StoreRecord) -> int:
        """Queue `record` for writing and return its number; returns at once (the lock is only held for
        a queue append)."""
        with self._lock:
            if self._closed:
                raise StoreError("store writer is closed")
            number = self._submitted
            self._submitted += 1
            self._queue.put((number, record))
            return number

    def submit_many(self, records: Iterable[StoreRecord]) -> None:
        for record in records:
            self.submit(record)

    def _queue_flush(self, flush: _Flush) -> bool:
        """Queue `flush` for the thread to serve once what is queued before it is written; False (and
        not queued) when the thread has ended, having written everything."""
        with self._lock:
            if self._stopped:
                return False
            self._queue.put(flush)
            return True

    def _wait_written(self, timeout: float | None) -> None:
        done = threading.Event()
        if self._queue_flush(_Flush(done.set)) and not done.wait(timeout):
            raise StoreError(f"store writer did not flush within {timeout} s")

    async def _await_written(self) -> None:
        """`_wait_written` for an event loop, without holding a thread while it waits: a coordinator
        acknowledges every event POST this way, and hundreds at once would queue for the loop's few
        default-executor threads (and starve the planner, which runs there too)."""
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not written.done():  # the waiter may have been cancelled meanwhile
                written.set_result(None)

        def done() -> None:  # on the writer thread
            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop closed while its waiter was queued
                pass

        if self._queue_flush(_Flush(done)):
            await written

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything submitted before this call is written; raise if anything failed."""
        self._wait_written(timeout)
        self._raise_failures()

    async def aflush(self) -> None:
        """`flush()` without blocking the event loop."""
        await self._await_written()
        self._raise_failures()

    def commit(self, first: int, end: int, timeout: float | None = None) -> CommitResult:
        """Wait until records `first` to `end - 1` are written or failed; report (once) only on those."""
        self._wait_written(timeout)
        return self._result(first, end)

    async def acommit(self, first: int, end: int) -> CommitResult:
        """`commit()` without blocking the event loop (and without a thread per waiter)."""
        await self._await_written()
        return self._result(first, end)

    def _result(self, first: int, end: int) -> CommitResult:
        with self._failed_lock:
            mine = [self._failed.pop(n) for n in range(first, end) if n in self._failed]
        unavailable = [failure.reason for failure in mine if failure.transient]
        return CommitResult(unavailable[-1] if unavailable else None, len(mine) - len(unavailable))

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued, stop the thread; raise if any batch could not be written, or if the thread
        is still writing after `timeout` seconds (a database that stopped answering: what it still holds is
        then not written; the thread, a daemon, ends with the process)."""
        with self._lock:
            stopping, self._closed = not self._closed, True
            if stopping:
                self._queue.put(_Stop())
        if stopping:
            self._thread.join(timeout)
            if self._thread.is_alive():
                unwritten = self._submitted - self._written - self.unwritable
                raise StoreError(f"store writer still writing after {timeout} s; up to {unwritten} records "
                                 f"submitted to {self.store.name} are not written")
        self._raise_failures()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _raise_failures(self) -> None:
        with self._failed_lock:
            count = self._evicted + len(self._failed)
            reasons = [self._evicted_reason] + [failure.reason for failure in self._failed.values()]
            self._failed.clear()
            self._evicted = 0
        if count:
            raise StoreError(f"{count} records could not be written to {self.store.name}: {reasons[-1]}")

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            with self._lock:
                self._stopped = True
            self._release_waiters()

    def _release_waiters(self) -> None:
        """Answer the flush requests queued behind the stop (or left by a failure): nothing more comes."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Flush):
                item.done()

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            batch: list[tuple[int, StoreRecord]] = []
            waiters: list[_Flush] = []
            item = self._queue.get()
            deadline = time.monotonic() + self.flush_interval_s
            while True:
                if isinstance(item, _Stop):
                    stopping = True
                    break
                if isinstance(item, _Flush):
                    # Someone waits: write what is queued by now and no later. Group commit: the records
                    # and waiters queued behind it join this batch, so a hundred concurrent waiters cost
                    # one transaction, not a hundred.
                    waiters.append(item)
                    deadline = 0.0
                else:
                    batch.append(item)
                    if len(batch) >= self.batch_size:
                        break
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            for waiter in waiters:
                waiter.done()

    def _write(self, batch: list[tuple[int, StoreRecord]]) -> None:
        for attempt in range(MAX_ATTEMPTS):
            try:
                with (
                    self.store.engine.connect().execution_options(tao_begin="IMMEDIATE") as conn,
                    conn.begin(),
                ):
                    write_batch(conn, [record for _, record in batch], self.redactor)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the writer thread must survive it
                if _transient(exc):
                    if attempt + 1 < MAX_ATTEMPTS:
                        time.sleep(_backoff(attempt))
                        continue
                    self._fail(batch, _Failure(_reason(exc), transient=True))
                elif len(batch) > 1:  # one bad record must not take the rest of its batch down with it
                    for item in batch:
                        self._write([item])
                else:
                    self.unwritable += 1
                    self._fail(batch, _Failure(_reason(exc), transient=False))
            else:
                self._written += len(batch)
            return

    def _fail(self, batch: list[tuple[int, StoreRecord]], failure: _Failure) -> None:
        kind = "unavailable" if failure.transient else "refused"
        log.error("store writer: %d records not written (database %s): %s", len(batch), kind, failure.reason)
        with self._failed_lock:
            for number, _ in batch:
                self._failed[number] = failure
            while len(self._failed) > MAX_TRACKED_FAILURES:
                self._evicted += 1
                self._evicted_reason = self._failed.pop(next(iter(self._failed))).reason
