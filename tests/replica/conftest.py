"""Fixtures: a real replica app on a loopback port (OS-chosen) and SDK clients pointed at it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from tao_harness.config import ReplicaConfig
from tao_harness.replica.app import build_app
from tao_harness.replica.keys import DRIVERS
from tao_harness.replica.scenario import load_scenario


@dataclass
class RunningReplica:
    app: web.Application
    url: str  # server root, no /v1

    def engine_metrics(self, rank: int = 0) -> Any:
        return self.app[DRIVERS][rank].engine.metrics()


StartReplica = Callable[..., Awaitable[RunningReplica]]


@pytest.fixture
def start_replica(aiohttp_server: Any) -> StartReplica:
    async def start(scenario: str = "swe-short", **settings: Any) -> RunningReplica:
        settings.setdefault("time_scale", 50.0)
        app = build_app(ReplicaConfig(port=0, **settings), load_scenario(scenario))
        server = await aiohttp_server(app)
        return RunningReplica(app, str(server.make_url("")).rstrip("/"))

    return start
