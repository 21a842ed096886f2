"""`tao proxy`: the agents' OpenAI/Anthropic endpoint in front of the replicas.

Per LLM request: identify the session, get a replica (coordinator admission, or local cache affinity
when the coordinator is unavailable), forward with pinning headers, pass the response through chunk by
chunk while a `UsageTracker` watches it, then report usage and timing. A replica that fails is
replaced (proxy.failover): afresh before the client got content, by a continuation of the answer after.
A client that disconnects cancels the handler (aiohttp `handler_cancellation`), which closes the
upstream request and reports the request as cancelled, so its admission is freed at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, AsyncIterator, Coroutine

import aiohttp
from aiohttp import web

from tao_harness.config import ProxyConfig, ReplicaSpec
from tao_harness.proxy.channel import CoordinatorChannel
from tao_harness.proxy.coordinator_client import Admission, AdmitRequest, CoordinatorClient, RequestReport
from tao_harness.proxy.failover import Relay, Retry
from tao_harness.proxy.identity import SessionIdentity, identify_session
from tao_harness.proxy.leases import LeaseTable
from tao_harness.proxy.routing import AffinityRouter, pin_headers
from tao_harness.proxy.splice import Unresumable
from tao_harness.proxy.usage import ApiKind, UsageTracker

log = logging.getLogger(__name__)

# Paths that start an LLM generation and therefore need an admission.
GENERATION_PATHS: dict[str, ApiKind] = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "openai",
    "/v1/messages": "anthropic",
}
HOP_BY_HOP = frozenset(
    h.lower() for h in ("Host", "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding", "TE",
                        "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Trailer")
)
# A rough prompt-size estimate from the body: ~4 bytes of JSON per token.
BYTES_PER_TOKEN = 4
# The in-band error of an answer no replica could finish.
_CUT = "the replica failed mid-response and no other replica could continue it; send the request again"


@dataclass
class ProxyState:
    config: ProxyConfig
    http: aiohttp.ClientSession
    router: AffinityRouter
    coordinator: CoordinatorClient | None
    # The coordinator's holders, kept by the coordinator channel (empty without one).
    leases: LeaseTable = field(default_factory=LeaseTable)
    # Messages to the coordinator still on their way, per session: the last of a chain in which each
    # waits for the one before (a report must not overtake the request's own lease notice). Sent after
    # the response so the client's connection is free at once; the next admission waits for them.
    reports: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def send_report(self, session: str, report: Coroutine[Any, Any, None]) -> None:
        previous = self.reports.get(session)

        async def in_order() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await report

        task = asyncio.create_task(in_order())
        self.reports[session] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self.reports.get(session) is done:
                del self.reports[session]

        task.add_done_callback(forget)


STATE = web.AppKey("proxy_state", ProxyState)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "proxy_error", "code": status}},
                             status=status)


def _connection_id(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else uuid.uuid4().hex[:8]


def _forward_headers(request: web.Request, extra: dict[str, str], request_id: str) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
    headers.setdefault("X-Request-Id", request_id)
    headers.update(extra)
    return headers


async def _choose_replica(state: ProxyState, identity: SessionIdentity, api: ApiKind | None,
                          request_id: str, body_size: int, exclude: tuple[str, ...]) -> Admission | None:
    if api is not None and state.coordinator is not None:
        ask = AdmitRequest(session=identity.session, request_id=request_id, api=api, path=identity.path,
                           prompt_tokens_estimate=body_size // BYTES_PER_TOKEN, exclude=exclude,
                           identity_source=identity.source)
        lease = state.leases.get(identity.session) if not exclude else None
        if lease is not None and state.coordinator.available:
            state.send_report(identity.session, state.coordinator.record_leased(replace(ask, leased=lease.replica)))
            return lease
        previous = state.reports.get(identity.session)
        if previous is not None:
            await asyncio.shield(previous)
        admission = await state.coordinator.admit(ask)
        if admission is not None:
            return admission
    replica = state.router.pick(identity.session, exclude)
    if replica is None:
        return None
    return Admission(replica.id, replica.base_url, pin_headers(replica, identity.session))


async def handle(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    started = time.time()
    clock0 = time.monotonic()
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:  # aiohttp's own answer would be text/plain
        return _error(413, exc.text or "request body too large")
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None  # the replica answers malformed JSON with its own 400
    identity = identify_session(request.headers, request.path, body if isinstance(body, dict) else None,
                                _connection_id(request))
    if identity.source == "connection":
        log.warning("no session id on %s %s; using one session per connection (%s)",
                    request.method, identity.path, identity.session)
    api = GENERATION_PATHS.get(identity.path) if request.method == "POST" else None
    streaming = isinstance(body, dict) and body.get("stream") is True
    request_id = request.headers.get("X-Request-Id") or f"tao-{uuid.uuid4().hex}"
    relay = Relay(api, identity.path, request.query_string, body, streaming)
    exclude: tuple[str, ...] = ()
    for _attempt in range(state.config.connect_retries + 1):
        admission = await _choose_replica(state, identity, api, request_id, len(raw), exclude)
        if admission is None:
            return await relay.give_up(request, _CUT, _error(503, "no replica available"))
        report = _Report(state, identity.session, request_id, admission, started, clock0)
        headers = _forward_headers(request, admission.headers, request_id)
        try:
            path, data = await relay.next_request(state.http, admission.base_url, headers, raw)
            upstream = await state.http.request(
                request.method, admission.base_url.rstrip("/") + path, data=data or None, headers=headers,
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            )
        # ClientOSError covers refused connects and a reset before the headers (replica killed mid-request).
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError) as exc:
            log.warning("replica %s refused %s: %s", admission.replica, request_id, exc)
            await report.send("connect_error", None, None)
            exclude += (admission.replica,)
            continue
        except Unresumable as exc:
            await report.send("error", None, None)
            return await relay.give_up(request, f"{_CUT} ({exc})", _error(502, str(exc)))
        try:
            return await _pass_through(request, upstream, report, api, relay)
        except Retry:
            exclude += (admission.replica,)
        finally:
            upstream.release()
    refused = _error(502, f"replicas {', '.join(exclude)} refused the connection")
    return await relay.give_up(request, _CUT, refused)


class _Report:
    """Collects what one forwarded request did and reports it exactly once (even when cancelled)."""

    def __init__(self, state: ProxyState, session: str, request_id: str, admission: Admission,
                 started: float, clock0: float) -> None:
        self.state, self.session, self.request_id, self.admission = state, session, request_id, admission
        self.started, self.clock0 = started, clock0
        self.ttft_s: float | None = None
        self.sent = False

    async def send(self, status: str, http_status: int | None, tracker: UsageTracker | None) -> None:
        if self.sent:
            return
        self.sent = True
        if status == "ok":
            self.state.router.remember(self.session, self.admission.replica)
        else:  # the coordinator frees the session's hold; no request may go out on it meanwhile
            self.state.leases.drop(self.session)
        if self.state.coordinator is None:
            return
        usage = tracker.finish() if tracker is not None else None
        await self.state.coordinator.report(RequestReport(
            session=self.session, request_id=self.request_id, replica=self.admission.replica,
            status=status, http_status=http_status,
            prompt_tokens=usage.prompt_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            ttft_s=self.ttft_s, latency_s=time.monotonic() - self.clock0,
            queue_wait_s=self.admission.queue_wait_s, started_at=self.started,
        ))


def _client_response(upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for name, value in upstream.headers.items():
        if name.lower() not in HOP_BY_HOP:
            response.headers.add(name, value)
    if upstream.content_length is not None:
        response.content_length = upstream.content_length
    return response


async def _pass_through(request: web.Request, upstream: aiohttp.ClientResponse, report: _Report,
                        api: ApiKind | None, relay: Relay) -> web.StreamResponse:
    tracker = UsageTracker(api or "openai", relay.streaming) if api is not None else None
    status = "cancelled"
    try:
        await relay.open(request, _client_response(upstream), upstream)
        async for chunk in upstream.content.iter_any():
            if tracker is not None and tracker.feed(chunk) and report.ttft_s is None:
                report.ttft_s = time.monotonic() - report.clock0
            await relay.write(request, chunk, tracker is not None and tracker.first_token_seen)
        await relay.finish(request)
        status = "ok" if upstream.status < 400 else "error"
        return relay.response
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        return relay.response  # the client went away: reported as cancelled below
    except aiohttp.ClientError as exc:
        # Before any byte reached the client this counts as a refused connection; after, the replica
        # failed mid-response and another one continues the answer where possible.
        log.warning("replica %s failed during %s: %s", report.admission.replica, report.request_id, exc)
        status = "error" if relay.started else "connect_error"
        if relay.failed():
            raise Retry from exc
        log.warning("%s cannot be continued: %s", report.request_id, relay.unresumable)
        return await relay.give_up(request, _CUT, relay.response)
    except Unresumable as exc:
        status = "error"
        return await relay.give_up(request, f"{_CUT} ({exc})", relay.response)
    finally:
        if api is not None:
            # A task of its own: a cancelled handler must still free its admission.
            report.state.send_report(report.session, report.send(status, upstream.status, tracker))
        elif status == "ok":
            report.state.router.remember(report.session, report.admission.replica)


def build_app(config: ProxyConfig, replicas: tuple[ReplicaSpec, ...], token: str | None = None) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as http:
            coordinator = (
                CoordinatorClient(config.coordinator_url, http, config.admission_poll_s,
                                  config.coordinator_grace_s, token)
                if config.coordinator_url else None
            )
            app[STATE] = state = ProxyState(config, http, AffinityRouter(replicas), coordinator)
            following = None
            if coordinator is not None and config.admission_leases:
                coordinator.channel = CoordinatorChannel(config.coordinator_url or "", http, coordinator.headers,
                                                         state.leases)
                following = asyncio.create_task(coordinator.channel.run())
            yield
            await asyncio.gather(*state.reports.values(), return_exceptions=True)
            if following is not None:
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/healthz", healthz)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
