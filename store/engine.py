"""Opening the history database: URL resolution, SQLite/PostgreSQL engine set-up, schema check.

SQLite gets a busy timeout (concurrent writers wait instead of failing) and enforced foreign keys, set
per connection by a connect event, and WAL (readers never block the writer), set once the schema check
has accepted the file and only by an opener that may write: a file that is not ours is left as it was.
Write transactions can ask for `BEGIN IMMEDIATE` (execution option `tao_begin="IMMEDIATE"`) so a writer
takes the lock up front instead of failing on a read-to-write upgrade. Every failure to open becomes a `StoreError`
whose message is one readable line.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import platformdirs
from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from tao_harness.store.migrations import SchemaError, ensure_schema

SQLITE_BUSY_TIMEOUT_MS = 30_000
OPEN_ATTEMPTS = 5
DEFAULT_FILE_NAME = "history.db"

T = TypeVar("T")


class StoreError(Exception):
    """The database cannot be opened or used; the message is one line naming the database."""


def default_path() -> Path:
    """The default SQLite file, under the user's data directory (XDG on Linux)."""
    return Path(platformdirs.user_data_dir("tao_harness")) / DEFAULT_FILE_NAME


def resolve_url(url: str | None) -> URL:
    """A SQLAlchemy URL from `url`; None means the default file, a bare path means a SQLite file."""
    if url is None:
        return make_url(f"sqlite:///{default_path()}")
    if not url.strip():  # a bare path of "" would name the current directory
        raise StoreError("the database URL is empty: give a SQLite file path or a URL "
                         "(sqlite:///..., postgresql+psycopg://...)")
    if "://" not in url:
        return make_url(f"sqlite:///{Path(url).expanduser().resolve()}")
    try:
        return make_url(url)
    except ArgumentError:
        raise StoreError(f"not a database URL: {url!r}") from None


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names; None for in-memory SQLite and for other databases."""
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(url.database)
    return None


def new_sqlite_file(url: str | None) -> Path | None:
    """The SQLite file `url` names if it does not exist yet: what a command that fails should remove
    (`remove_sqlite_file`) rather than leave an empty database behind. None for anything else."""
    try:
        path = sqlite_file(resolve_url(url))
    except StoreError:
        return None
    return path if path is not None and not path.exists() else None


def remove_sqlite_file(path: Path) -> None:
    """Remove a SQLite database with its write-ahead log and shared-memory files."""
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        name.unlink(missing_ok=True)


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Python's sqlite3 would open transactions on its own; the begin event below does it instead.
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("tao_begin", "")
    conn.exec_driver_sql(f"BEGIN {mode}".strip())


def _make_engine(url: URL, pool_size: int) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size * 2)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size * 2, pool_pre_ping=True)


def _describe(url: URL) -> str:
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return url.render_as_string(hide_password=True)


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc
    return (str(inner).strip().splitlines() or [type(inner).__name__])[0]


@dataclass(frozen=True)
class Store:
    """An open history database: its engine and what it is called in messages."""

    engine: Engine
    url: URL
    schema_version: int

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def name(self) -> str:
        return _describe(self.url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _use_wal(engine: Engine) -> None:
    # The journal mode is stored in the file, so setting it once is enough; it cannot change inside a
    # transaction, hence the raw connection (whose isolation level is None: no implicit BEGIN).
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()
    finally:
        raw.close()


def _retry_locked(step: Callable[[], T]) -> T:
    # Connections racing to open a brand-new SQLite file can see "database is locked" while another
    # switches it to WAL, which the busy timeout does not always cover; such a race is retried.
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return step()
        except (OperationalError, sqlite3.OperationalError) as exc:
            if attempt + 1 == OPEN_ATTEMPTS or "locked" not in str(getattr(exc, "orig", exc)):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _ensure_schema(engine: Engine, create: bool) -> int:
    with engine.connect().execution_options(tao_begin="IMMEDIATE") as conn, conn.begin():
        return ensure_schema(conn, create=create)


def open_store(url: str | None = None, *, create: bool = True, pool_size: int = 5) -> Store:
    """Open (and with `create`, create) the database at `url`, upgrading an older schema.

    With `create=False` a missing SQLite file or an empty database is an error and nothing is created,
    so read-only commands never leave an empty file behind.
    """
    resolved = resolve_url(url)
    name = _describe(resolved)
    path = sqlite_file(resolved)
    if path is not None and not path.exists():
        if not create:
            raise StoreError(f"no history database at {path} (pass --db or set TAO_DB_URL)")
        if url is None:  # the user data directory is ours to create
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():  # a typo in a folder: an error, not a new tree of folders
            raise StoreError(f"cannot create the database {path}: no directory {path.parent}")
    try:
        engine = _make_engine(resolved, pool_size)
    except (ArgumentError, ImportError) as exc:
        raise StoreError(f"cannot use database URL {name}: {_first_line(exc)}") from None
    try:
        version = _retry_locked(lambda: _ensure_schema(engine, create))
        if create and resolved.get_backend_name() == "sqlite":
            _retry_locked(lambda: _use_wal(engine))
    except SchemaError as exc:
        engine.dispose()
        raise StoreError(f"database {name} {exc}") from None
    except (SQLAlchemyError, sqlite3.Error) as exc:
        engine.dispose()
        reason = _first_line(exc)
        if resolved.get_backend_name() == "sqlite":
            raise StoreError(f"{name} is not a usable SQLite database: {reason}") from None
        raise StoreError(f"cannot open database {name}: {reason}") from None
    return Store(engine=engine, url=resolved, schema_version=version)
