"""The proxy refuses unusable input at its edge (4xx JSON naming the field) and never leaks an admission:
whatever ends a request after the coordinator admitted it, the admission is given back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec, load_config
from tao_harness.coordinator.api import build_app as build_coordinator_app
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.service import Coordinator
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario

Serve = Callable[[Any], Awaitable[TestServer]]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _url(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def _cluster(serve: Serve, replica: web.Application) -> tuple[Coordinator, str]:
    """One replica, a coordinator (no store) and a proxy; returns the coordinator and the proxy's URL."""
    replica_url = _url(await serve(replica))
    config = load_config(overrides={"cluster.replicas": [{"id": "r0", "base_url": replica_url,
                                                          "capacity_tokens": 100_000}]}, environ={})
    coordinator = build_coordinator(config, use_store=False, tick_s=0.05)
    coordinator_url = _url(await serve(build_coordinator_app(coordinator)))
    proxy = await serve(build_proxy_app(ProxyConfig(port=0, coordinator_url=coordinator_url, admission_poll_s=2.0,
                                                    coordinator_grace_s=0.5),
                                        (ReplicaSpec(id="r0", base_url=replica_url),)))
    return coordinator, _url(proxy)


async def _settled(coordinator: Coordinator, timeout_s: float = 5.0) -> int:
    """Reserved tokens once nothing is reserved any more, or after `timeout_s`."""
    for _ in range(int(timeout_s / 0.02)):
        if coordinator.state.used_tokens("r0") == 0:
            break
        await asyncio.sleep(0.02)
    return coordinator.state.used_tokens("r0")


@pytest.mark.parametrize(("path", "extra", "headers", "field"), [
    ("/v1/chat/completions", {"user": "a\x00b"}, {}, "user"),
    ("/v1/chat/completions", {"user": "line\nbreak"}, {}, "user"),
    ("/v1/messages", {"metadata": {"session_id": "x\x01y"}}, {}, "metadata.session_id"),
    ("/v1/chat/completions", {"user": "\ud800"}, {}, "user"),
    ("/v1/chat/completions", {"user": "u" * 201}, {}, "user"),
    ("/s/%00/v1/chat/completions", {}, {}, "path /s/{session}/"),
    ("/v1/chat/completions", {}, {"X-TAO-Session": "tab\there"}, "X-TAO-Session"),
    ("/v1/chat/completions", {"user": "ok"}, {"X-Request-Id": "r" * 300}, "X-Request-Id"),
])
async def test_unusable_ids_are_refused_before_admission(serve: Serve, path: str, extra: dict[str, Any],
                                                         headers: dict[str, str], field: str) -> None:
    coordinator, proxy_url = await _cluster(serve, build_replica_app(ReplicaConfig(port=0, time_scale=50.0),
                                                                     load_scenario("swe-short")))
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy_url + path, data=json.dumps(CHAT | extra),
                             headers={"Content-Type": "application/json", **headers}) as response:
            payload = await response.json()
    assert response.status == 400, payload
    assert payload["error"]["message"].startswith(field + ":"), payload
    assert await _settled(coordinator) == 0 and not coordinator._sizes  # nothing admitted, nothing known


async def test_deep_json_is_a_400_not_a_500(serve: Serve) -> None:
    _, proxy_url = await _cluster(serve, build_replica_app(ReplicaConfig(port=0, time_scale=50.0),
                                                           load_scenario("swe-short")))
    deep = '{"model": "m", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    async with aiohttp.ClientSession() as http, http.post(proxy_url + "/v1/chat/completions", data=deep) as response:
        payload = await response.json()
    assert response.status == 400 and payload["error"]["message"].startswith("body:"), payload


def _silent_replica() -> web.Application:
    """Answers /metrics, takes generation requests and never answers them (a replica stuck in its queue)."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def hang(_: web.Request) -> web.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", hang)
    return app


async def test_a_client_gone_before_the_replica_answered_frees_its_admission(serve: Serve) -> None:
    coordinator, proxy_url = await _cluster(serve, _silent_replica())
    async with aiohttp.ClientSession() as http:
        for index in range(3):
            with pytest.raises(asyncio.TimeoutError):
                async with http.post(proxy_url + "/v1/chat/completions", json=CHAT | {"user": f"gone-{index}"},
                                     timeout=aiohttp.ClientTimeout(total=0.5)):
                    pass
    assert set(coordinator._sizes) == {"gone-0", "gone-1", "gone-2"}  # they were admitted
    assert await _settled(coordinator) == 0


async def test_a_client_gone_while_waiting_for_admission_leaves_the_pool_at_once(serve: Serve) -> None:
    coordinator, proxy_url = await _cluster(serve, _silent_replica())
    coordinator.state.set_capacity("r0", 10)  # nothing fits: the request waits in the pool
    async with aiohttp.ClientSession() as http:
        with pytest.raises(asyncio.TimeoutError):
            async with http.post(proxy_url + "/v1/chat/completions", json=CHAT | {"user": "impatient"},
                                 timeout=aiohttp.ClientTimeout(total=0.5)):
                pass
    assert "impatient" in coordinator._sizes
    # Well before the coordinator's own backstop (a wait nobody polls, withdrawn after the proxy grace).
    for _ in range(100):
        if "impatient" not in coordinator._pending:
            break
        await asyncio.sleep(0.02)
    assert "impatient" not in coordinator._pending
