"""`tao coordinator` HTTP API (JSON under /v1/, plus /healthz and /metrics).

    POST /v1/admit              long-poll: {"status": "admitted", "replica", "base_url", "headers",
                                "queue_wait_s"} or {"status": "waiting"} after `wait_s`; with
                                "leased": replica, records a request already sent on a lease; "proxy"
                                names the proxy instance that forwards it (coordinator.owners)
    GET  /v1/channel?proxy=ID   WebSocket for a proxy's reports and lease notices (coordinator.channel)
    GET  /v1/leases             long-poll of holder changes: ?after=SEQ&instance=ID&wait_s=S →
                                {"instance", "seq", "reset", "leases": [{"session", "replica", ...}]}
    POST /v1/requests/done      usage and timing of a forwarded request (frees or resizes its hold)
    POST /v1/events             one tool event or {"events": [...]} (tao_harness.events format)
    POST /v1/sessions           {"session", "harness", "labels", "started_at"}
    POST /v1/sessions/{id}/end  optional {"ended_at"}: when the session ended (default: on arrival)
    GET  /v1/state              sessions (with `identified_by`, the proxy's identity rule), pool, reservations
                                per replica, replicas, recent plans, pool waits
                                (`?waits=1`: with the recent waits themselves)
    GET  /healthz               {"status": "ok", "planner": "ready"}, "loading" while the planner's
                                compiled kernels load (plans are best-fit-decreasing meanwhile)
    GET  /metrics               Prometheus text

Bad input answers 400 with {"error": {"message": ...}} naming the field; an event that does not fit a
session's lifecycle answers 409. With `TAO_TOKEN` set, every route but /healthz needs
`Authorization: Bearer <token>` (the scheme in any case, RFC 7235; 401 otherwise).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from tao_harness.auth import authorized
from tao_harness.coordinator.channel import ChannelBook, serve_channel
from tao_harness.coordinator.inputs import (
    MAX_WAIT_S,
    BadRequest,
    ended_at_field,
    field,
    parse_admit,
    parse_request_done,
)
from tao_harness.coordinator.metrics import CoordinatorMetrics
from tao_harness.coordinator.records import SessionStateError
from tao_harness.coordinator.service import Coordinator
from tao_harness.events import EventError, events_from_body
from tao_harness.store.engine import StoreError
from tao_harness.store.limits import MAX_HARNESS_CHARS, fit_json

log = logging.getLogger(__name__)

COORDINATOR = web.AppKey("coordinator", Coordinator)
METRICS = web.AppKey("metrics", CoordinatorMetrics)
CHANNELS = web.AppKey("channels", ChannelBook)
POLL_INTERVAL_S = 1.0
# How long shutdown waits for the store writer to write what it queues (a batch takes milliseconds): a
# database that stopped answering must not keep a stopping coordinator up for the hours TCP takes to notice.
WRITER_CLOSE_S = 30.0


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=json.loads)
    except ValueError:
        raise BadRequest("body: not valid JSON") from None
    except RecursionError:
        raise BadRequest("body: JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise BadRequest(f"body: expected a JSON object, got {type(body).__name__}")
    return body


async def admit(request: web.Request) -> web.Response:
    coordinator = request.app[COORDINATOR]
    given = parse_admit(await _json_object(request), coordinator.registry.ids)
    # The session's report may still be on its way over the proxy's channel: let it land first.
    await request.app[CHANNELS].wait_applied(given.channel, given.after_seq)
    answer = await coordinator.admit(given.session, given.request_id, given.estimate, given.exclude,
                                     given.wait_s, given.leased, given.proxy,
                                     prefix_group=given.prefix_group, shared_tokens=given.shared_tokens,
                                     identified_by=given.identity_source)
    if answer.replica is None:
        return web.json_response({"status": "waiting", "queue_wait_s": answer.queue_wait_s})
    request.app[METRICS].queue_wait.observe(answer.queue_wait_s)
    return web.json_response({
        "status": "admitted", "replica": answer.replica.id, "base_url": answer.replica.base_url,
        "headers": answer.headers, "queue_wait_s": answer.queue_wait_s,
    })


async def leases(request: web.Request) -> web.Response:
    query = request.query
    try:
        after = int(query.get("after", "-1"))
        wait_s = float(query.get("wait_s", "0"))
    except ValueError:
        raise BadRequest("after and wait_s: expected numbers") from None
    if not math.isfinite(wait_s) or wait_s < 0:
        raise BadRequest("wait_s: must be a non-negative number")
    update = await request.app[COORDINATOR].leases.wait(after, query.get("instance"), min(MAX_WAIT_S, wait_s))
    return web.json_response(update.to_json())


async def channel(request: web.Request) -> web.StreamResponse:
    return await serve_channel(request, request.app[COORDINATOR], request.app[CHANNELS])


async def request_done(request: web.Request) -> web.Response:
    coordinator = request.app[COORDINATOR]
    coordinator.request_done(parse_request_done(await _json_object(request), coordinator.registry.ids))
    return web.json_response({"status": "ok"})


def _mark(coordinator: Coordinator) -> int:
    """The number the writer gives the next record: a route's records are those from here on, up to
    its next await."""
    return coordinator.writer.submitted if coordinator.writer is not None else 0


async def _acknowledge(coordinator: Coordinator, first: int, answer: dict[str, Any]) -> web.Response:
    """`answer` once this route's records are stored: a shim drops what is acknowledged, so a crash after
    the answer must not lose it (the relay is off the agent's path, so the wait costs agents nothing).
    Failures of other requests' records are theirs: they are not reported here."""
    writer = coordinator.writer
    if writer is None:
        return web.json_response(answer)
    result = await writer.acommit(first, writer.submitted)
    if result.unavailable is not None:  # the shim keeps the records and resends them (the store upserts)
        log.warning("history store unavailable, records not acknowledged: %s", result.unavailable)
        return _error(503, f"history store unavailable: {result.unavailable}")
    if result.unwritable:  # resending would fail the same way: acknowledged, logged and counted
        log.error("history store refused %d record(s)", result.unwritable)
    return web.json_response(answer | ({"not_stored": result.unwritable} if "accepted" in answer else {}))


async def events(request: web.Request) -> web.Response:
    try:
        parsed = events_from_body(await _json_object(request))
    except EventError as exc:
        raise BadRequest(str(exc)) from None
    coordinator = request.app[COORDINATOR]
    first = _mark(coordinator)
    for event in parsed:
        try:
            coordinator.tool_event(event)
        except SessionStateError as exc:
            log.warning("tool event for %s not applied: %s", event.session, exc)
    return await _acknowledge(coordinator, first, {"accepted": len(parsed)})


async def start_session(request: web.Request) -> web.Response:
    body = await _json_object(request)
    labels = field(body, "labels", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise BadRequest("labels: expected an object of strings")
    harness = field(body, "harness", str, None)
    if harness is not None and len(harness) > MAX_HARNESS_CHARS:
        raise BadRequest(f"harness: longer than {MAX_HARNESS_CHARS} characters")
    coordinator = request.app[COORDINATOR]
    first = _mark(coordinator)
    coordinator.start_session(field(body, "session", str), harness, fit_json(labels),
                              float(field(body, "started_at", (int, float), coordinator.clock())))
    return await _acknowledge(coordinator, first, {"status": "ok"})


async def end_session(request: web.Request) -> web.Response:
    coordinator = request.app[COORDINATOR]
    body = await _json_object(request) if request.can_read_body else {}
    ended_at = ended_at_field(body, coordinator.clock)
    first = _mark(coordinator)
    ended = coordinator.end_session(request.match_info["session"], ended_at)
    return await _acknowledge(coordinator, first, {"status": "ok" if ended else "unknown"})


async def state(request: web.Request) -> web.Response:
    coordinator = request.app[COORDINATOR]
    now = coordinator.clock()
    snapshot = coordinator.state.snapshot(now)
    replicas = [
        {"id": spec.id, "base_url": spec.base_url, "dp_rank": spec.dp_rank,
         "capacity_tokens": load.capacity_tokens, "reserved_tokens": coordinator.state.used_tokens(spec.id),
         "running_requests": load.running_requests, "waiting_requests": load.waiting_requests,
         "kv_usage": load.kv_usage, "down": load.down, "load_age_s": coordinator.registry.load_age_s(spec.id),
         "reports_cached_tokens": coordinator.registry.reports_cached_tokens.get(spec.id)}
        for spec in coordinator.registry.specs for load in [coordinator.registry.loads[spec.id]]
    ]
    return web.json_response({
        "now": now,
        "policy": coordinator.policy.name,
        "pool": [s.id for s in snapshot.sessions if s.state == "waiting"],
        "sessions": [s.to_json() | {"identified_by": coordinator.identified_by(s.id)} for s in snapshot.sessions],
        "replicas": replicas,
        "counters": {name: getattr(coordinator.state.counters, name)
                     for name in type(coordinator.state.counters).__dataclass_fields__},
        "pool_wait": _pool_wait(coordinator, with_samples=request.query.get("waits") == "1"),
        "recent_plans": [
            {"at": p.at, "solver": p.solver, "solve_ms": p.solve_ms, "waiting": p.waiting,
             "assigned": [list(a) for a in p.assigned], "interrupts": list(p.interrupts),
             "discarded": list(p.discarded), "fallback": p.fallback,
             "bound": None if p.bound is None else list(p.bound), "gap": p.gap}
            for p in coordinator.recent_plans
        ],
    })


def _pool_wait(coordinator: Coordinator, with_samples: bool) -> dict[str, Any]:
    """The wait bound and how the pool measures up to it (seconds of the scheduler's clock); with
    `?waits=1` also the recent waits themselves (up to 4,096, oldest first), for a benchmark's CDF."""
    counters = coordinator.counters
    waits = sorted(counters.pool_waits)
    # the waits and their max to the same places: rounding keeps order only at one precision (a wait of
    # 0.19634 s was reported as 0.1963 beside a max of 0.196, and a benchmark's p99 came out above its max)
    return ({"recent": [round(w, 4) for w in counters.pool_waits]} if with_samples else {}) | {
        "bound_s": coordinator.config.planner.max_wait_s,
        "oldest_s": round(coordinator.oldest_wait(), 4),
        "recent_p99_s": round(waits[min(len(waits) - 1, int(0.99 * len(waits)))], 4) if waits else 0.0,
        "max_s": round(counters.max_pool_wait_s, 4),
        "over_bound": counters.waits_over_bound,
    }


async def healthz(request: web.Request) -> web.Response:
    # serving from the start; "planner": "loading" while plans are best-fit-decreasing (benchmarks wait)
    ready = request.app[COORDINATOR].planner_ready
    return web.json_response({"status": "ok", "planner": "ready" if ready else "loading"})


async def metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": content_type})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _middleware(token: str | None) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token and request.path != "/healthz":
            if not authorized(request.headers, token):
                return _error(401, "missing or wrong token (Authorization: Bearer <TAO_TOKEN>)")
        try:
            return await handler(request)
        except BadRequest as exc:
            return _error(400, str(exc))
        except SessionStateError as exc:
            return _error(409, str(exc))
        except web.HTTPException as exc:
            return _error(exc.status, exc.reason)

    return guard


def build_app(coordinator: Coordinator, token: str | None = None) -> web.Application:
    app = web.Application(middlewares=[_middleware(token)], client_max_size=16 * 1024 * 1024)
    app[COORDINATOR] = coordinator
    app[METRICS] = CoordinatorMetrics(coordinator)
    app[CHANNELS] = ChannelBook()

    async def background(app: web.Application) -> AsyncIterator[None]:
        # what imports and the planner's compiled kernels left (the TAO policy is built: planner/warm.py), out
        # of the garbage collector's way: its full collections (~50 ms with numba loaded) would land in plans
        gc.collect()
        gc.freeze()
        async with aiohttp.ClientSession() as http:
            await coordinator.poll_replicas(http)

            async def poll_forever() -> None:
                while True:
                    await asyncio.sleep(POLL_INTERVAL_S)
                    try:
                        await coordinator.poll_replicas(http)
                    except Exception:
                        log.exception("replica poll failed")

            tasks = [asyncio.create_task(coordinator.planning_loop()), asyncio.create_task(poll_forever())]
            yield
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if coordinator.writer is not None:
                try:
                    await asyncio.to_thread(coordinator.writer.close, WRITER_CLOSE_S)
                except StoreError as exc:  # said once, not a traceback: the server is stopping either way
                    log.error("at shutdown: %s", exc)
                finally:  # its connections closed too (SQLite folds its write-ahead log back in)
                    coordinator.writer.store.close()

    app.cleanup_ctx.append(background)

    async def close_channels(app: web.Application) -> None:
        await app[CHANNELS].close_all()

    app.on_shutdown.append(close_channels)
    app.router.add_post("/v1/admit", admit)
    app.router.add_post("/v1/requests/done", request_done)
    app.router.add_get("/v1/leases", leases)
    app.router.add_get("/v1/channel", channel)
    app.router.add_post("/v1/events", events)
    app.router.add_post("/v1/sessions", start_session)
    app.router.add_post("/v1/sessions/{session}/end", end_session)
    app.router.add_get("/v1/state", state)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app
