"""Serving an aiohttp app: one helper for every server this package starts (coordinator, proxy, relay)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from typing import Any, Coroutine, TypeVar

from aiohttp import web

# Connections the kernel queues before the server accepts them. aiohttp's default (128) overflows when
# thousands of agents reconnect at once (a proxy restart): the overflow waits for SYN retries, seconds
# later, and clients time out. vLLM's server (uvicorn) queues 2048; Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 4096

_T = TypeVar("_T")
log = logging.getLogger(__name__)


# The signals that stop a server cleanly: SIGTERM is what process managers (systemd, docker, Kubernetes)
# send, SIGINT what a terminal does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_server(main: Coroutine[Any, Any, _T]) -> _T | None:
    """Run a server's main coroutine on uvloop until it returns, or until SIGINT or SIGTERM stops it: then
    the coroutine is cancelled, its cleanup runs (the coordinator writes what its store still queues) and
    None is returned.

    uvloop: the proxy's hot path is mostly socket writes and event-loop bookkeeping (py-spy: ~30% in
    asyncio's selector transport), which libuv does in C. Falls back to asyncio where uvloop does not exist
    (Windows)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency wherever it builds
        return asyncio.run(_until_stopped(main))
    return uvloop.run(_until_stopped(main))


async def _until_stopped(main: Coroutine[Any, Any, _T]) -> _T | None:
    """`main`, cancelled by a stop signal. Handled here rather than left to the defaults: SIGTERM's kills
    the process with nothing cleaned up, and a server started in the background by a shell inherits
    SIGINT ignored (asyncio then leaves it so), which made it deaf to the SIGINT meant to stop it."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main)
    stopping = False

    def stop(signum: signal.Signals) -> None:
        nonlocal stopping
        log.info("%s received: shutting down", signum.name)
        stopping = True
        task.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await task
    except asyncio.CancelledError:
        if not stopping:
            raise
        return None
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


async def start_site(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve `app` (a client that disconnects cancels its handler); returns the runner and the root URL."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}"


def freeze_startup_objects() -> None:
    """Move everything allocated so far (modules, config, a loaded history: ~100k objects) out of the cyclic
    garbage collector's reach, for a server that keeps it all until it exits. Each full collection walked
    them again: 115 ms of CPU, and stalls of up to 3 s on a loaded machine (seen in the coordinator of the
    2,048-session soak), in which no request was answered. Objects freed by reference counting still are."""
    gc.collect()
    gc.freeze()


async def serve_forever(app: web.Application, host: str, port: int, banner: str) -> None:
    """Serve until cancelled, printing `banner` with the bound URL first (scripts read that line)."""
    runner, url = await start_site(app, host, port)
    freeze_startup_objects()
    print(f"{banner} listening on {url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
