"""The routers a live fleet benchmark compares, each started the way a user would deploy it.

- `tao`: our coordinator + proxy (any `--policy`), in this process, on the fleet's emulated clock;
- `vllm-router-program`: PyPI `vllm-router` with `--enable-program-scheduling` and
  `{"program_scheduling_enable_key": "auto", "global_queue": true, "token_capacity_per_target": C}`,
  which reads the replicas' `/metrics` and identifies programs from the `x-session-id` header;
- `vllm-router-ca`: the same binary with `--policy cache_aware`;
- `thunderagent`: ThunderAgent (ThunderAgent-org/ThunderAgent, installed by scripts/install_peers.sh)
  with its capacity scheduler (`--router tr`) reading the replicas' `/metrics` (`--metrics`); sessions send
  `program_id` in the request body and release their program at `/programs/release` when they end;
- `direct-rr`: no router; the fleet's own balancer sends each request to the next replica in turn.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Sequence

import aiohttp

from tao_harness.fleet.processes import ProcessGroup, free_port
from tao_harness.clock import ScaledClock
from tao_harness.fleet.session import Endpoints

ROUTERS = ("tao", "thunderagent", "vllm-router-program", "vllm-router-ca", "direct-rr")
PLANNER_READY_S = 900.0  # at most, for a coordinator's first start to compile the planner's kernels

# ThunderAgent's default --scheduler-interval and --metrics-interval, in seconds of a real deployment.
THUNDERAGENT_INTERVAL_S = 5.0


class RouterUnavailable(RuntimeError):
    """The router cannot run here (e.g. vllm-router is not installed); the message says how to get it."""


@dataclass(frozen=True, slots=True)
class RouterInfo:
    name: str
    # Exact version and flags, for the results file.
    description: str


# The console script each peer router is started by, and how to get it.
_PEERS = {
    "vllm-router": "vllm-router is not installed: scripts/install_peers.sh VENV (or pip install "
                   "vllm-router==0.1.17 into a virtualenv) and pass --peers-venv VENV (or put it on PATH)",
    "thunderagent": "ThunderAgent is not installed: fetch ThunderAgent-org/ThunderAgent, run scripts/"
                    "install_peers.sh VENV PATH_TO_ITS_CHECKOUT_OR_GIT_DIR and pass --peers-venv VENV",
}


def find_peer(script: str, peers_bin: Path | None) -> Path:
    """The peer router's console script, from the peers virtualenv or else PATH."""
    candidates = [peers_bin / script] if peers_bin else []
    found = shutil.which(script)
    candidates += [Path(found)] if found else []
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise RouterUnavailable(_PEERS[script])


def peer_script(router: str) -> str | None:
    """The console script a router needs from the peers virtualenv (None: it needs none)."""
    if router.startswith("vllm-router"):
        return "vllm-router"
    return "thunderagent" if router == "thunderagent" else None


def _version(binary: Path, package: str) -> str:
    pip = binary.parent / "pip"
    if pip.exists():
        out = subprocess.run([str(pip), "show", package], capture_output=True, text=True, check=False)
        for line in out.stdout.splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown version"


def thunderagent_argv(binary: Path, replica_urls: Sequence[str], port: int, time_scale: float) -> list[str]:
    """ThunderAgent's command line (flags from its `__main__.py`) for one run.

    Its scheduler (pause and resume) and its metrics fetches run every 5 s of a real deployment. The
    replicas run `time_scale` times faster than real time, so the same 5 s of the workload's time is
    5 / time_scale wall seconds: at x10, 0.5 s. Passing 5 s unchanged would give it ten times fewer
    decisions per tool call and per turn than it makes in production (50 emulated seconds at x10, longer
    than most of swe-lite's tool calls), and would measure a slower scheduler than the one it ships.
    """
    interval = f"{THUNDERAGENT_INTERVAL_S / time_scale:g}"
    return [str(binary), "--backends", ",".join(replica_urls), "--backend-type", "vllm", "--router", "tr",
            "--metrics", "--metrics-interval", interval, "--scheduler-interval", interval,
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]


def _thunderagent_source(binary: Path) -> str:
    """Where scripts/install_peers.sh installed it from (the commit), when it recorded that."""
    record = binary.parent.parent / "thunderagent-source.txt"
    return record.read_text().strip() if record.exists() else "source not recorded"


