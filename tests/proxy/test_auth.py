"""`--require-token`: the proxy and the replica take the deployment's TAO_TOKEN as their clients' API key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario

Serve = Callable[[Any], Awaitable[TestServer]]
TOKEN = "t0ken"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def test_proxy_and_replica_refuse_requests_without_the_token(serve: Serve) -> None:
    replica = await serve(build_replica_app(ReplicaConfig(port=0, time_scale=50.0, require_token=True),
                                            load_scenario("swe-short"), TOKEN))
    proxy = await serve(build_proxy_app(ProxyConfig(port=0, require_token=True),
                                        (ReplicaSpec(id="r0", base_url=_url(replica)),), TOKEN))
    cases = {"none": {}, "bare": {"Authorization": TOKEN}, "wrong": {"Authorization": "Bearer nope"},
             "bearer": {"Authorization": f"Bearer {TOKEN}"}, "lower": {"Authorization": f"bearer {TOKEN}"},
             "x-api-key": {"x-api-key": TOKEN}}
    got: dict[tuple[str, str], int] = {}
    async with aiohttp.ClientSession() as http:
        for name, headers in cases.items():
            for server, base in (("proxy", _url(proxy)), ("replica", _url(replica))):
                async with http.post(base + "/v1/chat/completions", json=CHAT,
                                     headers={"x-session-id": "s", **headers}) as response:
                    got[(server, name)] = response.status
                    payload = await response.json()
                    if response.status == 401:
                        assert payload["error"]["type"] == "authentication_error"
        for base, path in ((_url(proxy), "/healthz"), (_url(replica), "/health"), (_url(replica), "/metrics")):
            async with http.get(base + path) as response:
                assert response.status == 200, path
    refused = {"none", "bare", "wrong"}
    assert got == {(server, name): 401 if name in refused else 200
                   for name in cases for server in ("proxy", "replica")}


def test_require_token_without_a_token_is_refused() -> None:
    with pytest.raises(ValueError, match="TAO_TOKEN"):
        build_proxy_app(ProxyConfig(port=0, require_token=True), ())
    with pytest.raises(ValueError, match="TAO_TOKEN"):
        build_replica_app(ReplicaConfig(port=0, require_token=True), load_scenario("swe-short"))
