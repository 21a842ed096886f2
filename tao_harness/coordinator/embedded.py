"""Build and run a coordinator (and optionally a proxy) in this process.

`build_coordinator` is the one place that wires config → store, history, policy, replica registry and
state machine; `tao coordinator`, `tao-run`'s embedded mode and the demo all use it.
`EmbeddedCluster` starts coordinator + proxy on free loopback ports for the length of a `with` block.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Callable

from aiohttp import web

from tao_harness.config import ProxyConfig, TaoConfig
from tao_harness.coordinator.api import build_app
from tao_harness.coordinator.policy_loading import load_in_background
from tao_harness.coordinator.prediction import HistoryPredictor
from tao_harness.coordinator.replicas import ReplicaRegistry
from tao_harness.coordinator.service import Coordinator
from tao_harness.coordinator.state import ClusterState
from tao_harness.policies.registry import get_policy
from tao_harness.readiness.estimator import DurationHistory
from tao_harness.serving import start_site
from tao_harness.store.engine import open_store
from tao_harness.store.queries import family_durations
from tao_harness.store.writer import StoreWriter

log = logging.getLogger(__name__)


def build_coordinator(config: TaoConfig, policy_name: str = "tao", *, use_store: bool = True,
                      tick_s: float = 0.5, clock: Callable[[], float] = time.time,
                      time_scale: float = 1.0, kernels_in_background: bool = False) -> Coordinator:
    """Wire a coordinator from config; the duration history is loaded once from the store.

    `kernels_in_background`: a server's choice, to plan at once while the planner's compiled kernels load
    (coordinator/policy_loading.py); otherwise they are loaded, or compiled, before this returns."""
    writer: StoreWriter | None = None
    history = DurationHistory()
    if use_store:
        store = open_store(config.store.url)
        history = DurationHistory.from_samples(family_durations(store))
        writer = StoreWriter.from_config(store, config.store)
        log.info("history: %d families loaded from %s", len(history.families()), store.name)
    policy = (load_in_background if kernels_in_background else get_policy)(policy_name, config.planner)
    registry = ReplicaRegistry(config.cluster.replicas,
                               host_tier_configured=config.planner.host_tokens_per_s is not None)
    state = ClusterState(
        [(spec.id, spec.capacity_tokens or 0) for spec in config.cluster.replicas],
        HistoryPredictor(history, config.readiness),
        planner=config.planner, readiness=config.readiness, sessions=config.sessions,
        admission_control=policy.admission_control,
    )
    return Coordinator(config, policy, registry, state, writer, clock=clock, tick_s=tick_s, time_scale=time_scale)


class EmbeddedCluster:
    """Coordinator + proxy on free loopback ports: `async with EmbeddedCluster(config) as cluster:`."""

    def __init__(self, config: TaoConfig, policy_name: str = "tao", token: str | None = None, *,
                 use_store: bool = True, clock: Callable[[], float] = time.time, time_scale: float = 1.0) -> None:
        self.config = config
        self.policy_name = policy_name
        self.token = token
        self.use_store = use_store
        self.clock = clock
        self.time_scale = time_scale
        self.coordinator: Coordinator | None = None
        self.coordinator_url = ""
        self.proxy_url = ""
        self._runners: list[web.AppRunner] = []

    async def __aenter__(self) -> EmbeddedCluster:
        from tao_harness.proxy.app import build_app as build_proxy

        self.coordinator = build_coordinator(self.config, self.policy_name, use_store=self.use_store,
                                             clock=self.clock, time_scale=self.time_scale,
                                             kernels_in_background=True)
        runner, self.coordinator_url = await start_site(build_app(self.coordinator, self.token), "127.0.0.1", 0)
        self._runners.append(runner)
        proxy_config = ProxyConfig(host="127.0.0.1", port=0, coordinator_url=self.coordinator_url)
        runner, self.proxy_url = await start_site(
            build_proxy(proxy_config, self.config.cluster.replicas, self.token), "127.0.0.1", 0)
        self._runners.append(runner)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
