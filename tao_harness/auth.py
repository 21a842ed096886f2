"""The deployment's shared token (`TAO_TOKEN`): how a server reads it from a request.

Credentials follow RFC 7235: `Authorization: <scheme> <credentials>` with the scheme matched
case-insensitively (`Bearer`, `bearer`, `BEARER`). A bare token with no scheme is not a credential.
Servers that agents call directly (the proxy, the replica, with `--require-token`) also take
Anthropic's `x-api-key` header, which is where Anthropic SDKs put the key: an agent gives TAO_TOKEN as
its API key.
"""

from __future__ import annotations

import hmac
from typing import Awaitable, Callable, Mapping

from aiohttp import web

BEARER = "bearer"


def bearer_token(authorization: str) -> str | None:
    """The credentials of an `Authorization: Bearer <token>` value, or None for any other form."""
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != BEARER or not credentials:
        return None
    return credentials


def presented_tokens(headers: Mapping[str, str], api_key_header: bool = False) -> list[str]:
    """Every token the request presents: the bearer credentials, and `x-api-key` when `api_key_header`."""
    found = [token for token in [bearer_token(headers.get("Authorization", ""))] if token is not None]
    if api_key_header and headers.get("x-api-key", "").strip():
        found.append(headers["x-api-key"].strip())
    return found


def authorized(headers: Mapping[str, str], token: str, api_key_header: bool = False) -> bool:
    """True when the request presents `token` (compared in constant time)."""
    return any(hmac.compare_digest(given.encode(), token.encode())
               for given in presented_tokens(headers, api_key_header))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def agent_token_middleware(token: str, open_paths: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Refuse (401, OpenAI-style JSON error) every request but `open_paths` that does not present `token`
    as a bearer credential or an `x-api-key`."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in open_paths and not authorized(request.headers, token, api_key_header=True):
            return web.json_response({"error": {
                "message": "missing or wrong token (Authorization: Bearer <TAO_TOKEN>, or x-api-key)",
                "type": "authentication_error", "code": 401}}, status=401)
        return await handler(request)

    return check
