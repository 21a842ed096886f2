"""The proxy's side of the coordinator HTTP API, failing open.

`admit` long-polls `POST /v1/admit` until the coordinator names a replica. It returns None — and the
proxy routes by local cache affinity instead — when the coordinator is unreachable, answers with an
error, or stays silent past a long-poll plus a grace period. After a failure the client stays in
fail-open mode for a back-off interval so agents never pay a connect timeout per request; reports made
meanwhile are dropped (the coordinator re-learns cache state from the next reports).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from tao_harness.proxy.channel import CoordinatorChannel

log = logging.getLogger(__name__)

BACKOFF_S = 2.0


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


@dataclass(frozen=True, slots=True)
class Admission:
    replica: str
    base_url: str
    # Pinning and per-replica headers to add to the upstream request.
    headers: dict[str, str] = field(default_factory=dict)
    # Seconds the request waited in the coordinator's pool.
    queue_wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RequestReport:
    session: str
    request_id: str
    replica: str | None
    # "ok", "error" (upstream non-2xx), "cancelled" (client went away), "connect_error"
    status: str
    http_status: int | None
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    ttft_s: float | None
    latency_s: float | None
    queue_wait_s: float
    started_at: float


def _body(message: AdmitRequest | RequestReport) -> dict[str, Any]:
    """The message as a JSON object; flat, so cheaper than `dataclasses.asdict` (on every request's path)."""
    return {name: getattr(message, name) for name in message.__slots__}


class CoordinatorClient:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, poll_s: float, grace_s: float,
                 token: str | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._http = http
        self._poll_s = poll_s
        self._grace_s = grace_s
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._down_until = 0.0
        # Set by the proxy once built: reports and lease notices go over it while it is open.
        self.channel: CoordinatorChannel | None = None

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _mark_down(self, why: str) -> None:
        if self.available:
            log.warning("coordinator unavailable (%s); routing by cache affinity for %.0f s", why, BACKOFF_S)
        self._down_until = time.monotonic() + BACKOFF_S

    async def _post(self, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        if not self.available:
            return None
        try:
            async with self._http.post(
                self._base + path, json=body, headers=self.headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                if response.status == 409:  # up, but the request does not fit the session's state
                    log.info("coordinator refused %s: %s", path, (await response.text())[:200])
                    return None
                if response.status >= 400:
                    self._mark_down(f"HTTP {response.status} from {path}")
                    return None
                payload = await response.json()
                return payload if isinstance(payload, dict) else None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            self._mark_down(f"{type(exc).__name__} on {path}")
            return None

    async def admit(self, request: AdmitRequest) -> Admission | None:
        """Wait until admitted; None means fail open."""
        body = _body(request) | {"wait_s": self._poll_s}
        if self.channel is not None:  # the coordinator first applies this session's messages sent so far
            body["channel"], body["after_seq"] = self.channel.position(request.session)
        while True:
            answer = await self._post("/v1/admit", body, self._poll_s + self._grace_s)
            if answer is None:
                return None
            if answer.get("status") == "admitted":
                try:
                    return Admission(
                        replica=str(answer["replica"]),
                        base_url=str(answer["base_url"]),
                        headers={str(k): str(v) for k, v in (answer.get("headers") or {}).items()},
                        queue_wait_s=float(answer.get("queue_wait_s") or 0.0),
                    )
                except (KeyError, TypeError, ValueError, AttributeError):
                    self._mark_down("malformed admission")
                    return None
            if answer.get("status") != "waiting":
                self._mark_down(f"unexpected admission status {answer.get('status')!r}")
                return None

    async def record_leased(self, request: AdmitRequest) -> None:
        """Tell the coordinator about a request already sent on a lease (it answers at once)."""
        await self._deliver("leased", "/v1/admit", request.session, _body(request) | {"wait_s": 0})

    async def report(self, report: RequestReport) -> None:
        await self._deliver("done", "/v1/requests/done", report.session, _body(report))

    async def _deliver(self, kind: str, path: str, session: str, body: dict[str, Any]) -> None:
        """Over the channel while it is open, else as an HTTP request to `path`."""
        if self.channel is None or not await self.channel.send(kind, session, body):
            await self._post(path, body, self._grace_s)
