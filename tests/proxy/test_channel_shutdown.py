"""A clean shutdown of proxy + coordinator is not reported as a lost coordinator channel."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tao_harness.config import load_config
from tao_harness.coordinator.embedded import EmbeddedCluster


async def test_clean_shutdown_logs_no_channel_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tao_harness.proxy.channel")
    config = load_config(overrides={"cluster.replicas": [{"id": "r0", "base_url": "http://127.0.0.1:9"}]})
    async with EmbeddedCluster(config, use_store=False):
        for _ in range(500):  # the channel opens in the background: wait for it to say so
            if any("open" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the coordinator channel never opened")
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tao_harness.proxy.channel"]
    assert any("closed: the proxy is stopping" in text for _, text in messages), messages
    assert all(level < logging.WARNING for level, _ in messages), messages
