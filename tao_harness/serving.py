"""Serving an aiohttp app: one helper for every server this package starts (coordinator, proxy, relay)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Coroutine, TypeVar

from aiohttp import web

# Connections the kernel queues before the server accepts them. aiohttp's default (128) overflows when
# thousands of agents reconnect at once (a proxy restart): the overflow waits for SYN retries, seconds
# later, and clients time out. vLLM's server (uvicorn) queues 2048; Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 4096

_T = TypeVar("_T")


def run_server(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a server's main coroutine on uvloop: the proxy's hot path is mostly socket writes and event-loop
    bookkeeping (py-spy: ~30% in asyncio's selector transport), which libuv does in C. Falls back to
    asyncio where uvloop does not exist (Windows)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency wherever it builds
        return asyncio.run(main)
    return uvloop.run(main)


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
