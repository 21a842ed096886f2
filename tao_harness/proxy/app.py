"""`tao proxy`: the agents' OpenAI/Anthropic endpoint in front of the replicas.

Per LLM request: identify the session (by its conversation where nothing names it: proxy.telemetry),
end the tool calls whose results it carries, get a replica (coordinator admission, or local cache affinity
when the coordinator is unavailable), forward with pinning headers, pass the response through chunk by
chunk while a `UsageTracker` watches it (and reads the reply's tool calls, which start as its last bytes
go out), then report usage and timing. A replica that fails is
replaced (proxy.failover): afresh before the client got content, by a continuation of the answer after.
A client that disconnects cancels the handler (aiohttp `handler_cancellation`), which closes the
upstream request and reports the request as cancelled, so its admission is freed at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
from aiohttp import web

from tao_harness import fastjson
from tao_harness.auth import agent_token_middleware
from tao_harness.config import ProxyConfig, ReplicaSpec
from tao_harness.proxy.conversation import Asked
from tao_harness.proxy.coordinator_client import CoordinatorClient
from tao_harness.proxy.messages import Admission, AdmitRequest, RequestAnswer, RequestReport
from tao_harness.proxy.failover import Relay, Retry
from tao_harness.proxy.identity import BadSessionId, SessionIdentity, checked_id, harness_of, identify_session
from tao_harness.proxy.leases import LeaseTable
from tao_harness.proxy.shared_prefix import shared_prefix
from tao_harness.proxy.routing import AffinityRouter, pin_headers
from tao_harness.proxy.splice import Unresumable
from tao_harness.proxy.telemetry import Reading, Telemetry
from tao_harness.proxy.usage import ApiKind, Usage, UsageTracker

log = logging.getLogger(__name__)

# Paths that start an LLM generation and therefore need an admission.
GENERATION_PATHS: dict[str, ApiKind] = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
}
HOP_BY_HOP = frozenset(
    h.lower() for h in ("Host", "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding", "TE",
                        "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Trailer")
)
# A rough prompt-size estimate from the body: ~4 bytes of JSON per token.
BYTES_PER_TOKEN = 4
# The pause between connect attempts to a slow replica, while `connect_patience_s` lasts.
CONNECT_PAUSE_S = 1.0
# A report's usage where the replica gave none.
_NO_USAGE = Usage()
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
    # Tool calls and conversations read from the traffic (with a coordinator and `tool_telemetry`).
    telemetry: Telemetry | None = None
    # Request ids: this process's random prefix and a counter (cheaper than a uuid4 per request).
    _id_prefix: str = field(default_factory=lambda: f"tao-{secrets.token_hex(8)}-")
    _ids: Iterator[int] = field(default_factory=itertools.count)
    # An upstream request's timeouts: only its connect has one (`_send_upstream`).
    upstream_timeout: aiohttp.ClientTimeout = field(init=False)

    def __post_init__(self) -> None:
        self.upstream_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout_s)

    def new_request_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids)}"

    def lease(self, session: str) -> Admission | None:
        """Where the session's next request goes without an admission, if it is followed (`admission_leases`)."""
        return self.leases.get(session) if self.config.admission_leases else None


