"""Validation of what proxies send the coordinator, shared by the HTTP routes and the proxy channel.

Every error names the field; the HTTP API answers it with a 400, the channel logs it and drops the message.
Values must also fit the history store (tao_harness.store.limits): names at most 200 characters without
control characters, counts within 32 bits, numbers finite (10**400 is refused, not a 500).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection

from tao_harness.proxy.messages import RequestAnswer, RequestReport
from tao_harness.proxy.usage import Usage
from tao_harness.store.limits import LimitError, finite, identifier, int32

MAX_WAIT_S = 60.0
# A prefix group is a name, not a payload (the proxy's are 24 hex digits).
MAX_PREFIX_GROUP_CHARS = 128
REPORT_STATUSES = ("ok", "error", "cancelled", "connect_error")


class BadRequest(Exception):
    """Input that cannot be used; the message names the field."""


def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    value = body.get(name)
    if value is None:
        if default is ...:
            raise BadRequest(f"{name}: missing field")
        return default
    # Fast paths for the exact types JSON parsing gives, as the general checks below would judge them:
    # every report and lease notice passes ~25 fields through here (a third of the coordinator's cost
    # per channel message went to the general checks).
    cls = type(value)
    try:
        if cls is str and kind is str:
            if not value:
                raise BadRequest(f"{name}: must not be empty")
            return identifier(name, value)
        if cls is int and (kind is int or kind == _NUMBER):
            if value < 0:
                raise BadRequest(f"{name}: must not be negative")
            return int32(name, value) if kind is int else _finite_as_given(name, value)
        if cls is float and kind == _NUMBER:
            if value < 0:
                raise BadRequest(f"{name}: must not be negative")
            return _finite_as_given(name, value)
        if cls is kind and cls in (dict, list):
            return value
    except LimitError as exc:
        raise BadRequest(str(exc)) from None
    return _checked(name, value, kind)


_NUMBER = (int, float)


def _finite_as_given(name: str, value: int | float) -> int | float:
    """`value` itself (an int stays an int) once `finite` accepts it."""
    finite(name, value)
    return value


def _checked(name: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    """The general checks of `field` for a value that is present."""
    if isinstance(value, bool) and kind is not bool:
        raise BadRequest(f"{name}: expected {getattr(kind, '__name__', kind)}, got a boolean")
    if not isinstance(value, kind):
        raise BadRequest(f"{name}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    if isinstance(value, (int, float)) and value < 0:
        raise BadRequest(f"{name}: must not be negative")
    if isinstance(value, str) and not value:
        raise BadRequest(f"{name}: must not be empty")
    try:
        if isinstance(value, str):
            identifier(name, value)
        elif isinstance(value, int) and float not in (kind if isinstance(kind, tuple) else (kind,)):
            int32(name, value)
        elif isinstance(value, (int, float)):
            finite(name, value)
    except LimitError as exc:
        raise BadRequest(str(exc)) from None
    return value


def ended_at_field(body: Any, clock: Callable[[], float]) -> float:
    """A session end's own time (`ended_at`, optional: `clock()` when absent) from its body, which may be
    empty (`{}`); a late delivery must record when the session ended, not when it arrived."""
    if not isinstance(body, dict):
        raise BadRequest(f"body: expected a JSON object, got {type(body).__name__}")
    given = field(body, "ended_at", _NUMBER, None)
    return clock() if given is None else float(given)


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
    # Instance id of the proxy forwarding the request (coordinator.owners), None if it gave none.
    proxy: str | None = None
    # The prompt prefix the session shares with others (the proxy's digest of its system prompt and
    # tools) and that prefix's size in tokens; None / 0 when it named none.
    prefix_group: str | None = None
    shared_tokens: int = 0
    # How the proxy identified the session (proxy.identity's rule), None if it did not say.
    identity_source: str | None = None


def parse_admit(body: dict[str, Any], replica_ids: Collection[str]) -> AdmitInput:
    exclude = field(body, "exclude", list, [])
    if not all(isinstance(item, str) for item in exclude):
        raise BadRequest("exclude: expected a list of replica ids")
    leased = field(body, "leased", str, None)
    if leased is not None and leased not in replica_ids:
        raise BadRequest(f"leased: unknown replica {leased!r}")
    prefix_group = field(body, "prefix_group", str, None)  # `field` refuses an empty or control-laden name
    if prefix_group is not None and len(prefix_group) > MAX_PREFIX_GROUP_CHARS:
        raise BadRequest(f"prefix_group: expected 1 to {MAX_PREFIX_GROUP_CHARS} characters")
    return AdmitInput(
        session=field(body, "session", str), request_id=field(body, "request_id", str),
        estimate=field(body, "prompt_tokens_estimate", int, 0), exclude=tuple(exclude),
        wait_s=min(MAX_WAIT_S, float(field(body, "wait_s", (int, float), 10.0))), leased=leased,
        channel=field(body, "channel", str, None), after_seq=field(body, "after_seq", int, 0),
        proxy=field(body, "proxy", str, None), prefix_group=prefix_group,
        shared_tokens=field(body, "shared_tokens_estimate", int, 0),
        identity_source=field(body, "identity_source", str, None),
    )


def _status(body: dict[str, Any], prefix: str = "") -> str:
    status = field(body, "status", str)
    if status not in REPORT_STATUSES:
        raise BadRequest(f"{prefix}status: expected ok, error, cancelled or connect_error, got {status!r}")
    return status


def _answer(body: dict[str, Any]) -> RequestAnswer | None:
    answer = field(body, "answer", dict, None)
    if answer is None:
        return None
    try:
        return RequestAnswer(
            status=_status(answer), replica=field(answer, "replica", str, None),
            prompt_tokens=_optional_count(answer, "prompt_tokens"),
            cached_tokens=_optional_count(answer, "cached_tokens"),
            completion_tokens=_optional_count(answer, "completion_tokens"),
            ttft_s=field(answer, "ttft_s", (int, float), None),
            latency_s=field(answer, "latency_s", (int, float), None),
            attempts=field(answer, "attempts", int),
            queue_wait_s=float(field(answer, "queue_wait_s", (int, float), 0.0)),
        )
    except BadRequest as exc:
        raise BadRequest(f"answer.{exc}") from None


def parse_request_done(body: dict[str, Any], replica_ids: Collection[str]) -> RequestReport:
    """A proxy's `RequestReport.to_json()` (its `http_status` is not read: `status` says what happened)."""
    status = _status(body)
    replica = field(body, "replica", str, None)
    if status == "connect_error" and replica is not None and replica not in replica_ids:
        raise BadRequest(f"replica: unknown replica {replica!r}")  # its failure count would mark nothing down
    return RequestReport(
        session=field(body, "session", str), request_id=field(body, "request_id", str),
        replica=replica, status=status,
        usage=Usage(_optional_count(body, "prompt_tokens"), _optional_count(body, "cached_tokens"),
                    _optional_count(body, "completion_tokens")),
        ttft_s=field(body, "ttft_s", (int, float), None), latency_s=field(body, "latency_s", (int, float), None),
        queue_wait_s=float(field(body, "queue_wait_s", (int, float), 0.0)),
        started_at=float(field(body, "started_at", (int, float), 0.0)),
        attempt=field(body, "attempt", int, 1), answer=_answer(body),
    )
