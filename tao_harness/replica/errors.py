"""Error responses in the shapes vLLM returns, so clients raise their usual errors.

OpenAI routes: `{"error": {"message", "type", "param", "code"}}`; Anthropic routes:
`{"type": "error", "error": {"type", "message"}}`. vLLM 0.32 names the error type the same way on both
(`BadRequestError`, `NotFoundError`, ...; not Anthropic's own `invalid_request_error`), and so does this
replica. Handlers raise `ApiError`; the middleware renders it in the shape of the API the path belongs
to, and turns any unexpected exception into a 500 of the same shape instead of a traceback page.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

_log = logging.getLogger(__name__)

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    500: "InternalServerError",
}


class ApiError(Exception):
    """A request the server refuses, with the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param  # the request field at fault, as vLLM names it (e.g. "model")


def validation_message(exc: ValidationError) -> str:
    """One line naming the first bad field, e.g. `messages.0.role: Input should be ...`."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def is_anthropic_path(path: str) -> bool:
    return path.startswith("/v1/messages")


def error_body(path: str, message: str, status: int, param: str | None = None) -> dict[str, Any]:
    """The error JSON for `path`'s API (also sent as an SSE event when a stream fails midway)."""
    kind = _ERROR_TYPES.get(status, "BadRequestError" if status < 500 else "InternalServerError")
    if is_anthropic_path(path):
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def error_response(path: str, message: str, status: int, param: str | None = None) -> web.Response:
    """The error response for `path`'s API."""
    return web.json_response(error_body(path, message, status, param), status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(request.path, exc.message, exc.status, exc.param)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request.path, exc.reason, exc.status)
    except Exception:  # the last line of defence: log it, never send a traceback page
        _log.exception("unhandled error on %s", request.path)
        return error_response(request.path, "internal error in the emulated replica", 500)
