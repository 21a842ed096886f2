"""Real vLLM servers for the real-vLLM tier, started once per test run and shared by every test.

`make vllm` installs vLLM's CPU build (.tools/vllm) and builds the tiny model (.tools/tiny-model); run the
tier with `make test-vllm`. Without the install the tier is skipped, unless TAO_REAL_VLLM=1 (as `make
test-vllm` and CI set) makes a missing install an error.

Fixtures (session scope, each a `VllmServer`: `base_url`, `model`, `data_parallel_size`, ...):
  vllm_single  one engine, `--enable-prompt-tokens-details`, no reasoning parser.
  vllm_dp2     `--data-parallel-size 2` (ranks pinned with `X-data-parallel-rank`) with
               `--reasoning-parser deepseek_r1`: a request with `chat_template_kwargs:
               {"enable_thinking": true}` streams `delta.reasoning`, any other streams content (the tiny
               model's template closes the think block). vLLM 0.32's non-streamed parse ignores that
               closed block, so a non-streamed answer from this server comes back as `reasoning`: ask
               `vllm_single` for those. Deliberately WITHOUT `--enable-prompt-tokens-details` (its usage
               has no cached tokens: the coordinator must say so); its cache hits show in /metrics.
Both servers start together the first time a test needs either (a minute or more: eager mode, no
compilation); each test uses prompts of its own (`unique_prompt`), so the shared prefix caches and
cumulative counters never leak between tests. Tests marked `kills_vllm` (they SIGKILL `vllm_single`) run
after all others.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".tools" / "vllm" / "bin" / "python"
TINY_MODEL = ROOT / ".tools" / "tiny-model"
LAUNCHER = ROOT / "scripts" / "vllm" / "serve.py"
MODEL = "tiny"
START_TIMEOUT_S = 900.0
# What the system needs from every vLLM it schedules onto (README "Running against real vLLM"):
# prefix caching, cached-token counts in usage, tool calls for agents. The rest fits the tiny model, and
# `--enforce-eager` skips the minutes of torch.compile each start would cost (the tier checks shapes,
# caching and metrics, not decode speed).
SERVE_FLAGS = ("--enable-prefix-caching", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
               "--max-model-len", "4096", "--dtype", "float32", "--enforce-eager")


# The cores the vLLM servers may use: the first half of this process's (at least one). A generating vLLM
# CPU server keeps its cores busy (its worker spins on sched_yield between steps, its engine loop polls),
# and on these 2-core machines that starved everything that sleeps between events: with vLLM free to use
# both cores, the coordinator answered /v1/state after 14.6 s (during one 1,800-token stream) and the other
# server a 1-token request after 12–15 s (during one 1,500-token stream); with vLLM confined to one core,
# both within 0.2 s. A real
# deployment gives vLLM machines of its own; the other half here is the system under test's.
_ALLOWED_CORES = sorted(os.sched_getaffinity(0))
VLLM_CORES = frozenset(_ALLOWED_CORES[:max(1, len(_ALLOWED_CORES) // 2)])


def _confine_to_vllm_cores() -> None:
    os.sched_setaffinity(0, VLLM_CORES)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class VllmServer:
    """One real vLLM server process (with its engine processes, in a process group of its own)."""

    model: str
    data_parallel_size: int
    reasoning_parser: str | None
    # Started with --enable-prompt-tokens-details (usage.prompt_tokens_details.cached_tokens).
    cached_tokens_in_usage: bool
    port: int
    log: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    # Seconds from launch to /health answering 200 (set once ready).
    start_s: float | None = None

    @property
    def base_url(self) -> str:
        """Server root, without /v1."""
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def get(self, path: str, timeout_s: float = 5.0) -> str:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout_s) as response:
            return str(response.read().decode())

    def metrics(self) -> str:
        return self.get("/metrics")

    def pause(self) -> None:
        """SIGSTOP the whole server: every request it runs stays where it is, mid-generation, until the
        server is resumed or killed."""
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the whole server (API server and engines), as a crashed machine would end it. Its
        shared-memory segments (~420 MB in /dev/shm for the single server), which only a clean stop
        removes, are removed after it: CI runs on the machine the session leaves."""
        segments = self._shared_memory()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        for segment in segments:
            segment.unlink(missing_ok=True)

    def _shared_memory(self) -> set[Path]:
        found: set[Path] = set()
        for process in psutil.process_iter():
            try:
                if os.getpgid(process.pid) == self.process.pid:
                    found.update(Path(m.path) for m in process.memory_maps() if m.path.startswith("/dev/shm/"))
            except (psutil.Error, ProcessLookupError):
                continue  # gone meanwhile, or not ours to read
        return found

    def stop(self) -> None:
        if not self.alive():
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()

    def wait_ready(self, launched: float) -> None:
        deadline = launched + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"vLLM exited with {self.process.returncode} while starting:\n{_tail(self.log)}")
            try:
                self.get("/health", timeout_s=2.0)
                self.start_s = time.monotonic() - launched
                return
            except OSError:
                time.sleep(1.0)
        raise RuntimeError(f"vLLM did not answer /health within {START_TIMEOUT_S:.0f} s:\n{_tail(self.log)}")


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _launch(log_dir: Path, name: str, data_parallel_size: int, reasoning_parser: str | None,
            cached_tokens_in_usage: bool) -> VllmServer:
    port = _free_port()
    args = [str(VLLM_PYTHON), str(LAUNCHER), "serve", str(TINY_MODEL), "--served-model-name", MODEL,
            "--host", "127.0.0.1", "--port", str(port), *SERVE_FLAGS]
    if cached_tokens_in_usage:
        args.append("--enable-prompt-tokens-details")
    if data_parallel_size > 1:
        # One API server in front of the engines (vLLM starts one per engine by default): fewer processes.
        args += ["--data-parallel-size", str(data_parallel_size), "--data-parallel-rpc-port", str(_free_port()),
                 "--api-server-count", "1"]
    if reasoning_parser:
        args += ["--reasoning-parser", reasoning_parser]
    log = log_dir / f"{name}.log"
    # 1 GiB of KV cache per engine: plenty for the tiny model, and the machine is shared.
    # Each engine's OpenMP threads on the vLLM cores (one list per data-parallel rank): vLLM's own choice
    # ("auto") keeps a core free for its engine loop, which confined to one core it cannot.
    cores = ",".join(map(str, sorted(VLLM_CORES)))
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "VLLM_CPU_OMP_THREADS_BIND": "|".join([cores] * data_parallel_size)}
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log_dir,
                                   start_new_session=True, preexec_fn=_confine_to_vllm_cores)
    return VllmServer(MODEL, data_parallel_size, reasoning_parser, cached_tokens_in_usage, port, log, process)


