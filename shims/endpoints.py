"""The coordinator and proxy one `tao-run` talks to: given, started in-process, or embedded.

- `--coordinator URL` (or `TAO_COORDINATOR_URL` / config): that coordinator; the proxy is `--proxy URL`
  or a private in-process proxy admitting through that coordinator.
- Neither: the embedded cluster (`tao_harness.coordinator.embedded.EmbeddedCluster`) for this run.
  Where that is not installed, a private proxy without coordinator (cache-affinity routing over the
  configured replicas) and no live telemetry: tool events are spooled for later delivery.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from dataclasses import dataclass
from typing import AsyncIterator

from aiohttp import web

from tao_harness.config import TaoConfig
from tao_harness.serving import start_site

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Endpoints:
    # None: no coordinator (events are spooled).
    coordinator_url: str | None
    proxy_url: str


@contextlib.asynccontextmanager
async def _private_proxy(config: TaoConfig, coordinator_url: str | None,
                         token: str | None) -> AsyncIterator[str]:
    from tao_harness.proxy.app import build_app

    proxy_config = config.proxy.model_copy(update={"coordinator_url": coordinator_url, "port": 0,
                                                   "host": "127.0.0.1"})
    if not config.cluster.replicas and coordinator_url is None:
        print("tao-run: warning: no coordinator and no replicas configured; the agent's LLM requests "
              "will fail (give --replica ID=URL or --coordinator URL)", file=sys.stderr)
    runner, url = await start_site(build_app(proxy_config, config.cluster.replicas, token))
    try:
        yield url
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def open_endpoints(config: TaoConfig, coordinator_url: str | None, proxy_url: str | None,
                         token: str | None) -> AsyncIterator[Endpoints]:
    if coordinator_url is not None:
        if proxy_url is not None:
            yield Endpoints(coordinator_url, proxy_url)
            return
        async with _private_proxy(config, coordinator_url, token) as url:
            yield Endpoints(coordinator_url, url)
        return
    try:
        embedded = importlib.import_module("tao_harness.coordinator.embedded")
    except ModuleNotFoundError as exc:
        if exc.name != "tao_harness.coordinator.embedded":
            raise
        print("tao-run: warning: no coordinator configured and the embedded coordinator is not "
              "available; running without scheduling, tool events are spooled", file=sys.stderr)
        async with _private_proxy(config, None, token) as url:
            yield Endpoints(None, proxy_url or url)
        return
    async with embedded.EmbeddedCluster(config) as cluster:
        yield Endpoints(cluster.coordinator_url, proxy_url or cluster.proxy_url)
