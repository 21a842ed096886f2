"""The local event relay: the loopback endpoint shims post to, answering at once.

Served by `tao-run` on 127.0.0.1 (port 0). It speaks the coordinator's own API for the shims that build
events themselves (the OpenCode plugin, the mini-SWE-agent launcher), plus Claude Code's hook bodies:

    POST /{secret}/v1/events          one event or {"events": [...]}  -> 200 {"accepted": n} | 400
    POST /{secret}/v1/sessions        {"session", "harness", "labels", "started_at", "harness_session_id"}
    POST /{secret}/v1/sessions/{id}/end
    POST /{secret}/hooks/claude-code  a Claude Code hook input -> 200 {} (always: never disturb the agent)
    GET  /healthz

The relay forwards with the coordinator's token, so it must not take events from just any local process:
every route but /healthz sits under a random per-run secret path segment. Only the agent learns it, as
part of the relay URL it is given (TAO_RELAY_URL, the Claude Code settings file in the run's private
directory); every shim posts to "relay URL + path" and so presents it without knowing. Anything else
gets 404.

Accepted records go to a `Forwarder`, which delivers them in the background or spools them; a shim
never waits for the coordinator.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote

from aiohttp import web

from tao_harness.coordinator.inputs import BadRequest, ended_at_field
from tao_harness.events import EventError, event_to_json, events_from_body, fit_for_store
from tao_harness.shims.claude_code.hooks import CLAUDE_HOOK_PATH, ClaudeHookTranslator
from tao_harness.shims.forwarder import Forwarder

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session: str
    harness: str
    labels: dict[str, str]
    started_at: float
    harness_session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "harness": self.harness, "labels": dict(self.labels),
                "started_at": self.started_at, "harness_session_id": self.harness_session_id}


def session_end_request(session: str, ended_at: float) -> tuple[str, dict[str, Any]]:
    """The coordinator request (path, body) that ends `session`. It carries its own time: delivered late
    (retried, or from the spool), it still records when the session ended, not when it arrived."""
    return f"/v1/sessions/{quote(session, safe='')}/end", {"ended_at": ended_at}


@dataclass
class RelayState:
    forwarder: Forwarder
    # The run's own session: Claude Code hook events are attributed to it.
    session: SessionInfo
    claude: ClaudeHookTranslator
    clock: Callable[[], float] = time.time
    events_accepted: int = 0
    # The per-run path segment every route but /healthz sits under.
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @property
    def prefix(self) -> str:
        """The path the shims' relay URL ends with: `{root}{prefix}` + "/v1/events" etc."""
        return f"/{self.secret}"


RELAY = web.AppKey("relay_state", RelayState)


def _bad_request(message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=400)


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (ValueError, RecursionError):
        raise web.HTTPBadRequest(text='{"error": {"message": "body: not valid JSON or nested too deeply"}}',
                                 content_type="application/json") from None


async def post_events(request: web.Request) -> web.Response:
    state = request.app[RELAY]
    data = await _json_body(request)
    try:
        events = events_from_body(data)
    except EventError as exc:
        return _bad_request(str(exc))
    for event in events:
        state.forwarder.submit("/v1/events", event_to_json(event))
    state.events_accepted += len(events)
    return web.json_response({"accepted": len(events)})


async def post_session(request: web.Request) -> web.Response:
    data = await _json_body(request)
    if not isinstance(data, dict) or not isinstance(data.get("session"), str) or not data["session"]:
        return _bad_request("session: expected a non-empty string")
    labels = data.get("labels") or {}
    if not isinstance(labels, dict):
        return _bad_request("labels: expected an object")
    request.app[RELAY].forwarder.submit("/v1/sessions", data)
    return web.json_response({"status": "ok"})


async def end_session(request: web.Request) -> web.Response:
    """The shim's `ended_at` when it sends one (the mini-SWE-agent launcher does), else now."""
    state = request.app[RELAY]
    try:
        ended_at = ended_at_field(await _json_body(request) if request.can_read_body else {}, state.clock)
    except BadRequest as exc:
        return _bad_request(str(exc))
    state.forwarder.submit(*session_end_request(request.match_info["session"], ended_at))
    return web.json_response({"status": "ok"})


async def claude_hook(request: web.Request) -> web.Response:
    state = request.app[RELAY]
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        log.warning("ignored a Claude Code hook request without a JSON object body")
        return web.json_response({})
    outcome = state.claude.translate(body, state.clock())
    for event in outcome.events:
        try:
            fitted = fit_for_store(event)
        except EventError as exc:
            log.warning("ignored a Claude Code tool event the store cannot hold: %s", exc)
            continue
        state.forwarder.submit("/v1/events", event_to_json(fitted))
        state.events_accepted += 1
    known = state.session.harness_session_id
    if outcome.harness_session_id and known != outcome.harness_session_id:
        # Join the harness's id to ours: the registration is sent again with it (an upsert).
        state.session = SessionInfo(state.session.session, state.session.harness, state.session.labels,
                                    state.session.started_at, outcome.harness_session_id)
        state.forwarder.submit("/v1/sessions", state.session.to_json())
    # An empty JSON object: "no decision", so the hook never changes what Claude Code does.
    return web.json_response({})


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def build_relay_app(state: RelayState) -> web.Application:
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app[RELAY] = state
    prefix = state.prefix
    app.router.add_post(prefix + "/v1/events", post_events)
    app.router.add_post(prefix + "/v1/sessions", post_session)
    app.router.add_post(prefix + "/v1/sessions/{session}/end", end_session)
    app.router.add_post(prefix + CLAUDE_HOOK_PATH, claude_hook)
    app.router.add_get("/healthz", healthz)
    return app
