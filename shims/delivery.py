"""Sending shim records to the coordinator, in order, and replaying spool files.

A request's outcome is one of four: delivered; rejected (400/409/422: the coordinator found the input
invalid, so resending would be refused again); too large (413); unreachable (connection failure,
timeout, 5xx, or another 4xx such as a wrong token: kept and tried later). Consecutive `/v1/events`
records travel as one `{"events": [...]}` batch of at most `batch_max` events and `BATCH_MAX_BYTES`
of JSON, well under the coordinator's 16 MB body limit. A rejected or too-large batch is split in
halves and resent until the refused events are alone: only those are dropped (with a warning and a
count), never their neighbours. Delivery stops at the first unreachable request so the coordinator
sees records in order.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp

from tao_harness.events import EventError, event_from_json, event_to_json, fit_for_store
from tao_harness.shims.spool import SpoolRecord, claim, spool_files
from tao_harness.store.redact import Redactor

log = logging.getLogger(__name__)

EVENTS_PATH = "/v1/events"
BATCH_MAX_BYTES = 4 * 1024 * 1024
# Answers that mean "this input is invalid": resending the same records cannot succeed.
INVALID_STATUSES = frozenset({400, 409, 422})
TOO_LARGE_STATUS = 413
Outcome = Literal["ok", "rejected", "too_large", "unreachable"]


def outgoing_event(body: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A tool event body as it may leave this machine: fitted to what the store can hold (long text cut,
    unstorable characters replaced) and with its command and arguments redacted. A body that is not a
    valid event is only redacted: the coordinator refuses it and it is dropped then."""
    try:
        body = event_to_json(fit_for_store(event_from_json(body)))
    except EventError:
        pass
    fields = {name: redactor.value(body[name]) for name in ("command", "args") if body.get(name) is not None}
    return {**body, **fields} if fields else body


class CoordinatorPoster:
    """POSTs JSON to the coordinator and classifies the answer; never raises for network trouble."""

    def __init__(self, base_url: str, http: aiohttp.ClientSession, timeout_s: float,
                 token: str | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._http = http
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Why the last request that did not get through did not (for the user), e.g. "answered 503: ...".
        self.last_problem = ""
        # The coordinator's answer to the last request it refused ("400: {...}").
        self.last_refusal = ""

    async def post(self, path: str, body: dict) -> Outcome:
        try:
            async with self._http.post(self._base + path, json=body, headers=self._headers,
                                       timeout=self._timeout) as response:
                if response.status < 400:
                    return "ok"
                text = (await response.text())[:300]
                self.last_refusal = f"{response.status}: {text}"
                if response.status == TOO_LARGE_STATUS:
                    return "too_large"
                if response.status in INVALID_STATUSES:  # the refused records are found and logged by _send
                    log.debug("coordinator rejected %s (%d): %s", path, response.status, text)
                    return "rejected"
                self.last_problem = f"answered {response.status} to {path}: {text}"
                log.warning("coordinator %s", self.last_problem)
                return "unreachable"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            self.last_problem = f"unreachable at {self._base}: {exc!r}"
            log.debug("coordinator unreachable on %s: %r", path, exc)
            return "unreachable"


@dataclass
class Progress:
    """How far `deliver` got; kept up to date request by request, so it is right even if cancelled."""

    done: int = 0  # leading records settled (delivered or rejected)
    delivered: int = 0
    rejected: int = 0


def _requests(records: list[SpoolRecord], batch_max: int) -> list[list[SpoolRecord]]:
    groups: list[list[SpoolRecord]] = []
    size = 0
    for record in records:
        record_size = len(json.dumps(record.body)) + 1  # as aiohttp encodes it, plus a comma
        last = groups[-1] if groups else None
        if (record.path == EVENTS_PATH and last and last[0].path == EVENTS_PATH
                and len(last) < batch_max and size + record_size <= BATCH_MAX_BYTES):
            last.append(record)
            size += record_size
        else:
            groups.append([record])
            size = record_size
    return groups


async def _send(group: list[SpoolRecord], poster: CoordinatorPoster, progress: Progress) -> bool:
    """Deliver `group` (one request's records), splitting a refused batch; False when unreachable."""
    head = group[0]
    body = {"events": [r.body for r in group]} if head.path == EVENTS_PATH else head.body
    outcome = await poster.post(head.path, body)
    if outcome == "unreachable":
        return False
    if outcome != "ok" and len(group) > 1:
        middle = len(group) // 2
        return await _send(group[:middle], poster, progress) and await _send(group[middle:], poster, progress)
    if outcome == "ok":
        progress.delivered += len(group)
    else:
        log.warning("dropped a %s record the coordinator refused (%s, %s): %.200s", head.path, outcome,
                    poster.last_refusal, json.dumps(head.body))
        progress.rejected += len(group)
    progress.done += len(group)
    return True


async def deliver(records: list[SpoolRecord], poster: CoordinatorPoster, batch_max: int,
                  progress: Progress | None = None) -> Progress:
    """Send `records` in order; stops at the first unreachable request (records[progress.done:] remain)."""
    progress = progress if progress is not None else Progress()
    for group in _requests(records, batch_max):
        if not await _send(group, poster, progress):
            break
    return progress


@dataclass(frozen=True, slots=True)
class FlushResult:
    files: int
    delivered: int
    rejected: int
    # Records still spooled (in files this flush reached) because the coordinator became unreachable.
    remaining: int
    # Files skipped because their writer is still running.
    in_use: int
    # Why delivery stopped, when records remain ("answered 503 to /v1/events: ...").
    problem: str = ""


async def flush_spool(directory: Path, poster: CoordinatorPoster, batch_max: int,
                      exclude: Path | None = None, redactor: Redactor | None = None) -> FlushResult:
    """Deliver every spool file not in use, oldest first; stop at the first unreachable request.

    Events are passed through `outgoing_event` first (a file an older version wrote may hold them
    unredacted or too big to send), and what stays in the file is written back in that form.
    """
    redactor = redactor or Redactor()
    files = delivered = rejected = remaining = in_use = 0
    for path in spool_files(directory, exclude):
        claimed = claim(path)
        if claimed is None:
            in_use += path.exists()
            continue
        files += 1
        records = [SpoolRecord(r.path, outgoing_event(r.body, redactor), r.spooled_at)
                   if r.path == EVENTS_PATH else r for r in claimed.records]
        progress = Progress()
        try:
            await deliver(records, poster, batch_max, progress)
        finally:
            claimed.finish(records[progress.done:])
        delivered += progress.delivered
        rejected += progress.rejected
        remaining += len(records) - progress.done
        if progress.done < len(records):
            break
    problem = poster.last_problem if remaining else ""
    return FlushResult(files, delivered, rejected, remaining, in_use, problem)
