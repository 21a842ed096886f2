"""Error responses in the shapes vLLM (OpenAI API) and Anthropic return, so clients raise their usual errors.

OpenAI/vLLM: `{"error": {"message", "type", "param", "code"}}`; Anthropic:
`{"type": "error", "error": {"type", "message"}}`. Handlers raise `ApiError`; the middleware renders it
in the shape of the API the path belongs to, and turns any unexpected exception into a 500 of the same
shape instead of a traceback page.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

_log = logging.getLogger(__name__)

_OPENAI_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    500: "InternalServerError",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    500: "api_error",
}


class ApiError(Exception):
    """A request the server refuses, with the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def validation_message(exc: ValidationError) -> str:
    """One line naming the first bad field, e.g. `messages.0.role: Input should be ...`."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def is_anthropic_path(path: str) -> bool:
    return path.startswith("/v1/messages")


def error_body(path: str, message: str, status: int) -> dict[str, Any]:
    """The error JSON for `path`'s API (also sent as an SSE event when a stream fails midway)."""
    if is_anthropic_path(path):
        kind = _ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = _OPENAI_TYPES.get(status, "BadRequestError" if status < 500 else "InternalServerError")
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def error_response(path: str, message: str, status: int) -> web.Response:
    """The error response for `path`'s API."""
    return web.json_response(error_body(path, message, status), status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(request.path, exc.message, exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request.path, exc.reason, exc.status)
    except Exception:  # the last line of defence: log it, never send a traceback page
        _log.exception("unhandled error on %s", request.path)
        return error_response(request.path, "internal error in the emulated replica", 500)