STATE = web.AppKey("proxy_state", ProxyState)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
                          request_id: str, raw: bytes, body: Any, exclude: tuple[str, ...]) -> Admission | None:
    if api is not None and state.coordinator is not None:
        lease = state.lease(identity.session) if not exclude else None
        if lease is not None and not state.coordinator.available:
            lease = None
        prefix = None if lease is not None else shared_prefix(body, api)  # only where the coordinator plans
        ask = AdmitRequest(session=identity.session, request_id=request_id, api=api, path=identity.path,
                           prompt_tokens_estimate=len(raw) // BYTES_PER_TOKEN, exclude=exclude,
                           identity_source=identity.source, leased=lease.replica if lease is not None else None,
                           prefix_group=prefix.group if prefix is not None else None,
                           shared_tokens_estimate=prefix.size // BYTES_PER_TOKEN if prefix is not None else 0)
        if lease is not None:
            state.coordinator.record_leased(ask)
            return lease
        try:
            admission = await state.coordinator.admit(ask)
        except asyncio.CancelledError:  # the client left while it waited: its admission must not go unused
            state.coordinator.withdraw(ask)
            raise
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
            body = fastjson.loads(raw)
        except ValueError:
            body = None  # the replica answers malformed JSON with its own 400
        except RecursionError:
            return _error(400, "body: JSON nested too deeply")
    try:
        identity = identify_session(request.headers, request.path, body if isinstance(body, dict) else None,
                                    _connection_id(request))
        request_id = checked_id(request.headers.get("X-Request-Id") or state.new_request_id(), "X-Request-Id")
    except BadSessionId as exc:
        return _error(400, str(exc))
    api = GENERATION_PATHS.get(identity.path) if request.method == "POST" else None
    telemetry = state.telemetry if api is not None else None
    conversation: Asked | None = None
    if telemetry is not None and api is not None:
        identity, conversation = telemetry.identify(identity, body, api)
        telemetry.request(identity.session, body, api, started)  # before its admission: the tools ended
    if identity.source == "connection":
        log.warning("no session id on %s %s; using one session per connection (%s)",
                    request.method, identity.path, identity.session)
    try:
        return await _forward(request, state, identity, api, request_id, raw, body, started, clock0,
                              conversation)
    finally:
        if telemetry is not None and conversation is not None:
            telemetry.end(conversation)


async def _forward(request: web.Request, state: ProxyState, identity: SessionIdentity, api: ApiKind | None,
                   request_id: str, raw: bytes, body: Any, started: float, clock0: float,
                   conversation: Asked | None) -> web.StreamResponse:
    """The request's upstream attempts, until one answers or none is left."""
    streaming = isinstance(body, dict) and body.get("stream") is True
    relay = Relay(api, identity.path, request.query_string, body, streaming, clock0)
    harness = harness_of(request.headers) if state.telemetry is not None else None
    exclude: tuple[str, ...] = ()
    report: _Report | None = None
    for _attempt in range(state.config.connect_retries + 1):
        admission = await _choose_replica(state, identity, api, request_id, raw, body, exclude)
        if admission is None:
            _close(report)
            return await relay.give_up(request, _CUT, _error(503, "no replica available"))
        report = _Report(state, identity.session, request_id, admission, started, clock0, relay)
        reading = (state.telemetry.reading(identity.session, request_id, harness, conversation, relay.upstream_api)
                   if state.telemetry is not None and api is not None else None)
        try:
            headers = _forward_headers(request, admission.headers, request_id)
            path, data = await relay.next_request(state.http, admission.base_url, headers, raw)
            upstream = await _send_upstream(state, request.method, admission.base_url.rstrip("/") + path,
                                            data, headers)
        # ClientOSError covers refused connects and a reset before the headers (replica killed mid-request).
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError) as exc:
            log.warning("replica %s refused %s: %s", admission.replica, request_id, exc)
            report.send("connect_error", None, None, final=False)
            exclude += (admission.replica,)
            continue
        except Unresumable as exc:
            report.send("error", None, None)
            return await relay.give_up(request, f"{_CUT} ({exc})", _error(502, str(exc)))
        except BaseException as exc:  # the client left (cancelled) or a bug: the admission must not outlive it
            report.send("cancelled" if isinstance(exc, asyncio.CancelledError) else "error", None, None)
            raise
        try:
            return await _pass_through(request, upstream, report, api, relay, reading)
        except Retry:
            exclude += (admission.replica,)
        finally:
            upstream.release()
    _close(report)
    refused = _error(502, f"replicas {', '.join(exclude)} refused the connection")
    return await relay.give_up(request, _CUT, refused)


async def _send_upstream(state: ProxyState, method: str, url: str, data: bytes | None,
                         headers: dict[str, str]) -> aiohttp.ClientResponse:
    """The upstream request; a connect that times out is made again, a second later, for up to
    `connect_patience_s`: slow to connect is busy, not dead (under load the kernel's accept queue or this
    proxy's own event loop lags). A refused or reset connection raises at once."""
    config = state.config
    deadline = time.monotonic() + config.connect_patience_s
    pause = min(CONNECT_PAUSE_S, config.connect_timeout_s)
    while True:
        try:
            return await state.http.request(
                method, url, data=data or None, headers=headers, auto_decompress=False,
                timeout=state.upstream_timeout)
        except asyncio.TimeoutError as exc:  # only the connect has a timeout
            if time.monotonic() + pause >= deadline:
                raise
            log.info("connecting to %s timed out (%s); trying again", url, exc)
            await asyncio.sleep(pause)


def _close(report: _Report | None) -> None:
    """The request ends without another attempt after `report`'s, which went out as not the last: a
    message with only the request's answer follows it."""
    if report is not None and report.relay.api is not None and report.state.coordinator is not None:
        report.state.coordinator.report(replace(
            report.message("error", None, None), attempt=0,
            answer=report.relay.answer("error", report.admission.replica, None)))


class _Report:
    """Collects what one upstream attempt did and reports it exactly once (even when cancelled); the
    request's last attempt also reports what the client got (`Relay.answer`)."""

    def __init__(self, state: ProxyState, session: str, request_id: str, admission: Admission,
                 started: float, clock0: float, relay: Relay) -> None:
        self.state, self.session, self.request_id, self.admission = state, session, request_id, admission
        self.started, self.clock0, self.relay = started, clock0, relay
        self.attempt = relay.begin_attempt(admission.queue_wait_s)
        self.ttft_s: float | None = None
        self.sent = False

    def message(self, status: str, http_status: int | None, usage: Usage | None,
                answer: RequestAnswer | None = None) -> RequestReport:
        return RequestReport(
            session=self.session, request_id=self.request_id, replica=self.admission.replica, status=status,
            usage=usage or _NO_USAGE, ttft_s=self.ttft_s, latency_s=time.monotonic() - self.clock0,
            queue_wait_s=self.admission.queue_wait_s, started_at=self.started, attempt=self.attempt,
            answer=answer, http_status=http_status,
        )

    def send(self, status: str, http_status: int | None, tracker: UsageTracker | None,
             final: bool = True) -> None:
        """`final`: no attempt follows this one (else the request's answer is not known yet). Returns at
        once (the message goes out in the background): a cancelled handler still frees its admission."""
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
        answer = self.relay.answer(status, self.admission.replica, usage) if final else None
        # A session without a lease: its next request's admission waits for this report, so no lingering.
        self.state.coordinator.report(self.message(status, http_status, usage, answer),
                                      urgent=self.state.lease(self.session) is None)


