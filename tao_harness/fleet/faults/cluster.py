"""A `tao` cluster in child processes whose parts a fault script can kill and bring back.

Like the `tao` router of the fleet benchmark (emulated replicas, `tao coordinator`, `tao proxy`, one
shared emulated clock), but every process handle is kept: the coordinator or the proxy can be SIGKILLed
and restarted on the same port (the other keeps its URL), a replica can be SIGKILLed, and process RSS can
be sampled.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import psutil
from prometheus_client.parser import text_string_to_metric_families

from tao_harness.clock import ScaledClock
from tao_harness.coordinator.replicas import parse_vllm_metrics
from tao_harness.fleet.processes import ProcessGroup
from tao_harness.fleet.session import Endpoints

TAO = (sys.executable, "-m", "tao_harness.cli.main")


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    replicas: int = 2
    time_scale: float = 20.0
    num_gpu_blocks: int = 4000
    policy: str = "tao"
    # History database of the coordinator (SQLAlchemy URL); None runs it with --no-store.
    db_url: str | None = None


@dataclass
class FaultCluster:
    spec: ClusterSpec
    processes: ProcessGroup
    clock: ScaledClock
    replica_urls: list[str]
    replica_procs: list[asyncio.subprocess.Process]
    coordinator_url: str
    coordinator_proc: asyncio.subprocess.Process
    proxy_url: str
    proxy_proc: asyncio.subprocess.Process
    _coordinator_argv: list[str] = field(default_factory=list)
    _proxy_argv: list[str] = field(default_factory=list)

    @property
    def endpoints(self) -> Endpoints:
        """Fresh per fleet run (it carries a request counter)."""
        return Endpoints((self.proxy_url,), self.coordinator_url)

    async def kill_coordinator(self) -> None:
        await _kill(self.coordinator_proc)

    async def restart_coordinator(self) -> None:
        """Start the coordinator again on its old port, with its old flags (its state starts empty)."""
        self.coordinator_proc = await self._restarted("coordinator", self._coordinator_argv, self.coordinator_url)

    async def kill_proxy(self) -> None:
        await _kill(self.proxy_proc)

    async def restart_proxy(self) -> None:
        """Start the proxy again on its old port (a new instance: the coordinator sees a new proxy id)."""
        self.proxy_proc = await self._restarted("proxy", self._proxy_argv, self.proxy_url)

    async def _restarted(self, name: str, argv: list[str], url: str) -> asyncio.subprocess.Process:
        """`argv` started again; it must come back on `url`, where the fleet's clients look for it."""
        process, new_url = await self.processes.start_url_server(argv)
        if new_url != url:
            raise RuntimeError(f"{name} came back on {new_url}, not {url}")
        return process

    async def kill_replica(self, index: int) -> None:
        await _kill(self.replica_procs[index])

    async def state(self, http: aiohttp.ClientSession) -> dict[str, Any]:
        """The coordinator's `GET /v1/state`."""
        async with http.get(self.coordinator_url + "/v1/state",
                            timeout=aiohttp.ClientTimeout(total=10)) as response:
            response.raise_for_status()
            payload: dict[str, Any] = await response.json()
            return payload

    async def coordinator_metrics(self, http: aiohttp.ClientSession) -> dict[str, float]:
        """The coordinator's unlabelled Prometheus samples by name (`tao_pool_sessions`, `tao_plans_total`,
        ...): O(1) for the coordinator, unlike `/v1/state`, which lists every session."""
        async with http.get(self.coordinator_url + "/metrics",
                            timeout=aiohttp.ClientTimeout(total=10)) as response:
            response.raise_for_status()
            text = await response.text()
        return {sample.name: sample.value for family in text_string_to_metric_families(text)
                for sample in family.samples if not sample.labels}

    async def replica_running(self, http: aiohttp.ClientSession, index: int) -> int:
        """Requests running on a replica now (its vLLM `/metrics`)."""
        async with http.get(self.replica_urls[index] + "/metrics",
                            timeout=aiohttp.ClientTimeout(total=5)) as response:
            return parse_vllm_metrics(await response.text(), None).running_requests

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of the coordinator and the proxy processes."""
        return {name: psutil.Process(proc.pid).memory_info().rss
                for name, proc in (("coordinator", self.coordinator_proc), ("proxy", self.proxy_proc))}

    def coordinator_rss(self) -> int:
        """Resident memory of the coordinator (readable while the proxy is down)."""
        return int(psutil.Process(self.coordinator_proc.pid).memory_info().rss)


async def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await process.wait()


def _replica_argv(spec: ClusterSpec) -> list[str]:
    return [*TAO, "replica", "--port", "0", "--time-scale", str(spec.time_scale), "--log-level", "WARNING",
            "--num-gpu-blocks", str(spec.num_gpu_blocks)]


async def start_cluster(spec: ClusterSpec, processes: ProcessGroup) -> FaultCluster:
    """Replicas, then coordinator and proxy; the processes belong to `processes` (closed by its owner)."""
    clock = ScaledClock(spec.time_scale)
    started = await asyncio.gather(*(processes.start_url_server(_replica_argv(spec)) for _ in range(spec.replicas)))
    replica_urls = [url for _, url in started]
    replica_flags = [flag for i, url in enumerate(replica_urls) for flag in ("--replica", f"r{i}={url}")]
    store_flags = ["--db", spec.db_url] if spec.db_url else ["--no-store"]
    coordinator_argv = [*TAO, "coordinator", "--policy", spec.policy, *store_flags, *replica_flags,
                        "--time-scale", str(spec.time_scale), "--clock-epoch", repr(clock.epoch),
                        "--log-level", "WARNING"]
    coordinator_proc, coordinator_url = await processes.start_url_server([*coordinator_argv, "--port", "0"])
    port = urlsplit(coordinator_url).port
    proxy_argv = [*TAO, "proxy", "--coordinator", coordinator_url, *replica_flags, "--log-level", "WARNING"]
    proxy_proc, proxy_url = await processes.start_url_server([*proxy_argv, "--port", "0"])
    return FaultCluster(spec, processes, clock, replica_urls, [p for p, _ in started], coordinator_url,
                        coordinator_proc, proxy_url, proxy_proc, [*coordinator_argv, "--port", str(port)],
                        [*proxy_argv, "--port", str(urlsplit(proxy_url).port)])
