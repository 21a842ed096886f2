"""Which agent session an LLM request belongs to.

First match wins, most explicit first:
1. `X-TAO-Session` header (set by `tao-run` and the shims);
2. path prefix `/s/{session}/...` (for clients that can only change the base URL);
3. `X-Claude-Code-Session-Id` (Claude Code; equals its hooks' `session_id`);
4. `X-Session-ID`, then `x-session-affinity` (OpenCode, vllm-router style clients);
5. body `metadata.session_id`, `metadata.program_id` / top-level `program_id`, then `user`
   (OpenAI) or `metadata.user_id` (Anthropic);
6. none: the caller falls back to one session per client connection and logs a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

SessionSource = Literal["tao-header", "path", "claude-code", "session-header", "body", "connection"]

SESSION_PATH_PREFIX = "/s/"
_HEADERS: tuple[tuple[str, SessionSource], ...] = (
    ("X-TAO-Session", "tao-header"),
    ("X-Claude-Code-Session-Id", "claude-code"),
    ("X-Session-ID", "session-header"),
    ("x-session-affinity", "session-header"),
)


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    session: str
    # Which rule matched; "connection" means no rule did and the id is per client connection.
    source: SessionSource
    # The upstream path with any `/s/{session}` prefix removed.
    path: str


def split_session_path(path: str) -> tuple[str | None, str]:
    """`/s/abc/v1/messages` -> ("abc", "/v1/messages"); other paths -> (None, path)."""
    if not path.startswith(SESSION_PATH_PREFIX):
        return None, path
    session, sep, rest = path[len(SESSION_PATH_PREFIX) :].partition("/")
    if not session or not sep:
        return None, path
    return session, "/" + rest


def _body_session(body: Mapping[str, Any] | None) -> str | None:
    if not isinstance(body, Mapping):
        return None
    metadata = body.get("metadata")
    candidates: list[Any] = []
    if isinstance(metadata, Mapping):
        candidates += [metadata.get("session_id"), metadata.get("program_id")]
    candidates.append(body.get("program_id"))
    candidates.append(body.get("user"))
    if isinstance(metadata, Mapping):
        candidates.append(metadata.get("user_id"))
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def identify_session(
    headers: Mapping[str, str], path: str, body: Mapping[str, Any] | None, connection_id: str
) -> SessionIdentity:
    """Apply the rules above; `connection_id` names the fallback session for this connection."""
    header_value = headers.get("X-TAO-Session", "").strip()
    path_session, upstream_path = split_session_path(path)
    if header_value:
        return SessionIdentity(header_value, "tao-header", upstream_path)
    if path_session:
        return SessionIdentity(path_session, "path", upstream_path)
    for name, source in _HEADERS[1:]:
        value = headers.get(name, "").strip()
        if value:
            return SessionIdentity(value, source, upstream_path)
    from_body = _body_session(body)
    if from_body:
        return SessionIdentity(from_body, "body", upstream_path)
    return SessionIdentity(f"conn-{connection_id}", "connection", upstream_path)
