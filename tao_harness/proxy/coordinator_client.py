"""The proxy's side of the coordinator HTTP API, failing open.

`admit` long-polls `POST /v1/admit` until the coordinator names a replica. It returns None — and the
proxy routes by local cache affinity instead — when the coordinator is unreachable (connection refused
or reset) or answers with an error. A coordinator that is merely slow — a long-poll unanswered past its
grace period — is polled again: failing open then would send every waiting request to the replicas at
once, with no admission control, just when the cluster is busiest. Only a coordinator that has answered
nothing at all for `unresponsive_s` counts as gone (hung). After a failure the client stays in fail-open
mode for a back-off interval so agents never pay a connect timeout per request; reports made meanwhile
are dropped (the coordinator re-learns cache state from the next reports).

Reports, lease notices and tool events (`record_leased`, `report`, `withdraw`, `events`) return at
once: they go out over the coordinator channel while it is open (proxy.channel), else as HTTP requests
in the background. A session's messages arrive in the order sent, and its next admission only after
them (`admit` waits).

Every admission names this proxy's instance id (`proxy`, a fresh one per process): the coordinator ends
the requests of a proxy that went away without reporting them (coordinator.owners).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any

import aiohttp

from tao_harness.events import ToolEvent, event_to_json
from tao_harness.proxy.channel import CoordinatorChannel, Message
from tao_harness.proxy.leases import LeaseTable
from tao_harness.proxy.messages import Admission, AdmitRequest, RequestReport
from tao_harness.proxy.usage import Usage

log = logging.getLogger(__name__)

BACKOFF_S = 2.0
# The HTTP route of each kind of message the channel carries.
_ROUTES = {"leased": "/v1/admit", "done": "/v1/requests/done", "events": "/v1/events"}


class _NoAnswer(Exception):
    """The coordinator took the request but did not answer in time: slow, not gone (see `_send`)."""


class CoordinatorClient:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, poll_s: float, grace_s: float,
                 token: str | None = None, unresponsive_s: float = 60.0, leases: LeaseTable | None = None) -> None:
        """`leases`: the table a coordinator channel keeps (`channel`, to be run by the caller); without
        one, every message goes over HTTP."""
        self._base = base_url.rstrip("/")
        self._http = http
        self._poll_s = poll_s
        self._grace_s = grace_s
        self._unresponsive_s = unresponsive_s
        self._heard_at = time.monotonic()  # the coordinator's last answer (any status), or the start
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.proxy_id = uuid.uuid4().hex
        self._down_until = 0.0
        # Per session, the last of its messages going out over HTTP; each waits for the one before.
        self._sending: dict[str, asyncio.Task[None]] = {}
        self.channel = (CoordinatorChannel(self._base, http, self.headers, leases, self.proxy_id, self._send_later)
                        if leases is not None else None)

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _mark_down(self, why: str) -> None:
        if self.available:
            log.warning("coordinator unavailable (%s); routing by cache affinity for %.0f s", why, BACKOFF_S)
        self._down_until = time.monotonic() + BACKOFF_S

    async def _send(self, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The coordinator's JSON answer; None when it is unavailable (fail open). Raises `_NoAnswer` when
        it did not answer within `timeout_s` but answered something within `unresponsive_s`."""
        if not self.available:
            return None
        try:
            async with self._http.post(
                self._base + path, json=body, headers=self.headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                self._heard_at = time.monotonic()
                if response.status == 409:  # up, but the request does not fit the session's state
                    log.info("coordinator refused %s: %s", path, (await response.text())[:200])
                    return None
                if response.status >= 400:
                    self._mark_down(f"HTTP {response.status} from {path}")
                    return None
                payload = await response.json()
                return payload if isinstance(payload, dict) else None
        except asyncio.TimeoutError:  # aiohttp's connect and read timeouts included
            silent_s = time.monotonic() - self._heard_at
            if silent_s < self._unresponsive_s:
                raise _NoAnswer(f"no answer on {path} within {timeout_s:g} s") from None
            self._mark_down(f"no answer for {silent_s:.0f} s")
            return None
        except (aiohttp.ClientError, ValueError) as exc:  # refused, reset, or not JSON
            self._mark_down(f"{type(exc).__name__} on {path}")
            return None

    async def _post(self, path: str, body: dict[str, Any], timeout_s: float) -> None:
        """`_send` for a message the coordinator can do without (a report: it re-learns from the next)."""
        try:
            await self._send(path, body, timeout_s)
        except _NoAnswer as exc:
            log.info("coordinator slow: %s", exc)

    async def admit(self, request: AdmitRequest) -> Admission | None:
        """Wait until admitted; None means fail open."""
        await self.settle(request.session)
        body = request.to_json(self.proxy_id, self._poll_s)
        if self.channel is not None:  # the coordinator first applies this session's messages sent so far
            body["channel"], body["after_seq"] = self.channel.position(request.session)
        while True:
            try:
                answer = await self._send("/v1/admit", body, self._poll_s + self._grace_s)
            except _NoAnswer:  # the request keeps its place in the pool: poll again
                continue
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

    def record_leased(self, request: AdmitRequest) -> None:
        """Tell the coordinator about a request already sent on a lease (it answers at once)."""
        self._tell("leased", request.session, request.to_json(self.proxy_id, 0))

    def withdraw(self, request: AdmitRequest) -> None:
        """The client left while its request waited for admission: the request leaves the pool at once."""
        self.report(RequestReport(request.session, request.request_id, None, "cancelled", Usage(), None, None,
                                  0.0, time.time()))

    def report(self, report: RequestReport, urgent: bool = True) -> None:
        """`urgent`: without lingering in the channel (the session's next request will ask for an
        admission, which waits for this report)."""
        self._tell("done", report.session, report.to_json(), urgent)

    def events(self, session: str, events: Sequence[ToolEvent]) -> None:
        """Tool events the proxy read from the traffic of `session`, in order with its other messages."""
        self._tell("events", session, {"events": [event_to_json(event) for event in events]})

    def _tell(self, kind: str, session: str, body: dict[str, Any], urgent: bool = False) -> None:
        """Over the channel while it is open, unless an earlier message of the session still goes over HTTP."""
        if session in self._sending or self.channel is None or not self.channel.post(kind, session, body, urgent):
            self._send_later((session, kind, body))

    def _send_later(self, message: Message) -> None:
        """An HTTP request for `message`, after the session's earlier ones; dropped while the coordinator
        is unavailable (see the module's doc)."""
        session, kind, body = message
        if not self.available:
            return
        post = self._post(_ROUTES[kind], body, self._grace_s)
        previous = self._sending.get(session)
        task = asyncio.create_task(post if previous is None else _after(previous, post))
        self._sending[session] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._sending.get(session) is done:
                del self._sending[session]

        task.add_done_callback(forget)

    async def settle(self, session: str) -> None:
        """Until the session's messages sent so far have reached the coordinator (or the channel)."""
        if self.channel is not None:
            await self.channel.flushed(session)
        previous = self._sending.get(session)
        if previous is not None:
            await asyncio.shield(previous)

    async def close(self, timeout_s: float) -> None:
        """At shutdown: deliver what is on its way (the channel's frames for up to `timeout_s`)."""
        if self.channel is not None:
            try:
                await asyncio.wait_for(self.channel.flushed(), timeout_s)
            except asyncio.TimeoutError:
                log.warning("coordinator channel did not take the last messages in %.0f s", timeout_s)
        await asyncio.gather(*self._sending.values(), return_exceptions=True)


async def _after(previous: asyncio.Task[None], message: Coroutine[Any, Any, None]) -> None:
    await asyncio.wait([previous])
    await message
