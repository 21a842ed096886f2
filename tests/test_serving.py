"""Servers keep their start-up objects out of the cyclic garbage collector's reach: a full collection
walked ~100k of them every time, and stalled a loaded coordinator for seconds."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
from aiohttp import web

from tao_harness.serving import serve_forever


async def test_a_server_freezes_its_startup_objects(capsys: pytest.CaptureFixture[str]) -> None:
    gc.unfreeze()
    server = asyncio.create_task(serve_forever(web.Application(), "127.0.0.1", 0, "test server"))
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in capsys.readouterr().out:
            assert not server.done(), server.result()  # it failed to start: say why, rather than wait on
            assert time.monotonic() < deadline, "the server never said it was listening"
            await asyncio.sleep(0.01)
        assert gc.get_freeze_count() > 10_000  # the interpreter, aiohttp, the test's own modules
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        gc.unfreeze()
