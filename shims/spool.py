"""The local spool: coordinator requests that could not be delivered, kept as JSONL until they can.

Each line is one request to replay, `{"path": "/v1/events", "body": {...}, "spooled_at": t}`, in the
order the shim produced them, with secrets already redacted (the forwarder does it), in files only their
user can read (0600 in a 0700 directory). Every `tao-run` process appends only to its own file and holds an
exclusive `flock` on it for its whole life, so a flusher (the next run, `tao spool flush`) never reads a
file that is still being written; the lock also dies with a killed process, which frees its file.
A flusher takes the same lock without blocking, checks that the path still names the inode it locked
(another flusher may have just deleted it), delivers in order, and then deletes the file or rewrites it
with what is left. Together this gives no loss and no duplicate delivery between cooperating flushers.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

import platformdirs

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    # Coordinator API path, e.g. "/v1/events" or "/v1/sessions/s1/end".
    path: str
    # JSON body of the request (one event object for "/v1/events").
    body: dict[str, Any]
    # Unix seconds when the record was first spooled.
    spooled_at: float

    def to_line(self) -> str:
        return json.dumps({"path": self.path, "body": self.body, "spooled_at": self.spooled_at},
                          separators=(",", ":")) + "\n"

    @staticmethod
    def from_line(line: str) -> SpoolRecord | None:
        """None for a line that is not a record (a torn last line after a crash)."""
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("path"), str) or not isinstance(
                data.get("body"), dict):
            return None
        return SpoolRecord(data["path"], data["body"], float(data.get("spooled_at") or 0.0))


def private_dir(directory: Path) -> None:
    """Create `directory` readable by this user only (the spool holds commands and their arguments)."""
    directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o077:
        try:
            directory.chmod(PRIVATE_DIR)
        except PermissionError:  # someone else's directory: still usable, our files are 0600
            log.warning("spool directory %s is readable by others and not ours to change", directory)


def default_spool_dir(configured: str | None = None) -> Path:
    return Path(configured) if configured else Path(platformdirs.user_data_dir("tao_harness")) / "spool"


def _read_records(handle: IO[str]) -> list[SpoolRecord]:
    handle.seek(0)
    records = [SpoolRecord.from_line(line) for line in handle if line.strip()]
    dropped = sum(r is None for r in records)
    if dropped:
        log.warning("spool %s: skipped %d unreadable line(s)", handle.name, dropped)
    return [r for r in records if r is not None]


def _rewrite(handle: IO[str], records: list[SpoolRecord]) -> None:
    # In place (same inode): the lock is held on this inode, so renaming a new file over it would let
    # another flusher lock the replacement while this one still works on the old content.
    handle.seek(0)
    handle.truncate()
    handle.writelines(record.to_line() for record in records)
    handle.flush()
    os.fsync(handle.fileno())


class SpoolWriter:
    """This process's own spool file, locked for as long as the writer is open."""

    def __init__(self, directory: Path) -> None:
        private_dir(directory)
        self.path = directory / f"spool-{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        self._handle: IO[str] | None = open(fd, "a+", encoding="utf-8")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)
        self._count = 0

    @property
    def count(self) -> int:
        """Records currently in the file."""
        return self._count

    def append(self, records: list[SpoolRecord]) -> None:
        if self._handle is None or not records:
            return
        self._handle.writelines(record.to_line() for record in records)
        self._handle.flush()
        self._count += len(records)

    def replace(self, records: list[SpoolRecord]) -> None:
        """Make the file hold exactly `records` (what is still undelivered)."""
        if self._handle is None:
            return
        _rewrite(self._handle, records)
        self._count = len(records)

    def close(self) -> None:
        """Release the file: an empty one is deleted, a non-empty one waits for the next flush."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        if self._count == 0:
            self.path.unlink(missing_ok=True)
        handle.close()  # releases the lock


@dataclass(frozen=True, slots=True)
class SpoolFile:
    path: Path
    records: int
    # True while the process that writes it is alive (its lock is held).
    in_use: bool
    oldest_at: float | None


def _lock_if_current(path: Path) -> IO[str] | None:
    """Open and lock `path` without blocking; None if it is in use or no longer the file at that path."""
    try:
        handle = open(path, "r+", encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = os.fstat(handle.fileno())
        current = os.stat(path)
        if locked.st_ino == current.st_ino and locked.st_nlink > 0:
            return handle
    except (BlockingIOError, FileNotFoundError):
        pass
    handle.close()
    return None


def spool_files(directory: Path, exclude: Path | None = None) -> Iterator[Path]:
    if not directory.is_dir():
        return iter(())
    paths = [p for p in directory.glob(f"*{SUFFIX}") if p != exclude]
    return iter(sorted(paths, key=lambda p: (p.stat().st_mtime if p.exists() else 0.0, p.name)))


def describe(directory: Path) -> list[SpoolFile]:
    found: list[SpoolFile] = []
    for path in spool_files(directory):
        handle = _lock_if_current(path)
        if handle is None:
            lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
            records = [r for r in map(SpoolRecord.from_line, lines) if r is not None]
            in_use = True
        else:
            with handle:
                records = _read_records(handle)
            in_use = False
        oldest = min((r.spooled_at for r in records), default=None)
        found.append(SpoolFile(path, len(records), in_use, oldest))
    return found


class ClaimedFile:
    """A spool file locked by this flusher: read its records, then `finish` with what is left."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle
        self.records = _read_records(handle)

    def finish(self, remaining: list[SpoolRecord]) -> None:
        try:
            if remaining:
                _rewrite(self._handle, remaining)
            else:
                self.path.unlink(missing_ok=True)
        finally:
            self._handle.close()


def claim(path: Path) -> ClaimedFile | None:
    handle = _lock_if_current(path)
    return ClaimedFile(path, handle) if handle is not None else None
