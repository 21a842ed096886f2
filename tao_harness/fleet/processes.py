"""Child processes of a fleet run: emulated replicas, and servers that print their URL when ready.

Replicas run in their own processes so the engines' timing is not disturbed by the driver's event loop.
Every child is stopped (terminate, then kill) when the `ProcessGroup` closes, even after an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import re
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import aiohttp

URL_LINE = re.compile(rb"(https?://[\w.\-:\[\]]+)")
PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent() -> None:
    """Linux: the child gets SIGTERM when its parent dies, even by SIGKILL, so no replica is orphaned."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessError(RuntimeError):
    """A child process failed to start; the message carries its last output."""


@dataclass
class ProcessGroup:
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)

    async def start_url_server(self, argv: list[str], timeout_s: float = 120.0) -> tuple[asyncio.subprocess.Process, str]:
        """Start `argv` and wait for the first line on stdout that holds a URL."""
        process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.STDOUT,
                                                       preexec_fn=die_with_parent)
        self.processes.append(process)
        seen: list[bytes] = []
        assert process.stdout is not None
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    line = await process.stdout.readline()
                    if not line:
                        raise ProcessError(f"{argv[0]} exited: {b''.join(seen[-5:]).decode(errors='replace')}")
                    seen.append(line)
                    match = URL_LINE.search(line)
                    if match:
                        asyncio.create_task(_drain(process.stdout))
                        return process, match.group(1).decode()
        except TimeoutError:
            raise ProcessError(f"{argv[0]} printed no URL within {timeout_s} s") from None

    async def start_until_healthy(self, argv: list[str], health_url: str, timeout_s: float = 60.0,
                                  log: Path | None = None) -> None:
        """Start `argv` and wait until `health_url` answers 200; its output goes to `log` (else discarded)."""
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
        # The child keeps its own descriptor of the log; ours is closed once it has started.
        with log.open("wb") if log is not None else contextlib.nullcontext(asyncio.subprocess.DEVNULL) as output:
            process = await asyncio.create_subprocess_exec(*argv, stdout=output, stderr=asyncio.subprocess.STDOUT,
                                                           preexec_fn=die_with_parent)
        self.processes.append(process)
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if process.returncode is not None:
                    raise ProcessError(f"{argv[0]} exited with code {process.returncode}")
                try:
                    async with http.get(health_url, timeout=aiohttp.ClientTimeout(total=1)) as response:
                        if response.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.2)
        raise ProcessError(f"{argv[0]} was not healthy at {health_url} within {timeout_s} s")

    async def start_replica(self, *, time_scale: float, profile: str | None = None,
                            num_gpu_blocks: int | None = None, data_parallel_size: int = 1,
                            kv_offloading_size_gib: float | None = None) -> str:
        argv = [sys.executable, "-m", "tao_harness.cli.main", "replica", "--port", "0",
                "--time-scale", str(time_scale), "--log-level", "WARNING",
                "--data-parallel-size", str(data_parallel_size)]
        if profile:
            argv += ["--profile", profile]
        if num_gpu_blocks:
            argv += ["--num-gpu-blocks", str(num_gpu_blocks)]
        if kv_offloading_size_gib is not None:
            argv += ["--kv-offloading-size", repr(kv_offloading_size_gib)]
        _, url = await self.start_url_server(argv)
        return url

    async def close(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.terminate()
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it exited between the wait and the kill
                    process.kill()
                await process.wait()
        self.processes.clear()

    async def __aenter__(self) -> ProcessGroup:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


async def _drain(stream: asyncio.StreamReader) -> None:
    """Keep reading a child's output so a full pipe never blocks it."""
    while await stream.read(65536):
        pass


def free_port() -> int:
    """A port that was free a moment ago (for servers that cannot report the port they bound)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
