"""Proxy overhead: added latency (p50/p99) at 1 and 64 concurrent clients, and the request-rate ceiling.

`CPU ms/req` is the CPU time of the router's own processes (the proxy and its coordinator) per request
while measured, from /proc: on a loaded machine the rate says how much CPU a process got, this what a
request costs. Every router is measured side by side in one run against the same fast fake backend (a minimal
aiohttp server that answers chat completions at once, in its own process), so the figures are
comparable on a shared, noisy machine. Routers: `direct` (no router), `tao-proxy` (fail-open: no
coordinator), `tao-proxy+coordinator` (admitted by a `tao coordinator`; later requests of a session that
still holds its replica go out on its admission lease), the same with `--no-leases` (every request
admitted), and, when installed, `vllm-router` (`--policy cache_aware`) and LiteLLM's proxy.

    python scripts/bench_proxy.py [--seconds 5] [--peers-venv /tmp/peers] [--json]

`--peers-venv` names a virtualenv holding `vllm-router` (pip install vllm-router==0.1.17) and/or
`litellm[proxy]`; they are not dependencies of tao_harness.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from tao_harness.fleet.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
CHAT_BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}

BACKEND_CODE = r"""
import json, sys
from aiohttp import web
ANSWER = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0,
    "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}).encode()
METRICS = (b'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100000"} 1\n'
           b'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_waiting{engine="0"} 0\n')
async def chat(request):
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")
async def ok(request):
    return web.json_response({"status": "ok"})
async def models(request):
    return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
async def metrics(request):
    return web.Response(body=METRICS, content_type="text/plain")
app = web.Application()
app.router.add_post("/v1/chat/completions", chat)
app.router.add_get("/health", ok)
app.router.add_get("/v1/models", models)
app.router.add_get("/metrics", metrics)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


@dataclass
class Row:
    router: str
    clients: int
    requests: int
    p50_ms: float
    p99_ms: float
    rate_per_s: float
    added_p50_ms: float | None = None
    added_p99_ms: float | None = None
    # CPU time the router's own processes (a proxy and its coordinator) spent per request while measured:
    # unlike the rate, it hardly depends on what else the machine runs. None where /proc cannot say.
    cpu_ms_per_request: float | None = None


def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status < 500:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {timeout_s} s")


async def load(url: str, clients: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def client(index: int) -> None:
            headers = {"X-TAO-Session": f"bench-{index}", "Authorization": "Bearer dummy"}
            while time.monotonic() < deadline:
                start = time.perf_counter()
                async with http.post(url, json=CHAT_BODY, headers=headers) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{url}: HTTP {response.status}")
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(client(i) for i in range(clients)))
    return latencies


def cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU time of these processes (all their threads) so far; None without /proc."""
    total = 0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def measure(name: str, base: str, clients: int, seconds: float, pids: list[int] | None = None) -> Row:
    url = base.rstrip("/") + "/v1/chat/completions"
    asyncio.run(load(url, clients, min(1.0, seconds / 4)))  # warm-up: connections, JIT-free paths
    cpu_before = cpu_seconds(pids) if pids else None
    latencies = asyncio.run(load(url, clients, seconds))
    cpu_after = cpu_seconds(pids) if pids else None
    ordered = sorted(latencies)
    cpu_ms = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) * 1e3 / len(ordered)
    return Row(name, clients, len(ordered), statistics.median(ordered) * 1e3,
               ordered[int(0.99 * (len(ordered) - 1))] * 1e3, len(ordered) / seconds, cpu_ms_per_request=cpu_ms)


def start(stack: ExitStack, argv: list[str], ready_url: str, env: dict[str, str] | None = None,
          timeout_s: float = 30.0) -> int:
    """Start a server and wait until it answers; returns its process id."""
    log = stack.enter_context(tempfile.TemporaryFile())
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    stack.callback(process.wait, 10)
    stack.callback(process.terminate)
    try:
        wait_ready(ready_url, timeout_s)
    except RuntimeError:
        log.seek(0)
        tail = log.read().decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{argv[0]} did not come up: {' | '.join(tail)}") from None
    return process.pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per cell (default 5)")
    parser.add_argument("--clients", default="1,64", help="concurrency levels (default 1,64)")
    parser.add_argument("--peers-venv", type=Path, help="virtualenv with vllm-router and/or litellm")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    rows: list[Row] = []
    versions: dict[str, str] = {}
    with ExitStack() as stack:
        backend_port = free_port()
        backend = f"http://127.0.0.1:{backend_port}"
        start(stack, [sys.executable, "-c", BACKEND_CODE, str(backend_port)], backend + "/health")
        routers: dict[str, str] = {"direct": backend}
        pids: dict[str, list[int]] = {}  # each router's own processes

        proxy_port = free_port()
        pids["tao-proxy"] = [start(stack, [sys.executable, "-m", "tao_harness.cli.main", "proxy",
                                           "--port", str(proxy_port), "--replica", f"r0={backend}",
                                           "--log-level", "WARNING"], f"http://127.0.0.1:{proxy_port}/healthz")]
        routers["tao-proxy"] = f"http://127.0.0.1:{proxy_port}"
        versions["tao-proxy"] = "tao_harness (this tree), fail-open mode (no coordinator)"

        coordinator_port = free_port()
        coordinator = f"http://127.0.0.1:{coordinator_port}"
        coordinator_pid = start(stack, [sys.executable, "-m", "tao_harness.cli.main", "coordinator",
                                        "--port", str(coordinator_port), "--no-store", "--replica", f"r0={backend}",
                                        "--log-level", "WARNING"], coordinator + "/healthz")
        for name, flags, what in (
            ("tao-proxy+coordinator", [], "admission by `tao coordinator --policy tao`, following its leases"),
            ("tao-proxy+coordinator, no leases", ["--no-leases"], "every request admitted by the coordinator"),
        ):
            admitted_port = free_port()
            pids[name] = [coordinator_pid, start(
                stack, [sys.executable, "-m", "tao_harness.cli.main", "proxy", "--port", str(admitted_port),
                        "--coordinator", coordinator, "--replica", f"r0={backend}", "--log-level", "WARNING", *flags],
                f"http://127.0.0.1:{admitted_port}/healthz")]
            routers[name] = f"http://127.0.0.1:{admitted_port}"
            versions[name] = f"tao_harness (this tree), {what}"

        peer_bin = args.peers_venv / "bin" if args.peers_venv else None
        if peer_bin and (peer_bin / "vllm-router").exists():
            router_port = free_port()
            pids["vllm-router"] = [start(stack, [str(peer_bin / "vllm-router"), "--worker-urls", backend,
                                                 "--policy", "cache_aware", "--port", str(router_port),
                                                 "--log-level", "warning", "--prometheus-host", "127.0.0.1",
                                                 "--prometheus-port", str(free_port())],
                                         f"http://127.0.0.1:{router_port}/health")]
            routers["vllm-router"] = f"http://127.0.0.1:{router_port}"
            out = subprocess.run([str(peer_bin / "pip"), "show", "vllm-router"], capture_output=True, text=True)
            versions["vllm-router"] = " ".join(re.findall(r"^Version: (.*)$", out.stdout, re.M)) + \
                " --policy cache_aware"
        if peer_bin and (peer_bin / "litellm").exists():
            litellm_port = free_port()
            config = stack.enter_context(tempfile.NamedTemporaryFile("w", suffix=".yaml"))
            config.write(f"model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n"
                         f"      api_base: {backend}/v1\n      api_key: dummy\n")
            config.flush()
            try:
                pids["litellm"] = [start(stack, [str(peer_bin / "litellm"), "--config", config.name,
                                                 "--port", str(litellm_port)],
                                         f"http://127.0.0.1:{litellm_port}/health/liveliness",
                                         env=os.environ | {"LITELLM_LOG": "ERROR",
                                                           "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"},
                                         timeout_s=180)]
                routers["litellm"] = f"http://127.0.0.1:{litellm_port}"
                versions["litellm"] = "LiteLLM proxy (litellm[proxy] from PyPI), one openai/ model entry"
            except RuntimeError as exc:
                print(f"litellm skipped: {exc}", file=sys.stderr)

        # Interleave routers per concurrency level so drift on a shared machine hits all alike.
        for clients in levels:
            direct = measure("direct", routers["direct"], clients, args.seconds)
            rows.append(direct)
            for name, base in routers.items():
                if name == "direct":
                    continue
                row = measure(name, base, clients, args.seconds, pids.get(name))
                row.added_p50_ms = row.p50_ms - direct.p50_ms
                row.added_p99_ms = row.p99_ms - direct.p99_ms
                rows.append(row)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "versions": versions}, indent=2))
        return 0
    sys.path.insert(0, str(ROOT))
    from tao_harness.tables import format_table

    print(format_table(
        [(r.router, r.clients, r.requests, r.p50_ms, r.p99_ms, r.added_p50_ms, r.added_p99_ms, r.rate_per_s,
          r.cpu_ms_per_request) for r in rows],
        ["router", "clients", "requests", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms", "req/s",
         "CPU ms/req"],
    ))
    for name, version in versions.items():
        print(f"{name}: {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