class _Servers:
    """Launches both servers together on first use (start-up overlaps) and stops them at the end."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._servers: dict[str, VllmServer] = {}
        self._launched = 0.0

    def get(self, name: str) -> VllmServer:
        if not self._servers:
            if not (VLLM_PYTHON.exists() and (TINY_MODEL / "config.json").exists()):
                message = f"real vLLM is not installed ({VLLM_PYTHON}, {TINY_MODEL}): run `make vllm`"
                if os.environ.get("TAO_REAL_VLLM") == "1":
                    pytest.fail(message)
                pytest.skip(message)
            self._launched = time.monotonic()
            self._servers = {"single": _launch(self._log_dir, "single", 1, None, True),
                             "dp2": _launch(self._log_dir, "dp2", 2, "deepseek_r1", False)}
        server = self._servers[name]
        if server.start_s is None:
            server.wait_ready(self._launched)
            print(f"\nvLLM {name} ready in {server.start_s:.0f} s (log {server.log})", flush=True)
        if not server.alive():
            pytest.fail(f"vLLM {name} is not running (killed by an earlier test?):\n{_tail(server.log)}")
        return server

    def stop(self) -> None:
        for server in self._servers.values():
            server.stop()


@pytest.fixture(scope="session")
def _vllm_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Servers]:
    servers = _Servers(tmp_path_factory.mktemp("vllm"))
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def vllm_single(_vllm_servers: _Servers) -> VllmServer:
    """A single-engine vLLM server with cached tokens in its usage and no reasoning parser."""
    return _vllm_servers.get("single")


@pytest.fixture(scope="session")
def vllm_dp2(_vllm_servers: _Servers) -> VllmServer:
    """A `--data-parallel-size 2` vLLM server with `--reasoning-parser deepseek_r1`, without
    `--enable-prompt-tokens-details`."""
    return _vllm_servers.get("dp2")


@pytest.fixture
def unique_prompt() -> str:
    """A prompt no other test sends: the servers' prefix caches are shared by the whole run."""
    return f"[{uuid.uuid4().hex}] Fix the failing test in tests/test_parser.py, then run the suite again."


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that kill `vllm_single` run last, so every other test still finds it running."""
    items.sort(key=lambda item: item.get_closest_marker("kills_vllm") is not None)
