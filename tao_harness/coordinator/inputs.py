"""Validation of what proxies send the coordinator, shared by the HTTP routes and the proxy channel.

Every error names the field; the HTTP API answers it with a 400, the channel logs it and drops the message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Collection

from tao_harness.coordinator.service import RequestDone
from tao_harness.proxy.usage import Usage

MAX_WAIT_S = 60.0
REPORT_STATUSES = ("ok", "error", "cancelled", "connect_error")


class BadRequest(Exception):
    """Input that cannot be used; the message names the field."""


def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if name not in body or body[name] is None:
        if default is ...:
            raise BadRequest(f"{name}: missing field")
        return default
    value = body[name]
    if isinstance(value, bool) and kind is not bool:
        raise BadRequest(f"{name}: expected {getattr(kind, '__name__', kind)}, got a boolean")
    if not isinstance(value, kind):
        raise BadRequest(f"{name}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(f"{name}: must be finite")
    if isinstance(value, (int, float)) and value < 0:
        raise BadRequest(f"{name}: must not be negative")
    if isinstance(value, str) and not value:
        raise BadRequest(f"{name}: must not be empty")
    return value


def _optional_count(body: dict[str, Any], name: str) -> int | None:
    return field(body, name, int, None)


@dataclass(frozen=True, slots=True)
class AdmitInput:
    session: str
    request_id: str
    # The proxy's prompt-size estimate (tokens).
    estimate: int
    # Replicas that refused this request's connection.
    exclude: tuple[str, ...]
    # Longest wait before answering "waiting" (long-poll).
    wait_s: float
    # The replica the request was already sent to on a lease, or None.
    leased: str | None
    # The proxy's coordinator channel and the number of this session's last message sent on it: the
    # admission waits until the channel has applied it (None: no channel).
    channel: str | None = None
    after_seq: int = 0


def parse_admit(body: dict[str, Any], replica_ids: Collection[str]) -> AdmitInput:
    exclude = field(body, "exclude", list, [])
    if not all(isinstance(item, str) for item in exclude):
        raise BadRequest("exclude: expected a list of replica ids")
    leased = field(body, "leased", str, None)
    if leased is not None and leased not in replica_ids:
        raise BadRequest(f"leased: unknown replica {leased!r}")
    return AdmitInput(
        session=field(body, "session", str), request_id=field(body, "request_id", str),
        estimate=field(body, "prompt_tokens_estimate", int, 0), exclude=tuple(exclude),
        wait_s=min(MAX_WAIT_S, float(field(body, "wait_s", (int, float), 10.0))), leased=leased,
        channel=field(body, "channel", str, None), after_seq=field(body, "after_seq", int, 0),
    )


def parse_request_done(body: dict[str, Any]) -> RequestDone:
    status = field(body, "status", str)
    if status not in REPORT_STATUSES:
        raise BadRequest(f"status: expected ok, error, cancelled or connect_error, got {status!r}")
    return RequestDone(
        session=field(body, "session", str), request_id=field(body, "request_id", str),
        replica=field(body, "replica", str, None), status=status,
        usage=Usage(_optional_count(body, "prompt_tokens"), _optional_count(body, "cached_tokens"),
                    _optional_count(body, "completion_tokens")),
        ttft_s=field(body, "ttft_s", (int, float), None), latency_s=field(body, "latency_s", (int, float), None),
        queue_wait_s=float(field(body, "queue_wait_s", (int, float), 0.0)),
        started_at=float(field(body, "started_at", (int, float), 0.0)),
    )
