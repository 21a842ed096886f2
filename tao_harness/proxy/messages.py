"""The messages between the proxy and the coordinator (admissions, leases, request reports), as both
sides read them: their own module, so the coordinator, the proxy's client, channel and lease table share
them without importing one another. `to_json` gives each one's wire form (the HTTP API's bodies, also
carried by the channel); the coordinator reads them back in `coordinator.inputs`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tao_harness.proxy.usage import Usage


@dataclass(frozen=True, slots=True)
class AdmitRequest:
    session: str
    # Id the proxy gives this LLM request; repeated in the completion report.
    request_id: str
    # "openai" or "anthropic": which front received it.
    api: str
    # Upstream path, e.g. "/v1/chat/completions".
    path: str
    # Rough prompt size from the request body, for a session the coordinator has not seen yet.
    prompt_tokens_estimate: int
    # Replicas that refused a connection for this request; the coordinator avoids them.
    exclude: tuple[str, ...] = ()
    # How the session was identified (proxy.identity rule), for the coordinator's log.
    identity_source: str = "tao-header"
    # The replica the request was already sent to on an admission lease; None asks for an admission.
    leased: str | None = None
    # The prompt prefix it shares with other sessions (system prompt and tools, proxy.shared_prefix):
    # a digest naming the group, and its size in tokens, roughly. None / 0: none.
    prefix_group: str | None = None
    shared_tokens_estimate: int = 0

    def to_json(self, proxy: str, wait_s: float) -> dict[str, Any]:
        """The `/v1/admit` body, from proxy instance `proxy`, long-polling up to `wait_s`."""
        return {"session": self.session, "request_id": self.request_id, "api": self.api, "path": self.path,
                "prompt_tokens_estimate": self.prompt_tokens_estimate, "exclude": self.exclude,
                "identity_source": self.identity_source, "leased": self.leased, "prefix_group": self.prefix_group,
                "shared_tokens_estimate": self.shared_tokens_estimate, "wait_s": wait_s, "proxy": proxy}


@dataclass(frozen=True, slots=True)
class Admission:
    replica: str
    base_url: str
    # Pinning and per-replica headers to add to the upstream request.
    headers: dict[str, str] = field(default_factory=dict)
    # Seconds the request waited in the coordinator's pool.
    queue_wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RequestAnswer:
    """What the client of a request got, across all its upstream attempts (the request's record)."""

    # "ok", "error" (an error status or an answer no replica could finish), "cancelled"
    status: str
    # The replica of the last attempt.
    replica: str | None
    # The usage the answer reported to the client (a continued answer: its whole generation, the
    # original prompt); None where unknown.
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    # From the request's arrival: the client's first content, and the answer's end.
    ttft_s: float | None
    latency_s: float | None
    # Upstream attempts made (refused connections included), and their admission waits added up.
    attempts: int
    queue_wait_s: float

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "replica": self.replica, "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens, "completion_tokens": self.completion_tokens,
                "ttft_s": self.ttft_s, "latency_s": self.latency_s, "attempts": self.attempts,
                "queue_wait_s": self.queue_wait_s}


@dataclass(frozen=True, slots=True)
class RequestReport:
    """One upstream attempt of a request, done (`attempt` 0: no attempt, only the request's `answer`):
    what the proxy reports and the coordinator reads back (`coordinator.inputs.parse_request_done`)."""

    session: str
    request_id: str
    replica: str | None
    # "ok", "error" (upstream non-2xx or failed mid-answer), "cancelled" (client went away),
    # "connect_error"; "lost" when the coordinator ended a request nobody reported (never on the wire)
    status: str
    # The replica's own usage report for this attempt (on the wire: its three counts, flat).
    usage: Usage
    ttft_s: float | None
    latency_s: float | None
    queue_wait_s: float
    started_at: float
    # 1, 2, ... for the attempts of one request; 0 for a message that only carries the answer (the
    # request ended without another attempt after one already reported).
    attempt: int = 1
    # On the request's last report: what the client got, recorded as the request's row.
    answer: RequestAnswer | None = None
    # The replica's HTTP status; None where it gave none (refused, cancelled before an answer).
    http_status: int | None = None

    def to_json(self) -> dict[str, Any]:
        usage = self.usage
        return {"session": self.session, "request_id": self.request_id, "replica": self.replica,
                "status": self.status, "http_status": self.http_status, "prompt_tokens": usage.prompt_tokens,
                "cached_tokens": usage.cached_tokens, "completion_tokens": usage.completion_tokens,
                "ttft_s": self.ttft_s, "latency_s": self.latency_s, "queue_wait_s": self.queue_wait_s,
                "started_at": self.started_at, "attempt": self.attempt,
                "answer": self.answer.to_json() if self.answer is not None else None}
