"""Sending shim records to the coordinator, in order, and replaying spool files.

A record's outcome is one of three: delivered; rejected (the coordinator answered 4xx: retrying would
be rejected again, so it is dropped with a warning); unreachable (connection failure, timeout or 5xx:
it must be kept and tried later). Consecutive `/v1/events` records travel as one `{"events": [...]}`
batch. Delivery stops at the first unreachable request so the coordinator sees records in order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiohttp

from tao_harness.shims.spool import SpoolRecord, claim, spool_files

log = logging.getLogger(__name__)

EVENTS_PATH = "/v1/events"
Outcome = Literal["ok", "rejected", "unreachable"]


class CoordinatorPoster:
    """POSTs JSON to the coordinator and classifies the answer; never raises for network trouble."""

    def __init__(self, base_url: str, http: aiohttp.ClientSession, timeout_s: float,
                 token: str | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._http = http
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def post(self, path: str, body: dict) -> Outcome:
        try:
            async with self._http.post(self._base + path, json=body, headers=self._headers,
                                       timeout=self._timeout) as response:
                if response.status < 400:
                    return "ok"
                text = (await response.text())[:300]
                if response.status >= 500:
                    log.warning("coordinator answered %d to %s: %s", response.status, path, text)
                    return "unreachable"
                log.warning("coordinator rejected %s (%d): %s", path, response.status, text)
                return "rejected"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
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
    for record in records:
        last = groups[-1] if groups else None
        if (record.path == EVENTS_PATH and last and last[0].path == EVENTS_PATH
                and len(last) < batch_max):
            last.append(record)
        else:
            groups.append([record])
    return groups


async def deliver(records: list[SpoolRecord], poster: CoordinatorPoster, batch_max: int,
                  progress: Progress | None = None) -> Progress:
    """Send `records` in order; stops at the first unreachable request (records[progress.done:] remain)."""
    progress = progress if progress is not None else Progress()
    for group in _requests(records, batch_max):
        head = group[0]
        body = {"events": [r.body for r in group]} if head.path == EVENTS_PATH else head.body
        outcome = await poster.post(head.path, body)
        if outcome == "unreachable":
            break
        if outcome == "ok":
            progress.delivered += len(group)
        else:
            progress.rejected += len(group)
        progress.done += len(group)
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


async def flush_spool(directory: Path, poster: CoordinatorPoster, batch_max: int,
                      exclude: Path | None = None) -> FlushResult:
    """Deliver every spool file not in use, oldest first; stop at the first unreachable request."""
    files = delivered = rejected = remaining = in_use = 0
    for path in spool_files(directory, exclude):
        claimed = claim(path)
        if claimed is None:
            in_use += path.exists()
            continue
        files += 1
        progress = Progress()
        try:
            await deliver(claimed.records, poster, batch_max, progress)
        finally:
            claimed.finish(claimed.records[progress.done:])
        delivered += progress.delivered
        rejected += progress.rejected
        remaining += len(claimed.records) - progress.done
        if progress.done < len(claimed.records):
            break
    return FlushResult(files, delivered, rejected, remaining, in_use)