async def _check_thunderagent_capacity(url: str, capacity_tokens: int) -> None:
    """ThunderAgent reads each backend's KV capacity (`vllm:cache_config_info`) once, at startup; a backend
    it could not read then has no capacity for good, and its scheduler never pauses or resumes there. The
    run would measure a plain proxy, so it does not start."""
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as response:
            backends = (await response.json())["backends"]
    read = {backend: (state.get("cache_config") or {}).get("total_tokens_capacity")
            for backend, state in backends.items()}
    if any(tokens != capacity_tokens for tokens in read.values()):
        raise RouterUnavailable(f"ThunderAgent read KV capacities {read} from the replicas, "
                                f"expected {capacity_tokens} tokens each")


def host_tier_flags(directory: Path, host_tokens_per_s: float | None) -> list[str]:
    """The coordinator's `--config` flags telling its planner of the replicas' host KV tier (none without one)."""
    if host_tokens_per_s is None:
        return []
    path = directory / "coordinator.yaml"
    path.write_text(f"planner:\n  host_tokens_per_s: {host_tokens_per_s!r}\n")
    return ["--config", str(path)]


@asynccontextmanager
async def start_router(name: str, replica_urls: Sequence[str], capacity_tokens: int, clock: ScaledClock,
                       processes: ProcessGroup, *, policy: str = "tao", peers_bin: Path | None = None,
                       log: Path | None = None, host_tokens_per_s: float | None = None,
                       ) -> AsyncIterator[tuple[Endpoints, RouterInfo]]:
    """Starts `name` against the replicas; a peer router's output goes to `log` (else discarded).
    `host_tokens_per_s`: the replicas' host KV tier reload rate, told to TAO's planner (the peers read
    only what the replicas' /metrics say)."""
    if name == "tao":
        # Own processes, like the peers: the fleet driver's event loop must not host the router under test.
        replica_flags = [flag for i, url in enumerate(replica_urls) for flag in ("--replica", f"r{i}={url}")]
        tao = [sys.executable, "-m", "tao_harness.cli.main"]
        with tempfile.TemporaryDirectory(prefix="tao-bench-") as config_dir:  # read once, at start
            _, coordinator_url = await processes.start_url_server([
                *tao, "coordinator", "--port", "0", "--no-store", "--policy", policy, *replica_flags,
                *host_tier_flags(Path(config_dir), host_tokens_per_s), "--time-scale", str(clock.time_scale),
                "--clock-epoch", repr(clock.epoch), "--log-level", "WARNING"])
        _, proxy_url = await processes.start_url_server([
            *tao, "proxy", "--port", "0", "--coordinator", coordinator_url, *replica_flags, "--log-level", "WARNING"])
        await _planner_ready(coordinator_url)
        yield (Endpoints((proxy_url,), coordinator_url),
               RouterInfo(name, f"tao_harness coordinator + proxy (own processes), --policy {policy}; "
                                f"capacity from the replicas' /metrics"
                                + (f"; planner.host_tokens_per_s {host_tokens_per_s:,.0f}" if host_tokens_per_s else "")))
        return
    if name == "direct-rr":
        yield Endpoints(tuple(replica_urls)), RouterInfo(name, "no router: requests round-robin over the replicas")
        return
    if name == "thunderagent":
        binary = find_peer("thunderagent", peers_bin)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = thunderagent_argv(binary, replica_urls, port, clock.time_scale)
        await processes.start_until_healthy(argv, url + "/health", log=log)
        await _check_thunderagent_capacity(url, capacity_tokens)
        flags = " ".join(argv[1:]).replace(",".join(replica_urls), "URLS").replace(f" {port} ", " P ")
        version = f"ThunderAgent {_version(binary, 'ThunderAgent')} ({_thunderagent_source(binary)})"
        yield (Endpoints((url,), programs_url=url),
               RouterInfo(name, f"{version} {flags}: 5 s scheduler and metrics intervals in emulated time"))
        return
    if name not in ("vllm-router-program", "vllm-router-ca"):
        raise RouterUnavailable(f"unknown router {name!r}; choose from {', '.join(ROUTERS)}")
    binary = find_peer("vllm-router", peers_bin)
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
    await processes.start_until_healthy(argv, url + "/health", log=log)
    version = _version(binary, "vllm-router")
    yield Endpoints((url,)), RouterInfo(name, f"vllm-router {version} {' '.join(flags)}")


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
