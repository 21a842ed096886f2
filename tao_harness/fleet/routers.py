"""The routers a live fleet benchmark compares, each started the way a user would deploy it.

- `tao`: our coordinator + proxy (any `--policy`), in this process, on the fleet's emulated clock;
- `vllm-router-program`: PyPI `vllm-router` with `--enable-program-scheduling` and
  `{"program_scheduling_enable_key": "auto", "global_queue": true, "token_capacity_per_target": C}`,
  which reads the replicas' `/metrics` and identifies programs from the `x-session-id` header;
- `vllm-router-ca`: the same binary with `--policy cache_aware`;
- `direct-rr`: no router; the fleet's own balancer sends each request to the next replica in turn.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Sequence

import aiohttp

from tao_harness.fleet.processes import ProcessGroup, free_port
from tao_harness.clock import ScaledClock
from tao_harness.fleet.session import Endpoints

ROUTERS = ("tao", "vllm-router-program", "vllm-router-ca", "direct-rr")
PLANNER_READY_S = 900.0  # at most, for a coordinator's first start to compile the planner's kernels


class RouterUnavailable(RuntimeError):
    """The router cannot run here (e.g. vllm-router is not installed); the message says how to get it."""


@dataclass(frozen=True, slots=True)
class RouterInfo:
    name: str
    # Exact version and flags, for the results file.
    description: str


def find_vllm_router(peers_bin: Path | None) -> Path:
    candidates = [peers_bin / "vllm-router"] if peers_bin else []
    found = shutil.which("vllm-router")
    candidates += [Path(found)] if found else []
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise RouterUnavailable("vllm-router is not installed: pip install vllm-router==0.1.17 into a virtualenv "
                            "and pass --peers-venv DIR (or put it on PATH)")


def _version(binary: Path) -> str:
    pip = binary.parent / "pip"
    if pip.exists():
        out = subprocess.run([str(pip), "show", "vllm-router"], capture_output=True, text=True, check=False)
        for line in out.stdout.splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown version"


@asynccontextmanager
async def start_router(name: str, replica_urls: Sequence[str], capacity_tokens: int, clock: ScaledClock,
                       processes: ProcessGroup, *, policy: str = "tao", peers_bin: Path | None = None,
                       ) -> AsyncIterator[tuple[Endpoints, RouterInfo]]:
    if name == "tao":
        # Own processes, like the peers: the fleet driver's event loop must not host the router under test.
        replica_flags = [flag for i, url in enumerate(replica_urls) for flag in ("--replica", f"r{i}={url}")]
        tao = [sys.executable, "-m", "tao_harness.cli.main"]
        _, coordinator_url = await processes.start_url_server([
            *tao, "coordinator", "--port", "0", "--no-store", "--policy", policy, *replica_flags,
            "--time-scale", str(clock.time_scale), "--clock-epoch", repr(clock.epoch), "--log-level", "WARNING"])
        _, proxy_url = await processes.start_url_server([
            *tao, "proxy", "--port", "0", "--coordinator", coordinator_url, *replica_flags, "--log-level", "WARNING"])
        await _planner_ready(coordinator_url)
        yield (Endpoints((proxy_url,), coordinator_url),
               RouterInfo(name, f"tao_harness coordinator + proxy (own processes), --policy {policy}; "
                                f"capacity from the replicas' /metrics"))
        return
    if name == "direct-rr":
        yield Endpoints(tuple(replica_urls)), RouterInfo(name, "no router: requests round-robin over the replicas")
        return
    if name not in ("vllm-router-program", "vllm-router-ca"):
        raise RouterUnavailable(f"unknown router {name!r}; choose from {', '.join(ROUTERS)}")
    binary = find_vllm_router(peers_bin)
    flags = ["--policy", "cache_aware"]
    if name == "vllm-router-program":
        settings = {"program_scheduling_enable_key": "auto", "global_queue": True,
                    "token_capacity_per_target": capacity_tokens}
        flags = ["--enable-program-scheduling", "--program-scheduling-config-json", json.dumps(settings)]
    argv = [str(binary), "--worker-urls", *replica_urls, "--host", "127.0.0.1", "--log-level", "warning",
            "--queue-size", "10000", "--request-timeout-secs", "3600", *flags]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Each instance needs its own Prometheus exporter port, or a second router fails to start.
    argv += ["--port", str(port), "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    await processes.start_until_healthy(argv, url + "/health")
    yield Endpoints((url,)), RouterInfo(name, f"vllm-router {_version(binary)} {' '.join(flags)}")


async def _planner_ready(coordinator_url: str) -> None:
    """Wait until the coordinator plans with its policy's exact program: until then (its compiled kernels
    loading) it plans best-fit-decreasing, which is not what the benchmark compares."""
    deadline = time.monotonic() + PLANNER_READY_S
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(coordinator_url + "/healthz") as response:
                if (await response.json())["planner"] == "ready":
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the coordinator's planner was not ready within {PLANNER_READY_S:.0f} s")
            await asyncio.sleep(0.2)
