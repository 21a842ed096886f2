"""A live cluster on loopback: emulated replicas, the coordinator and the proxy, all real HTTP servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tao_harness.config import ProxyConfig, ReplicaConfig, ReplicaSpec, TaoConfig, load_config
from tao_harness.coordinator.api import build_app as build_coordinator_app
from tao_harness.coordinator.embedded import build_coordinator
from tao_harness.coordinator.service import Coordinator
from tao_harness.proxy.app import build_app as build_proxy_app
from tao_harness.replica.app import build_app as build_replica_app
from tao_harness.replica.scenario import load_scenario


@dataclass
class LiveCluster:
    replicas: dict[str, TestServer]
    coordinator: Coordinator
    coordinator_server: TestServer
    proxy_server: TestServer
    db_url: str
    extra: list[TestServer] = field(default_factory=list)

    @property
    def proxy_url(self) -> str:
        return str(self.proxy_server.make_url("")).rstrip("/")

    @property
    def coordinator_url(self) -> str:
        return str(self.coordinator_server.make_url("")).rstrip("/")


StartCluster = Callable[..., Awaitable[LiveCluster]]


@pytest.fixture
async def start_cluster(tmp_path: Path) -> AsyncIterator[StartCluster]:
    servers: list[TestServer] = []

    async def serve(app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1", port=0, handler_cancellation=True)
        await server.start_server()
        servers.append(server)
        return server

    async def start(replicas: int = 2, *, policy: str = "tao", scenario: str = "swe-short",
                    capacity_tokens: int | None = None, time_scale: float = 50.0,
                    num_gpu_blocks: int = 4096, dump_snapshots: str | None = None,
                    overrides: dict[str, Any] | None = None,
                    **replica_settings: Any) -> LiveCluster:
        replica_servers: dict[str, TestServer] = {}
        for index in range(replicas):
            settings = ReplicaConfig(port=0, time_scale=time_scale, num_gpu_blocks=num_gpu_blocks,
                                     **replica_settings)
            replica_servers[f"r{index}"] = await serve(build_replica_app(settings, load_scenario(scenario)))
        specs = [
            ReplicaSpec(id=rid, base_url=str(server.make_url("")).rstrip("/"), capacity_tokens=capacity_tokens)
            for rid, server in replica_servers.items()
        ]
        db_url = f"sqlite:///{tmp_path / 'history.db'}"
        config: TaoConfig = load_config(overrides={"store.url": db_url, "store.flush_interval_s": 0.05,
                                                   "cluster.replicas": [s.model_dump() for s in specs],
                                                   "planner.dump_snapshots": dump_snapshots,
                                                   **(overrides or {})},
                                        environ={})
        coordinator = build_coordinator(config, policy, tick_s=0.05)
        coordinator_server = await serve(build_coordinator_app(coordinator))
        proxy_config = ProxyConfig(port=0, coordinator_url=str(coordinator_server.make_url("")).rstrip("/"),
                                   admission_poll_s=2.0, coordinator_grace_s=0.5)
        proxy_server = await serve(build_proxy_app(proxy_config, tuple(specs)))
        return LiveCluster(replica_servers, coordinator, coordinator_server, proxy_server, db_url)

    yield start
    for server in reversed(servers):
        await server.close()