class _HeldResponse(web.StreamResponse):
    """An answer the relay holds until content (proxy.failover): its `prepare` is always followed by its
    first bytes, which carry the headers in the same socket write. aiohttp writes a StreamResponse's
    headers at `prepare`; that second write wakes the client once more (~0.1 ms a request here)."""

    _send_headers_immediately = False


def _client_response(upstream: aiohttp.ClientResponse, held: bool) -> web.StreamResponse:
    response = (_HeldResponse if held else web.StreamResponse)(status=upstream.status, reason=upstream.reason)
    for name, value in upstream.headers.items():
        if name.lower() not in HOP_BY_HOP:
            response.headers.add(name, value)
    if upstream.content_length is not None:
        response.content_length = upstream.content_length
    return response


async def _pass_through(request: web.Request, upstream: aiohttp.ClientResponse, report: _Report,
                        api: ApiKind | None, relay: Relay, reading: Reading | None) -> web.StreamResponse:
    tracker = (UsageTracker(relay.upstream_api, relay.streaming, reading.reader if reading is not None else None)
               if api is not None else None)
    status = "cancelled"
    final = True
    answered = False  # the replica's whole response was read
    try:
        await relay.open(request, _client_response(upstream, api is not None), upstream)
        telemetry = report.state.telemetry if upstream.status < 400 else None  # an error has no turn
        async for chunk in upstream.content.iter_any():
            if tracker is not None and tracker.feed(chunk) and report.ttft_s is None:
                report.ttft_s = time.monotonic() - report.clock0
            if reading is not None and telemetry is not None and tracker is not None and tracker.complete:
                # The stream's closing event is in this chunk: its calls start before the client has it,
                # so the next request, which may come the moment it does, finds them.
                telemetry.response(reading, time.time())
            await relay.write(request, chunk, tracker is not None and tracker.first_token_seen)
        answered = True
        if reading is not None and telemetry is not None and tracker is not None:
            tracker.finish()  # a whole body (`finish` reads it) is still held: it goes out below
            telemetry.response(reading, time.time())
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
            final = False
            raise Retry from exc
        log.warning("%s cannot be continued: %s", report.request_id, relay.unresumable)
        return await relay.give_up(request, _CUT, relay.response)
    except Unresumable as exc:
        status = "error"
        return await relay.give_up(request, f"{_CUT} ({exc})", relay.response)
    finally:
        if status == "cancelled" and (answered or (tracker is not None and tracker.complete)):
            # The client left with its whole answer: the SDKs close the connection on [DONE], which can
            # come before the proxy has ended the response (seen against real vLLM).
            status = "ok" if upstream.status < 400 else "error"
        if api is not None:
            report.send(status, upstream.status, tracker, final)
        elif status == "ok":
            report.state.router.remember(report.session, report.admission.replica)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A bug still answers JSON (an agent's SDK parses the error body), never aiohttp's plain-text 500."""
    try:
        return await handler(request)
    except Exception:
        log.exception("proxy failed on %s %s", request.method, request.path)
        return _error(500, "internal proxy error (see the proxy's log)")


def build_app(config: ProxyConfig, replicas: tuple[ReplicaSpec, ...], token: str | None = None) -> web.Application:
    """`token` (TAO_TOKEN) authenticates the proxy to the coordinator, and its clients to it with
    `config.require_token` (ValueError without a token)."""
    middlewares = [_json_errors]
    if config.require_token:
        if not token:
            raise ValueError("proxy.require_token needs a token (set TAO_TOKEN)")
        middlewares.insert(0, agent_token_middleware(token, frozenset({"/healthz"})))
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as http:
            leases = LeaseTable()
            # The coordinator channel runs also without leases: it keeps this proxy's requests alive.
            coordinator = (
                CoordinatorClient(config.coordinator_url, http, config.admission_poll_s,
                                  config.coordinator_grace_s, token, config.coordinator_unresponsive_s, leases)
                if config.coordinator_url else None
            )
            telemetry = Telemetry(coordinator) if coordinator is not None and config.tool_telemetry else None
            app[STATE] = ProxyState(config, http, AffinityRouter(replicas), coordinator, leases, telemetry)
            following = None
            if coordinator is not None and coordinator.channel is not None:
                following = asyncio.create_task(coordinator.channel.run())
            yield
            if coordinator is not None:
                await coordinator.close(config.coordinator_grace_s)
            if following is not None:
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/healthz", healthz)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
