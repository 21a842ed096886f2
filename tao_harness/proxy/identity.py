"""Which agent session an LLM request belongs to.

First match wins, most explicit first:
1. `X-TAO-Session` header (set by `tao-run` and the shims);
2. path prefix `/s/{session}/...` (for clients that can only change the base URL);
3. `X-Claude-Code-Session-Id` (Claude Code; equals its hooks' `session_id`);
4. `X-Session-ID`, then `x-session-affinity` (OpenCode, vllm-router style clients), then `session-id`
   (the Codex CLI);
5. body `metadata.session_id`, `metadata.program_id` / top-level `program_id`, then `user`
   (OpenAI) or `metadata.user_id` (Anthropic);
6. none: the caller tells the session by its conversation (proxy.conversation: the chain of digests of
   its message list) where the request has one and tool telemetry is on, else falls back to one
   session per client connection and logs a warning.

An id that matched but cannot be used — a control or other unprintable character (it would go out in
a pinning header), or longer than the history store keeps — is refused with `BadSessionId` naming where
it came from, before anything is admitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

SessionSource = Literal["tao-header", "path", "claude-code", "session-header", "body", "conversation",
                        "connection"]

SESSION_PATH_PREFIX = "/s/"
# The history store's limit for ids (store.models).
MAX_ID_CHARS = 200
_HEADERS: tuple[tuple[str, SessionSource], ...] = (
    ("X-TAO-Session", "tao-header"),
    ("X-Claude-Code-Session-Id", "claude-code"),
    ("X-Session-ID", "session-header"),
    ("x-session-affinity", "session-header"),
    ("session-id", "session-header"),
)


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    session: str
    # Which rule matched; "connection" means no rule did and the id is per client connection.
    source: SessionSource
    # The upstream path with any `/s/{session}` prefix removed.
    path: str


def harness_of(headers: Mapping[str, str]) -> str | None:
    """The harness a request comes from, where its headers say (the shims' spelling), else None."""
    if "X-Claude-Code-Session-Id" in headers:
        return "claude-code"
    agent = headers.get("User-Agent", "").lower()
    if agent.startswith("claude-cli"):
        return "claude-code"
    return next((name for name in ("opencode", "codex") if name in agent), None)


class BadSessionId(ValueError):
    """A session (or request) id the proxy cannot use; the message starts with the field it came from."""


def checked_id(value: str, where: str) -> str:
    """`value` if it can serve as an id (printable, at most MAX_ID_CHARS), else BadSessionId naming `where`."""
    if len(value) > MAX_ID_CHARS:
        raise BadSessionId(f"{where}: id longer than {MAX_ID_CHARS} characters")
    if not value.isprintable():
        raise BadSessionId(f"{where}: id contains a control or unprintable character")
    return value


def split_session_path(path: str) -> tuple[str | None, str]:
    """`/s/abc/v1/messages` -> ("abc", "/v1/messages"); other paths -> (None, path)."""
    if not path.startswith(SESSION_PATH_PREFIX):
        return None, path
    session, sep, rest = path[len(SESSION_PATH_PREFIX) :].partition("/")
    if not session or not sep:
        return None, path
    return session, "/" + rest


def _body_session(body: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(session id, the field it came from) of the first body rule that matches."""
    if not isinstance(body, Mapping):
        return None
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    candidates = (("metadata.session_id", metadata.get("session_id")),
                  ("metadata.program_id", metadata.get("program_id")), ("program_id", body.get("program_id")),
                  ("user", body.get("user")), ("metadata.user_id", metadata.get("user_id")))
    for where, value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip(), where
    return None


def identify_session(
    headers: Mapping[str, str], path: str, body: Mapping[str, Any] | None, connection_id: str
) -> SessionIdentity:
    """Apply the rules above; `connection_id` names the fallback session for this connection.
    Raises BadSessionId when the id that matched cannot be used."""
    header_value = headers.get("X-TAO-Session", "").strip()
    path_session, upstream_path = split_session_path(path)
    if header_value:
        return SessionIdentity(checked_id(header_value, "X-TAO-Session"), "tao-header", upstream_path)
    if path_session:
        return SessionIdentity(checked_id(path_session, "path /s/{session}/"), "path", upstream_path)
    for name, source in _HEADERS[1:]:
        value = headers.get(name, "").strip()
        if value:
            return SessionIdentity(checked_id(value, name), source, upstream_path)
    from_body = _body_session(body)
    if from_body:
        return SessionIdentity(checked_id(*from_body), "body", upstream_path)
    return SessionIdentity(f"conn-{connection_id}", "connection", upstream_path)
