"""Serving an aiohttp app: one helper for every server this package starts (coordinator, proxy, relay)."""

from __future__ import annotations

import asyncio

from aiohttp import web


async def start_site(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve `app` (a client that disconnects cancels its handler); returns the runner and the root URL."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}"


async def serve_forever(app: web.Application, host: str, port: int, banner: str) -> None:
    """Serve until cancelled, printing `banner` with the bound URL first (scripts read that line)."""
    runner, url = await start_site(app, host, port)
    print(f"{banner} listening on {url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
