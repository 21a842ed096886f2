"""Batched background writer: callers hand over records without waiting for the database.

`submit()` only appends to an unbounded in-memory queue, so it never blocks (safe to call from an
asyncio event loop or a hot request path). One background thread takes records off the queue and
writes a batch, in one transaction, when `batch_size` records are waiting, when the oldest has waited
`flush_interval_s`, or when `flush()` asks; redaction happens there too, off the caller's path.
Transient failures (SQLite busy, PostgreSQL deadlock or lost connection) are retried with backoff; a
batch that still fails is counted and reported by the next `flush()`/`close()` as a `StoreError`,
never dropped silently. The queue is unbounded on purpose: a slow database costs memory, not
stalled agents.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from sqlalchemy.exc import OperationalError

from tao_harness.store.engine import Store, StoreError
from tao_harness.store.records import StoreRecord
from tao_harness.store.redact import Redactor
from tao_harness.store.upsert import write_batch

if TYPE_CHECKING:  # the config module pulls in pydantic; worker processes need not pay for it
    from tao_harness.config import StoreConfig

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class _Flush:
    done: threading.Event


class _Stop:
    pass


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
        self._queue: queue.SimpleQueue[StoreRecord | _Flush | _Stop] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()  # orders submit() against close(): nothing is queued behind the stop
        self._written = 0
        self._failures: list[str] = []
        self._failed_rows = 0
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

    def submit(self, record: StoreRecord) -> None:
        """Queue `record` for writing; returns at once (the lock is only ever held for a queue append)."""
        with self._lock:
            if self._closed:
                raise StoreError("store writer is closed")
            self._queue.put(record)

    def submit_many(self, records: Iterable[StoreRecord]) -> None:
        for record in records:
            self.submit(record)

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything submitted before this call is written; raise if anything failed."""
        if self._thread.is_alive():
            done = threading.Event()
            self._queue.put(_Flush(done))
            if not done.wait(timeout):
                raise StoreError(f"store writer did not flush within {timeout} s")
        self._raise_failures()

    async def aflush(self) -> None:
        """`flush()` without blocking the event loop."""
        await asyncio.to_thread(self.flush)

    def close(self) -> None:
        """Write what is queued, stop the thread; raise if any batch could not be written."""
        with self._lock:
            stopping, self._closed = not self._closed, True
            if stopping:
                self._queue.put(_Stop())
        if stopping:
            self._thread.join()
        self._raise_failures()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _raise_failures(self) -> None:
        if self._failures:
            reasons, rows = self._failures[:], self._failed_rows
            self._failures.clear()
            self._failed_rows = 0
            raise StoreError(f"{rows} records could not be written to {self.store.name}: {reasons[-1]}")

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[StoreRecord] = []
            waiters: list[_Flush] = []
            item = self._queue.get()
            deadline = time.monotonic() + self.flush_interval_s
            while True:
                if isinstance(item, _Stop):
                    stopping = True
                    break
                if isinstance(item, _Flush):
                    waiters.append(item)
                    break
                batch.append(item)
                remaining = deadline - time.monotonic()
                if len(batch) >= self.batch_size or remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            for waiter in waiters:
                waiter.done.set()

    def _write(self, batch: list[StoreRecord]) -> None:
        for attempt in range(MAX_ATTEMPTS):
            try:
                with (
                    self.store.engine.connect().execution_options(tao_begin="IMMEDIATE") as conn,
                    conn.begin(),
                ):
                    write_batch(conn, batch, self.redactor)
            except OperationalError as exc:
                if attempt + 1 < MAX_ATTEMPTS:
                    time.sleep(_backoff(attempt))
                    continue
                self._fail(len(batch), exc)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the writer thread must survive it
                if len(batch) > 1:  # one bad record must not take the rest of its batch down with it
                    for record in batch:
                        self._write([record])
                else:
                    self._fail(len(batch), exc)
            else:
                self._written += len(batch)
            return

    def _fail(self, rows: int, exc: BaseException) -> None:
        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        log.error("store writer: %d records not written: %s", rows, reason)
        self._failures.append(reason)
        self._failed_rows += rows
